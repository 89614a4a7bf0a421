"""topology: the order in which domains are offered and the preferred level's node scores, as KAI v0.17
decides them (`pkg/scheduler/plugins/topology/job_filtering.go` sortTree / sortDomainInfos,
`node_scoring.go` calculateNodeScores).

Cases ported by name from KAI v0.17.0's `node_scoring_test.go` (TestCalculateNodeScores, TestSortTree):
KAI's tests hand its functions a tree with free resources already summed; here the same facts are a
cluster whose nodes have those free resources, and the plugin's subsets and scores are read from a
session. KAI's trees in TestCalculateNodeScores come in the order its sort would give them (the fullest
first); the clusters here are made so that the sort gives that order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from helpers import node_manifest, open_session, pod_group_manifest, pod_manifest, queue_manifest
from helpers import topology_constraint as constraint
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.framework.session import Session
from kai_scheduler.plugins.topology import PREFERRED_DOMAIN_SCORE

Manifest = dict[str, Any]


def topology(levels: Sequence[str]) -> Manifest:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "dc"},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def node(name: str, labels: dict[str, str], *, gpus: int = 0, cpu: int = 64) -> Manifest:
    return node_manifest(name, gpus=gpus, cpu=cpu, labels=labels)


def session_for(
    levels: Sequence[str], nodes: Sequence[Manifest], size: int, topology_constraint: Manifest, **pod: Any
) -> Session:
    """A session with the topology plugin alone and a pending gang `g` of `size` pods (`pod`: their
    requests)."""
    return gang_session(levels, nodes, [pod] * size, topology_constraint)


def gang_session(
    levels: Sequence[str],
    nodes: Sequence[Manifest],
    pods: Sequence[dict[str, Any]],
    topology_constraint: Manifest,
) -> Session:
    """The same with a pod per request of `pods`."""
    group = pod_group_manifest("g", "q", min_member=len(pods))
    group["spec"]["topologyConstraint"] = topology_constraint
    members = [pod_manifest(f"g-{i}", group="g", **pod) for i, pod in enumerate(pods)]
    manifests = [topology(levels), queue_manifest("q"), *nodes, group, *members]
    objects = [parse_object(m, "test", i) for i, m in enumerate(manifests)]
    return open_session(objects, plugins=["topology"])


def offered(session: Session) -> list[list[str]]:
    """The node sets the plugin offers gang `g`, in order."""
    job = session.snapshot.jobs["default/g"]
    subsets = session.node_subsets(job, None, job.tasks)
    assert subsets is not None
    names = session.snapshot.nodes.names
    return [[names[i] for i in np.flatnonzero(mask)] for mask in subsets.masks]


def scores(session: Session) -> dict[str, float]:
    """The topology scores of every node for a pod of gang `g`, in steps of KAI's scores.Topology."""
    offered(session)  # the scores are set when the gang's subsets are made
    job = session.snapshot.jobs["default/g"]
    (scorer,) = session.points.node_scorers
    rows = np.arange(session.snapshot.nodes.size)
    values = np.broadcast_to(scorer(job.tasks[0], rows), rows.shape)
    names = session.snapshot.nodes.names
    return {names[i]: float(values[i]) / PREFERRED_DOMAIN_SCORE for i in rows}


def two_levels(upper: str, lower: str, rows: str) -> list[Manifest]:
    """Nodes from "name/upper domain/lower domain/GPUs" words."""
    found = []
    for row in rows.split():
        name, a, b, gpus = row.split("/")
        found.append(node(name, {upper: a, lower: b}, gpus=int(gpus)))
    return found


def racks(free_gpus: dict[str, int]) -> list[Manifest]:
    """One node `node<i>` per rack `rack<i>` of zone1, with that many GPUs."""
    return [
        node(f"node{rack[4:]}", {"zone": "zone1", "rack": rack}, gpus=gpus)
        for rack, gpus in free_gpus.items()
    ]


GPU_POD = {"gpus": 1, "cpu": None, "memory": None}


# --- TestCalculateNodeScores ---------------------------------------------------------------------


def test_calculate_node_scores_single_rack_with_nodes() -> None:
    # KAI: "single rack with nodes": the nodes share the preferred domain, every one scores 10.
    nodes = [node(name, {"zone": "zone1", "rack": "rack1"}, gpus=1) for name in ("node1", "node2")]
    session = session_for(("zone", "rack"), nodes, 3, constraint(preferred="rack"), **GPU_POD)
    assert scores(session) == {"node1": 10.0, "node2": 10.0}


