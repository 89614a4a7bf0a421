"""Queue sums carried from one cycle to the next (`framework.queue_sums`, issue #23 point 1): brought up
to date along the paths of the jobs the cache's log names (`model.job_changes`), they are the full sums'
bits whenever they are carried, and summed in full whenever they could differ."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import numpy as np
import pytest

from helpers import node, pod, queue
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.controlplane.unchanged_cycles import VERIFY_ENV
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.queue_sums import (
    CarriedQueueSums,
    QueueTotals,
    _Resource,
    binary_exponent,
    binary_exponents,
    distinct_job_sums,
    every_job_sums,
    job_sums,
    kept_job_sums,
    sums_are_exact,
)
from kai_scheduler.model import job_changes
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.job_changes import JobChangeLog, JobChangeMark
from kai_scheduler.model.snapshot import PodState
from kai_scheduler.plugins.proportion.plugin import (
    _ancestors_by_depth,
    _counted_queue_totals,
    _queue_totals,
    summed_queues,
)
from kai_scheduler.sim.engine import Simulation, SimulationOptions

START = datetime(2026, 1, 1, tzinfo=UTC)


def workload(seed: int, fractions: tuple[float, ...]) -> list[ApiObject]:
    """Two leaves under a department on 4 nodes: running pods that complete, and arrivals of whole and
    fractional GPUs (`fractions`), CPU in millicores and memory in odd byte counts, over 200 s."""
    rng = random.Random(seed)
    objects: list[ApiObject] = [node(f"n{i}", gpus=8) for i in range(4)]
    objects += [queue("dept"), queue("a", gpu=12, parent="dept"), queue("b", gpu=20, parent="dept")]
    for i in range(12):
        objects.append(
            pod(
                f"run-{i}",
                rng.choice("ab"),
                gpus=1,
                node_name=f"n{i % 4}",
                duration=f"{rng.randint(20, 150)}s",
            )
        )
    for i in range(40):
        fraction = rng.choice((None, *fractions))
        objects.append(
            pod(
                f"job-{i}",
                rng.choice("ab"),
                gpus=0 if fraction else rng.choice((1, 2, 8)),
                fraction=fraction,
                cpu=f"{rng.randint(1, 4000)}m",
                memory=str(rng.randint(1, 1 << 34)),
                arrival=f"{rng.randint(0, 200)}s",
                duration=f"{rng.randint(10, 120)}s",
            )
        )
    return objects


def carried_against_full(objects: list[ApiObject], cycles: int) -> list[bool]:
    """Run the cycles; after each, carry the sums to the cache's next snapshot and check them against the
    full sums bit for bit. Per cycle: whether they were carried (else summed in full)."""
    sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=cycles))
    carried = CarriedQueueSums()
    used = []
    for number in range(1, cycles + 1):
        sim._cycle(10.0 * (number - 1), number)
        snapshot = sim.cluster.cache.snapshot()
        totals = carried.totals(snapshot)
        full, rows = summed_queues(snapshot)
        if totals is None:
            carried.adopt(full, rows)
        else:
            assert [[v.hex() for v in row] for row in totals] == [[v.hex() for v in row] for row in full]
        used.append(totals is not None)
    return used


@pytest.mark.parametrize("seed", range(3))
def test_carried_sums_are_the_full_sums_bit_for_bit(seed: int) -> None:
    """Whole GPUs, halves and quarters, millicores and bytes add up exactly: after the first snapshot every
    one is carried, and equals the full sum in snapshot order."""
    used = carried_against_full(workload(seed, (0.5, 0.25)), 25)
    assert used == [False] + [True] * 24


def test_sums_that_could_round_are_summed_in_full_until_they_are_gone() -> None:
    """A tenth of a GPU is no binary fraction: while such a pod is counted the sums are summed in full, and
    carried again once the last one has ended."""
    objects: list[ApiObject] = [node("n0", gpus=4), queue("a", gpu=4)]
    objects += [pod("tenth", "a", gpus=0, fraction=0.1, arrival="10s", duration="30s")]
    objects += [pod(f"whole-{i}", "a", gpus=1, arrival=f"{5 * i}s", duration="100s") for i in range(3)]
    used = carried_against_full(objects, 10)
    assert used == [False] * 5 + [True] * 5, used  # the tenth is counted from 10 s until the cycle at 50 s


def test_binary_exponent() -> None:
    values = [1.0, 3.0, 8.0, 0.5, 0.75, -2.0, 1000.0, 2.0**60, 0.1, float("inf"), float("nan")]
    found = [binary_exponent(v) for v in values]
    assert found[:8] == [0, 0, 3, -1, -2, 1, 3, 60]
    assert found[8] < -50 and found[9] < -1000 and found[10] < -1000
    assert binary_exponents(np.array(values)).tolist() == found  # the vectorized one, for a full sum's rows


def test_the_log_says_what_it_no_longer_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    log = JobChangeLog()
    first = JobChangeMark(log, log.stamp)
    log.note("a")
    log.note("b")
    second = JobChangeMark(log, log.stamp)
    assert second.since(first) == {"a", "b"}
    assert second.since(second) == set()
    assert second.since(None) is None
    assert second.since(JobChangeMark(JobChangeLog(), 1)) is None  # another cache's
    log.note_everything()
    assert JobChangeMark(log, log.stamp).since(second) is None
    monkeypatch.setattr(job_changes, "_KEPT", 4)
    third = JobChangeMark(log, log.stamp)
    for key in "cdefg":
        log.note(key)
    assert JobChangeMark(log, log.stamp).since(third) is None  # forgotten: the older half went


def test_verify_mode_checks_the_carried_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the debug variable set the queue sums are summed in full too: carried ones that differ raise."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    objects: list[ApiObject] = [node("n0", gpus=1), queue("q", gpu=1)]
    objects += [pod("running", gpus=1, node_name="n0"), pod("waiting", gpus=1)]
    sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=3))
    sim._cycle(0.0, 1)
    carried = sim.driver.scheduler.memos.queue_sums
    assert carried._totals is not None
    carried._totals[0][0] += 1.0
    sim.cluster.cache.set_nodes([node("n0", gpus=1, labels={"zone": "z1"})])  # a change: the cycle runs
    with pytest.raises(CarriedMismatch, match="queue q: its sums carried from the last cycle differ"):
        sim._cycle(10.0, 2)


def test_every_job_sums_is_kept_job_sums_of_each_job_in_turn() -> None:
    """`every_job_sums` gives each job the row `job_sums` makes of it: a bare pod's plain pending job takes
    the row of the first such job of its request, whose sums are kept on it as `kept_job_sums` keeps them,
    whatever the job keeps itself; a running job and a job of another request are summed each, and a
    job whose sums are kept is not summed again."""
    cache = ClusterCache()
    cache.set_nodes([node("n1", gpus=8)])
    cache.set_queues([queue("a", gpu=8)])
    cache.upsert_pod(PodState(pod("p1", "a", gpus=1, cpu="500m"), 0))
    cache.upsert_pod(PodState(pod("running", "a", gpus=1, cpu="500m"), 1, node_name="n1", phase="Running"))
    cache.upsert_pod(PodState(pod("p2", "a", gpus=1, cpu="500m"), 2))
    cache.upsert_pod(PodState(pod("other", "a", gpus=2), 3))
    cache.upsert_pod(PodState(pod("p3", "a", gpus=1, cpu="500m"), 4))
    snapshot = cache.snapshot()
    jobs = list(snapshot.jobs.values())
    assert all(job.lone_task is not None for job in jobs)
    gpu_memory, memory = snapshot.nodes.gpu_memory_mib, snapshot.min_gpu_memory_mib
    kept = (7.0, 7.0, 7.0, 7.0, 7.0, 7.0)  # (no job's real sums: taken as kept, not summed again)
    for faked in (jobs[1], jobs[2]):
        faked.queue_sums, faked.queue_sums_version, faked.queue_sums_gpu_memory = kept, faked.version, memory
    expected = [job_sums(job, gpu_memory, memory) for job in jobs]

    distinct, rows = distinct_job_sums(jobs, gpu_memory, memory)
    table = every_job_sums(jobs, gpu_memory, memory)

    assert rows.tolist() == [0, 1, 0, 2, 0]  # the plain pending jobs of one request share a row
    assert [tuple(row) for row in table.tolist()] == [expected[0], kept, *expected[2:]]
    assert [tuple(row) for row in distinct.tolist()] == [expected[0], kept, expected[3]]
    assert expected[1] != expected[0]  # (the running pod's GPU is allocated, the pending ones' are not)
    assert jobs[0].queue_sums == expected[0] and jobs[3].queue_sums == expected[3]
    assert all(kept_job_sums(job, gpu_memory, memory) is job.queue_sums for job in (jobs[0], jobs[3]))


def test_every_job_sums_of_no_jobs_is_an_empty_table() -> None:
    assert every_job_sums([], np.zeros(0), 0.0).shape == (0, 6)


def _job_by_job_and_counted(objects: list[ApiObject]) -> tuple[list[QueueTotals], list[QueueTotals] | None]:
    """After one cycle: the queue totals added job by job (`_queue_totals`) and counted per queue
    (`_counted_queue_totals`, None when it declines) from the same jobs' sums."""
    sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=1))
    sim._cycle(0.0, 1)
    snapshot = sim.cluster.cache.snapshot()
    queues = snapshot.queues
    position = {queue.name: i for i, queue in enumerate(queues)}
    jobs = [job for job in snapshot.jobs.values() if job.queue in position]
    job_queue = [position[job.queue] for job in jobs]
    preemptible = [job.preemptible for job in jobs]
    distinct, rows = distinct_job_sums(jobs, snapshot.nodes.gpu_memory_mib, snapshot.min_gpu_memory_mib)
    job_by_job = _queue_totals(distinct[rows], job_queue, preemptible, _ancestors_by_depth(queues, position))
    return job_by_job, _counted_queue_totals(distinct, rows, job_queue, preemptible, queues, position)


