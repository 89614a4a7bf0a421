"""The cluster cache makes the job of a bare pod that no PodGroup names and no other pod shares by a lean
path (`JobRebuild._make_lone`); every field of that job and of its task must be what the general path
(`JobRebuild._make_job`) makes of the same objects, over generated pods of every kind the lean path takes
or hands back (annotations, labels, gates, admissions, nodes known or not, phases, nominations, stuck
releases, job times, queues missing or not leaves)."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, pod, pod_group, queue
from kai_scheduler.api.admission_gate import QUEUE_ADMISSION_GATE
from kai_scheduler.framework.gang import _only_pod
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.snapshot import JobTimes, PodGroupState, PodState

EXAMPLES = int(os.environ.get("KAI_CACHE_EXAMPLES", "150"))
# What JobInfo keeps of its answers (the lean path may tell a job those of one made alike, and its one
# task as a plain job's: compared by the answers themselves).
_KEPT_ANSWERS = ("_tally", "_has_topology", "_may_go_stale", "lone_task")
# JobInfo's fields other than its pods, which are compared task by task, and its kept answers.
_JOB_FIELDS = [f.name for f in fields(JobInfo) if f.name not in ("tasks", "podsets", *_KEPT_ANSWERS)]
_TASK_FIELDS = [name for name in TaskInfo.__slots__ if name not in ("job", "podset")]


@dataclass(frozen=True)
class BarePod:
    name: str
    queue: str | None
    gpus: int
    fraction: float | None
    annotation: tuple[str, str] | None
    labels: tuple[tuple[str, str], ...]
    priority_class: str | None
    node: str | None
    phase: str
    terminating: bool
    gated: bool
    admitted: float | None
    nominated: str | None
    deleted: float | None
    created: float | None
    times: bool


ANNOTATIONS = (
    None,
    None,
    ("pod-group-name", "named"),
    ("kai.scheduler/skip-podgrouper", "true"),
    ("kai.scheduler/skip-podgrouper", "false"),
    ("kai.scheduler/topology", "racks"),
    ("kai.scheduler/preemption-delay", "30s"),
    ("kai.scheduler/preemption-delay", "-5s"),
    ("kai.scheduler/preemption-delay", "later"),
    ("unrelated", "x"),
)
LABELS = st.lists(
    st.sampled_from(
        (
            ("kai.scheduler/subgroup-name", "default"),
            ("kai.scheduler/subgroup-name", "workers"),
            ("kai.scheduler/preemptibility", "preemptible"),
            ("kai.scheduler/preemptibility", "non-preemptible"),
            ("priorityClassName", "train"),
            ("kai.scheduler/task-priority", "7"),
            ("app", "web"),
        )
    ),
    max_size=3,
    unique_by=lambda label: label[0],
).map(tuple)

bare_pods = st.builds(
    BarePod,
    name=st.sampled_from(("p1", "p2", "p3", "p4", "p5", "p6")),
    queue=st.sampled_from(("a", "a", "parent", "missing", None)),
    gpus=st.integers(0, 2),
    fraction=st.sampled_from((None, None, 0.5)),
    annotation=st.sampled_from(ANNOTATIONS),
    labels=LABELS,
    priority_class=st.sampled_from((None, "train", "inference", "unknown")),
    node=st.sampled_from((None, None, "n1", "n2", "gone")),
    phase=st.sampled_from(("Running", "Pending", "Succeeded", "Failed")),
    terminating=st.booleans(),
    gated=st.sampled_from((False, False, True)),
    admitted=st.sampled_from((None, None, 5.0)),
    nominated=st.sampled_from((None, None, "n1", "gone")),
    deleted=st.sampled_from((None, None, 1.0)),
    created=st.sampled_from((None, 3.0)),
    times=st.booleans(),
)


def _state(spec: BarePod, rank: int) -> PodState:
    obj = pod(
        spec.name,
        spec.queue,
        gpus=0 if spec.fraction else spec.gpus,
        fraction=spec.fraction,
        priority_class=spec.priority_class,
        annotations=dict([spec.annotation]) if spec.annotation else None,
        labels=dict(spec.labels),
        terminating=spec.terminating,
    )
    if spec.gated:
        gates = [{"name": QUEUE_ADMISSION_GATE}]
        obj = obj.model_copy(update={"spec": obj.spec.model_copy(update={"scheduling_gates": gates})})
    bound = spec.node is not None and spec.phase in ("Running", "Succeeded", "Failed")
    return PodState(
        obj,
        rank,
        spec.node if bound else None,
        spec.phase if bound or spec.phase != "Running" else "Pending",
        (f"{spec.node}-gpu-0",) if bound and spec.fraction else (),
        spec.terminating,
        created=spec.created,
        deleted=spec.deleted if spec.terminating else None,
        admitted=spec.admitted,
    )


def _same_job(lone: JobInfo, general: JobInfo) -> None:
    for name in _JOB_FIELDS:
        assert getattr(lone, name) == getattr(general, name), name
    assert type(lone.invalid_reason) is type(general.invalid_reason)
    assert (lone.tally(), lone.has_topology(), lone.may_go_stale(), lone.has_pending()) == (
        general.tally(),
        general.has_topology(),
        general.may_go_stale(),
        general.has_pending(),
    )
    assert lone.lone_task is lone.tasks[0] and general.lone_task is None
    assert _only_pod(general) is general.tasks[0]
    assert list(lone.podsets) == list(general.podsets)
    for key, podset in lone.podsets.items():
        other = general.podsets[key]
        assert (podset.name, podset.min_member, podset.topology, podset.parent) == (
            other.name,
            other.min_member,
            other.topology,
            other.parent,
        )
        assert [task.key for task in podset.tasks] == [task.key for task in other.tasks]
    assert len(lone.tasks) == len(general.tasks)
    for task, other in zip(lone.tasks, general.tasks, strict=True):
        for name in _TASK_FIELDS:
            assert getattr(task, name) == getattr(other, name), name
        assert task.job is lone
        assert task.podset is lone.podsets[""]
        # Shared by shape and by placement, as the general path shares them.
        assert task.request is other.request
        assert task.placement is other.placement


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bare_pods, min_size=1, max_size=6, unique_by=lambda spec: spec.name))
def test_a_lone_pods_job_is_the_general_paths(specs: list[BarePod]) -> None:
    cache = ClusterCache()
    cache.set_nodes([node("n1", gpus=4), node("n2", gpus=4)])
    cache.set_queues([queue("parent"), queue("a", parent="parent")])
    cache.set_priorities(Priorities({"train": 50, "inference": 125}))
    cache.stuck_releases.threshold = 0.5
    for rank, spec in enumerate(specs):
        cache.upsert_pod(_state(spec, rank))
    cache.nominate({f"default/{s.name}": (s.nominated, ()) for s in specs if s.nominated})
    cache.replace_job_times(
        {f"default/pg-{s.name}": JobTimes(last_start=2.0, last_eviction=1.5) for s in specs if s.times}
    )
    cache.catch_up(now=10.0)
    jobs = cache._jobs
    for spec in specs:
        key = f"default/pg-{spec.name}"
        state = cache.pod(f"default/{spec.name}")
        assert state is not None
        if key not in cache._pods.ours_by_job:
            continue
        lone = jobs._make_lone(key, state.pod.key, state)
        general = jobs._make_job(key)
        assert general is not None
        if lone is not None:
            _same_job(lone, general)
            # The cache's own, made as the pod arrived when nothing since changed what it read.
            _same_job(jobs.jobs[key], general)


def test_the_lean_path_makes_the_plain_jobs() -> None:
    """Bare pods pending, running and finished take the lean path (the property above compares only the
    jobs it makes), and one naming a PodGroup or gated does not."""
    cache = ClusterCache()
    cache.set_nodes([node("n1", gpus=4)])
    cache.set_queues([queue("a")])
    states = {
        "pending": PodState(pod("pending", "a"), 0),
        "running": PodState(pod("running", "a", gpus=1), 1, "n1", "Running"),
        "done": PodState(pod("done", "a"), 2, "n1", "Succeeded"),
        "named": PodState(pod("named", "a", group="g"), 3),
    }
    for state in states.values():
        cache.upsert_pod(state)
    cache.catch_up()
    jobs = cache._jobs
    made = {
        name: jobs._make_lone(f"default/pg-{name}", f"default/{name}", state)
        for name, state in states.items()
    }
    assert made["pending"] is not None and made["pending"].invalid_reason is None
    assert made["running"] is not None and made["done"] is not None
    assert made["done"].invalid_reason == "waiting for pods: 0 of minMember 1 exist"
    assert made["named"] is None


def test_a_job_made_again_reads_its_queue_as_the_queues_are_now() -> None:
    """What a job says of its queue (missing, not a leaf) is worked out once a queue while the queues
    stay; a change of the queues is a new answer for the jobs made after it, a lone pod's (the lean path)
    and a PodGroup's (the general one)."""
    cache = ClusterCache()
    cache.set_nodes([node("n1", gpus=4)])
    cache.set_queues([queue("a"), queue("b")])
    cache.upsert_pod_group(PodGroupState(pod_group("g", "a"), 0))
    cache.upsert_pod(PodState(pod("member", "a", group="g"), 1))
    cache.upsert_pod(PodState(pod("lone", "a"), 2))

    def said() -> set[str | None]:
        cache.catch_up()
        return {cache._jobs.jobs[key].invalid_reason for key in ("default/pg-lone", "default/g")}

    assert said() == {None}
    cache.set_queues([queue("b"), queue("a", parent="b")])
    assert said() == {None}  # "a" still a leaf
    cache.set_queues([queue("a"), queue("b", parent="a")])
    assert said() == {"queue a is not a leaf queue; jobs must be submitted to leaf queues"}
    cache.set_queues([queue("b")])
    assert said() == {"QueueDoesNotExist: queue a does not exist"}
