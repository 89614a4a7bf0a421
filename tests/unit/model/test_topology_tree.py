"""Topology trees and topology constraints in the snapshot.

Reference: kai-reference §7 ("Per Topology CR the scheduler builds a tree: root → level-0 domains → … →
nodes. Nodes missing any level label are excluded from that topology. Domain IDs are label values joined
with `.`"; a PodGroup or subGroup carries `topology`, `requiredTopologyLevel`, `preferredTopologyLevel`;
annotations on the top owner set it: `kai.scheduler/topology`, `…-required-placement`,
`…-preferred-placement`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers import node, pod, pod_group_manifest, queue, snapshot_of
from kai_scheduler.api.objects import PodGroup, Topology
from kai_scheduler.model.jobs import TopologyConstraint
from kai_scheduler.model.topology import TopologyTree, build_topology

LEVELS = ("zone", "rack")


def labels(zone: str | None, rack: str | None, **extra: str) -> dict[str, str]:
    found = {"zone": zone, "rack": rack, **extra}
    return {key: value for key, value in found.items() if value is not None}


def domain_ids(tree: TopologyTree, level: int) -> list[str]:
    return [d.id for d in tree.domains[level]]


def nodes_of(tree: TopologyTree, level: int, domain_id: str) -> list[int]:
    domain = tree.domain(level, domain_id)
    assert domain is not None, f"no domain {domain_id} at level {level}"
    return [int(i) for i in np.flatnonzero(domain.nodes)]


# --- build_topology --------------------------------------------------------------------------------


def test_domain_ids_join_the_label_values_of_the_levels_down_to_theirs() -> None:
    tree = build_topology(
        "dc",
        LEVELS,
        [labels("z0", "r1"), labels("z0", "r1"), labels("z0", "r2"), labels("z1", "r1")],
    )
    assert sorted(domain_ids(tree, 0)) == ["z0", "z1"]
    assert sorted(domain_ids(tree, 1)) == ["z0.r1", "z0.r2", "z1.r1"]
    assert nodes_of(tree, 0, "z0") == [0, 1, 2]
    assert nodes_of(tree, 0, "z1") == [3]
    assert nodes_of(tree, 1, "z0.r1") == [0, 1]
    assert nodes_of(tree, 1, "z0.r2") == [2]


def test_the_same_rack_name_in_two_zones_is_two_domains() -> None:
    tree = build_topology("dc", LEVELS, [labels("z0", "r1"), labels("z1", "r1")])
    assert len(tree.domains[1]) == 2
    assert nodes_of(tree, 1, "z0.r1") == [0]
    assert nodes_of(tree, 1, "z1.r1") == [1]
    assert tree.domain(1, "r1") is None
    first, second = tree.domain_of(0, 1), tree.domain_of(1, 1)
    assert first is not None and second is not None and first != second
    assert int(tree.node_domain[1][0]) != int(tree.node_domain[1][1])


def test_every_member_node_has_one_domain_per_level_that_contains_it() -> None:
    node_labels = [labels("z0", "r1"), labels("z0", "r2"), labels("z1", "r1"), labels("z1", "r3")]
    tree = build_topology("dc", LEVELS, node_labels)
    for index, own in enumerate(node_labels):
        zone, rack = tree.domain_of(index, 0), tree.domain_of(index, 1)
        assert zone is not None and rack is not None
        assert zone.id == own["zone"] and rack.id == f"{own['zone']}.{own['rack']}"
        assert zone.level == 0 and rack.level == 1
        assert zone.nodes[index] and rack.nodes[index]
        # A rack lies inside its zone.
        assert not (rack.nodes & ~zone.nodes).any()


def test_nodes_missing_a_level_label_are_outside_the_topology() -> None:
    tree = build_topology(
        "dc",
        LEVELS,
        [
            labels("z0", "r1"),
            labels("z0", None),  # no rack label
            labels(None, "r1"),  # no zone label
            labels(None, None, other="x"),  # neither
        ],
    )
    assert tree.members.tolist() == [True, False, False, False]
    for level in (0, 1):
        assert tree.node_domain[level].tolist() == [0, -1, -1, -1]
        for outside in (1, 2, 3):
            assert tree.domain_of(outside, level) is None
    # The zone of node 1 ("z0") is not made a domain of its own, nor does it join node 0's.
    assert nodes_of(tree, 0, "z0") == [0]
    assert domain_ids(tree, 1) == ["z0.r1"]


def test_labels_that_are_not_levels_do_not_matter() -> None:
    tree = build_topology("dc", LEVELS, [labels("z0", "r1", host="a"), labels("z0", "r1", host="b")])
    assert tree.members.tolist() == [True, True]
    assert domain_ids(tree, 1) == ["z0.r1"]


def test_level_of_names_the_level_index_widest_first() -> None:
    tree = build_topology("dc", ("zone", "row", "rack"), [{"zone": "z", "row": "w", "rack": "r"}])
    assert tree.levels == ("zone", "row", "rack")
    assert tree.level_of("zone") == 0
    assert tree.level_of("row") == 1
    assert tree.level_of("rack") == 2
    assert tree.level_of("host") is None
    assert tree.level_of("") is None
    assert domain_ids(tree, 2) == ["z.w.r"]


def test_a_topology_over_no_member_nodes_has_no_domains() -> None:
    tree = build_topology("dc", LEVELS, [labels(None, None), {}])
    assert not tree.members.any()
    assert tree.domains == ((), ())


# --- the snapshot: trees per Topology object, constraints on jobs and pod sets ----------------------


def topology(name: str, *levels: str) -> Topology:
    return Topology.model_validate(
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]},
        }
    )


def group(name: str, spec: dict[str, Any], **kwargs: Any) -> PodGroup:
    manifest = pod_group_manifest(name, "q", **kwargs)
    manifest["spec"].update(spec)
    return PodGroup.model_validate(manifest)


def test_the_snapshot_has_a_tree_per_topology_in_node_table_order() -> None:
    snapshot = snapshot_of(
        [
            topology("dc", "zone", "rack"),
            topology("zones", "zone"),
            node("b", labels=labels("z1", "r1")),
            node("a", labels=labels("z0", "r1")),
            node("c", labels=labels("z0", None)),
            queue("q"),
        ]
    )
    names = list(snapshot.nodes.names)
    assert set(snapshot.topologies) == {"dc", "zones"}
    dc, zones = snapshot.topologies["dc"], snapshot.topologies["zones"]
    assert dc.levels == ("zone", "rack")
    assert [names[i] for i in np.flatnonzero(dc.members)] == ["a", "b"]
    # "c" has a zone but no rack: outside "dc", inside "zones".
    assert [names[i] for i in np.flatnonzero(zones.members)] == ["a", "b", "c"]
    rack = dc.domain_of(names.index("a"), 1)
    assert rack is not None and rack.id == "z0.r1"
    assert [names[i] for i in np.flatnonzero(rack.nodes)] == ["a"]


def test_a_pod_group_constraint_reaches_the_job_and_leaf_sub_groups_their_own() -> None:
    whole = {"topology": "dc", "requiredTopologyLevel": "zone", "preferredTopologyLevel": "rack"}
    spec = {
        "topologyConstraint": whole,
        "subGroups": [
            {"name": "top"},
            {
                "name": "s0",
                "parent": "top",
                "minMember": 1,
                "topologyConstraint": {"topology": "dc", "requiredTopologyLevel": "rack"},
            },
            {"name": "s1", "parent": "top", "minMember": 1},
        ],
    }
    snapshot = snapshot_of(
        [
            topology("dc", "zone", "rack"),
            node("a", labels=labels("z0", "r1")),
            queue("q"),
            group("g", spec, min_member=2),
            pod("s0-0", group="g", labels={"kai.scheduler/subgroup-name": "s0"}),
            pod("s1-0", group="g", labels={"kai.scheduler/subgroup-name": "s1"}),
        ]
    )
    job = snapshot.jobs["default/g"]
    assert job.topology == TopologyConstraint("dc", "zone", "rack")
    assert set(job.podsets) == {"s0", "s1"}
    assert job.podsets["s0"].topology == TopologyConstraint("dc", "rack", "")
    assert job.podsets["s1"].topology is None
    assert [t.name for t in job.podsets["s0"].tasks] == ["s0-0"]


def test_a_constraint_without_a_topology_or_without_any_level_is_no_constraint() -> None:
    snapshot = snapshot_of(
        [
            topology("dc", "zone", "rack"),
            node("a", labels=labels("z0", "r1")),
            queue("q"),
            group("no-level", {"topologyConstraint": {"topology": "dc"}}),
            pod("p0", group="no-level"),
            group("no-name", {"topologyConstraint": {"requiredTopologyLevel": "rack"}}),
            pod("p1", group="no-name"),
            group("plain", {}),
            pod("p2", group="plain"),
        ]
    )
    for name in ("no-level", "no-name", "plain"):
        job = snapshot.jobs[f"default/{name}"]
        assert job.topology is None, name
        assert all(p.topology is None for p in job.podsets.values()), name


def test_a_bare_pod_takes_its_constraint_from_its_annotations() -> None:
    snapshot = snapshot_of(
        [
            topology("dc", "zone", "rack"),
            node("a", labels=labels("z0", "r1")),
            queue("q"),
            pod(
                "both",
                annotations={
                    "kai.scheduler/topology": "dc",
                    "kai.scheduler/topology-required-placement": "zone",
                    "kai.scheduler/topology-preferred-placement": "rack",
                },
            ),
            pod(
                "preferred",
                annotations={
                    "kai.scheduler/topology": "dc",
                    "kai.scheduler/topology-preferred-placement": "rack",
                },
            ),
            pod("level-only", annotations={"kai.scheduler/topology-required-placement": "rack"}),
            pod("plain"),
        ]
    )
    by_pod = {job.tasks[0].name: job for job in snapshot.jobs.values()}
    assert by_pod["both"].topology == TopologyConstraint("dc", "zone", "rack")
    assert by_pod["preferred"].topology == TopologyConstraint("dc", "", "rack")
    assert by_pod["level-only"].topology is None
    assert by_pod["plain"].topology is None