def test_calculate_node_scores_multiple_racks_scores_decrease_by_position() -> None:
    # KAI: "multiple racks - scores decrease by position": the sort puts rack3 (fullest) first, rack1
    # last; the i-th of 3 scores floor((i + 1) / 3 * 10).
    session = session_for(
        ("zone", "rack"),
        racks({"rack1": 3, "rack2": 2, "rack3": 1}),
        7,
        constraint(preferred="rack"),
        **GPU_POD,
    )
    assert scores(session) == {"node1": 10.0, "node2": 6.0, "node3": 3.0}


def test_calculate_node_scores_4_racks_verify_scoring_distribution() -> None:
    # KAI: "4 racks - verify scoring distribution": 2.5 and 7.5 round down.
    free = {"rack1": 4, "rack2": 3, "rack3": 2, "rack4": 1}
    session = session_for(("zone", "rack"), racks(free), 11, constraint(preferred="rack"), **GPU_POD)
    assert scores(session) == {"node1": 10.0, "node2": 7.0, "node3": 5.0, "node4": 2.0}


def test_calculate_node_scores_nested_hierarchy_nodes_directly_in_preferred_level_domains() -> None:
    # KAI: "nested hierarchy - nodes directly in preferred level domains": zones of region1, zone2 the
    # fuller (first), zone1 last.
    rows = "node1/region1/zone1/2 node2/region1/zone1/2 node3/region1/zone2/1 node4/region1/zone2/1"
    nodes = two_levels("region", "zone", rows)
    session = session_for(("region", "zone"), nodes, 5, constraint(preferred="zone"), **GPU_POD)
    assert scores(session) == {"node1": 10.0, "node2": 10.0, "node3": 5.0, "node4": 5.0}


def test_the_scores_hold_a_gang_no_preferred_domain_can_take_in_the_last_one_first() -> None:
    # What the scores do: 5 one-GPU pods, no rack holds them; they start in rack1 (the emptiest, scored
    # highest) and go on to the next rack in order once it is full.
    free = {"rack1": 4, "rack2": 3, "rack3": 2, "rack4": 1}
    session = session_for(("zone", "rack"), racks(free), 5, constraint(preferred="rack"), **GPU_POD)
    by_score = sorted(scores(session).items(), key=lambda item: -item[1])
    assert [name for name, _ in by_score] == ["node1", "node2", "node3", "node4"]


# --- TestSortTree ------------------------------------------------------------------------------------


def rack_order(free: dict[str, int], **pod: Any) -> list[str]:
    """The racks offered to a one-pod gang that requires a rack, in order."""
    session = session_for(("zone", "rack"), racks(free), 1, constraint(required="rack"), **pod)
    return [f"rack{nodes[0][4:]}" for nodes in offered(session)]


def test_sort_tree_sort_single_level_gpus() -> None:
    assert rack_order({"rack3": 5, "rack1": 2, "rack2": 8}, **GPU_POD) == ["rack1", "rack3", "rack2"]


def test_sort_tree_sort_single_level_cpu() -> None:
    nodes = [
        node(f"node{i}", {"zone": "zone1", "rack": f"rack{i}"}, cpu=cpu)
        for i, cpu in ((3, 5), (1, 2), (2, 8))
    ]
    session = session_for(("zone", "rack"), nodes, 1, constraint(required="rack"), cpu="1", memory=None)
    assert offered(session) == [["node1"], ["node3"], ["node2"]]


def test_sort_tree_sort_single_level_several_dominant_resources() -> None:
    # KAI: 1 CPU and 1 GPU asked; rack3 100 CPUs 5 GPUs, rack1 2 CPUs 4 GPUs, rack2 100 CPUs 8 GPUs: each
    # rack by its largest share (rack1: half its CPUs).
    nodes = [
        node(f"node{i}", {"zone": "zone1", "rack": f"rack{i}"}, gpus=gpus, cpu=cpu)
        for i, cpu, gpus in ((3, 100, 5), (1, 2, 4), (2, 100, 8))
    ]
    session = session_for(
        ("zone", "rack"), nodes, 1, constraint(required="rack"), gpus=1, cpu="1", memory=None
    )
    assert offered(session) == [["node1"], ["node3"], ["node2"]]


