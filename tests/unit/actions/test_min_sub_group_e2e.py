"""KAI v0.17.0's minSubGroup end-to-end specs, run by the simulator: a PodGroup whose sub-group tree
needs only `minSubGroup` of its children is placed whole when the queue has room, with just the required
children when it has less, and not at all when even they do not fit.

Ported by It name from `test/e2e/suites/allocate/min_subgroups/min_subgroups_test.go` (11) and
`test/e2e/suites/preempt/preempt_min_subgroup_specs.go` (1). As there: pods of 100m CPU, a child queue of a
parent queue whose CPU quota and limit are what the Describe sets (800m, 1000m, 600m, 400m), a "filler"
pod of the same queue placed first; the cluster (one node here) has far more CPU than the queue, so the
queue's limit is what constrains. KAI waits for "at least N pods scheduled/unschedulable"; here the counts
are exact, 30 s in.

Why 30 s in, not at rest: KAI v0.17's stale rule (`PodGroupInfo.IsStale`, job_info.go) asks every leaf pod
set for its own minMember, so a job placed with only the children its minSubGroup requires, the others
pending, is a stale gang, and stalegangeviction evicts it after the grace period (60 s) and allocate places
it again. The simulator does as KAI's code does; KAI's specs look only at the first placement.
"""

from __future__ import annotations

from typing import Any

from helpers import node, objects_of, pod_manifest, queue, run
from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.sim.engine import SimulationResult

Leaf = tuple[str, int, int]  # (name, minMember, pods)


def leaves(prefix: str, count: int, pods: int) -> list[dict[str, Any]]:
    """KAI's flatLeaves: `<prefix>-<i>` leaves of `pods` pods, minMember `pods`."""
    return [{"name": f"{prefix}-{i}", "minMember": pods, "pods": pods} for i in range(count)]


def leader_worker_groups(names: list[str], min_sub_group: int, leaders: int, workers: int) -> list[Any]:
    """KAI's leaderWorkerGroups: per name a mid-level group of `<name>-leaders` and `<name>-workers`."""
    made: list[dict[str, Any]] = []
    for name in names:
        made.append({"name": name, "minSubGroup": min_sub_group})
        made.append({"name": f"{name}-leaders", "minMember": leaders, "pods": leaders, "parent": name})
        made.append({"name": f"{name}-workers", "minMember": workers, "pods": workers, "parent": name})
    return made


def hierarchy(
    sub_groups: list[dict[str, Any]], *, min_sub_group: int | None = None, min_member: int | None = None
) -> list[dict[str, Any]]:
    """KAI's CreateWithHierarchy (or BuildHierarchy with a PodGroup of its own): PodGroup `pg` in queue
    `child` with the sub-groups, and `pods` pods per sub-group labelled with it (`<sub-group>-<i>`)."""
    spec: dict[str, Any] = {
        "queue": "child",
        "subGroups": [{k: v for k, v in s.items() if k != "pods"} for s in sub_groups],
    }
    if min_sub_group is not None:
        spec["minSubGroup"] = min_sub_group
    if min_member is not None:
        spec["minMember"] = min_member
    metadata = {"name": "pg", "annotations": {"simulation.kai.scheduler/arrival": "1"}}
    made: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": metadata, "spec": spec}
    ]
    for sub_group in sub_groups:
        for i in range(sub_group.get("pods", 0)):
            made.append(
                cpu_pod(f"{sub_group['name']}-{i}", group="pg", labels={c.SUBGROUP_LABEL: sub_group["name"]})
            )
    return made


def cpu_pod(name: str, cpu: str = "100m", **kwargs: Any) -> dict[str, Any]:
    return pod_manifest(name, "child", cpu=cpu, memory=None, arrival=kwargs.pop("arrival", 1), **kwargs)


