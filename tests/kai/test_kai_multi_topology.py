"""KAI v0.17's `allocate/allocate_multi_topology_test.go` (#1638): one job whose sub-groups are constrained
by different Topology objects. KAI checks these two cases with assertions of their own (which domain each
sub-group's pods landed in), not with the tables' harness; the clusters are in `built_cases.py`. Their
minSubGroup asks for every child, as a sub-group tree without it does."""

from __future__ import annotations

from collections import Counter
from typing import Any

from built_cases import RACK, ZONE, hierarchical_multi_topology_sub_groups, multi_topology_sub_groups
from table_cluster import run_case

from kai_scheduler.model.jobs import TaskStatus


def placed_domains(case: dict[str, Any], job: str) -> dict[str, list[tuple[str, str, str]]]:
    """Allocate once; each sub-group's pods as (node, rack, zone). Every pod of the job must be placed."""
    session = run_case("allocate", case)
    names = session.snapshot.nodes.names
    labels = {name: spec["Labels"] for name, spec in case["Nodes"].items()}
    found: dict[str, list[tuple[str, str, str]]] = {}
    for task in session.snapshot.jobs[f"default/{job}"].tasks:
        assert task.status is TaskStatus.ALLOCATED, f"{task.name} is {task.status.value}"
        node = names[task.node]
        found.setdefault(task.podset.name, []).append((node, labels[node][RACK], labels[node][ZONE]))
    return found


def domains(placed: list[tuple[str, str, str]], index: int) -> Counter[str]:
    return Counter(place[index] for place in placed)


def test_sub_groups_of_one_job_follow_their_own_topologies() -> None:
    # TestHandleTopologyAllocation_MultiTopologiesAcrossSubgroups: the rack sub-group fills rack-a (its seed
    # makes it the fullest rack), the zone sub-group zone-x (node2 and node4, node0 being full after the
    # rack sub-group).
    placed = placed_domains(multi_topology_sub_groups(), "pending_job0")
    assert domains(placed["rack-workers"], 1) == {"rack-a": 3}
    assert domains(placed["zone-workers"], 2) == {"zone-x": 3}
    assert {node for node, _, _ in placed["rack-workers"]} == {"node0", "node1"}
    assert {node for node, _, _ in placed["zone-workers"]} == {"node2", "node4"}


def test_children_take_racks_of_their_own_inside_their_parents_zone() -> None:
    # TestHandleTopologyAllocation_HierarchicalMultiTopologiesAcrossSubgroups: both children in zone-x, each
    # in one rack, the two racks different: rack-a and rack-b (the seeded ones).
    placed = placed_domains(hierarchical_multi_topology_sub_groups(), "pending_job1")
    assert domains(placed["child-a"], 2) == {"zone-x": 3}
    assert domains(placed["child-b"], 2) == {"zone-x": 3}
    racks = [domains(placed[child], 1) for child in ("child-a", "child-b")]
    assert [len(rack) for rack in racks] == [1, 1]
    assert {next(iter(rack)) for rack in racks} == {"rack-a", "rack-b"}
