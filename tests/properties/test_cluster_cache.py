"""`ClusterCache` under random deltas equals a cache built from scratch from the same objects.

The simulator only ever binds, pipelines, evicts, completes and admits pods; live mode sees everything
else too: pods deleted, re-annotated into another PodGroup, bound by another scheduler, gated and
ungated; PodGroups created after their pods and deleted before them; nodes and queues edited. Random
sequences of such deltas, with scheduling cycles in between whose decisions are not carried out (as in
live mode, where a bind is seen only when the informer shows it), must leave the cache's snapshot equal,
field by field, to one built from scratch (a node edited while the same nodes stay keeps the jobs and
makes only the node table again).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import fingerprint, node, pod, pod_group, queue
from kai_scheduler.api.admission_gate import QUEUE_ADMISSION_GATE
from kai_scheduler.api.objects import NodeCondition
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.gang import _only_pod
from kai_scheduler.framework.kept_job_groups import KeptJobGroups
from kai_scheduler.framework.queue_sums import CarriedQueueSums
from kai_scheduler.model.builder import PodDerivations
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.cache.gang_jobs import GangJobMismatch
from kai_scheduler.model.cache.job_rebuild import JobRebuild
from kai_scheduler.model.cache.lone_jobs import LoneJobMismatch, LoneJobs
from kai_scheduler.model.jobs import JobInfo, Tally, TaskInfo
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.shared_gpus import is_shared_gpu_pod
from kai_scheduler.model.snapshot import JOB_GROUPS, JobsAtOpen, PodGroupState, PodState
from kai_scheduler.plugins.proportion.plugin import summed_queues

EXAMPLES = int(os.environ.get("KAI_CACHE_EXAMPLES", "150"))
POD_NAMES = ("p1", "p2", "p3", "p4", "p5", "pg-p1")
NODES = ("n1", "n2", "n3")
GROUPS = ("g1", "g2")
QUEUES = ("a", "b")
# How a node-spec operation edits its node besides the cordon and the zone label: the capacity stays
# (none, a taint, not ready) or moves (GPU memory read from a label, an extended resource only it has).
NODE_EDITS = ("none", "taint", "not-ready", "gpu-memory", "extra")


@dataclass(frozen=True)
class PodSpec:
    name: str
    queue: str
    gpus: int
    fraction: float | None
    group: str | None
    node: str | None
    phase: str
    terminating: bool
    foreign: bool
    gated: bool | str  # a gate's name (True: another's), or none
    priority_class: str | None


pod_specs = st.builds(
    PodSpec,
    name=st.sampled_from(POD_NAMES),
    queue=st.sampled_from(QUEUES),
    gpus=st.integers(0, 2),
    fraction=st.sampled_from((None, None, 0.5, 0.25)),
    group=st.sampled_from((None, None, *GROUPS)),
    node=st.sampled_from((None, None, *NODES, "gone")),
    phase=st.sampled_from(("Running", "Running", "Pending", "Succeeded", "Failed")),
    terminating=st.booleans(),
    foreign=st.sampled_from((False, False, False, True)),
    gated=st.sampled_from((False, False, False, True, QUEUE_ADMISSION_GATE)),
    priority_class=st.sampled_from((None, "train", "inference", "custom")),
)

operations = st.one_of(
    st.tuples(st.just("pod"), pod_specs),
    st.tuples(st.just("delete-pod"), st.sampled_from(POD_NAMES)),
    # (With a preemption delay or not: the waiting jobs with one are a group of their own.)
    st.tuples(
        st.just("group"), st.sampled_from(GROUPS), st.integers(1, 3), st.sampled_from(QUEUES), st.booleans()
    ),
    st.tuples(st.just("delete-group"), st.sampled_from(GROUPS)),
    st.tuples(st.just("nodes"), st.lists(st.sampled_from(NODES), min_size=1, unique=True), st.integers(2, 8)),
    # The same nodes changed (cordoned, relabelled, tainted, not ready, resized): only the node table is
    # made again, and only the changed nodes' facts when their capacity stays.
    st.tuples(
        st.just("node-spec"),
        st.sampled_from(NODES),
        st.booleans(),
        st.sampled_from(("z1", "z2")),
        st.sampled_from(NODE_EDITS),
    ),
    st.tuples(st.just("queues"), st.booleans()),
    st.tuples(st.just("priorities"), st.integers(0, 200)),
    st.tuples(st.just("cycle")),
    st.tuples(st.just("nominate"), st.sampled_from(("p1", "p2", "p3")), st.sampled_from(NODES)),
    st.tuples(
        st.just("facts"),
        st.sampled_from(POD_NAMES),
        st.sampled_from((None, *NODES)),
        st.sampled_from(("Running", "Pending", "Succeeded")),
        st.booleans(),
    ),
)


def rank_of(name: str) -> int:
    """Creation order: fixed per object, as an object's creation time never changes."""
    return (*GROUPS, *POD_NAMES).index(name)