def cluster(cpu_quota: int, *manifests: dict[str, Any], filler: str | None = None) -> list[ApiObject]:
    objects: list[ApiObject] = [
        node("node0", gpus=0, cpu="16"),
        queue("parent"),
        queue("child", parent="parent", cpu=cpu_quota, cpu_limit=cpu_quota),
    ]
    if filler is not None:
        objects += objects_of(cpu_pod("filler", filler, arrival=0))
    return objects + objects_of(*manifests)


def placed(objects: list[ApiObject]) -> SimulationResult:
    return run(objects, until=30)


def bound(result: SimulationResult) -> set[str]:
    return {p.pod.metadata.name for p in result.cluster.pods if p.node is not None} - {"filler"}


def pending(result: SimulationResult) -> set[str]:
    return {p.pod.metadata.name for p in result.cluster.pods if p.node is None}


# --- Single-level hierarchy with minSubGroup (queue of 800m) -----------------------------------------


def test_should_schedule_when_min_sub_group_threshold_is_met() -> None:
    result = placed(cluster(800, *hierarchy(leaves("prefill", 4, 2), min_sub_group=3)))
    assert bound(result) == {f"prefill-{i}-{j}" for i in range(4) for j in range(2)}


def test_should_schedule_with_only_min_sub_group_subgroups_when_resources_are_constrained() -> None:
    result = placed(cluster(800, *hierarchy(leaves("prefill", 4, 2), min_sub_group=3), filler="200m"))
    assert len(bound(result)) == 6 and len(pending(result)) == 2
    # Whole leaves: each placed leaf has both its pods (its minMember).
    assert len({name.rsplit("-", 1)[0] for name in bound(result)}) == 3


def test_should_not_schedule_when_min_sub_group_cannot_be_satisfied() -> None:
    result = placed(cluster(800, *hierarchy(leaves("prefill", 4, 2), min_sub_group=4), filler="500m"))
    assert bound(result) == set() and len(pending(result)) == 8


# --- Multi-level hierarchy with minSubGroup (queue of 1000m) -----------------------------------------


def test_should_schedule_2_level_hierarchy_when_all_min_sub_group_thresholds_are_met() -> None:
    tree = leader_worker_groups(["decode", "prefill"], 2, 1, 4)
    result = placed(cluster(1000, *hierarchy(tree, min_sub_group=2)))
    assert len(bound(result)) == 10


def test_should_not_schedule_2_level_hierarchy_when_child_min_sub_group_cannot_be_met() -> None:
    tree = leader_worker_groups(["decode", "prefill"], 2, 1, 4)
    result = placed(cluster(1000, *hierarchy(tree, min_sub_group=2), filler="700m"))
    assert bound(result) == set() and len(pending(result)) == 10


def test_should_schedule_2_level_hierarchy_with_elastic_mid_level_subgroups() -> None:
    tree = leader_worker_groups(["group1", "group2", "group3"], 2, 1, 2)
    result = placed(cluster(1000, *hierarchy(tree, min_sub_group=2), filler="400m"))
    assert len(bound(result)) == 6 and len(pending(result)) == 3
    assert len({name.split("-", 1)[0] for name in bound(result)}) == 2  # two whole mid-level groups


# --- MinSubGroup backward compatibility (queue of 600m) ----------------------------------------------


def test_should_require_all_subgroups_when_min_sub_group_is_nil() -> None:
    tree = [{"name": "sub-1", "minMember": 2, "pods": 3}, {"name": "sub-2", "minMember": 2, "pods": 3}]
    result = placed(cluster(600, *hierarchy(tree, min_member=4)))
    assert len(bound(result) & {"sub-1-0", "sub-1-1", "sub-1-2"}) >= 2
    assert len(bound(result) & {"sub-2-0", "sub-2-1", "sub-2-2"}) >= 2


