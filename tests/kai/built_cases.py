"""KAI's cases whose clusters Go code builds (loops, variables), which the converter cannot read: the same
facts, built here. `test_kai_tables.py` runs the table cases among them in place of their table's
`unreadable` entry (by table file and case name); `test_kai_multi_topology.py` the others, with their own
checks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TRAIN = 50  # constants.PriorityTrainNumber
INTERACTIVE_PREEMPTIBLE = 75  # constants.PriorityInteractivePreemptibleNumber
BUILD = 100  # constants.PriorityBuildNumber


def flaky_scenario() -> dict[str, Any]:
    """preempt/preemptGang_test.go, TestHandleScatteredNodesForGangPreempt, "flaky scenario": four
    1-GPU nodes each running a 1-GPU train job (job-<node>-0, older by node), and a 2-pod preemptible
    interactive gang whose pods must go to node1 and node3."""
    nodes = {f"node{i}": {"GPUs": 1} for i in range(4)}
    jobs: list[dict[str, Any]] = [
        {
            "Name": f"job-{i}-0",
            "RequiredGPUsPerTask": 1,
            "Priority": TRAIN,
            "QueueName": "queue",
            "JobAgeInMinutes": i,
            "Tasks": [{"State": "Running", "NodeName": f"node{i}"}],
        }
        for i in range(4)
    ]
    jobs.append(
        {
            "Name": "preemptor",
            "RequiredGPUsPerTask": 1,
            "Priority": INTERACTIVE_PREEMPTIBLE,
            "QueueName": "queue",
            "Tasks": [
                {"State": "Pending", "NodeAffinityNames": ["node1"]},
                {"State": "Pending", "NodeAffinityNames": ["node3"]},
            ],
        }
    )
    return {
        "Name": "flaky scenario",
        "Jobs": jobs,
        "Nodes": nodes,
        "Queues": [{"Name": "queue", "MaxAllowedGPUs": -1, "GPUOverQuotaWeight": 1}],
        "JobExpectedResults": {"preemptor": {"GPUsRequired": 2, "Status": "Pipelined"}},
        "Mocks": {
            "CacheRequirements": {
                "NumberOfCacheBinds": 2,
                "NumberOfCacheEvictions": 4,
                "NumberOfPipelineActions": 4,
            }
        },
    }


def gang_full_drain() -> dict[str, Any]:
    """preempt/preempt_gang_full_drain_test.go, TestPreemptGangFullDrainMultiVictimPerNode (KAI's issue
    #1591): eleven 4-GPU nodes, each full with four 1-GPU train jobs, and an 11-pod build gang of 4-GPU
    pods: every victim must go and every gang pod be pipelined."""
    nodes, gpus = 11, 4
    jobs: list[dict[str, Any]] = [
        {
            "Name": f"victim-n{i}-g{j}",
            "RequiredGPUsPerTask": 1,
            "Priority": TRAIN,
            "QueueName": "queue0",
            "Tasks": [{"NodeName": f"node{i}", "State": "Running"}],
        }
        for i in range(nodes)
        for j in range(gpus)
    ]
    jobs.append(
        {
            "Name": "gang-preemptor",
            "RequiredGPUsPerTask": gpus,
            "Priority": BUILD,
            "QueueName": "queue0",
            "Tasks": [{"State": "Pending"} for _ in range(nodes)],
        }
    )
    expected: dict[str, Any] = {"gang-preemptor": {"GPUsRequired": nodes * gpus, "Status": "Pipelined"}}
    expected.update({job["Name"]: {"GPUsRequired": 1, "Status": "Releasing"} for job in jobs[:-1]})
    return {
        "Name": "issue-1591 reproducer: 11-pod gang of 4-GPU pods, fully-packed 11-node × 4-GPU cluster, "
        "1-GPU victims",
        "Nodes": {f"node{i}": {"GPUs": gpus} for i in range(nodes)},
        "Queues": [
            {
                "Name": "queue0",
                "DeservedGPUs": nodes * gpus,
                "GPUOverQuotaWeight": 1,
                "MaxAllowedGPUs": -1,
            }
        ],
        "Jobs": jobs,
        "JobExpectedResults": expected,
        "Mocks": {
            "CacheRequirements": {"NumberOfCacheEvictions": nodes * gpus, "NumberOfPipelineActions": nodes}
        },
    }


# Table file -> case name -> its builder.
BUILT: dict[str, dict[str, Callable[[], dict[str, Any]]]] = {
    "preemptGang_test": {"flaky scenario": flaky_scenario},
    "preempt_gang_full_drain_test": {gang_full_drain()["Name"]: gang_full_drain},
}


def _topology(name: str, label: str) -> dict[str, Any]:
    return {"ObjectMeta": {"Name": name}, "Spec": {"Levels": [{"NodeLabel": label}]}}


RACK = "topology.test/rack-domain"
ZONE = "topology.test/zone-domain"
MULTI_TOPOLOGIES = [_topology("rack-topology", RACK), _topology("zone-topology", ZONE)]


def _required(topology: str, level: str) -> dict[str, str]:
    return {"Topology": topology, "RequiredLevel": level}


def _seed(name: str, node: str) -> dict[str, Any]:
    """A running 4-GPU job that makes its node the fullest of its domains."""
    return {
        "Name": name,
        "RequiredGPUsPerTask": 4,
        "Priority": TRAIN,
        "QueueName": "queue0",
        "Tasks": [{"State": "Running", "NodeName": node}],
    }


def _multi_topology_case(
    name: str, seeds: list[dict[str, Any]], job: dict[str, Any], domains: list[tuple[str, str]], gpus: int
) -> dict[str, Any]:
    """8-GPU nodes labelled with their (rack, zone), in order; one queue under one department."""
    return {
        "Name": name,
        "Topologies": MULTI_TOPOLOGIES,
        "Jobs": [*seeds, job],
        "Nodes": {
            f"node{i}": {"GPUs": 8, "Labels": {RACK: rack, ZONE: zone}}
            for i, (rack, zone) in enumerate(domains)
        },
        "Queues": [
            {
                "Name": "queue0",
                "ParentQueue": "department-a",
                "DeservedGPUs": gpus,
                "GPUOverQuotaWeight": 1,
                "MaxAllowedGPUs": gpus,
            }
        ],
        "Departments": [{"Name": "department-a", "DeservedGPUs": gpus}],
        "Mocks": {"CacheRequirements": {"NumberOfCacheBinds": 6}},
    }


def _pending(name: str, root: dict[str, Any], sub_groups: list[str]) -> dict[str, Any]:
    return {
        "Name": name,
        "RequiredGPUsPerTask": 4,
        "Priority": TRAIN,
        "QueueName": "queue0",
        "RootSubGroupSet": root,
        "Tasks": [{"State": "Pending", "SubGroupName": group} for group in sub_groups for _ in range(3)],
    }


def _pod_set(name: str, topology: str, level: str) -> dict[str, Any]:
    return {"name": name, "minAvailable": 3, "topology": _required(topology, level)}


def multi_topology_sub_groups() -> dict[str, Any]:
    """allocate/allocate_multi_topology_test.go, TestHandleTopologyAllocation_MultiTopologiesAcrossSubgroups
    (buildMultiTopologySubgroupsTest): one job of two pod sets of three 4-GPU pods (minSubGroup 2), one
    required in a rack of `rack-topology`, the other in a zone of `zone-topology`; node0 and node2 run a
    4-GPU seed each."""
    root = {
        "name": "",
        "topology": None,
        "minSubGroup": 2,
        "podSets": [
            _pod_set("rack-workers", "rack-topology", RACK),
            _pod_set("zone-workers", "zone-topology", ZONE),
        ],
        "subGroups": [],
    }
    domains = [(f"rack-{rack}", f"zone-{zone}") for rack in "abc" for zone in "xy"]
    return _multi_topology_case(
        "Allocate one job with two subgroups using different topology CRs",
        [_seed("seed_rack_a", "node0"), _seed("seed_zone_x", "node2")],
        _pending("pending_job0", root, ["rack-workers", "zone-workers"]),
        domains,
        64,
    )


def hierarchical_multi_topology_sub_groups() -> dict[str, Any]:
    """allocate/allocate_multi_topology_test.go,
    TestHandleTopologyAllocation_HierarchicalMultiTopologiesAcrossSubgroups
    (buildHierarchicalMultiTopologySubgroupsTest): a parent sub-group required in a zone of
    `zone-topology` (minSubGroup 2) with two pod sets of three 4-GPU pods, each required in a rack of
    `rack-topology`; node0 and node2 (zone-x, racks a and b) run a 4-GPU seed each."""
    parent = {
        "name": "parent",
        "topology": _required("zone-topology", ZONE),
        "minSubGroup": 2,
        "podSets": [_pod_set("child-a", "rack-topology", RACK), _pod_set("child-b", "rack-topology", RACK)],
        "subGroups": [],
    }
    root = {"name": "", "topology": None, "podSets": [], "subGroups": [parent]}
    domains = [(f"rack-{rack}", f"zone-{zone}") for zone in "xy" for rack in "abc" for _ in range(2)]
    return _multi_topology_case(
        "Allocate one hierarchical job with parent and children using different topology CRs",
        [_seed("seed_parent_zone_x_rack_a", "node0"), _seed("seed_parent_zone_x_rack_b", "node2")],
        _pending("pending_job1", root, ["child-a", "child-b"]),
        domains,
        128,
    )