def pod_state(spec: PodSpec) -> PodState:
    obj = pod(
        spec.name,
        spec.queue,
        gpus=0 if spec.fraction else spec.gpus,
        fraction=spec.fraction,
        group=spec.group,
        priority_class=spec.priority_class,
        scheduler="other" if spec.foreign else "kai-scheduler",
    )
    if spec.gated:
        gate = spec.gated if isinstance(spec.gated, str) else "wait"
        obj = obj.model_copy(
            update={"spec": obj.spec.model_copy(update={"scheduling_gates": [{"name": gate}]})}
        )
    bound = spec.node is not None and spec.phase == "Running"
    groups = (f"{spec.node}-gpu-{spec.name}",) if bound and spec.fraction else ()
    return PodState(
        obj,
        rank_of(spec.name),
        spec.node if bound else None,
        spec.phase if not bound else "Running",
        groups,
        spec.terminating,
    )


def apply(cache: ClusterCache, operation: tuple[object, ...], scheduler: Scheduler) -> None:
    kind = operation[0]
    if kind == "pod":
        spec = operation[1]
        assert isinstance(spec, PodSpec)
        cache.upsert_pod(pod_state(spec))
    elif kind == "delete-pod":
        cache.remove_pod(f"default/{operation[1]}")
    elif kind == "group":
        _, name, min_member, queue_name, delayed = operation
        group = pod_group(str(name), str(queue_name), min_member=int(min_member))  # type: ignore[call-overload]
        if delayed:
            delay = group.spec.model_copy(update={"preemption_delay": "30s"})
            group = group.model_copy(update={"spec": delay})
        cache.upsert_pod_group(PodGroupState(group, rank_of(str(name))))
    elif kind == "delete-group":
        cache.remove_pod_group(f"default/{operation[1]}")
    elif kind == "nodes":
        names, gpus = operation[1], operation[2]
        cache.set_nodes([node(name, gpus=gpus) for name in names])  # type: ignore[attr-defined]
    elif kind == "node-spec":
        _, changed, cordoned, zone, edit = operation
        nodes = {name: node(name, gpus=4) for name in NODES}
        edited = node(
            str(changed),
            gpus=4,
            unschedulable=bool(cordoned),
            labels={"zone": str(zone)},
            taints=[{"key": "k", "effect": "NoSchedule"}] if edit == "taint" else None,
            gpu_memory=40_000 if edit == "gpu-memory" else None,
            extra={"example.com/dongle": 1} if edit == "extra" else None,
        )
        if edit == "not-ready":
            status = edited.status.model_copy(
                update={"conditions": [NodeCondition(type="Ready", status="False")]}
            )
            edited = edited.model_copy(update={"status": status})
        nodes[str(changed)] = edited
        cache.set_nodes(nodes.values())
    elif kind == "queues":
        hierarchy = operation[1]
        parents = [queue("dept")] if hierarchy else []
        cache.set_queues([*parents, *(queue(q, parent="dept" if hierarchy else None) for q in QUEUES)])
    elif kind == "priorities":
        cache.set_priorities(Priorities({"train": 50, "inference": 125, "custom": int(operation[1])}))  # type: ignore[call-overload]
    elif kind == "cycle":
        result = scheduler.run(cache.snapshot(), cycle=1, now=0.0)
        cache.after_cycle(d.pod for d in result.decisions)
    elif kind == "facts":  # the same pod object, other runtime facts (bound, evicted, finished, moved)
        _, name, node_name, phase, terminating = operation
        current = cache.pod(f"default/{name}")
        if current is not None:
            bound = node_name is not None and phase == "Running"
            groups = (f"{node_name}-gpu-{name}",) if bound and is_shared_gpu_pod(current.pod) else ()
            cache.upsert_pod(
                replace(
                    current,
                    node_name=node_name if bound else None,
                    phase=phase if not bound else "Running",
                    gpu_groups=groups,
                    terminating=bool(terminating),
                )
            )
    elif kind == "nominate":
        cache.nominate({f"default/{operation[1]}": (str(operation[2]), ())})


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, min_size=1, max_size=25))
def test_cache_after_random_deltas_equals_a_rebuild(ops: list[tuple[object, ...]]) -> None:
    cache = ClusterCache()
    cache.lone_jobs.verify = True  # a bare pod's job made as it arrived is compared with one made anew
    cache.set_nodes([node(name, gpus=4) for name in NODES])
    cache.set_queues([queue(q) for q in QUEUES])
    scheduler = Scheduler(SchedulerConfig())
    # The queue sums and the groups of jobs the actions read, brought up to date by the jobs the cache's
    # log names.
    carried, groups = CarriedQueueSums(), KeptJobGroups()
    running_before = frozenset(cache.running_jobs), cache.running_jobs
    for step, operation in enumerate(ops):
        apply(cache, operation, scheduler)
        snapshot = cache.snapshot()
        incremental = fingerprint(snapshot)
        fresh = ClusterCache.of(cache.state())
        rebuilt = fingerprint(fresh.snapshot())
        for part, value in rebuilt.items():
            assert incremental[part] == value, f"after step {step} {operation[0]}: {part} differs"
        assert cache.running_jobs == fresh.running_jobs, f"after step {step} {operation[0]}: running jobs"
        # What started since the last step, as next_job_times asks it (from what the change log names).
        plain, kept = frozenset(cache.running_jobs), cache.running_jobs
        assert kept - running_before[1] == plain - running_before[0], f"after step {step}: jobs started"
        running_before = plain, kept
        for job in snapshot.jobs.values():
            # What the cache told a job it made alike others (`JobInfo.know_as`) or as a bare pod's
            # plain job (`lone_task`), against the answers worked out on a copy of the job that was told
            # nothing.
            told, counted = answers(job), answers(replace(job))
            assert told == counted, f"after step {step} {operation[0]}: {job.key}'s answers"
        tasks = snapshot.tasks.values()
        assert snapshot.nominated_tasks == [t for t in tasks if t.nominated_node >= 0]
        assert snapshot.asks_gpu_memory == any(t.request.gpu_memory_mib for t in tasks)
        admitting = [job for job in snapshot.jobs.values() if job.admission is not None]
        assert snapshot.admission_jobs is not None
        assert [id(job) for job in snapshot.admission_jobs] == [id(job) for job in admitting], (
            f"after step {step} {operation[0]}: jobs meeting the admission gate"
        )
        totals, (full, rows) = carried.totals(snapshot), summed_queues(snapshot)
        assert totals is None or totals == full, f"after step {step} {operation[0]}: carried queue sums"
        if totals is None:
            carried.adopt(full, rows)
        kept, found = groups.at_open(snapshot), JobsAtOpen.of(snapshot.jobs.values())
        for name in JOB_GROUPS:
            assert [id(job) for job in getattr(kept, name)] == [id(job) for job in getattr(found, name)], (
                f"after step {step} {operation[0]}: {name} carried"
            )