def test_should_not_schedule_when_any_subgroup_fails_and_min_sub_group_is_nil() -> None:
    # KAI waits for the PodGroup's NotReady event: sub-2 asks for 5 of its 3 pods.
    tree = [{"name": "sub-1", "minMember": 2, "pods": 3}, {"name": "sub-2", "minMember": 5, "pods": 3}]
    result = placed(cluster(600, *hierarchy(tree, min_member=7)))
    assert bound(result) == set()
    assert "default/pg" in result.reasons


def test_should_handle_existing_pod_groups_with_only_min_member() -> None:
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"queue": "child", "minMember": 2},
    }
    result = placed(cluster(600, group, *[cpu_pod(f"p-{i}", group="pg") for i in range(3)]))
    assert len(bound(result)) >= 2


# --- Mid-level SubGroup with minSubGroup=0 (queue of 400m) -------------------------------------------

OPTIONAL_SUBTREE = [
    {"name": "group-required", "minSubGroup": 2},
    {"name": "leaf-r1", "minMember": 1, "pods": 1, "parent": "group-required"},
    {"name": "leaf-r2", "minMember": 1, "pods": 1, "parent": "group-required"},
    {"name": "group-optional", "minSubGroup": 0},
    {"name": "leaf-o1", "minMember": 1, "pods": 1, "parent": "group-optional"},
    {"name": "leaf-o2", "minMember": 1, "pods": 1, "parent": "group-optional"},
]


def test_should_schedule_both_subtrees_when_resources_are_ample() -> None:
    result = placed(cluster(400, *hierarchy(OPTIONAL_SUBTREE, min_sub_group=2)))
    assert bound(result) == {"leaf-r1-0", "leaf-r2-0", "leaf-o1-0", "leaf-o2-0"}


def test_should_schedule_group_required_and_skip_group_optional_when_resources_are_constrained() -> None:
    result = placed(cluster(400, *hierarchy(OPTIONAL_SUBTREE, min_sub_group=2), filler="200m"))
    assert bound(result) == {"leaf-r1-0", "leaf-r2-0"}
    assert pending(result) == {"leaf-o1-0", "leaf-o2-0"}


# --- Preempt with MinSubGroup (preempt_min_subgroup_specs.go) ----------------------------------------


def test_should_preempt_elastic_subgroups_above_min_sub_group_threshold() -> None:
    """Two queues of 300m quota and 600m limit under one parent, on a node of 600m: the low queue's
    PodGroup (minSubGroup 2, four one-pod leaves) runs 400m; a 300m pod of the high queue arrives and
    takes what it needs from the leaves above the two required."""
    objects: list[ApiObject] = [
        node("node0", gpus=0, cpu="600m"),
        queue("parent"),
        queue("child", parent="parent", cpu=300, cpu_limit=600),
        queue("high", parent="parent", cpu=300, cpu_limit=600),
        *objects_of(*hierarchy(leaves("sg", 4, 1), min_sub_group=2)),
        *objects_of(pod_manifest("high-pod", "high", cpu="300m", memory=None, arrival=5)),
    ]
    result = run(objects)
    assert "high-pod" in bound(result)
    low = bound(result) - {"high-pod"}
    assert len(low) >= 2 and len(low) == 3


def test_a_job_placed_with_only_its_required_sub_groups_is_a_stale_gang_after_the_grace_period() -> None:
    """Not one of KAI's specs: what its code does after them (the module doc), the reason naming the
    sub-group below its minMember."""
    result = run(cluster(400, *hierarchy(OPTIONAL_SUBTREE, min_sub_group=2), filler="200m"), until=61)
    evictions = [(r.time, d.pod, d.reason) for r in result.cycles for d in r.decisions if d.type == "evict"]
    reason = "stale gang default/pg: 2 pods running, sub-group leaf-o1 below its minMember 1, for 60s"
    assert [(t, p) for t, p, _ in evictions] == [(61.0, "default/leaf-r1-0"), (61.0, "default/leaf-r2-0")]
    assert all(r.startswith(reason) for _, _, r in evictions)
