"""topology: a job (or each of its sub-groups) kept within one domain of a Topology.

Reference: kai-reference §7 (required level: the job's pods fit entirely in one domain of that level or
are not placed; preferred level: best effort; candidate subsets offered from the preferred level up to the
required level or the root; only domains where the pods fit; domains sorted to bin-pack, the fuller first;
running pods of a job with a required constraint pin it to their domain; nodes missing a level label are
outside the topology; failure message `topology <name>, requirement <level> couldn't be satisfied for job
<ns>/<job>: not enough resources in the cluster to allocate the job.`; sub-group (hierarchical)
constraints, e.g. each segment in one rack and the whole job, or the segments' parent sub-group, in one
zone; annotations `kai.scheduler/topology`, `…-required-placement`, `…-preferred-placement` on a bare
pod), §2.2 (`subGroups[]` with `parent`), §4.4 (`topology` is in the default plugin list; a
configuration without it does not run it), §9 (configuration format).

Most tests run the simulator with the default configuration on a small cluster of racks whose nodes are
partly busy so that plain binpack would split the job across domains; a control run without the
constraint shows that it does, so each test can fail.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from helpers import (
    config,
    node_manifest,
    open_session,
    pipelines,
    pod_group_manifest,
    pod_manifest,
    queue_manifest,
    run,
    simulate,
)
from helpers import topology_constraint as constraint
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.cli import main
from kai_scheduler.framework.config import DEFAULT_PLUGIN_ARGUMENTS, DEFAULT_PLUGINS
from kai_scheduler.sim.results import result_document

Manifest = dict[str, Any]

ALLOCATE = config(actions="allocate")
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"


# --- building the cluster --------------------------------------------------------------------------


def topology_manifest(name: str = "dc", levels: Sequence[str] = ("zone", "rack")) -> Manifest:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def rack_node(name: str, zone: str | None, rack: str | None, *, gpus: int = 4) -> Manifest:
    """A node with `zone` / `rack` labels (None: the label is missing)."""
    labels = {key: value for key, value in (("zone", zone), ("rack", rack)) if value is not None}
    return node_manifest(name, gpus=gpus, labels=labels)


def busy(node: str, gpus: int) -> Manifest:
    """A running, non-preemptible pod using `gpus` GPUs of `node` (no action moves it)."""
    return pod_manifest(
        f"busy-{node}",
        gpus=gpus,
        node_name=node,
        labels={"kai.scheduler/preemptibility": "non-preemptible"},
    )


def job(
    name: str,
    size: int,
    *,
    min_member: int | None = None,
    gpus: int = 1,
    topology: Manifest | None = None,
) -> list[Manifest]:
    """A PodGroup (with `topology` as its spec.topologyConstraint) and its pods `<name>-0` ..."""
    group = pod_group_manifest(name, "q", min_member=size if min_member is None else min_member)
    if topology is not None:
        group["spec"]["topologyConstraint"] = topology
    return [group] + [pod_manifest(f"{name}-{i}", gpus=gpus, group=name) for i in range(size)]


def objects(manifests: Sequence[Manifest]) -> list[ApiObject]:
    return [parse_object(m, "test", i) for i, m in enumerate(manifests)]


def run_sim(manifests: Sequence[Manifest], scheduler_config: Any = None, **options: Any) -> dict[str, Any]:
    return simulate(objects(manifests), scheduler_config, **options)


# --- reading the result ----------------------------------------------------------------------------


def placed(document: dict[str, Any], *prefixes: str) -> dict[str, str | None]:
    """pod name -> node (None while not running) for the pods named `<prefix>-<i>`."""
    return {p["name"]: p["node"] for p in document["pods"] if p["name"].rsplit("-", 1)[0] in prefixes}


def domains(
    document: dict[str, Any], prefix: str | tuple[str, ...], cluster: Sequence[Manifest], level: str
) -> set[str]:
    """The `level` domain ids ("z0" / "z0.r1") of the nodes the pods `<prefix>-<i>` run on."""
    prefixes = (prefix,) if isinstance(prefix, str) else prefix
    labels = {m["metadata"]["name"]: m["metadata"]["labels"] for m in cluster if m["kind"] == "Node"}
    found = set()
    pods = placed(document, *prefixes)
    assert pods, f"no pods named {prefixes}"
    for node in pods.values():
        assert node is not None, f"a pod of {prefixes} is not running: {pods}"
        own = labels[node]
        found.add(own["zone"] if level == "zone" else f"{own['zone']}.{own['rack']}")
    return found


def reason(document: dict[str, Any], group: str) -> str | None:
    found: str | None = next(g for g in document["podGroups"] if g["name"] == group)["unschedulableReason"]
    return found


def failure(level: str, job_name: str, topology: str = "dc") -> str:
    return (
        f"topology {topology}, requirement {level} couldn't be satisfied for job default/{job_name}: "
        "not enough resources in the cluster to allocate the job."
    )


# One zone, two racks of two 4-GPU nodes; a1 has 1 GPU free and b1 2, so binpack starts a gang on a1 then
# b1 (free: rack z0.r1 5, rack z0.r2 6).
ONE_ZONE = [
    topology_manifest(),
    queue_manifest("q"),
    rack_node("a1", "z0", "r1"),
    rack_node("a2", "z0", "r1"),
    rack_node("b1", "z0", "r2"),
    rack_node("b2", "z0", "r2"),
    busy("a1", 3),
    busy("b1", 2),
]


# --- required level --------------------------------------------------------------------------------


def test_control_binpack_alone_splits_the_gang_across_racks() -> None:
    document = run_sim([*ONE_ZONE, *job("g", 4)])
    assert domains(document, "g", ONE_ZONE, "rack") == {"z0.r1", "z0.r2"}


def test_a_required_rack_keeps_the_whole_gang_in_one_rack() -> None:
    document = run_sim([*ONE_ZONE, *job("g", 4, topology=constraint(required="rack"))])
    assert all(placed(document, "g").values())
    assert len(domains(document, "g", ONE_ZONE, "rack")) == 1


def test_a_gang_no_rack_can_hold_waits_with_the_reason_although_the_cluster_has_room() -> None:
    # 9 one-GPU pods: 11 GPUs are free but a rack has 8 at most.
    control = run_sim([*ONE_ZONE, *job("g", 9)])
    assert all(placed(control, "g").values())

    document = run_sim([*ONE_ZONE, *job("g", 9, topology=constraint(required="rack"))])
    assert set(placed(document, "g").values()) == {None}
    got = reason(document, "g")
    assert got is not None and got.startswith(failure("rack", "g"))
    # With allocate alone, that is the whole reason.
    alone = run_sim([*ONE_ZONE, *job("g", 9, topology=constraint(required="rack"))], ALLOCATE)
    assert reason(alone, "g") == failure("rack", "g")


def test_a_required_zone_holds_a_gang_wider_than_a_rack() -> None:
    document = run_sim([*ONE_ZONE, *job("g", 9, topology=constraint(required="zone"))])
    assert domains(document, "g", ONE_ZONE, "zone") == {"z0"}


# --- preferred level only (best effort) --------------------------------------------------------------


def test_a_preferred_rack_keeps_the_gang_in_one_rack_when_one_can_hold_it() -> None:
    document = run_sim([*ONE_ZONE, *job("g", 4, topology=constraint(preferred="rack"))])
    assert len(domains(document, "g", ONE_ZONE, "rack")) == 1


def test_a_preferred_rack_no_rack_can_hold_still_runs_across_racks() -> None:
    document = run_sim([*ONE_ZONE, *job("g", 9, topology=constraint(preferred="rack"))])
    assert reason(document, "g") is None
    assert domains(document, "g", ONE_ZONE, "rack") == {"z0.r1", "z0.r2"}


# --- required zone + preferred rack --------------------------------------------------------------------

# Two zones, each with racks r1 and r2 (the same rack names in both zones) of two 4-GPU nodes. In zone z1,
# c1 has 1 GPU free and d1 2 (rack z1.r1 5 free, z1.r2 6, zone z1 11); zone z0 is empty (16 free).
TWO_ZONES = [
    topology_manifest(),
    queue_manifest("q"),
    rack_node("a1", "z0", "r1"),
    rack_node("a2", "z0", "r1"),
    rack_node("b1", "z0", "r2"),
    rack_node("b2", "z0", "r2"),
    rack_node("c1", "z1", "r1"),
    rack_node("c2", "z1", "r1"),
    rack_node("d1", "z1", "r2"),
    rack_node("d2", "z1", "r2"),
    busy("c1", 3),
    busy("d1", 2),
]
ZONE_AND_RACK = constraint(required="zone", preferred="rack")


def test_control_a_required_zone_alone_splits_a_small_gang_across_racks() -> None:
    document = run_sim([*TWO_ZONES, *job("g", 3, topology=constraint(required="zone"))])
    assert domains(document, "g", TWO_ZONES, "zone") == {"z1"}
    assert domains(document, "g", TWO_ZONES, "rack") == {"z1.r1", "z1.r2"}


def test_required_zone_preferred_rack_puts_a_small_gang_in_one_rack() -> None:
    document = run_sim([*TWO_ZONES, *job("g", 3, topology=ZONE_AND_RACK)])
    assert len(domains(document, "g", TWO_ZONES, "rack")) == 1


def test_control_binpack_alone_splits_a_large_gang_across_zones() -> None:
    document = run_sim([*TWO_ZONES, *job("g", 10)])
    assert domains(document, "g", TWO_ZONES, "zone") == {"z0", "z1"}


def test_required_zone_preferred_rack_puts_a_gang_wider_than_a_rack_in_one_zone() -> None:
    document = run_sim([*TWO_ZONES, *job("g", 10, topology=ZONE_AND_RACK)])
    assert reason(document, "g") is None
    assert len(domains(document, "g", TWO_ZONES, "zone")) == 1
    assert len(domains(document, "g", TWO_ZONES, "rack")) > 1


def test_required_zone_preferred_rack_waits_when_no_zone_can_hold_the_gang() -> None:
    # 17 GPUs: 27 are free in the cluster, 16 at most in a zone.
    document = run_sim([*TWO_ZONES, *job("g", 17, topology=ZONE_AND_RACK)], ALLOCATE)
    assert set(placed(document, "g").values()) == {None}
    assert reason(document, "g") == failure("zone", "g")


def test_racks_with_the_same_name_in_two_zones_are_different_racks() -> None:
    # a (z0/r1) and c (z1/r1) have 2 GPUs free each; b (z0/r2) has 4. Rack "r1" would have 4 free if the
    # rack ids were not qualified by their zone.
    cluster = [
        topology_manifest(),
        queue_manifest("q"),
        rack_node("a", "z0", "r1"),
        rack_node("b", "z0", "r2"),
        rack_node("c", "z1", "r1"),
        busy("a", 2),
        busy("c", 2),
    ]
    control = run_sim([*cluster, *job("g", 4)])
    assert set(placed(control, "g").values()) == {"a", "c"}
    document = run_sim([*cluster, *job("g", 4, topology=constraint(required="rack"))])
    assert set(placed(document, "g").values()) == {"b"}


# --- fullest domain first -----------------------------------------------------------------------------


@pytest.mark.parametrize("fuller", ["r1", "r2"])
def test_of_two_racks_that_fit_the_fuller_one_is_chosen(fuller: str) -> None:
    # The fuller rack has 4 GPUs free (2 + 2); the other 5 (1 + 4) but holds the single fullest node,
    # where binpack alone starts.
    emptier = "r2" if fuller == "r1" else "r1"
    cluster = [
        topology_manifest(),
        queue_manifest("q"),
        rack_node(f"{fuller}-n1", "z0", fuller),
        rack_node(f"{fuller}-n2", "z0", fuller),
        rack_node(f"{emptier}-n1", "z0", emptier),
        rack_node(f"{emptier}-n2", "z0", emptier),
        busy(f"{fuller}-n1", 2),
        busy(f"{fuller}-n2", 2),
        busy(f"{emptier}-n1", 3),
    ]
    control = run_sim([*cluster, *job("g", 3)])
    assert placed(control, "g")["g-0"] == f"{emptier}-n1"

    for level in ("required", "preferred"):
        document = run_sim([*cluster, *job("g", 3, topology=constraint(**{level: "rack"}))])
        assert domains(document, "g", cluster, "rack") == {f"z0.{fuller}"}, level


def test_a_gang_waits_for_a_rack_being_released_rather_than_split() -> None:
    # a1 (rack z0.r1) is being released by a terminating 4-GPU pod; b1 (rack z0.r2) has 2 GPUs free.
    cluster = [
        topology_manifest(),
        queue_manifest("q"),
        rack_node("a1", "z0", "r1"),
        rack_node("b1", "z0", "r2"),
        busy("b1", 2),
        pod_manifest("leaving", gpus=4, node_name="a1", terminating=True),
    ]
    control = run(objects([*cluster, *job("g", 4)]), ALLOCATE, cycles=1)
    assert sorted(pipelines(control.cycles[0].decisions).values()) == ["a1", "a1", "b1", "b1"]

    result = run(objects([*cluster, *job("g", 4, topology=constraint(required="rack"))]), ALLOCATE, cycles=1)
    assert pipelines(result.cycles[0].decisions) == {f"g-{i}": "a1" for i in range(4)}
    document = result_document(run(objects([*cluster, *job("g", 4, topology=constraint(required="rack"))])))
    assert set(placed(document, "g").values()) == {"a1"}


def test_a_rack_whose_nodes_reject_the_pods_is_passed_over_for_the_next() -> None:
    # Rack z0.r1 (a1, 2 GPUs free) is the fuller and is offered first, but only b1 (rack z0.r2) has the
    # label the pods select.
    cluster = [
        topology_manifest(),
        queue_manifest("q"),
        rack_node("a1", "z0", "r1"),
        rack_node("b1", "z0", "r2"),
        busy("a1", 2),
    ]
    cluster[3]["metadata"]["labels"]["accelerator"] = "x"
    gang = job("g", 2, topology=constraint(required="rack"))
    for manifest in gang[1:]:
        manifest["spec"]["nodeSelector"] = {"accelerator": "x"}
    assert offered([*cluster, *gang], "g") == [["a1"], ["b1"]]
    document = run_sim([*cluster, *gang])
    assert placed(document, "g") == {"g-0": "b1", "g-1": "b1"}
    assert reason(document, "g") is None


# --- running pods pin the job -----------------------------------------------------------------------


def growing_job(topology: Manifest | None) -> list[Manifest]:
    """An elastic job (minMember 2) whose pods e-0, e-1 run on a1 and e-2, e-3 wait."""
    group = pod_group_manifest("e", "q", min_member=2)
    if topology is not None:
        group["spec"]["topologyConstraint"] = topology
    return [
        group,
        pod_manifest("e-0", gpus=1, group="e", node_name="a1"),
        pod_manifest("e-1", gpus=1, group="e", node_name="a1"),
        pod_manifest("e-2", gpus=1, group="e"),
        pod_manifest("e-3", gpus=1, group="e"),
    ]


# Rack z0.r1 (a1 with e-0 and e-1, a2 empty) has 6 GPUs free; rack z0.r2 only 1, on b1 (the fullest node,
# and the fullest rack).
PINNING = [
    topology_manifest(),
    queue_manifest("q"),
    rack_node("a1", "z0", "r1"),
    rack_node("a2", "z0", "r1"),
    rack_node("b1", "z0", "r2"),
    rack_node("b2", "z0", "r2"),
    busy("b1", 3),
    busy("b2", 4),
]


def test_control_an_unconstrained_growing_job_grows_into_the_other_rack() -> None:
    document = run_sim([*PINNING, *growing_job(None)])
    assert "b1" in placed(document, "e").values()


def test_a_growing_job_adds_pods_only_in_the_rack_its_pods_run_in() -> None:
    document = run_sim([*PINNING, *growing_job(constraint(required="rack"))])
    nodes = placed(document, "e")
    assert all(nodes.values()), nodes
    assert domains(document, "e", PINNING, "rack") == {"z0.r1"}


def test_pods_placed_earlier_in_the_same_cycle_pin_the_growth() -> None:
    # Rack z0.r1 (a1) has 2 GPUs free, z0.r2 7 (b1 3, b2 4): minMember 2 goes to the fuller z0.r1, and the
    # next pods have no room left there.
    cluster = [
        topology_manifest(),
        queue_manifest("q"),
        rack_node("a1", "z0", "r1"),
        rack_node("b1", "z0", "r2"),
        rack_node("b2", "z0", "r2"),
        busy("a1", 2),
        busy("b1", 1),
    ]
    control = run_sim([*cluster, *job("e", 4, min_member=2)], ALLOCATE, cycles=1)
    assert all(placed(control, "e").values())
    assert domains(control, "e", cluster, "rack") == {"z0.r1", "z0.r2"}

    document = run_sim(
        [*cluster, *job("e", 4, min_member=2, topology=constraint(required="rack"))], ALLOCATE, cycles=1
    )
    assert placed(document, "e") == {"e-0": "a1", "e-1": "a1", "e-2": None, "e-3": None}


# --- nodes outside the topology --------------------------------------------------------------------

# a1 is the only node with both labels (4 GPUs free); x has no labels, y only a zone, each with 1 GPU free
# (the fullest nodes, where binpack starts).
OUTSIDE = [
    topology_manifest(),
    queue_manifest("q"),
    rack_node("a1", "z0", "r1"),
    rack_node("x", None, None, gpus=8),
    rack_node("y", "z0", None, gpus=8),
    busy("x", 7),
    busy("y", 7),
]


def test_control_an_unconstrained_gang_uses_nodes_without_the_labels() -> None:
    document = run_sim([*OUTSIDE, *job("g", 4)])
    assert {"x", "y"} <= set(placed(document, "g").values())


@pytest.mark.parametrize("level", ["required", "preferred"])
def test_a_constrained_gang_never_uses_nodes_without_the_labels(level: str) -> None:
    document = run_sim([*OUTSIDE, *job("g", 4, topology=constraint(**{level: "rack"}))])
    assert set(placed(document, "g").values()) == {"a1"}


@pytest.mark.parametrize("level", ["required", "preferred"])
def test_a_constrained_gang_waits_rather_than_spill_onto_nodes_without_the_labels(level: str) -> None:
    # 5 GPUs: a1 has 4, x and y one each.
    document = run_sim([*OUTSIDE, *job("g", 5, topology=constraint(**{level: "rack"}))], ALLOCATE)
    assert set(placed(document, "g").values()) == {None}
    assert reason(document, "g") == failure("rack", "g")


def test_unconstrained_pods_still_use_nodes_without_the_labels() -> None:
    document = run_sim([*OUTSIDE, *job("g", 4, topology=constraint(required="rack")), *job("u", 2)])
    assert set(placed(document, "g").values()) == {"a1"}
    assert set(placed(document, "u").values()) == {"x", "y"}


# --- unknown topology or level ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topology", "expected"),
    [
        (constraint("nope", required="rack"), "topology nope does not exist"),
        (constraint("nope", preferred="rack"), "topology nope does not exist"),
        (constraint(required="row"), "topology dc has no level row"),
        (constraint(preferred="row"), "topology dc has no level row"),
        (constraint(required="zone", preferred="row"), "topology dc has no level row"),
    ],
)
def test_an_unknown_topology_or_level_waits_with_a_reason_naming_it(
    topology: Manifest, expected: str
) -> None:
    document = run_sim([*ONE_ZONE, *job("g", 2, topology=topology)])
    assert set(placed(document, "g").values()) == {None}
    got = reason(document, "g")
    assert got is not None and expected in got, got


def test_a_preferred_level_wider_than_the_required_one_waits_with_a_reason() -> None:
    document = run_sim([*ONE_ZONE, *job("g", 2, topology=constraint(required="rack", preferred="zone"))])
    assert set(placed(document, "g").values()) == {None}
    got = reason(document, "g")
    assert got is not None and "preferred level zone" in got and "required level rack" in got, got


def test_a_running_job_whose_topology_is_missing_keeps_its_pods_and_does_not_grow() -> None:
    group = pod_group_manifest("e", "q", min_member=2)
    group["spec"]["topologyConstraint"] = constraint("gone", required="rack")
    manifests = [
        *ONE_ZONE,
        group,
        pod_manifest("e-0", gpus=1, group="e", node_name="a2"),
        pod_manifest("e-1", gpus=1, group="e", node_name="a2"),
        pod_manifest("e-2", gpus=1, group="e"),
    ]
    document = run_sim(manifests)
    assert placed(document, "e") == {"e-0": "a2", "e-1": "a2", "e-2": None}
    got = reason(document, "e")
    assert got is not None and "topology gone does not exist" in got, got


# --- sub-groups ---------------------------------------------------------------------------------------

# Two zones of two racks of two 4-GPU nodes. Zone z0: every node has 2 GPUs free (4 per rack). Zone z1:
# rack z1.r1 has 3 free (c1), rack z1.r2 2 (d1): a rack of z1 holds one 3-pod segment, z1 not the job.
SEGMENTS = [
    topology_manifest(),
    queue_manifest("q"),
    *(rack_node(name, "z0", "r1") for name in ("a1", "a2")),
    *(rack_node(name, "z0", "r2") for name in ("b1", "b2")),
    *(rack_node(name, "z1", "r1") for name in ("c1", "c2")),
    *(rack_node(name, "z1", "r2") for name in ("d1", "d2")),
    *(busy(name, 2) for name in ("a1", "a2", "b1", "b2", "d1")),
    busy("c1", 1),
    busy("c2", 4),
    busy("d2", 4),
]


SEGMENT_PODS = ("s0", "s1")


def segmented_job(whole: Manifest | None, each: Manifest | None) -> list[Manifest]:
    """A PodGroup with two leaf sub-groups s0 and s1 of 3 one-GPU pods each."""
    group = pod_group_manifest("seg", "q", min_member=6)
    if whole is not None:
        group["spec"]["topologyConstraint"] = whole
    group["spec"]["subGroups"] = [
        {"name": name, "minMember": 3, **({"topologyConstraint": each} if each is not None else {})}
        for name in ("s0", "s1")
    ]
    pods = [
        pod_manifest(f"{name}-{i}", gpus=1, group="seg", labels={SUBGROUP_LABEL: name})
        for name in ("s0", "s1")
        for i in range(3)
    ]
    return [group, *pods]


@pytest.mark.parametrize(
    ("whole", "each", "spans"),
    [
        (None, None, "rack"),
        (constraint(required="zone"), None, "rack"),
        (None, constraint(required="rack"), "zone"),
    ],
    ids=["no-constraint", "zone-only", "racks-only"],
)
def test_control_without_both_constraints_the_segments_spread(
    whole: Manifest | None, each: Manifest | None, spans: str
) -> None:
    document = run_sim([*SEGMENTS, *segmented_job(whole, each)])
    if spans == "zone":
        assert len(domains(document, SEGMENT_PODS, SEGMENTS, "zone")) == 2
    else:
        assert any(len(domains(document, s, SEGMENTS, "rack")) > 1 for s in ("s0", "s1"))


def test_each_segment_in_one_rack_and_the_whole_job_in_one_zone() -> None:
    document = run_sim([*SEGMENTS, *segmented_job(constraint(required="zone"), constraint(required="rack"))])
    assert reason(document, "seg") is None
    s0 = domains(document, "s0", SEGMENTS, "rack")
    s1 = domains(document, "s1", SEGMENTS, "rack")
    assert len(s0) == 1 and len(s1) == 1
    assert s0 != s1  # no rack has room for both
    assert domains(document, SEGMENT_PODS, SEGMENTS, "zone") == {"z0"}


# Zone z0 of SEGMENTS alone: 4 GPUs free per rack, 8 in the zone.
ZONE_Z0 = [
    m
    for m in SEGMENTS
    if m["metadata"]["name"] not in {"c1", "c2", "d1", "d2"}
    and m.get("spec", {}).get("nodeName") not in {"c1", "c2", "d1", "d2"}
]


def oversized_segment_job(whole: Manifest | None) -> list[Manifest]:
    """Sub-group s0 (5 one-GPU pods) requires a rack, which no rack of ZONE_Z0 can hold; s1 has 2 pods."""
    group = pod_group_manifest("seg", "q", min_member=7)
    if whole is not None:
        group["spec"]["topologyConstraint"] = whole
    group["spec"]["subGroups"] = [
        {"name": "s0", "minMember": 5, "topologyConstraint": constraint(required="rack")},
        {"name": "s1", "minMember": 2},
    ]
    pods = [pod_manifest(f"s0-{i}", gpus=1, group="seg", labels={SUBGROUP_LABEL: "s0"}) for i in range(5)]
    pods += [pod_manifest(f"s1-{i}", gpus=1, group="seg", labels={SUBGROUP_LABEL: "s1"}) for i in range(2)]
    return [group, *pods]


def test_a_segment_no_rack_can_hold_keeps_the_whole_job_waiting() -> None:
    document = run_sim([*ZONE_Z0, *oversized_segment_job(None)], ALLOCATE)
    assert set(placed(document, *SEGMENT_PODS).values()) == {None}
    assert reason(document, "seg") == failure("rack", "seg")


def test_a_sub_group_rack_failure_inside_a_zone_is_reported_as_the_rack_requirement() -> None:
    # The zone has room (8 GPUs free for 7 pods); what fails is sub-group s0's rack (5 pods, 4 GPUs free
    # per rack), so the reason names the rack, not the zone.
    document = run_sim([*ZONE_Z0, *oversized_segment_job(constraint(required="zone"))], ALLOCATE)
    assert set(placed(document, *SEGMENT_PODS).values()) == {None}
    assert reason(document, "seg") == failure("rack", "seg")


@pytest.mark.parametrize("topology", [None, constraint(required="rack")], ids=["control", "required-rack"])
def test_a_sub_group_grows_only_in_the_rack_its_running_pods_use(topology: Manifest | None) -> None:
    # s0-0 and s1-0 run on a1 (rack z0.r1, 6 GPUs free with a2); rack z0.r2 has 1 free on b1, the fullest.
    group = pod_group_manifest("seg", "q", min_member=2)
    group["spec"]["subGroups"] = [
        {"name": "s0", "minMember": 1, **({"topologyConstraint": topology} if topology else {})},
        {"name": "s1", "minMember": 1},
    ]
    pods = [
        pod_manifest("s0-0", gpus=1, group="seg", labels={SUBGROUP_LABEL: "s0"}, node_name="a1"),
        pod_manifest("s1-0", gpus=1, group="seg", labels={SUBGROUP_LABEL: "s1"}, node_name="a1"),
        pod_manifest("s0-1", gpus=1, group="seg", labels={SUBGROUP_LABEL: "s0"}),
    ]
    document = run_sim([*PINNING, group, *pods])
    assert placed(document, "s0")["s0-1"] == ("b1" if topology is None else "a1")


def test_an_unknown_topology_in_a_sub_group_waits_with_a_reason_naming_it() -> None:
    document = run_sim([*SEGMENTS, *segmented_job(None, constraint("nope", required="rack"))])
    assert set(placed(document, *SEGMENT_PODS).values()) == {None}
    got = reason(document, "seg")
    assert got is not None and "topology nope does not exist" in got, got


# --- non-leaf sub-groups: a constraint on all pods of a sub-group's descendants -----------------------


def workers_job(
    workers: Manifest | None,
    each: Manifest | None = None,
    *,
    whole: Manifest | None = None,
    sizes: Sequence[int] = (3, 3),
    leaves: Sequence[Manifest] = (),
) -> list[Manifest]:
    """PodGroup "seg": sub-group "workers" (constraint `workers`), the parent of leaf segments s0, s1, ...
    (constraint `each`) of `sizes` one-GPU pods each (minMember: all of them); `leaves` are more leaf
    sub-groups (their pods are the caller's)."""
    group = pod_group_manifest("seg", "q", min_member=sum(sizes) + sum(g["minMember"] for g in leaves))
    if whole is not None:
        group["spec"]["topologyConstraint"] = whole
    segments = [f"s{i}" for i in range(len(sizes))]
    group["spec"]["subGroups"] = [
        {"name": "workers", **({"topologyConstraint": workers} if workers else {})},
        *(
            {
                "name": name,
                "minMember": size,
                "parent": "workers",
                **({"topologyConstraint": each} if each else {}),
            }
            for name, size in zip(segments, sizes, strict=True)
        ),
        *leaves,
    ]
    pods = [
        pod_manifest(f"{name}-{i}", gpus=1, group="seg", labels={SUBGROUP_LABEL: name})
        for name, size in zip(segments, sizes, strict=True)
        for i in range(size)
    ]
    return [group, *pods]


def test_the_sub_group_tree_is_built_from_the_parents() -> None:
    group = pod_group_manifest("seg", "q", min_member=2)
    group["spec"]["subGroups"] = [
        {"name": "decode", "topologyConstraint": constraint(required="zone")},
        {"name": "decode-leader", "parent": "decode", "minMember": 1},
        {"name": "decode-workers", "parent": "decode", "topologyConstraint": constraint(required="rack")},
        {"name": "decode-workers-0", "parent": "decode-workers", "minMember": 1},
        {"name": "prefill", "minMember": 1},
    ]
    session = open_session(objects([*SEGMENTS, group]), plugins=["topology"])
    target = session.snapshot.jobs["default/seg"]
    assert set(target.podsets) == {"decode-leader", "decode-workers-0", "prefill"}
    assert set(target.subgroups) == {"decode", "decode-workers"}
    decode, decode_workers = target.subgroups["decode"], target.subgroups["decode-workers"]
    assert [child.name for child in decode.children] == ["decode-leader", "decode-workers"]
    assert [p.name for p in decode.podsets] == ["decode-leader", "decode-workers-0"]
    assert decode.topology is not None and decode.topology.required == "zone"
    assert decode_workers.parent is decode and decode.parent is None
    assert target.podsets["decode-workers-0"].parent is decode_workers
    assert target.podsets["prefill"].parent is None


@pytest.mark.parametrize("workers", [None, constraint(required="zone")], ids=["control", "required-zone"])
def test_segments_each_in_one_rack_and_together_in_the_zone_their_parent_requires(
    workers: Manifest | None,
) -> None:
    # As with the job-level zone (above): rack z1.r1 (3 free) takes a segment first, and zone z1 (5 free)
    # cannot hold both segments.
    document = run_sim([*SEGMENTS, *workers_job(workers, constraint(required="rack"))])
    assert reason(document, "seg") is None
    s0 = domains(document, "s0", SEGMENTS, "rack")
    s1 = domains(document, "s1", SEGMENTS, "rack")
    assert len(s0) == 1 and len(s1) == 1
    zones = domains(document, SEGMENT_PODS, SEGMENTS, "zone")
    assert zones == ({"z0", "z1"} if workers is None else {"z0"})


def test_a_parent_constraint_holds_only_its_own_descendants() -> None:
    # The trainer (a leaf beside "workers", placed after the segments: pod sets of equal rank go by name)
    # selects zone z1; the workers' zone z0 does not hold it.
    trainer = {"name": "trainer", "minMember": 1}
    pod = pod_manifest(
        "trainer-0", gpus=1, group="seg", labels={SUBGROUP_LABEL: "trainer"}, node_selector={"zone": "z1"}
    )
    document = run_sim(
        [
            *SEGMENTS,
            *workers_job(constraint(required="zone"), constraint(required="rack"), leaves=[trainer]),
            pod,
        ]
    )
    assert reason(document, "seg") is None
    assert domains(document, SEGMENT_PODS, SEGMENTS, "zone") == {"z0"}
    assert domains(document, "trainer", SEGMENTS, "zone") == {"z1"}


@pytest.mark.parametrize(
    ("workers", "whole"),
    [
        (None, None),
        (constraint(required="rack"), None),
        (constraint(required="rack"), constraint(required="zone")),
    ],
    ids=["control", "parent-rack", "parent-rack-in-job-zone"],
)
def test_a_parent_constraint_no_domain_can_meet_keeps_the_job_waiting_naming_its_level(
    workers: Manifest | None, whole: Manifest | None
) -> None:
    # 6 pods: zone z0 has 8 GPUs free, each of its racks 4. With the job's zone (which has room), the
    # reason is still the rack the sub-group requires.
    document = run_sim([*ZONE_Z0, *workers_job(workers, whole=whole)], ALLOCATE)
    if workers is None:
        assert all(placed(document, *SEGMENT_PODS).values())
        assert reason(document, "seg") is None
    else:
        assert set(placed(document, *SEGMENT_PODS).values()) == {None}
        assert reason(document, "seg") == failure("rack", "seg")


@pytest.mark.parametrize("each", [None, constraint(required="rack")], ids=["control", "segment-rack"])
def test_a_segment_rack_failure_inside_its_parents_zone_is_reported_as_the_rack_requirement(
    each: Manifest | None,
) -> None:
    # Job and "workers" in one zone (8 GPUs free in z0 for 5 + 2 pods), segment s0's 5 pods in one rack
    # (4 free each): the narrowest constraint that failed is named.
    document = run_sim(
        [
            *ZONE_Z0,
            *workers_job(constraint(required="zone"), each, whole=constraint(required="zone"), sizes=(5, 2)),
        ],
        ALLOCATE,
    )
    if each is None:
        assert all(placed(document, *SEGMENT_PODS).values())
    else:
        assert set(placed(document, *SEGMENT_PODS).values()) == {None}
        assert reason(document, "seg") == failure("rack", "seg")


@pytest.mark.parametrize(
    ("workers", "problem"),
    [
        (constraint(required="zone"), None),
        (constraint(required="row"), "sub-group workers: topology dc has no level row"),
        (constraint(preferred="row"), "sub-group workers: topology dc has no level row (the preferred level"),
        (constraint("nope", required="zone"), "sub-group workers: topology nope does not exist"),
    ],
    ids=["control", "unknown-required-level", "unknown-preferred-level", "unknown-topology"],
)
def test_a_non_leaf_sub_group_with_an_unknown_level_waits_with_a_reason_naming_it(
    workers: Manifest, problem: str | None
) -> None:
    document = run_sim([*SEGMENTS, *workers_job(workers)])
    got = reason(document, "seg")
    if problem is None:
        assert got is None
        assert all(placed(document, *SEGMENT_PODS).values())
    else:
        assert set(placed(document, *SEGMENT_PODS).values()) == {None}
        assert got is not None and problem in got, got


def test_a_job_shaped_like_one_whose_parent_constraint_failed_is_still_tried() -> None:
    # "seg" (6 pods; its "workers" in one rack, and no rack of ZONE_Z0 holds them) goes first; "free", the
    # same pods without a constraint, fits in the zone. Were the attempts' signatures equal, "free" would
    # be skipped as "a job of the same shape" (the signature must see the non-leaf constraint).
    document = run_sim([*ZONE_Z0, *workers_job(constraint(required="rack")), *job("free", 6)], ALLOCATE)
    assert reason(document, "seg") == failure("rack", "seg")
    assert all(placed(document, "free").values()), reason(document, "free")


# Zone z0: rack z0.r1 is full (a1 runs the job's s0-0 and s1-0 beside 2 busy GPUs, a2 is busy), rack
# z0.r2 has 3 GPUs free on b1. Zone z1: rack z1.r1 has 2 free on c1, the fullest node and rack with room.
GROWTH = [
    topology_manifest(),
    queue_manifest("q"),
    *(rack_node(name, "z0", "r1") for name in ("a1", "a2")),
    *(rack_node(name, "z0", "r2") for name in ("b1", "b2")),
    *(rack_node(name, "z1", "r1") for name in ("c1", "c2")),
    *(rack_node(name, "z1", "r2") for name in ("d1", "d2")),
    busy("a1", 2),
    busy("b1", 1),
    busy("c1", 2),
    *(busy(name, 4) for name in ("a2", "b2", "c2", "d1", "d2")),
]


def running_segment(name: str, index: int = 0) -> Manifest:
    return pod_manifest(f"{name}-{index}", gpus=1, group="seg", labels={SUBGROUP_LABEL: name}, node_name="a1")


@pytest.mark.parametrize("workers", [None, constraint(required="zone")], ids=["control", "required-zone"])
def test_a_growing_segment_stays_in_the_zone_its_parent_runs_in(workers: Manifest | None) -> None:
    # Segment s0 (minMember 1, preferring a rack) runs s0-0 on a1 and grows by s0-1: its rack is full.
    group = pod_group_manifest("seg", "q", min_member=2)
    group["spec"]["subGroups"] = [
        {"name": "workers", **({"topologyConstraint": workers} if workers else {})},
        {
            "name": "s0",
            "minMember": 1,
            "parent": "workers",
            "topologyConstraint": constraint(preferred="rack"),
        },
        {"name": "s1", "minMember": 1, "parent": "workers"},
    ]
    growing = pod_manifest("s0-1", gpus=1, group="seg", labels={SUBGROUP_LABEL: "s0"})
    document = run_sim([*GROWTH, group, running_segment("s0"), running_segment("s1"), growing])
    assert placed(document, "s0")["s0-1"] == ("c1" if workers is None else "b1")


@pytest.mark.parametrize("workers", [None, constraint(required="zone")], ids=["control", "required-zone"])
def test_a_new_segment_joins_its_running_sibling_in_the_zone_their_parent_requires(
    workers: Manifest | None,
) -> None:
    # s0-0 runs on a1 (zone z0); segment s1 (2 pods, one rack) starts: rack z1.r1 is the fuller with room.
    group = pod_group_manifest("seg", "q", min_member=1)
    group["spec"]["subGroups"] = [
        {"name": "workers", **({"topologyConstraint": workers} if workers else {})},
        {"name": "s0", "minMember": 1, "parent": "workers"},
        {
            "name": "s1",
            "minMember": 2,
            "parent": "workers",
            "topologyConstraint": constraint(required="rack"),
        },
    ]
    pods = [pod_manifest(f"s1-{i}", gpus=1, group="seg", labels={SUBGROUP_LABEL: "s1"}) for i in range(2)]
    document = run_sim([*GROWTH, group, running_segment("s0"), *pods])
    assert domains(document, "s1", GROWTH, "rack") == ({"z1.r1"} if workers is None else {"z0.r2"})


def workers_subsets(s0_runs: bool) -> list[list[str]]:
    """The subsets the plugin offers sub-group "workers" (required zone) for its pending pods: s1-0, and
    s0-0 unless it runs on a1."""
    group = pod_group_manifest("seg", "q", min_member=1)
    group["spec"]["subGroups"] = [
        {"name": "workers", "topologyConstraint": constraint(required="zone")},
        {"name": "s0", "minMember": 1, "parent": "workers"},
        {"name": "s1", "minMember": 1, "parent": "workers"},
    ]
    s0 = running_segment("s0")
    if not s0_runs:
        del s0["spec"]["nodeName"]
    pending = pod_manifest("s1-0", gpus=1, group="seg", labels={SUBGROUP_LABEL: "s1"})
    session = open_session(objects([*GROWTH, group, s0, pending]), plugins=["topology"])
    target = session.snapshot.jobs["default/seg"]
    tasks = [t for t in target.tasks if t.node < 0]
    subsets = session.node_subsets(target, target.subgroups["workers"], tasks)
    assert subsets is not None
    names = session.snapshot.nodes.names
    return [[names[i] for i in np.flatnonzero(mask)] for mask in subsets.masks]


def test_the_plugin_pins_a_sub_group_to_the_domain_its_descendants_run_in() -> None:
    # Nothing runs: both zones could hold the 2 pods, z1 (2 GPUs free) is the fuller; s0-0 on a1 pins z0.
    assert workers_subsets(s0_runs=False) == [["c1", "c2", "d1", "d2"], ["a1", "a2", "b1", "b2"]]
    assert workers_subsets(s0_runs=True) == [["a1", "a2", "b1", "b2"]]


# --- a bare pod's annotations ------------------------------------------------------------------------


def bare(name: str, **annotations: str) -> Manifest:
    return pod_manifest(name, gpus=1, annotations={f"kai.scheduler/{k}": v for k, v in annotations.items()})


def test_control_a_bare_pod_goes_to_the_fullest_node_outside_the_topology() -> None:
    document = run_sim([*OUTSIDE, bare("p-0")])
    assert placed(document, "p")["p-0"] in {"x", "y"}


@pytest.mark.parametrize("placement", ["topology-required-placement", "topology-preferred-placement"])
def test_a_bare_pod_with_the_topology_annotations_is_constrained(placement: str) -> None:
    document = run_sim([*OUTSIDE, bare("p-0", **{"topology": "dc", placement: "rack"})])
    assert placed(document, "p") == {"p-0": "a1"}


def test_a_bare_pod_naming_an_unknown_topology_waits_with_a_reason() -> None:
    document = run_sim([*OUTSIDE, bare("p-0", **{"topology": "nope", "topology-required-placement": "rack"})])
    assert placed(document, "p") == {"p-0": None}
    got = reason(document, "pg-p-0")
    assert got is not None and "topology nope does not exist" in got, got


# --- actions that make room keep the constraint --------------------------------------------------------

# Every GPU of both racks is in use by one-GPU pods except 1 on a1 (rack z0.r1) and 2 on b1 (rack z0.r2).
CROWDED = [
    topology_manifest(),
    rack_node("a1", "z0", "r1"),
    rack_node("a2", "z0", "r1"),
    rack_node("b1", "z0", "r2"),
    rack_node("b2", "z0", "r2"),
]
CROWD = {"a1": 3, "a2": 4, "b1": 2, "b2": 4}


def crowd(queue: str) -> list[Manifest]:
    return [
        pod_manifest(f"low{node}-{i}", queue, gpus=1, node_name=node)
        for node, count in CROWD.items()
        for i in range(count)
    ]


def urgent_job(topology: Manifest | None) -> list[Manifest]:
    manifests = job("g", 4, topology=topology)
    for manifest in manifests[1:]:
        manifest["spec"]["priorityClassName"] = "build"
    return manifests


@pytest.mark.parametrize("topology", [None, constraint(required="rack")], ids=["control", "required-rack"])
def test_preempt_places_the_preemptor_in_one_rack(topology: Manifest | None) -> None:
    # A higher-priority gang of 4 in the same queue: 3 GPUs are free, so it preempts.
    document = run_sim([*CROWDED, queue_manifest("q"), *crowd("q"), *urgent_job(topology)])
    racks = domains(document, "g", CROWDED, "rack")
    assert len(racks) == (2 if topology is None else 1)


@pytest.mark.parametrize("topology", [None, constraint(required="rack")], ids=["control", "required-rack"])
def test_reclaim_places_the_reclaimer_in_one_rack(topology: Manifest | None) -> None:
    # Queue "other" (no quota) holds 13 GPUs; queue q deserves 8 and reclaims.
    manifests = [
        *CROWDED,
        queue_manifest("q", gpu=8),
        queue_manifest("other", gpu=0),
        *crowd("other"),
        *job("g", 4, topology=topology),
    ]
    document = run_sim(manifests)
    racks = domains(document, "g", CROWDED, "rack")
    assert len(racks) == (2 if topology is None else 1)


def test_consolidation_moves_a_pod_to_make_room_in_one_rack() -> None:
    # a1 (rack z0.r1) has 2 GPUs free beside the preemptible "mover"; b1 (rack z0.r2) 3: no rack holds
    # the gang of 4 until mover goes to b1. Without the constraint the gang binds at once, split.
    cluster = [
        topology_manifest(),
        queue_manifest("q"),
        rack_node("a1", "z0", "r1"),
        rack_node("b1", "z0", "r2"),
        busy("b1", 1),
        pod_manifest("mover", gpus=2, node_name="a1"),
    ]
    control = run_sim([*cluster, *job("g", 4)])
    assert set(placed(control, "g").values()) == {"a1", "b1"}

    document = run_sim([*cluster, *job("g", 4, topology=constraint(required="rack"))])
    assert set(placed(document, "g").values()) == {"a1"}
    assert placed(document, "mover") == {"mover": "b1"}


# --- the plugin turned off -------------------------------------------------------------------------


def simulate_cli(tmp_path: Path, manifests: Sequence[Manifest], scheduler_config: Manifest) -> dict[str, Any]:
    """`kai-scheduler simulate INPUT --config CONFIG --output json --out FILE`."""
    source, config_file, out = tmp_path / "input.yaml", tmp_path / "config.yaml", tmp_path / "result.json"
    source.write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    config_file.write_text(yaml.safe_dump(scheduler_config, sort_keys=False))
    argv = ["simulate", str(source), "--config", str(config_file), "--output", "json", "--out", str(out)]
    assert main(argv) == 0
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def plugins_config(names: Sequence[str]) -> Manifest:
    plugins = [{"name": name, "arguments": DEFAULT_PLUGIN_ARGUMENTS.get(name, {})} for name in names]
    return {"tiers": [{"plugins": plugins}]}


def test_the_cli_with_the_default_plugin_list_honours_constraints(tmp_path: Path) -> None:
    cluster = [*ONE_ZONE, rack_node("x", None, None, gpus=8), busy("x", 7)]
    manifests = [
        *cluster,
        *job("g", 4, topology=constraint(required="rack")),
        *job("h", 2, topology=constraint("nope", required="rack")),
    ]
    document = simulate_cli(tmp_path, manifests, plugins_config(DEFAULT_PLUGINS))
    assert len(domains(document, "g", cluster, "rack")) == 1
    assert set(placed(document, "h").values()) == {None}


def test_a_configuration_without_the_topology_plugin_ignores_constraints(tmp_path: Path) -> None:
    cluster = [*ONE_ZONE, rack_node("x", None, None, gpus=8), busy("x", 7)]
    manifests = [
        *cluster,
        *job("g", 4, topology=constraint(required="rack")),
        *job("h", 2, topology=constraint("nope", required="rack")),
    ]
    document = simulate_cli(
        tmp_path, manifests, plugins_config([p for p in DEFAULT_PLUGINS if p != "topology"])
    )
    # The required rack is ignored: binpack starts on x (outside the topology), then a1 and b1.
    nodes = placed(document, "g")
    assert "x" in nodes.values()
    assert {"a1", "b1"} <= set(nodes.values())
    # A constraint naming a missing topology does not hold the job back.
    assert all(placed(document, "h").values())
    assert reason(document, "h") is None


# --- the subsets the plugin offers (one session, by hand) --------------------------------------------


def offered(manifests: Sequence[Manifest], job_name: str) -> list[list[str]] | None:
    """The node subsets the topology plugin offers for the pending pods of `job_name`, as node names."""
    session = open_session(objects(manifests), plugins=["topology"])
    target = session.snapshot.jobs[f"default/{job_name}"]
    pending = [t for t in target.tasks if t.node < 0]
    subsets = session.node_subsets(target, None, pending)
    if subsets is None:
        return None
    names = session.snapshot.nodes.names
    return [[names[i] for i in np.flatnonzero(mask)] for mask in subsets.masks]


def test_subsets_run_from_the_preferred_level_up_to_the_required_one_fullest_first() -> None:
    # Free: z1.r1 5, z1.r2 6, z0.r1 8, z0.r2 8; zone z1 11, z0 16.
    assert offered([*TWO_ZONES, *job("g", 3, topology=ZONE_AND_RACK)], "g") == [
        ["c1", "c2"],
        ["d1", "d2"],
        ["a1", "a2"],
        ["b1", "b2"],
        ["c1", "c2", "d1", "d2"],
        ["a1", "a2", "b1", "b2"],
    ]


def test_subsets_offer_only_domains_that_could_hold_the_pods() -> None:
    # 6 GPUs: z1.r1 (5 free) cannot hold them; 12: no rack and not zone z1 (11 free).
    assert offered([*TWO_ZONES, *job("g", 6, topology=ZONE_AND_RACK)], "g") == [
        ["d1", "d2"],
        ["a1", "a2"],
        ["b1", "b2"],
        ["c1", "c2", "d1", "d2"],
        ["a1", "a2", "b1", "b2"],
    ]
    assert offered([*TWO_ZONES, *job("g", 12, topology=ZONE_AND_RACK)], "g") == [["a1", "a2", "b1", "b2"]]


def test_subsets_with_only_a_preferred_level_go_up_to_the_whole_topology() -> None:
    # 10 GPUs: no rack holds them; then the zones (z1 is fuller), then every node of the topology (not x).
    cluster = [*TWO_ZONES, rack_node("x", None, None)]
    assert offered([*cluster, *job("g", 10, topology=constraint(preferred="rack"))], "g") == [
        ["c1", "c2", "d1", "d2"],
        ["a1", "a2", "b1", "b2"],
        ["a1", "a2", "b1", "b2", "c1", "c2", "d1", "d2"],
    ]


def test_an_unconstrained_job_gets_no_subsets() -> None:
    assert offered([*TWO_ZONES, *job("g", 3)], "g") is None


# --- preferred domains within a wider subset ----------------------------------------------------------

SPREAD_BAIT = [
    topology_manifest(),
    queue_manifest("q"),
    # r1 and r2 each have one node with a 4-GPU hole (binpack's favourites); r2 and r3 have whole nodes.
    rack_node("r1-n0", "z0", "r1", gpus=8),
    rack_node("r2-n0", "z0", "r2", gpus=8),
    rack_node("r2-n1", "z0", "r2", gpus=8),
    rack_node("r3-n0", "z0", "r3", gpus=8),
    rack_node("r3-n1", "z0", "r3", gpus=8),
    busy("r1-n0", 4),
    busy("r2-n0", 4),
]


def test_control_binpack_alone_spreads_a_gang_over_three_racks() -> None:
    document = run_sim([*SPREAD_BAIT, *job("big", 5, gpus=4, topology=constraint(required="zone"))], ALLOCATE)
    assert len(domains(document, "big", SPREAD_BAIT, "rack")) == 3


def test_a_preferred_rack_no_rack_can_hold_keeps_the_gang_in_as_few_racks_as_possible() -> None:
    # Five 4-GPU pods: no rack holds them (r3: 4, r2: 3), so the zone is used; the preferred rack still
    # counts: two racks suffice, not the three binpack's partly used nodes would draw it into.
    document = run_sim(
        [*SPREAD_BAIT, *job("big", 5, gpus=4, topology=constraint(required="zone", preferred="rack"))],
        ALLOCATE,
    )
    assert all(placed(document, "big").values())
    assert len(domains(document, "big", SPREAD_BAIT, "rack")) == 2


# --- victims that move keep their constraints together ------------------------------------------------


def test_consolidation_never_splits_a_constrained_gang_it_moves() -> None:
    # pipeline (3 x 8 GPUs, one zone) runs in z2 over both racks; sweep (2 x 8, one rack) arrives and no
    # rack has two free nodes. Moving pipeline's pods one by one would put one of them in z1 (and then the
    # two gangs would take turns evicting each other); moved together they have no zone to go to, so
    # consolidation leaves pipeline alone and sweep waits.
    cluster = [
        topology_manifest(),
        queue_manifest("q"),
        *(
            rack_node(f"z{z}-r{r}-{n}", f"z{z}", f"r{r}", gpus=8)
            for z in (1, 2)
            for r in (1, 2)
            for n in "ab"
        ),
        busy("z1-r1-a", 4),
        busy("z1-r2-a", 8),
        busy("z1-r2-b", 8),
    ]
    gangs = [
        *job("pipeline", 3, gpus=8, topology=constraint(required="zone", preferred="rack")),
        *job("sweep", 2, gpus=8, topology=constraint(required="rack")),
    ]
    gangs[-3]["metadata"]["annotations"]["simulation.kai.scheduler/arrival"] = "1m"
    document = run_sim([*cluster, *gangs])
    assert [d for d in document["decisions"] if d["type"] != "bind"] == []
    assert len(domains(document, "pipeline", cluster, "zone")) == 1
    assert all(node is None for node in placed(document, "sweep").values())