def answers(job: JobInfo) -> tuple[Tally, bool, bool, bool, TaskInfo | None]:
    """What a job answers that the cache may tell it (`know_as`, `lone_task`)."""
    return job.tally(), job.has_topology(), job.may_go_stale(), job.has_pending(), _only_pod(job)


def test_a_pod_bound_evicted_and_finished_in_place_keeps_its_job_current() -> None:
    """The simulator's path: the same pod object with new runtime facts changes its task in place."""
    cache = ClusterCache()
    cache.set_nodes([node(name, gpus=4) for name in NODES])
    cache.set_queues([queue(q) for q in QUEUES])
    pending = pod_state(PodSpec("p1", "a", 1, None, None, None, "Pending", False, False, False, None))
    cache.upsert_pod(pending)
    steps = [
        replace(pending, node_name="n2", phase="Running"),  # bound
        replace(pending, node_name=None, phase="Pending"),  # evicted, recreated pending
        replace(pending, node_name="n1", phase="Running"),  # bound elsewhere
        replace(pending, node_name=None, phase="Succeeded"),  # finished: the job is made again
    ]
    running = [True, False, True, False]
    for state, expected in zip(steps, running, strict=True):
        cache.snapshot()
        cache.upsert_pod(state)
        fresh = ClusterCache.of(cache.state())
        assert fingerprint(cache.snapshot()) == fingerprint(fresh.snapshot())
        assert ("default/pg-p1" in cache.running_jobs) is expected