def test_a_rack_short_of_cpus_is_the_fuller_although_it_has_more_gpus_free() -> None:
    # The dominant share decides, not the free GPUs: rack1 (8 GPUs, 2 CPUs) is half used by the pod's CPU.
    nodes = [
        node("node1", {"zone": "zone1", "rack": "rack1"}, gpus=8, cpu=2),
        node("node2", {"zone": "zone1", "rack": "rack2"}, gpus=4, cpu=100),
    ]
    session = session_for(
        ("zone", "rack"), nodes, 1, constraint(required="rack"), gpus=1, cpu="1", memory=None
    )
    assert offered(session) == [["node1"], ["node2"]]


def test_sort_tree_stable_sort_same_allocatable_pods_maintain_order() -> None:
    assert rack_order({"rack2": 5, "rack3": 5, "rack1": 5}, **GPU_POD) == ["rack1", "rack2", "rack3"]


def test_sort_tree_sort_nested_hierarchy_to_rack_level() -> None:
    # KAI: zone1 (racks of 10 and 5 GPUs) and zone2 (3 and 5): zone2 is the fuller, so its racks are
    # offered first (rack4, rack3), then zone1's, although zone1's rack1 is as full as rack3.
    rows = "node1/zone1/rack1/5 node2/zone1/rack2/10 node3/zone2/rack3/5 node4/zone2/rack4/3"
    nodes = two_levels("zone", "rack", rows)
    session = session_for(("zone", "rack"), nodes, 1, constraint(required="rack"), **GPU_POD)
    assert offered(session) == [["node4"], ["node3"], ["node1"], ["node2"]]


# --- which domains could hold the pods (job_filtering.go checkJobDomainFit) ------------------------------


def offered_to(nodes: Sequence[Manifest], pods: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The node sets offered to gang `g` (its pods' requests `pods`), which requires a rack."""
    return offered(gang_session(("zone", "rack"), nodes, pods, constraint(required="rack")))


TWO_RACKS = two_levels("zone", "rack", "a1/zone1/rack1/2 a2/zone1/rack1/1 b1/zone1/rack2/2 b2/zone1/rack2/2")


def test_gpu_pods_of_different_sizes_count_as_copies_of_the_largest() -> None:
    # KAI's representor pods (calcNodeAccommodation): a 2-GPU and a 1-GPU pod count as two 2-GPU pods;
    # rack1's nodes hold one such copy (a2's one GPU none), so only rack2 is offered.
    pods = [{**GPU_POD, "gpus": 2}, GPU_POD]
    assert offered_to(TWO_RACKS, pods) == [["b1", "b2"]]


def test_pods_unlike_in_kind_are_summed_against_the_free_gpus() -> None:
    # A GPU pod and a CPU-only pod (KAI's useRepresentorPodsAccounting is false): their sum (3 GPUs) fits
    # both racks' free GPUs, rack1 (3 free) the fuller.
    pods = [{**GPU_POD, "gpus": 3}, {"cpu": "1", "memory": None}]
    assert offered_to(TWO_RACKS, pods) == [["a1", "a2"], ["b1", "b2"]]


def shared_gpus_half_used(extra: Sequence[Manifest] = ()) -> list[Manifest]:
    """KAI's "fractional GPU" clusters: node-1 (rack1) has 2 GPUs, each half used by a running 0.5 pod;
    node-2 (rack2) has no GPU."""
    running = [
        pod_manifest(f"running-{i}", fraction=0.5, node_name="node-1", labels={"runai-gpu-group": f"GPU-{i}"})
        for i in range(2)
    ]
    rows = "node-1/zone1/rack1/2 node-2/zone1/rack2/0"
    return [*two_levels("zone", "rack", rows), *running, *extra]


def test_calc_tree_allocatable_fractional_gpu_all_devices_partially_allocated() -> None:
    # KAI: "fractional GPU - all devices partially allocated, remaining capacity accommodates pods": two
    # 0.4 pods fit the unused halves of node-1's GPUs (rack1 holds 2 of them, rack2 none).
    pods = [{"fraction": 0.4, "cpu": None, "memory": None}] * 2
    assert offered_to(shared_gpus_half_used(), pods) == [["node-1"]]


def test_a_third_fractional_pod_is_more_than_the_unused_halves_hold() -> None:
    # The same count says no for three: floor(1.0 / 0.4) = 2 copies on node-1.
    pods = [{"fraction": 0.4, "cpu": None, "memory": None}] * 3
    assert offered_to(shared_gpus_half_used(), pods) == []
