"""The duration rule of the start-time estimates (`controlplane.run_times`): known, similar completed pods,
unknown; and which jobs wait to start."""

from __future__ import annotations

from helpers import cluster_state, node, pod, pod_group, queue
from kai_scheduler.controlplane.run_times import (
    RunHistory,
    known_duration,
    run_estimates,
    shape_of,
    waiting_jobs,
)


def test_similar_means_same_queue_job_size_and_request() -> None:
    group = pod_group("g", "q", min_member=2)
    base = shape_of(pod("a", "q", gpus=8, group="g"), group)
    assert shape_of(pod("b", "q", gpus=8, group="g"), group) == base
    assert shape_of(pod("c", "other", gpus=8, group="g"), pod_group("g", "other", min_member=2)) != base
    assert shape_of(pod("d", "q", gpus=4, group="g"), group) != base
    assert shape_of(pod("e", "q", gpus=8), None) != base  # a job of one pod


def test_the_estimate_is_the_median_of_the_latest_similar_runs() -> None:
    history = RunHistory(per_shape=3)
    shape = shape_of(pod("a", "q", gpus=8), None)
    assert history.estimate(shape) is None
    for i, seconds in enumerate((1000.0, 10.0, 20.0, 30.0)):  # the first falls out (3 kept)
        history.add(f"run-{i}", shape, seconds)
    assert history.estimate(shape) == 20.0
    history.add("run-3", shape, 5000.0)  # the same run again counts once
    assert history.estimate(shape) == 20.0


def test_without_a_run_of_the_same_job_size_the_same_pods_of_the_queue_count() -> None:
    history = RunHistory()
    history.add("single", shape_of(pod("a", "q", gpus=8), None), 600.0)
    gang_shape = shape_of(pod("b", "q", gpus=8, group="g"), pod_group("g", "q", min_member=4))
    assert history.estimate(gang_shape) == 600.0
    history.add("gang", gang_shape, 60.0)
    assert history.estimate(gang_shape) == 60.0  # its own size first
    assert history.estimate(shape_of(pod("c", "other", gpus=8), None)) is None  # never another queue


def test_a_known_duration_is_the_annotation() -> None:
    assert known_duration(pod("a", duration="1h30m")) == 5400.0
    assert known_duration(pod("b")) is None
    assert known_duration(pod("c", annotations={"simulation.kai.scheduler/duration": "soon"})) is None


def test_jobs_that_wait_to_start() -> None:
    objects = [node("n0"), queue("q"), pod_group("whole", min_member=2), pod_group("elastic", min_member=1)]
    objects += [pod("whole-0", group="whole", gpus=1, node_name="n0"), pod("whole-1", group="whole", gpus=1)]
    objects += [
        pod(f"elastic-{i}", group="elastic", gpus=1, node_name="n0" if i == 0 else None) for i in range(3)
    ]
    objects += [pod("single", gpus=1), pod("done", gpus=1, phase="Succeeded")]
    # The gang runs below its minMember: it waits to start; the elastic job runs at its minimum: started.
    assert waiting_jobs(cluster_state(objects)) == {"default/whole": 2, "default/pg-single": 1}


def test_run_estimates_for_reservation_and_backfill() -> None:
    """Reservation and backfill's expected ends (issue #24): a running pod ends at what is left of its
    duration, known or estimated; any placed now runs for its duration; one without either has none; the
    estimates change by the clock alone when a running pod outruns an estimated duration, and then it has
    no expected end."""
    history = RunHistory()
    history.add("done", shape_of(pod("x", "q", gpus=2), None), 300.0)
    pods = [
        (pod("known", "q", gpus=1, duration="600s"), True),
        (pod("estimated", "q", gpus=2), True),
        (pod("waiting", "q", gpus=2), False),
        (pod("unknown", "q", gpus=4), True),
        (pod("waiting-unknown", "q", gpus=4), False),
    ]
    started = {"default/known": 100.0, "default/estimated": 50.0}
    estimates = run_estimates(pods, {}, started, history, now=200.0)
    assert estimates.ends == {"default/known": 700.0, "default/estimated": 350.0}
    # Placed (again) now, a pod runs its whole duration: the running ones' too (moved, it starts over).
    assert estimates.durations == {
        "default/known": 600.0,
        "default/estimated": 300.0,
        "default/waiting": 300.0,
    }
    assert estimates.changes_at == 350.0  # when "estimated" outruns its estimate
    later = run_estimates(pods, {}, started, history, now=400.0)
    assert later.ends == {"default/known": 700.0}
    assert later.changes_at is None