# What may change between a bare pod's arrival and its job's making, besides the cycle's own inputs.
ARRIVAL_CHANGES = ("nothing", "priorities", "nominate", "derivations", "bound", "pod")


@pytest.mark.parametrize("change", ARRIVAL_CHANGES)
def test_a_bare_pods_job_made_as_it_arrived_is_taken_only_while_what_it_read_stays(
    change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pending bare pod's plain job is made as the pod arrives (`LoneJobs.arrived`) and the cycle takes
    it only while the priority classes, the pod's derivations, its state and the cache's nominations are
    those it was made with: else the job is made again, as a cache that never saw the arrival makes it."""
    made: list[str] = []
    make = LoneJobs.make

    def counted(lone: LoneJobs, state: PodState) -> JobInfo | None:
        made.append(state.pod.key)
        return make(lone, state)

    monkeypatch.setattr(LoneJobs, "make", counted)
    cache = ClusterCache()
    cache.set_nodes([node(name, gpus=4) for name in NODES])
    cache.set_queues([queue(q) for q in QUEUES])
    cache.set_priorities(Priorities({"train": 50}))
    arrived = pod_state(PodSpec("p1", "a", 1, None, None, None, "Pending", False, False, False, "train"))
    cache.upsert_pod(arrived)
    assert made == ["default/p1"]  # as it arrived
    if change == "priorities":
        cache.set_priorities(Priorities({"train": 75}))
    elif change == "nominate":
        cache.nominate({"default/p1": ("n2", ())})
    elif change == "derivations":
        cache.derivations = PodDerivations()  # another cache's, shared (`model.shard_caches`)
    elif change == "bound":  # the same pod object bound before any cycle made its job
        cache.upsert_pod(replace(arrived, node_name="n1", phase="Running"))
    elif change == "pod":
        cache.upsert_pod(replace(arrived, pod=arrived.pod.model_copy()))
    job = cache.snapshot().jobs["default/pg-p1"]
    # Made once more: as the new pod object arrived (and taken), or by the cycle.
    assert len(made) == (1 if change == "nothing" else 2), made
    fresh = ClusterCache.of(cache.state())
    assert fingerprint(cache.snapshot()) == fingerprint(fresh.snapshot())
    assert job.priority == (75 if change == "priorities" else 50)


def _verifying_cache(classes: dict[str, int]) -> ClusterCache:
    """A cache of the test's nodes and queues, the priority `classes` (the dict itself: a test changes it
    in place), that compares every job made as its pods arrived with one made anew (`verify`)."""
    cache = ClusterCache()
    cache.lone_jobs.verify = True
    cache.set_nodes([node(name, gpus=4) for name in NODES])
    cache.set_queues([queue(q) for q in QUEUES])
    cache.set_priorities(Priorities(classes))
    return cache


def test_a_bare_pods_job_made_as_it_arrived_is_checked_under_verify() -> None:
    """With `verify`, a job taken is compared with one made anew: an input the arrival's job read but the
    cache did not follow (here a priority class changed in place, which the cache never sees) raises."""
    classes = {"train": 50}
    cache = _verifying_cache(classes)
    cache.upsert_pod(
        pod_state(PodSpec("p1", "a", 1, None, None, None, "Pending", False, False, False, "train"))
    )
    classes["train"] = 75
    with pytest.raises(LoneJobMismatch, match="priority"):
        cache.snapshot()


# What may change between a PodGroup's pods' arrival and its job's making, besides the cycle's own inputs,
# and whether the job drafted as they arrived is still the one the cycle takes.
GANG_ARRIVAL_CHANGES = {
    "nothing": True,
    "group again": True,  # drafted anew from the new PodGroup object
    "priorities": False,
    "nominate": False,
    "derivations": False,
    "bound": False,
    "pod": False,
    "pod gone": False,
    "earlier pod": False,  # another scheduler's pod, made first, that names it: it speaks for the PodGroup
}


@pytest.mark.parametrize("group_first", [True, False], ids=["group-first", "pods-first"])
@pytest.mark.parametrize("change", GANG_ARRIVAL_CHANGES)
def test_a_pod_groups_job_drafted_as_it_arrived_is_taken_only_while_what_it_read_stays(
    change: str, group_first: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PodGroup's job is drafted as it and its plain pending pods arrive, in either order (`GangJobs`),
    and the cycle takes it only while the PodGroup, its pods' states, the first pod that names it, the
    priority classes, the derivations and the cache's nominations are those it was made of: else the
    job is made by the cycle, as a cache that never saw the arrivals makes it."""
    built: list[str] = []
    build = JobRebuild._build_job

    def counted(rebuild: JobRebuild, key: str) -> JobInfo | None:
        built.append(key)
        return build(rebuild, key)

    monkeypatch.setattr(JobRebuild, "_build_job", counted)
    cache = ClusterCache()
    cache.set_nodes([node(name, gpus=4) for name in NODES])
    cache.set_queues([queue(q) for q in QUEUES])
    cache.set_priorities(Priorities({"train": 50, "inference": 125}))
    group = PodGroupState(pod_group("g2", "a", min_member=2), rank_of("g2"))
    members = [
        pod_state(PodSpec(name, "a", 1, None, "g2", None, "Pending", False, False, False, "train"))
        for name in ("p2", "p3")
    ]
    if group_first:
        cache.upsert_pod_group(group)
    for member in members:
        cache.upsert_pod(member)
    if not group_first:
        cache.upsert_pod_group(group)
    if change == "group again":
        cache.upsert_pod_group(replace(group, pod_group=group.pod_group.model_copy()))
    elif change == "priorities":
        cache.set_priorities(Priorities({"train": 75, "inference": 125}))
    elif change == "nominate":
        cache.nominate({"default/p2": ("n2", ())})
    elif change == "derivations":
        cache.derivations = PodDerivations()  # another cache's, shared (`model.shard_caches`)
    elif change == "bound":  # the same pod object bound before any cycle made its job
        cache.upsert_pod(replace(members[1], node_name="n1", phase="Running"))
    elif change == "pod":
        cache.upsert_pod(replace(members[0], pod=members[0].pod.model_copy()))
    elif change == "pod gone":
        cache.remove_pod("default/p3")
    elif change == "earlier pod":
        spec = PodSpec("p1", "a", 1, None, "g2", None, "Pending", False, True, False, "inference")
        cache.upsert_pod(pod_state(spec))
    job = cache.snapshot().jobs["default/g2"]
    assert ("default/g2" not in built) == GANG_ARRIVAL_CHANGES[change], built
    fresh = ClusterCache.of(cache.state())
    assert fingerprint(cache.snapshot()) == fingerprint(fresh.snapshot())
    assert job.priority == {"priorities": 75, "earlier pod": 125}.get(change, 50)


def test_a_pod_groups_job_drafted_as_it_arrived_is_checked_under_verify() -> None:
    """With `verify`, a draft taken is compared with the job made anew: an input the draft read but the
    cache did not follow (here a priority class changed in place, which the cache never sees) raises."""
    classes = {"train": 50}
    cache = _verifying_cache(classes)
    cache.upsert_pod_group(PodGroupState(pod_group("g1", "a", min_member=1), rank_of("g1")))
    cache.upsert_pod(
        pod_state(PodSpec("p1", "a", 1, None, "g1", None, "Pending", False, False, False, "train"))
    )
    classes["train"] = 75
    with pytest.raises(GangJobMismatch, match="priority"):
        cache.snapshot()