def _bits(totals: list[QueueTotals]) -> list[list[str]]:
    return [[value.hex() for value in row] for row in totals]


@pytest.mark.parametrize("seed", range(3))
def test_counted_queue_totals_are_the_job_by_job_totals_bit_for_bit(seed: int) -> None:
    """Running and pending jobs, preemptible or not, of whole GPUs, halves and quarters, millicores and odd
    byte counts, in two leaves under a department: counted per queue, their totals are the job-by-job
    totals' bits, every queue's nine of them."""
    objects = workload(seed, (0.5, 0.25))
    objects += [pod(f"inference-{i}", "a", gpus=1, priority_class="inference") for i in range(3)]
    job_by_job, counted = _job_by_job_and_counted(objects)
    assert counted is not None
    assert _bits(counted) == _bits(job_by_job)
    assert any(row[6] for row in counted)  # (non-preemptible jobs were counted)


def test_queue_totals_that_could_round_are_added_job_by_job() -> None:
    """A tenth of a GPU is no binary fraction: the totals are not counted (the full sum adds them job by
    job, in snapshot order)."""
    objects: list[ApiObject] = [node("n0", gpus=4), queue("a", gpu=4)]
    objects += [pod("tenth", "a", gpus=0, fraction=0.1), pod("whole", "a", gpus=1)]
    _, counted = _job_by_job_and_counted(objects)
    assert counted is None


def test_a_resource_counts_each_distinct_sum_as_often_as_it_is_used() -> None:
    """The exactness bounds of distinct sums counted (`_Resource` with counts) are those of the sums
    written out one by one."""
    distinct = np.array([[1.0, 0.5], [0.0, 3.0], [0.25, 0.0]])
    counts = np.array([3, 1, 2])
    counted = _Resource(distinct, counts)
    written_out = _Resource(np.repeat(distinct, counts, axis=0).ravel())
    assert counted.exponents == written_out.exponents == {0: 4, -1: 3, -2: 2}
    assert counted.magnitude == written_out.magnitude == 8.0
    assert sums_are_exact(np.array([[1.0, 0, 0, 0.5, 0, 0]]), np.array([7]))
    assert not sums_are_exact(np.array([[0.1, 0, 0, 0.5, 0, 0]]), np.array([7]))
