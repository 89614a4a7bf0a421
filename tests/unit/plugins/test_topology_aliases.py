"""Topology level aliases (KAI v0.17, #1788): a level's `alias` may stand for its node label in a workload's
required or preferred level (PodGroup and sub-group `topologyConstraint`, the topology annotations); a name
that is neither passes through unchanged. The Topology is refused when an alias repeats or is a level's
node label, and on update when its node labels change (aliases may).

Ported by name from KAI v0.17.0: `pkg/scheduler/api/podgroup_info/job_info_aliases_test.go` (3),
`pkg/scheduler/api/topology_info/topology_info_test.go` (the 4 `TestResolveAliases*`) and
`pkg/admission/webhook/topologyhooks/topology_validator_test.go` `TestTopologyValidator` (7). Here the
snapshot's topology tree holds the aliases and resolves a level's name when it is looked up, instead of
rewriting the workload's constraint, so KAI's tests of the rewrite are tested by where the pods go.
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest, simulate
from helpers import topology_constraint as constraint
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.k8s.admission.review import review_topology_validation
from kai_scheduler.model.topology import build_topology

Manifest = dict[str, Any]
RACK, NODE = "accelerator.nvidia.com/rack", "kubernetes.io/hostname"
TOPOLOGY_KIND = {"group": "kai.scheduler", "version": "v1alpha1", "kind": "Topology"}


def rack_node(name: str, rack: str, busy: int) -> list[Manifest]:
    """A 4-GPU node of zone z0 and rack `rack`, `busy` GPUs held by a pod nothing moves."""
    node = node_manifest(name, gpus=4, labels={"zone": "z0", "rack": rack})
    held = pod_manifest(
        f"busy-{name}", gpus=busy, node_name=name, labels={"kai.scheduler/preemptibility": "non-preemptible"}
    )
    return [node, held]


def with_aliases(**aliases: str) -> list[Manifest]:
    """Topology dc (levels zone, rack; `aliases`: node label -> alias) over two racks of two nodes, where
    binpack alone would split a 4-pod gang across the racks (a1 has 1 GPU free, b1 2)."""
    levels = [{"nodeLabel": label} for label in ("zone", "rack")]
    for level in levels:
        if level["nodeLabel"] in aliases:
            level["alias"] = aliases[level["nodeLabel"]]
    topology = {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "dc"},
        "spec": {"levels": levels},
    }
    cluster: list[Manifest] = [topology, queue_manifest("q")]
    for name, rack, busy in (("a1", "r1", 3), ("a2", "r1", 0), ("b1", "r2", 2), ("b2", "r2", 0)):
        cluster += rack_node(name, rack, busy)
    return cluster


def job(name: str, size: int, *, topology: Manifest | None) -> list[Manifest]:
    group = pod_group_manifest(name, "q", min_member=size)
    if topology is not None:
        group["spec"]["topologyConstraint"] = topology
    return [group] + [pod_manifest(f"{name}-{i}", gpus=1, group=name) for i in range(size)]


def run_sim(manifests: list[Manifest]) -> dict[str, Any]:
    return simulate([parse_object(m, "test", i) for i, m in enumerate(manifests)])


def racks(document: dict[str, Any], prefix: str) -> set[str]:
    """The racks the pods `<prefix>-<i>` run on (each of them must run)."""
    rack_of = {"a1": "r1", "a2": "r1", "b1": "r2", "b2": "r2"}
    nodes = [p["node"] for p in document["pods"] if p["name"].rsplit("-", 1)[0] == prefix]
    assert nodes and all(nodes), nodes
    return {rack_of[node] for node in nodes}


def reason(document: dict[str, Any], group: str) -> str | None:
    found: str | None = next(g for g in document["podGroups"] if g["name"] == group)["unschedulableReason"]
    return found


# --- job_info_aliases_test.go ----------------------------------------------------------------------------


def test_resolve_topology_aliases() -> None:
    """TestPodGroupInfo_ResolveTopologyAliases: the job's required level and a sub-group's preferred one,
    named by alias, act as the node labels they stand for."""
    cluster = with_aliases(rack="rack-level", zone="zone-level")
    group = job("g", 4, topology=constraint(required="rack-level"))
    assert len(racks(run_sim([*cluster, *group]), "g")) == 1
    preferred = job("p", 4, topology=constraint(preferred="rack-level"))
    assert len(racks(run_sim([*cluster, *preferred]), "p")) == 1
    # The control: unconstrained, binpack splits the gang.
    assert len(racks(run_sim([*cluster, *job("c", 4, topology=None)]), "c")) == 2


def test_resolve_topology_aliases_pass_through_and_other_topology() -> None:
    """..._PassThroughAndOtherTopology: a node label is still a level with aliases around, and a name that
    is an alias of another Topology only is no level of this one."""
    cluster = with_aliases(rack="rack-level")
    other = {**cluster[0], "metadata": {"name": "zone-topology"}, "spec": {"levels": [{"nodeLabel": "zone"}]}}
    cluster.append(other)
    document = run_sim([*cluster, *job("g", 4, topology=constraint(required="rack"))])
    assert len(racks(document, "g")) == 1
    elsewhere = job("o", 2, topology=constraint("zone-topology", required="rack-level"))
    document = run_sim([*cluster, *elsewhere])
    assert "topology zone-topology has no level rack-level" in str(reason(document, "o"))


def test_resolve_topology_aliases_no_aliases_noop() -> None:
    """..._NoAliasesNoop: without aliases a name that is no node label stays what it is."""
    document = run_sim([*with_aliases(), *job("g", 2, topology=constraint(required="rack-level"))])
    assert "topology dc has no level rack-level" in str(reason(document, "g"))


def test_the_topology_annotations_of_a_bare_pod_may_name_an_alias() -> None:
    cluster = with_aliases(rack="rack-level")
    annotations = {
        "kai.scheduler/topology": "dc",
        "kai.scheduler/topology-required-placement": "rack-level",
    }
    document = run_sim([*cluster, pod_manifest("solo-0", gpus=4, annotations=annotations)])
    assert reason(document, "pg-solo-0") is None


# --- topology_info_test.go -------------------------------------------------------------------------------


def tree(aliases: dict[str, str] | None) -> Any:
    labels = [{RACK: "r1", NODE: "n1"}, {RACK: "r1", NODE: "n2"}]
    return build_topology("network", [RACK, NODE], labels, aliases)


def test_resolve_aliases() -> None:
    """TestResolveAliases."""
    network = tree({"rack": RACK, "node": NODE})
    assert (network.resolve("rack"), network.resolve("node")) == (RACK, NODE)
    assert (network.level_of("rack"), network.level_of("node")) == (0, 1)


def test_resolve_aliases_pass_through_and_partial() -> None:
    """TestResolveAliases_PassThroughAndPartial: a node label resolves to itself, empty stays empty."""
    network = tree({"rack": RACK})
    assert network.resolve(RACK) == RACK and network.level_of(RACK) == 0
    assert network.resolve("") == "" and network.level_of("node") is None


def test_resolve_aliases_gives_the_canonical_level() -> None:
    """TestResolveAliases_InvalidatesSignature asks that what KAI keys its scheduling signatures on be
    the node label after resolution; here the level itself is what placement reads: the same for both."""
    network = tree({"rack": RACK})
    assert network.level_of("rack") == network.level_of(RACK)


def test_resolve_aliases_nil_safe_and_no_aliases() -> None:
    """TestResolveAliases_NilSafeAndNoAliases."""
    for aliases in (None, {}):
        assert tree(aliases).resolve("rack") == "rack" and tree(aliases).level_of("rack") is None


# --- topology_validator_test.go TestTopologyValidator ----------------------------------------------------


def topology(*levels: tuple[str, str | None]) -> Manifest:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "network"},
        "spec": {
            "levels": [{"nodeLabel": label, **({"alias": alias} if alias else {})} for label, alias in levels]
        },
    }


def answer(obj: Manifest | None, *, operation: str = "CREATE", old: Manifest | None = None) -> Any:
    request: dict[str, Any] = {"uid": "uid-1", "operation": operation, "kind": TOPOLOGY_KIND}
    if obj is not None:
        request["object"] = obj
    if old is not None:
        request["oldObject"] = old
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return review_topology_validation(review)["response"]


def allowed(response: Any) -> bool:
    return bool(response["allowed"]) and "warnings" not in response


def denied(response: Any) -> str:
    assert not response["allowed"]
    return str(response["status"]["message"])


def test_allows_levels_without_aliases() -> None:
    assert allowed(answer(topology((RACK, None), (NODE, None))))


def test_allows_unique_aliases() -> None:
    assert allowed(answer(topology((RACK, "rack"), (NODE, "node"))))


def test_rejects_duplicate_aliases() -> None:
    message = denied(answer(topology((RACK, "rack"), (NODE, "rack"))))
    assert message == (
        "spec.levels: invalid topology aliases: aliases must be unique within the topology; "
        "duplicated: [rack]"
    )


def test_rejects_an_alias_that_collides_with_a_node_label() -> None:
    message = denied(answer(topology((RACK, NODE), (NODE, "node"))))
    assert "an alias must not equal a nodeLabel; conflicting: [kubernetes.io/hostname]" in message


def test_allows_re_pointing_an_alias_to_a_different_level() -> None:
    old = topology((RACK, "rack"), (NODE, None))
    assert allowed(answer(topology((RACK, None), (NODE, "rack")), operation="UPDATE", old=old))


def test_rejects_an_update_that_introduces_a_duplicate_alias() -> None:
    old = topology((RACK, "rack"))
    message = denied(answer(topology((RACK, "rack"), (NODE, "rack")), operation="UPDATE", old=old))
    assert "unique" in message and "rack" in message


def test_always_allows_deletion() -> None:
    assert allowed(answer(None, operation="DELETE"))


def test_rejects_an_update_that_changes_the_node_labels() -> None:
    """The CRD's rule (KAI v0.17): the node labels, in order, stay; here the webhook holds it too."""
    zone = "topology.kubernetes.io/zone"
    old = topology((zone, None), (RACK, None))
    message = denied(answer(topology((RACK, None), (zone, None)), operation="UPDATE", old=old))
    assert message == "spec.levels: nodeLabel structure is immutable; only aliases may be edited"


def test_simulate_refuses_the_same_topologies_in_one_line() -> None:
    with pytest.raises(
        ManifestError, match=r"spec\.levels: invalid topology aliases: .*duplicated: \[rack\]"
    ):
        parse_object(topology((RACK, "rack"), (NODE, "rack")), "input.yaml", 0)
    with pytest.raises(ManifestError, match=r"spec\.levels\[0\]\.alias"):
        parse_object(topology((RACK, "Not An Alias!")), "input.yaml", 0)
