"""Kubernetes matching semantics, checked against kube-scheduler's behaviour.

Inputs are built from camelCase manifest fragments so the real manifest shapes are exercised too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kai_scheduler.api.objects import (
    Affinity,
    LabelSelector,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    Taint,
    Toleration,
    WeightedPodAffinityTerm,
)
from kai_scheduler.model.matching import (
    ALL_NAMESPACES,
    NamespaceScope,
    PlacedPod,
    PlacedPodIndex,
    affinity_term_namespaces,
    default_normalize_scores,
    label_selector_matches,
    namespace_labels,
    node_affinity_preferred_score,
    node_affinity_required_matches,
    node_selector_requirement_matches,
    node_selector_term_matches,
    normalize_scores,
    pod_affinity_preferred_score,
    pod_affinity_required_ok,
    prefer_no_schedule_count,
    tolerates,
    untolerated_taint,
)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def selector(spec: dict[str, Any]) -> LabelSelector:
    return LabelSelector.model_validate(spec)


def req(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement.model_validate({"key": key, "operator": operator, "values": list(values)})


def term(spec: dict[str, Any]) -> NodeSelectorTerm:
    return NodeSelectorTerm.model_validate(spec)


def affinity(spec: dict[str, Any]) -> Affinity:
    return Affinity.model_validate(spec)


def pod_term(spec: dict[str, Any]) -> PodAffinityTerm:
    return PodAffinityTerm.model_validate(spec)


def taint(key: str, effect: str, value: str = "") -> Taint:
    return Taint.model_validate({"key": key, "value": value, "effect": effect})


def toleration(spec: dict[str, Any]) -> Toleration:
    return Toleration.model_validate(spec)


# --- label selectors ----------------------------------------------------------------------------


def test_none_selector_matches_nothing_and_empty_selector_matches_everything() -> None:
    assert not label_selector_matches(None, {"app": "web"})
    assert label_selector_matches(selector({}), {})
    assert label_selector_matches(selector({}), {"app": "web"})


@pytest.mark.parametrize(
    ("expression", "labels", "expected"),
    [
        ({"key": "app", "operator": "In", "values": ["web", "db"]}, {"app": "db"}, True),
        ({"key": "app", "operator": "In", "values": ["web"]}, {"app": "db"}, False),
        ({"key": "app", "operator": "In", "values": ["web"]}, {}, False),
        ({"key": "app", "operator": "NotIn", "values": ["web"]}, {"app": "db"}, True),
        ({"key": "app", "operator": "NotIn", "values": ["web"]}, {"app": "web"}, False),
        ({"key": "app", "operator": "NotIn", "values": ["web"]}, {}, True),
        ({"key": "app", "operator": "Exists"}, {"app": ""}, True),
        ({"key": "app", "operator": "Exists"}, {}, False),
        ({"key": "app", "operator": "DoesNotExist"}, {}, True),
        ({"key": "app", "operator": "DoesNotExist"}, {"app": "web"}, False),
        # Malformed requirements fail to parse in Kubernetes, and so select nothing.
        ({"key": "app", "operator": "In", "values": []}, {"app": "web"}, False),
        ({"key": "app", "operator": "NotIn", "values": []}, {}, False),
        ({"key": "app", "operator": "Exists", "values": ["web"]}, {"app": "web"}, False),
    ],
)
def test_label_selector_expression(
    expression: dict[str, Any], labels: dict[str, str], expected: bool
) -> None:
    assert label_selector_matches(selector({"matchExpressions": [expression]}), labels) is expected


def test_label_selector_ands_match_labels_and_expressions() -> None:
    sel = selector(
        {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    )
    assert label_selector_matches(sel, {"app": "web", "tier": "front"})
    assert not label_selector_matches(sel, {"app": "web"})
    assert not label_selector_matches(sel, {"app": "db", "tier": "front"})
    assert not label_selector_matches(selector({"matchLabels": {"app": ""}}), {})


# --- node selector requirements and terms -------------------------------------------------------


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (req("gpu", "In", "a100", "h100"), {"gpu": "h100"}, True),
        (req("gpu", "In", "a100"), {"gpu": "h100"}, False),
        (req("gpu", "In", "a100"), {}, False),
        (req("gpu", "NotIn", "a100"), {"gpu": "h100"}, True),
        (req("gpu", "NotIn", "a100"), {"gpu": "a100"}, False),
        (req("gpu", "NotIn", "a100"), {}, True),
        (req("gpu", "Exists"), {"gpu": "a100"}, True),
        (req("gpu", "Exists"), {}, False),
        (req("gpu", "DoesNotExist"), {}, True),
        (req("gpu", "DoesNotExist"), {"gpu": "a100"}, False),
        (req("gpu", "In"), {"gpu": "a100"}, False),  # In without values does not parse
        (req("gpu", "DoesNotExist", "x"), {}, False),  # values on DoesNotExist do not parse
    ],
)
def test_node_selector_set_operators(
    requirement: NodeSelectorRequirement, labels: dict[str, str], expected: bool
) -> None:
    assert node_selector_requirement_matches(requirement, labels) is expected


@pytest.mark.parametrize(
    ("requirement", "label", "expected"),
    [
        (req("mem", "Gt", "8"), "16", True),
        (req("mem", "Gt", "8"), "8", False),
        (req("mem", "Gt", "8"), "4", False),
        (req("mem", "Lt", "8"), "4", True),
        (req("mem", "Lt", "8"), "8", False),
        (req("mem", "Lt", "0"), "-3", True),
        (req("mem", "Gt", "-5"), "+1", True),  # Go's ParseInt accepts a sign
        (req("mem", "Gt", "8"), "16Gi", False),  # non-integer label: no match
        (req("mem", "Gt", "8"), " 16", False),  # Python's int() would accept this; Go does not
        (req("mem", "Gt", "8"), "1_6", False),
        (req("mem", "Gt", "8"), "99999999999999999999", False),  # outside int64
        (req("mem", "Gt", "8", "9"), "16", False),  # exactly one value required
        (req("mem", "Gt", "eight"), "16", False),
        (req("mem", "Gt"), "16", False),
    ],
)
def test_node_selector_gt_lt(requirement: NodeSelectorRequirement, label: str, expected: bool) -> None:
    assert node_selector_requirement_matches(requirement, {"mem": label}) is expected


def test_gt_lt_with_absent_label_do_not_match() -> None:
    assert not node_selector_requirement_matches(req("mem", "Gt", "1"), {})
    assert not node_selector_requirement_matches(req("mem", "Lt", "1"), {})


def test_empty_node_selector_term_matches_nothing() -> None:
    assert not node_selector_term_matches(term({}), {"a": "b"}, "n1")


def test_node_selector_term_ands_expressions_and_fields() -> None:
    t = term(
        {
            "matchExpressions": [
                {"key": "gpu", "operator": "Exists"},
                {"key": "zone", "operator": "In", "values": ["a"]},
            ],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
        }
    )
    assert node_selector_term_matches(t, {"gpu": "x", "zone": "a"}, "n1")
    assert not node_selector_term_matches(t, {"gpu": "x", "zone": "a"}, "n2")
    assert not node_selector_term_matches(t, {"zone": "a"}, "n1")


@pytest.mark.parametrize(
    ("field", "node_name", "expected"),
    [
        ({"key": "metadata.name", "operator": "In", "values": ["n1"]}, "n1", True),
        ({"key": "metadata.name", "operator": "In", "values": ["n1"]}, "n2", False),
        ({"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}, "n2", True),
        ({"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}, "n1", False),
        # Kubernetes rejects other fields, several values, and other operators.
        ({"key": "metadata.uid", "operator": "In", "values": ["n1"]}, "n1", False),
        ({"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}, "n1", False),
        ({"key": "metadata.name", "operator": "Exists"}, "n1", False),
    ],
)
def test_match_fields_metadata_name(field: dict[str, Any], node_name: str, expected: bool) -> None:
    assert node_selector_term_matches(term({"matchFields": [field]}), {}, node_name) is expected


# --- node affinity ------------------------------------------------------------------------------


def _required(*terms: dict[str, Any]) -> Affinity:
    return affinity(
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    )


def test_required_node_affinity_terms_are_ored() -> None:
    aff = _required(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
    )
    assert node_affinity_required_matches(aff, {}, {"zone": "a"}, "n1")
    assert node_affinity_required_matches(aff, {}, {"zone": "b", "gpu": "x"}, "n1")
    assert not node_affinity_required_matches(aff, {}, {"zone": "b"}, "n1")


def test_empty_term_among_required_terms_is_skipped_not_a_wildcard() -> None:
    aff = _required({}, {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]})
    assert not node_affinity_required_matches(aff, {}, {"zone": "a"}, "n1")
    assert node_affinity_required_matches(aff, {}, {"gpu": "x"}, "n1")


def test_required_section_with_no_terms_matches_no_node() -> None:
    assert not node_affinity_required_matches(_required(), {}, {"zone": "a"}, "n1")


def test_node_selector_map_and_required_affinity_are_anded() -> None:
    aff = _required({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]})
    labels = {"gpu": "x", "pool": "train"}
    assert node_affinity_required_matches(aff, {"pool": "train"}, labels, "n1")
    assert not node_affinity_required_matches(aff, {"pool": "serve"}, labels, "n1")
    assert not node_affinity_required_matches(None, {"missing": "x"}, labels, "n1")


def test_absent_affinity_parts_impose_nothing() -> None:
    assert node_affinity_required_matches(None, {}, {}, "n1")
    assert node_affinity_required_matches(affinity({}), {}, {}, "n1")
    assert node_affinity_required_matches(affinity({"nodeAffinity": {}}), {}, {}, "n1")


def test_preferred_node_affinity_sums_matching_weights() -> None:
    gpu = {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
    zone_a = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    named_n9 = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}
    terms = [(10, gpu), (5, zone_a), (7, named_n9), (50, {})]  # the empty term matches nothing
    preferred_terms = [{"weight": w, "preference": t} for w, t in terms]
    aff = affinity({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred_terms}})
    assert node_affinity_preferred_score(aff, {"gpu": "x", "zone": "a"}, "n1") == 15
    assert node_affinity_preferred_score(aff, {"zone": "a"}, "n9") == 12
    assert node_affinity_preferred_score(aff, {}, "n1") == 0
    assert node_affinity_preferred_score(None, {"gpu": "x"}, "n1") == 0


# --- taints and tolerations ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tol", "t", "expected"),
    [
        ({"key": "gpu", "value": "true", "effect": "NoSchedule"}, taint("gpu", "NoSchedule", "true"), True),
        ({"key": "gpu", "operator": "Equal", "value": "f"}, taint("gpu", "NoSchedule", "true"), False),
        ({"key": "gpu", "value": "true"}, taint("gpu", "NoExecute", "true"), True),  # Equal is the default
        ({"key": "gpu", "operator": "Exists"}, taint("gpu", "NoSchedule", "anything"), True),
        ({"key": "gpu", "operator": "Exists"}, taint("cpu", "NoSchedule"), False),
        ({"operator": "Exists"}, taint("anything", "NoExecute", "v"), True),  # empty key + Exists: all taints
        ({"key": "gpu", "operator": "Exists"}, taint("gpu", "NoExecute"), True),  # empty effect: all effects
        ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, taint("gpu", "NoExecute"), False),
        ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, taint("gpu", "NoExecute"), True),
        # ToleratesTaint skips the key check for an empty key even with Equal: only values are compared.
        ({"operator": "Equal", "value": ""}, taint("anything", "NoSchedule"), True),
        ({"operator": "Equal", "value": ""}, taint("anything", "NoSchedule", "v"), False),
    ],
)
def test_tolerates(tol: dict[str, Any], t: Taint, expected: bool) -> None:
    assert tolerates(toleration(tol), t) is expected


def test_untolerated_taint_returns_first_blocking_taint() -> None:
    taints = [taint("soft", "PreferNoSchedule"), taint("a", "NoSchedule"), taint("b", "NoExecute")]
    assert untolerated_taint(taints, []) == taints[1]
    assert untolerated_taint(taints, [toleration({"key": "a", "operator": "Exists"})]) == taints[2]
    both = [toleration({"key": "a", "operator": "Exists"}), toleration({"key": "b", "operator": "Exists"})]
    assert untolerated_taint(taints, both) is None


def test_prefer_no_schedule_never_blocks_but_is_counted() -> None:
    taints = [taint("soft", "PreferNoSchedule"), taint("soft2", "PreferNoSchedule"), taint("a", "NoSchedule")]
    assert untolerated_taint(taints[:2], []) is None
    assert prefer_no_schedule_count(taints, []) == 2
    assert prefer_no_schedule_count(taints, [toleration({"key": "soft", "operator": "Exists"})]) == 1
    only_no_schedule = toleration({"key": "soft", "operator": "Exists", "effect": "NoSchedule"})
    assert prefer_no_schedule_count(taints, [only_no_schedule]) == 2
    assert prefer_no_schedule_count(taints, [toleration({"operator": "Exists"})]) == 0


def test_no_execute_blocks_scheduling() -> None:
    assert untolerated_taint([taint("evict", "NoExecute")], []) == taint("evict", "NoExecute")


# --- score normalisation ------------------------------------------------------------------------


def test_normalize_scores_min_max() -> None:
    assert normalize_scores([0, 5, 10]) == [0.0, 50.0, 100.0]
    assert normalize_scores([-10, 0, 10]) == [0.0, 50.0, 100.0]
    assert normalize_scores([0, 1, 3]) == [0.0, 33.0, 100.0]  # kube-scheduler truncates to int64
    assert normalize_scores([7, 7]) == [0.0, 0.0]
    assert normalize_scores([]) == []


def test_default_normalize_scores() -> None:
    assert default_normalize_scores([0, 5, 10]) == [0, 50, 100]
    assert default_normalize_scores([1, 3]) == [33, 100]
    assert default_normalize_scores([0, 1, 3], reverse=True) == [100, 67, 0]
    assert default_normalize_scores([0, 0]) == [0, 0]
    assert default_normalize_scores([0, 0], reverse=True) == [100, 100]


# --- pod affinity -------------------------------------------------------------------------------

NODES: dict[str, dict[str, str]] = {
    "n1": {ZONE: "a", HOST: "n1"},
    "n2": {ZONE: "a", HOST: "n2"},
    "n3": {ZONE: "b", HOST: "n3"},
    "n4": {HOST: "n4"},  # no zone label
}


def placed(node: str, labels: Mapping[str, str], namespace: str = "default", **terms: Any) -> PlacedPod:
    return PlacedPod(namespace, labels, NODES[node], node, **terms)


def required_affinity(*terms: dict[str, Any], anti: bool = False) -> Affinity:
    kind = "podAntiAffinity" if anti else "podAffinity"
    return affinity({kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}})


def web_term(key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": key, **extra}


def allowed(
    aff: Affinity | None,
    pods: list[PlacedPod],
    labels: Mapping[str, str] | None = None,
    namespace: str = "default",
) -> list[str]:
    """The nodes of NODES the incoming pod may go to, via the one-node function."""
    return [
        name
        for name, node_labels in NODES.items()
        if pod_affinity_required_ok(namespace, labels or {}, aff, node_labels, pods)
    ]


def test_required_affinity_needs_a_matching_pod_in_the_same_domain() -> None:
    pods = [placed("n1", {"app": "web"})]
    assert allowed(required_affinity(web_term()), pods) == ["n1", "n2"]
    assert allowed(required_affinity(web_term(HOST)), pods) == ["n1"]


def test_first_pod_of_a_group_may_go_to_any_node_with_the_topology_key() -> None:
    aff = required_affinity(web_term())
    assert allowed(aff, [], labels={"app": "web"}) == ["n1", "n2", "n3"]  # n4 has no zone label
    assert allowed(aff, [], labels={"app": "db"}) == []  # the pod does not match its own term


def test_first_pod_exemption_ends_once_a_matching_pod_exists() -> None:
    aff = required_affinity(web_term())
    assert allowed(aff, [placed("n3", {"app": "web"})], labels={"app": "web"}) == ["n3"]


def test_matching_pod_on_a_node_without_the_topology_key_counts_nowhere() -> None:
    aff = required_affinity(web_term())
    pods = [placed("n4", {"app": "web"})]
    assert allowed(aff, pods, labels={"app": "db"}) == []
    assert allowed(aff, pods, labels={"app": "web"}) == ["n1", "n2", "n3"]  # still the "first" pod


def test_required_affinity_counts_only_pods_matching_all_terms() -> None:
    tier_term = {"labelSelector": {"matchLabels": {"tier": "front"}}, "topologyKey": HOST}
    aff = required_affinity(web_term(), tier_term)
    split = [placed("n1", {"app": "web"}), placed("n1", {"tier": "front"})]
    # Each term has a matching pod on n1, but no single pod matches both: kube-scheduler refuses.
    assert allowed(aff, split) == []
    assert allowed(aff, [*split, placed("n1", {"app": "web", "tier": "front"})]) == ["n1"]


def test_required_anti_affinity_same_zone_vs_different_zone() -> None:
    aff = required_affinity(web_term(), anti=True)
    pods = [placed("n1", {"app": "web"})]
    assert allowed(aff, pods) == ["n3", "n4"]  # n2 shares zone a; n4 is in no zone
    assert allowed(required_affinity(web_term(HOST), anti=True), pods) == ["n2", "n3", "n4"]


def test_symmetric_anti_affinity_of_placed_pods() -> None:
    anti = [pod_term(web_term())]
    pods = [placed("n1", {"app": "db"}, anti_affinity=anti)]
    assert allowed(None, pods, labels={"app": "web"}) == ["n3", "n4"]
    assert allowed(None, pods, labels={"app": "cache"}) == list(NODES)
    # The placed pod's term is scoped to its own namespace.
    assert allowed(None, pods, labels={"app": "web"}, namespace="other") == list(NODES)


def test_namespace_scoping_of_affinity_terms() -> None:
    pods = [placed("n1", {"app": "web"}, namespace="other")]
    assert allowed(required_affinity(web_term()), pods) == []  # own namespace only
    assert allowed(required_affinity(web_term(namespaces=["other"])), pods) == ["n1", "n2"]
    assert allowed(required_affinity(web_term(namespaceSelector={})), pods) == ["n1", "n2"]
    by_name = {"matchLabels": {"kubernetes.io/metadata.name": "other"}}
    assert allowed(required_affinity(web_term(namespaceSelector=by_name)), pods) == ["n1", "n2"]
    unknown_label = {"matchLabels": {"team": "ml"}}
    assert allowed(required_affinity(web_term(namespaceSelector=unknown_label)), pods) == []
    anti_other = required_affinity(web_term(), anti=True)
    assert allowed(anti_other, pods) == list(NODES)  # a web pod in another namespace does not repel


def test_affinity_term_namespaces() -> None:
    assert affinity_term_namespaces(pod_term(web_term()), "ns1") == NamespaceScope(frozenset({"ns1"}))
    listed = affinity_term_namespaces(pod_term(web_term(namespaces=["a", "b"])), "ns1")
    assert "a" in listed and "b" in listed and "ns1" not in listed
    everything = affinity_term_namespaces(pod_term(web_term(namespaceSelector={})), "ns1")
    assert everything.all_namespaces and "anything" in everything
    assert ALL_NAMESPACES.all_namespaces
    name_not_in = {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
    not_system = {"matchExpressions": [name_not_in]}
    scope = affinity_term_namespaces(
        pod_term(web_term(namespaces=["kube-system"], namespaceSelector=not_system)), "x"
    )
    assert "team-a" in scope and "kube-system" in scope  # listed names are unioned with the selector
    assert not scope.all_namespaces


def test_namespace_selector_matches_known_namespace_labels() -> None:
    known = {"team-a": {"team": "a"}, "spoof": {"kubernetes.io/metadata.name": "other"}}
    assert namespace_labels("team-a", known) == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    assert namespace_labels("team-a") == {"kubernetes.io/metadata.name": "team-a"}
    # The API server owns the name label: a namespace's own labels never override it.
    assert namespace_labels("spoof", known)["kubernetes.io/metadata.name"] == "spoof"
    term = pod_term(web_term(namespaceSelector={"matchLabels": {"team": "a"}}))
    assert "team-a" in affinity_term_namespaces(term, "x", known)
    assert "team-b" not in affinity_term_namespaces(term, "x", known)
    assert "team-a" not in affinity_term_namespaces(term, "x")  # labels unknown: only the name label


def test_malformed_incoming_selector_makes_the_pod_unschedulable() -> None:
    bad = {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}, "topologyKey": ZONE}
    assert allowed(required_affinity(bad, anti=True), []) == []
    preferred_bad = affinity(
        {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": bad}]
            }
        }
    )
    assert allowed(preferred_bad, []) == []


def test_malformed_anti_affinity_list_of_a_placed_pod_is_dropped_whole() -> None:
    exists_with_values = {"key": "x", "operator": "Exists", "values": ["v"]}
    bad = pod_term({"labelSelector": {"matchExpressions": [exists_with_values]}, "topologyKey": ZONE})
    pods = [placed("n1", {"app": "db"}, anti_affinity=[pod_term(web_term()), bad])]
    assert allowed(None, pods, labels={"app": "web"}) == list(NODES)


def test_required_ok_for_nodes_agrees_with_the_one_node_function() -> None:
    pods = [placed("n1", {"app": "web"}), placed("n3", {"app": "db"}, anti_affinity=[pod_term(web_term())])]
    aff = affinity(
        {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [web_term(HOST)]},
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}
                ]
            },
        }
    )
    index = PlacedPodIndex(pods)
    many = index.required_ok_for_nodes("default", {"app": "web"}, aff, list(NODES.items()))
    assert many == [n in allowed(aff, pods, labels={"app": "web"}) for n in NODES]
    assert many == [True, False, False, False]


def test_index_add_remove_and_domains() -> None:
    web1, web2 = placed("n1", {"app": "web"}), placed("n1", {"app": "web"})
    repeller = placed("n3", {"app": "db"}, anti_affinity=[pod_term(web_term())])
    index = PlacedPodIndex([web1, web2, repeller])
    t = pod_term(web_term())
    assert index.domains_matching(t, affinity_term_namespaces(t, "default")) == {(ZONE, "a")}
    assert index.domains_matching(t, frozenset({"other"})) == set()
    assert index.domains_matching(t, None) == {(ZONE, "a")}
    assert len(index) == 3 and web2 in index
    index.remove(web1)  # equal replicas are distinct pods
    assert index.domains_matching(t, None) == {(ZONE, "a")}
    index.remove(web2)
    assert index.domains_matching(t, None) == set()
    assert not index.required("default", {"app": "web"}, None).allows(NODES["n3"])
    index.remove(repeller)
    assert index.required("default", {"app": "web"}, None).allows(NODES["n3"])
    with pytest.raises(KeyError):
        index.remove(repeller)


def test_placed_pod_from_manifests() -> None:
    pod = Pod.model_validate(
        {
            "metadata": {"name": "p", "labels": {"app": "db"}},
            "spec": {
                "affinity": {
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [web_term()]}
                }
            },
        }
    )
    node = Node.model_validate({"metadata": {"name": "n1", "labels": NODES["n1"]}})
    p = PlacedPod.from_pod(pod, node)
    assert (p.namespace, p.node_name, dict(p.labels)) == ("default", "n1", {"app": "db"})
    assert allowed(None, [p], labels={"app": "web"}) == ["n3", "n4"]


# --- preferred pod affinity ---------------------------------------------------------------------


def preferred(
    affinity_terms: list[tuple[int, dict[str, Any]]], anti_terms: list[tuple[int, dict[str, Any]]]
) -> Affinity:
    def weighted(terms: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
        return [{"weight": w, "podAffinityTerm": t} for w, t in terms]

    return affinity(
        {
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": weighted(affinity_terms)},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": weighted(anti_terms)},
        }
    )


def scores(aff: Affinity | None, pods: list[PlacedPod], labels: Mapping[str, str] | None = None) -> list[int]:
    return [pod_affinity_preferred_score("default", labels or {}, aff, n, pods) for n in NODES.values()]


def test_preferred_score_is_weight_times_matching_pods_in_domain() -> None:
    pods = [placed("n1", {"app": "web"}), placed("n2", {"app": "web"}), placed("n3", {"app": "web"})]
    assert scores(preferred([(10, web_term())], []), pods) == [20, 20, 10, 0]
    assert scores(preferred([(10, web_term())], [(3, web_term(HOST))]), pods) == [17, 17, 7, 0]
    other_ns = [placed("n1", {"app": "web"}, namespace="other")]
    assert scores(preferred([(10, web_term())], []), other_ns) == [0, 0, 0, 0]


def weighted(weight: int, spec: dict[str, Any]) -> WeightedPodAffinityTerm:
    return WeightedPodAffinityTerm.model_validate({"weight": weight, "podAffinityTerm": spec})


def test_preferred_score_symmetric_terms_of_placed_pods() -> None:
    web = pod_term(web_term())
    pods = [
        placed("n1", {"app": "db"}, affinity=[web]),  # hard affinity: +hardPodAffinityWeight (1)
        placed("n3", {"app": "db"}, preferred_affinity=[weighted(4, web_term())]),
        placed("n3", {"app": "db"}, preferred_anti_affinity=[weighted(6, web_term(HOST))]),
    ]
    assert scores(None, pods, labels={"app": "web"}) == [1, 1, -2, 0]
    assert scores(None, pods, labels={"app": "db"}) == [0, 0, 0, 0]
    raw = PlacedPodIndex(pods).preferred_scores_for_nodes(
        "default", {"app": "web"}, None, list(NODES.items())
    )
    assert normalize_scores(raw) == [100.0, 100.0, 0.0, 66.0]
    heavy = PlacedPodIndex(pods).preferred_scores_for_nodes(
        "default", {"app": "web"}, None, list(NODES.items()), hard_pod_affinity_weight=5
    )
    assert heavy == [5, 5, -2, 0]


# --- the index agrees with a brute-force scan ---------------------------------------------------

_values = st.sampled_from(["a", "b", "c"])
_labels = st.dictionaries(st.sampled_from(["app", "tier"]), _values, max_size=2)
_pods = st.lists(
    st.tuples(st.sampled_from(list(NODES)), _labels, st.sampled_from(["default", "other"])), max_size=12
)
_expressions = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["app", "tier"]),
            "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
            "values": st.lists(_values, max_size=2),
        }
    ),
    max_size=2,
)
_selectors = st.fixed_dictionaries({"matchLabels": _labels, "matchExpressions": _expressions})


@settings(max_examples=200, deadline=None)
@given(pods=_pods, sel=_selectors, removed=st.sets(st.integers(0, 11)))
def test_index_domains_match_brute_force(
    pods: list[tuple[str, dict[str, str], str]], sel: dict[str, Any], removed: set[int]
) -> None:
    placed_pods = [placed(node, labels, ns) for node, labels, ns in pods]
    index = PlacedPodIndex(placed_pods)
    for i in sorted(removed):
        if i < len(placed_pods):
            index.remove(placed_pods[i])
    remaining = [p for i, p in enumerate(placed_pods) if i not in removed]
    t = pod_term({"labelSelector": sel, "topologyKey": ZONE})
    expected = {
        (ZONE, p.node_labels[ZONE])
        for p in remaining
        if p.namespace == "default"
        and ZONE in p.node_labels
        and label_selector_matches(t.label_selector, p.labels)
    }
    assert index.domains_matching(t, affinity_term_namespaces(t, "default")) == expected
