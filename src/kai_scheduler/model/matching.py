"""Kubernetes matching semantics: label and node selectors, node affinity, taints, inter-pod affinity.

Each function mirrors the kube-scheduler / apimachinery code it is named after, including the corner
cases users trip over, because a scheduler that is "compatible" must place pods where Kubernetes would:

* a malformed requirement (`In` without values, `Exists` with values, `Gt` with a non-integer) is a
  parse error in Kubernetes, and a term that fails to parse never matches; here it simply matches
  nothing. (Label key/value syntax is not re-validated: the API server already did that.)
* an empty node selector term matches nothing; a present-but-empty list of required terms matches no node;
* a toleration with an empty key and operator `Equal` tolerates every taint with an empty value
  (`ToleratesTaint` only compares keys when the toleration has one);
* required pod affinity counts only placed pods that match *all* of the incoming pod's required
  affinity terms (kube-scheduler's `podMatchesAllAffinityTerms`).

Pure functions over the `kai_scheduler.api.objects` models and plain mappings: no I/O, no numpy.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from kai_scheduler.api.objects import (
    Affinity,
    LabelSelector,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    Taint,
    Toleration,
    WeightedPodAffinityTerm,
)

MAX_NODE_SCORE = 100
"""kube-scheduler's `framework.MaxNodeScore`: every normalised plugin score lies in 0..100."""

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server puts on every namespace (since 1.21), holding the namespace's name."""

NODE_NAME_FIELD = "metadata.name"
"""The only node field `matchFields` may select on."""

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
"""kube-scheduler's default `hardPodAffinityWeight` (InterPodAffinityArgs)."""

Domain = tuple[str, str]
"""A topology domain: (topology key, the value of that label on the node)."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_K = TypeVar("_K", bound=Hashable)


# --- label selectors ----------------------------------------------------------------------------


def _set_requirement_well_formed(operator: str, values: Sequence[str]) -> bool:
    """`labels.NewRequirement`'s checks: In/NotIn need values, Exists/DoesNotExist take none."""
    if operator in ("In", "NotIn"):
        return len(values) > 0
    return len(values) == 0


def _set_requirement_matches(
    operator: str, key: str, values: Sequence[str], labels: Mapping[str, str]
) -> bool:
    """`labels.Requirement.Matches` for the set operators; NotIn/DoesNotExist hold on an absent label."""
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    return key not in labels  # DoesNotExist


def label_selector_well_formed(selector: LabelSelector | None) -> bool:
    """Whether `metav1.LabelSelectorAsSelector` accepts the selector (None is valid: it selects nothing)."""
    if selector is None:
        return True
    return all(_set_requirement_well_formed(e.operator, e.values) for e in selector.match_expressions)


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """matchLabels AND every matchExpression. None selects nothing; `{}` selects everything."""
    if selector is None or not label_selector_well_formed(selector):
        return False
    if any(key not in labels or labels[key] != value for key, value in selector.match_labels.items()):
        return False
    return all(
        _set_requirement_matches(e.operator, e.key, e.values, labels) for e in selector.match_expressions
    )


# --- node selectors and node affinity -----------------------------------------------------------


def _parse_int64(text: str | None) -> int | None:
    """Go's `strconv.ParseInt(text, 10, 64)`: optional sign, ASCII digits, int64 range; None on failure.

    Python's int() is more lenient (whitespace, underscores), which would match labels Kubernetes rejects.
    """
    if text is None or not _DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _numeric_requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """Gt/Lt: exactly one integer value; the label must be present and an integer too."""
    if len(req.values) != 1:
        return False
    bound = _parse_int64(req.values[0])
    actual = _parse_int64(labels.get(req.key))
    if bound is None or actual is None:
        return False
    return actual > bound if req.operator == "Gt" else actual < bound


def node_selector_requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One matchExpressions entry against a node's labels (In/NotIn/Exists/DoesNotExist/Gt/Lt)."""
    if req.operator in ("Gt", "Lt"):
        return _numeric_requirement_matches(req, labels)
    if not _set_requirement_well_formed(req.operator, req.values):
        return False
    return _set_requirement_matches(req.operator, req.key, req.values, labels)


def _field_requirement_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    """One matchFields entry: only `metadata.name`, with In/NotIn and exactly one value, parses."""
    if req.key != NODE_NAME_FIELD or len(req.values) != 1 or req.operator not in ("In", "NotIn"):
        return False
    if not node_name:
        # Kubernetes builds the node's field set only from a non-empty name, and skips field
        # selectors when that set is empty.
        return True
    same = node_name == req.values[0]
    return same if req.operator == "In" else not same


def node_selector_term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """All matchExpressions AND all matchFields; a term with neither matches nothing (Kubernetes rule)."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(node_selector_requirement_matches(r, labels) for r in term.match_expressions) and all(
        _field_requirement_matches(r, node_name) for r in term.match_fields
    )


def _required_node_selector(affinity: Affinity | None) -> NodeSelector | None:
    if affinity is None or affinity.node_affinity is None:
        return None
    return affinity.node_affinity.required_during_scheduling_ignored_during_execution


def node_affinity_required_matches(
    affinity: Affinity | None, node_selector: Mapping[str, str], labels: Mapping[str, str], node_name: str
) -> bool:
    """The NodeAffinity filter: every nodeSelector pair AND at least one required term.

    A required section whose term list is empty matches no node (an OR over nothing), as in Kubernetes.
    """
    if any(key not in labels or labels[key] != value for key, value in node_selector.items()):
        return False
    required = _required_node_selector(affinity)
    if required is None:
        return True
    return any(node_selector_term_matches(t, labels, node_name) for t in required.node_selector_terms)


def node_affinity_preferred_score(
    affinity: Affinity | None, labels: Mapping[str, str], node_name: str
) -> int:
    """The NodeAffinity score before normalisation: the summed weights of the matching preferred terms."""
    if affinity is None or affinity.node_affinity is None:
        return 0
    preferred = affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    return sum(p.weight for p in preferred if node_selector_term_matches(p.preference, labels, node_name))


# --- taints and tolerations ---------------------------------------------------------------------


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """`Toleration.ToleratesTaint`: an empty effect or key is a wildcard; Exists ignores the value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    return toleration.operator == "Exists" or toleration.value == taint.value


def _tolerated(taint: Taint, tolerations: Sequence[Toleration]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates (the TaintToleration filter's reason)."""
    for taint in taints:
        if taint.effect != "PreferNoSchedule" and not _tolerated(taint, tolerations):
            return taint
    return None


def prefer_no_schedule_count(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """The TaintToleration score before (reversed) normalisation: untolerated PreferNoSchedule taints."""
    return sum(1 for t in taints if t.effect == "PreferNoSchedule" and not _tolerated(t, tolerations))


# --- score normalisation ------------------------------------------------------------------------


def normalize_scores(scores: Sequence[int]) -> list[float]:
    """InterPodAffinity's NormalizeScore: (s - min) / (max - min) * 100, all zeros when max == min.

    kube-scheduler truncates the result to an integer (`int64(fScore)`); we do the same, so ties and
    sums with other plugins come out as in Kubernetes, and return the values as floats.
    """
    if not scores:
        return []
    low, spread = min(scores), max(scores) - min(scores)
    if spread <= 0:
        return [0.0] * len(scores)
    return [float(int(MAX_NODE_SCORE * ((s - low) / spread))) for s in scores]


def _go_div(numerator: int, denominator: int) -> int:
    """Go's integer division truncates toward zero; Python's // floors."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator < 0) == (denominator < 0) else -quotient


def default_normalize_scores(scores: Sequence[int], reverse: bool = False) -> list[int]:
    """`helper.DefaultNormalizeScore` (used by NodeAffinity, and by TaintToleration with reverse=True):
    s * 100 / max in integers; when max is 0 every node gets 0, or 100 if reversed."""
    top = max(scores, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0 for _ in scores]
    normalised = [_go_div(MAX_NODE_SCORE * s, top) for s in scores]
    return [MAX_NODE_SCORE - s for s in normalised] if reverse else normalised


# --- namespaces of pod affinity terms -----------------------------------------------------------


NamespaceLabels = Mapping[str, Mapping[str, str]]
"""Namespace name -> the labels of that Namespace object, as far as the edge knows them."""

_NO_NAMESPACE_LABELS: NamespaceLabels = MappingProxyType({})


def namespace_labels(namespace: str, known: NamespaceLabels = _NO_NAMESPACE_LABELS) -> dict[str, str]:
    """The labels we know a namespace has: its labels in `known` (live mode watches Namespaces), plus
    `kubernetes.io/metadata.name`, which the API server sets on every namespace (and which no user
    label overrides). A namespace the simulator's input gives no Namespace for carries only that label:
    a namespaceSelector on it (the usual way to pick namespaces by name) behaves exactly, and one on
    any other label matches nothing, as it would in a cluster whose namespaces carry no other labels.
    Treating such a selector as "all namespaces" instead would let an anti-affinity term block pods it
    was never meant to see."""
    labels = dict(known.get(namespace) or {})
    labels[NAMESPACE_NAME_LABEL] = namespace
    return labels


@dataclass(frozen=True)
class NamespaceScope:
    """The namespaces a pod affinity term applies to: listed names, plus those its selector matches.

    Kubernetes unions `namespaces` with the selector's matches, so both are kept. Supports `ns in scope`;
    the selector is matched against `namespace_labels(ns, known_labels)`.
    """

    names: frozenset[str] = frozenset()
    selector: LabelSelector | None = None
    known_labels: NamespaceLabels = field(default_factory=lambda: _NO_NAMESPACE_LABELS, compare=False)

    @property
    def all_namespaces(self) -> bool:
        """True for `namespaceSelector: {}`, which selects every namespace."""
        return (
            self.selector is not None
            and not self.selector.match_labels
            and not self.selector.match_expressions
        )

    def __contains__(self, namespace: object) -> bool:
        if not isinstance(namespace, str):
            return False
        return namespace in self.names or label_selector_matches(
            self.selector, namespace_labels(namespace, self.known_labels)
        )


ALL_NAMESPACES = NamespaceScope(selector=LabelSelector())

NamespacesArg = NamespaceScope | frozenset[str] | None
"""What index queries accept: a scope, a plain set of names, or None for all namespaces."""


def _as_scope(namespaces: NamespacesArg) -> NamespaceScope:
    if namespaces is None:
        return ALL_NAMESPACES
    if isinstance(namespaces, NamespaceScope):
        return namespaces
    return NamespaceScope(names=frozenset(namespaces))


def affinity_term_namespaces(
    term: PodAffinityTerm, pod_namespace: str, known_labels: NamespaceLabels = _NO_NAMESPACE_LABELS
) -> NamespaceScope:
    """`getNamespacesFromPodAffinityTerm` + the namespaceSelector: the term's own pod's namespace when the
    term lists none and has no selector, else the listed names plus the selector's matches (against the
    namespaces' `known_labels`, see `namespace_labels`).

    Returns a `NamespaceScope` rather than a bare set because a selector such as `NotIn [kube-system]`
    selects a co-finite set that no finite set can represent; `ns in scope` and `scope.all_namespaces`
    answer the questions a set (or None for "all") would have.
    """
    if not term.namespaces and term.namespace_selector is None:
        return NamespaceScope(names=frozenset({pod_namespace}))
    return NamespaceScope(frozenset(term.namespaces), term.namespace_selector, known_labels)


def pod_affinity_term_matches(
    term: PodAffinityTerm,
    term_pod_namespace: str,
    namespace: str,
    labels: Mapping[str, str],
    known_labels: NamespaceLabels = _NO_NAMESPACE_LABELS,
) -> bool:
    """`AffinityTerm.Matches`: the term (owned by a pod in `term_pod_namespace`) selects a pod with
    this namespace and these labels (`known_labels`: the namespaces' labels, see `namespace_labels`)."""
    in_scope = namespace in affinity_term_namespaces(term, term_pod_namespace, known_labels)
    return in_scope and label_selector_matches(term.label_selector, labels)


def _term_well_formed(term: PodAffinityTerm) -> bool:
    return label_selector_well_formed(term.label_selector) and label_selector_well_formed(
        term.namespace_selector
    )


def _usable(terms: Sequence[PodAffinityTerm]) -> tuple[PodAffinityTerm, ...]:
    """kube-scheduler's `getAffinityTerms` drops a pod's whole list of terms when one fails to parse."""
    return tuple(terms) if all(_term_well_formed(t) for t in terms) else ()


def _usable_weighted(terms: Sequence[WeightedPodAffinityTerm]) -> tuple[WeightedPodAffinityTerm, ...]:
    return tuple(terms) if all(_term_well_formed(t.pod_affinity_term) for t in terms) else ()


# --- placed pods --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PlacedPod:
    """A pod already bound (or tentatively placed) on a node, as inter-pod affinity sees it.

    Identity semantics (eq=False): two replicas with equal labels on the same node are two pods, and
    each must be counted and removable on its own. The last three fields feed only the symmetric part
    of the score (existing pods' own affinity towards the incoming pod); they default to empty.
    """

    namespace: str
    labels: Mapping[str, str]
    node_labels: Mapping[str, str]
    node_name: str
    anti_affinity: Sequence[PodAffinityTerm] = ()
    affinity: Sequence[PodAffinityTerm] = ()
    preferred_affinity: Sequence[WeightedPodAffinityTerm] = ()
    preferred_anti_affinity: Sequence[WeightedPodAffinityTerm] = ()

    @classmethod
    def from_pod(cls, pod: Pod, node: Node) -> PlacedPod:
        affinity = pod.spec.affinity
        pod_aff = affinity.pod_affinity if affinity else None
        anti_aff = affinity.pod_anti_affinity if affinity else None
        return cls(
            namespace=pod.namespace,
            labels=pod.metadata.labels,
            node_labels=node.metadata.labels,
            node_name=node.metadata.name,
            anti_affinity=_required_terms(anti_aff),
            affinity=_required_terms(pod_aff),
            preferred_affinity=_preferred_terms(pod_aff),
            preferred_anti_affinity=_preferred_terms(anti_aff),
        )


def _required_terms(section: PodAffinity | None) -> tuple[PodAffinityTerm, ...]:
    return tuple(section.required_during_scheduling_ignored_during_execution) if section else ()


def _preferred_terms(section: PodAffinity | None) -> tuple[WeightedPodAffinityTerm, ...]:
    return tuple(section.preferred_during_scheduling_ignored_during_execution) if section else ()


@dataclass(frozen=True)
class _OwnTerms:
    """A placed pod's terms that survive parsing, kept only for pods that have any."""

    anti_affinity: tuple[PodAffinityTerm, ...]
    affinity: tuple[PodAffinityTerm, ...]
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...]
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...]

    @classmethod
    def of(cls, pod: PlacedPod) -> _OwnTerms:
        return cls(
            _usable(pod.anti_affinity),
            _usable(pod.affinity),
            _usable_weighted(pod.preferred_affinity),
            _usable_weighted(pod.preferred_anti_affinity),
        )

    def __bool__(self) -> bool:
        return bool(
            self.anti_affinity or self.affinity or self.preferred_affinity or self.preferred_anti_affinity
        )


def _domain(pod: PlacedPod, topology_key: str) -> Domain | None:
    """The pod's domain for a key; None when its node lacks the label (such pods count nowhere)."""
    value = pod.node_labels.get(topology_key)
    return None if value is None else (topology_key, value)


# --- the incoming pod's terms -------------------------------------------------------------------


@dataclass(frozen=True)
class IncomingPod:
    """The pending pod's side of inter-pod affinity: its namespace, labels and (parsed) terms."""

    namespace: str
    labels: Mapping[str, str]
    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    well_formed: bool = True
    known_labels: NamespaceLabels = field(default_factory=lambda: _NO_NAMESPACE_LABELS, compare=False)

    @classmethod
    def of(
        cls,
        namespace: str,
        labels: Mapping[str, str],
        affinity: Affinity | None,
        known_labels: NamespaceLabels = _NO_NAMESPACE_LABELS,
    ) -> IncomingPod:
        pod_aff = affinity.pod_affinity if affinity else None
        anti_aff = affinity.pod_anti_affinity if affinity else None
        required = _required_terms(pod_aff) + _required_terms(anti_aff)
        preferred = _preferred_terms(pod_aff) + _preferred_terms(anti_aff)
        well_formed = all(_term_well_formed(t) for t in required) and all(
            _term_well_formed(w.pod_affinity_term) for w in preferred
        )
        return cls(
            namespace,
            labels,
            _required_terms(pod_aff),
            _required_terms(anti_aff),
            _preferred_terms(pod_aff),
            _preferred_terms(anti_aff),
            well_formed,
            known_labels,
        )

    def scope(self, term: PodAffinityTerm) -> NamespaceScope:
        return affinity_term_namespaces(term, self.namespace, self.known_labels)

    def matches_all_own_affinity_terms(self) -> bool:
        """`podMatchesAllAffinityTerms` on the pod itself: the test of the first-pod special case."""
        return bool(self.affinity) and all(
            pod_affinity_term_matches(t, self.namespace, self.namespace, self.labels, self.known_labels)
            for t in self.affinity
        )


# --- per-pod results, evaluated per node --------------------------------------------------------


@dataclass(frozen=True)
class RequiredPodAffinity:
    """The incoming pod's required inter-pod constraints resolved against the placed pods once
    (kube-scheduler's InterPodAffinity PreFilter state); `allows(node_labels)` is then O(terms)."""

    well_formed: bool
    affinity_keys: tuple[str, ...]
    affinity_domains: frozenset[Domain]
    first_pod_exempt: bool
    anti_affinity_keys: tuple[str, ...]
    anti_affinity_domains: frozenset[Domain]
    existing_anti_affinity_domains: frozenset[Domain]

    def allows(self, node_labels: Mapping[str, str]) -> bool:
        """The InterPodAffinity filter for one node."""
        return (
            self.well_formed
            and self._affinity_ok(node_labels)
            and self._anti_affinity_ok(node_labels)
            and self._existing_anti_affinity_ok(node_labels)
        )

    def _affinity_ok(self, node_labels: Mapping[str, str]) -> bool:
        # `satisfyPodAffinity`: the node must carry every topology key, even for the first pod.
        if any(key not in node_labels for key in self.affinity_keys):
            return False
        if all((key, node_labels[key]) in self.affinity_domains for key in self.affinity_keys):
            return True
        return self.first_pod_exempt

    def _anti_affinity_ok(self, node_labels: Mapping[str, str]) -> bool:
        # A node without the topology key is in no domain, so the term cannot be violated there.
        return not any(
            key in node_labels and (key, node_labels[key]) in self.anti_affinity_domains
            for key in self.anti_affinity_keys
        )

    def _existing_anti_affinity_ok(self, node_labels: Mapping[str, str]) -> bool:
        return not any(node_labels.get(key) == value for key, value in self.existing_anti_affinity_domains)


@dataclass(frozen=True)
class PreferredPodAffinity:
    """kube-scheduler's InterPodAffinity PreScore state: a signed weight per topology domain."""

    topology_score: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def score(self, node_labels: Mapping[str, str]) -> int:
        """The raw score of one node: the weights of the domains it belongs to, one per topology key."""
        return sum(
            values.get(node_labels[key], 0)
            for key, values in self.topology_score.items()
            if key in node_labels
        )


class _ScoreMap:
    """Accumulates `weight` into the domain of a placed pod, as kube-scheduler's `scoreMap.processTerm`."""

    def __init__(self) -> None:
        self.by_key: dict[str, dict[str, int]] = {}

    def add(self, pod: PlacedPod, topology_key: str, weight: int) -> None:
        value = pod.node_labels.get(topology_key)
        if value is not None and weight:
            values = self.by_key.setdefault(topology_key, {})
            values[value] = values.get(value, 0) + weight


# --- the index ----------------------------------------------------------------------------------


class PlacedPodIndex:
    """Placed pods indexed by namespace and label, so an incoming pod's terms are resolved to the set of
    matching topology domains once, after which each candidate node is a few set lookups.

    `namespace_labels` (namespace -> its labels) is what namespaceSelectors are matched against."""

    def __init__(
        self, pods: Iterable[PlacedPod] = (), namespace_labels: NamespaceLabels = _NO_NAMESPACE_LABELS
    ) -> None:
        self._namespace_labels = namespace_labels
        # dicts used as ordered sets: deterministic iteration, O(1) removal.
        self._by_namespace: dict[str, dict[PlacedPod, None]] = {}
        self._by_label: dict[tuple[str, str, str], dict[PlacedPod, None]] = {}
        self._own_terms: dict[PlacedPod, _OwnTerms] = {}
        for pod in pods:
            self.add(pod)

    def __len__(self) -> int:
        return sum(len(pods) for pods in self._by_namespace.values())

    def __iter__(self) -> Iterator[PlacedPod]:
        for pods in self._by_namespace.values():
            yield from pods

    def __contains__(self, pod: object) -> bool:
        return isinstance(pod, PlacedPod) and pod in self._by_namespace.get(pod.namespace, {})

    def add(self, pod: PlacedPod) -> None:
        self._by_namespace.setdefault(pod.namespace, {})[pod] = None
        for key, value in pod.labels.items():
            self._by_label.setdefault((pod.namespace, key, value), {})[pod] = None
        own = _OwnTerms.of(pod)
        if own:
            self._own_terms[pod] = own

    def remove(self, pod: PlacedPod) -> None:
        """Remove the very object that was added; KeyError if it is not in the index."""
        _discard(self._by_namespace, pod.namespace, pod, required=True)
        for key, value in pod.labels.items():
            _discard(self._by_label, (pod.namespace, key, value), pod, required=False)
        self._own_terms.pop(pod, None)

    # -- queries -------------------------------------------------------------------------------

    def matching_pods(self, selector: LabelSelector | None, namespaces: NamespacesArg) -> Iterator[PlacedPod]:
        """The placed pods in the namespaces that the label selector selects."""
        if selector is None or not label_selector_well_formed(selector):
            return
        for namespace in self._namespaces_in(_as_scope(namespaces)):
            for pod in self._candidates(selector, namespace):
                if label_selector_matches(selector, pod.labels):
                    yield pod

    def domains_matching(self, term: PodAffinityTerm, namespaces: NamespacesArg) -> set[Domain]:
        """The (topology_key, value) domains holding a pod the term selects within `namespaces`
        (pass `affinity_term_namespaces(term, incoming_namespace)`)."""
        domains = (_domain(p, term.topology_key) for p in self.matching_pods(term.label_selector, namespaces))
        return {d for d in domains if d is not None}

    def _namespaces_in(self, scope: NamespaceScope) -> Iterable[str]:
        if scope.selector is None:
            return [ns for ns in scope.names if ns in self._by_namespace]
        return [ns for ns in self._by_namespace if ns in scope]

    def _candidates(self, selector: LabelSelector, namespace: str) -> Iterable[PlacedPod]:
        # Narrow the scan to the smallest posting list among the selector's equality constraints;
        # the caller still checks the whole selector on each candidate.
        best: Mapping[PlacedPod, None] = self._by_namespace.get(namespace, {})
        for key, value in _equalities(selector):
            posting = self._by_label.get((namespace, key, value), {})
            if len(posting) < len(best):
                best = posting
        return best

    # -- required: the InterPodAffinity filter ---------------------------------------------------

    def required(
        self, pod_namespace: str, pod_labels: Mapping[str, str], affinity: Affinity | None
    ) -> RequiredPodAffinity:
        """Resolve the incoming pod's required terms (and the placed pods' anti-affinity towards it)."""
        pod = IncomingPod.of(pod_namespace, pod_labels, affinity, self._namespace_labels)
        affinity_domains = self._affinity_domains(pod)
        return RequiredPodAffinity(
            well_formed=pod.well_formed,
            affinity_keys=tuple(t.topology_key for t in pod.affinity),
            affinity_domains=frozenset(affinity_domains),
            first_pod_exempt=not affinity_domains and pod.matches_all_own_affinity_terms(),
            anti_affinity_keys=tuple(t.topology_key for t in pod.anti_affinity),
            anti_affinity_domains=frozenset(
                d for t in pod.anti_affinity for d in self.domains_matching(t, pod.scope(t))
            ),
            existing_anti_affinity_domains=frozenset(self._existing_anti_affinity_domains(pod)),
        )

    def required_ok_for_nodes(
        self,
        pod_namespace: str,
        pod_labels: Mapping[str, str],
        affinity: Affinity | None,
        nodes: Sequence[tuple[str, Mapping[str, str]]],
    ) -> list[bool]:
        """The InterPodAffinity filter for many `(node_name, node_labels)` at once."""
        check = self.required(pod_namespace, pod_labels, affinity)
        return [check.allows(labels) for _, labels in nodes]

    def _affinity_domains(self, pod: IncomingPod) -> set[Domain]:
        """Domains of placed pods matching ALL the pod's required affinity terms (`updateWithAffinityTerms`).

        A placed pod that matches only some of the terms counts for none of them, as in kube-scheduler."""
        if not pod.affinity:
            return set()
        first, rest = pod.affinity[0], pod.affinity[1:]
        domains: set[Domain] = set()
        for placed in self.matching_pods(first.label_selector, pod.scope(first)):
            if all(
                pod_affinity_term_matches(
                    t, pod.namespace, placed.namespace, placed.labels, self._namespace_labels
                )
                for t in rest
            ):
                domains.update(d for t in pod.affinity if (d := _domain(placed, t.topology_key)) is not None)
        return domains

    def _existing_anti_affinity_domains(self, pod: IncomingPod) -> set[Domain]:
        """Domains from which a placed pod's own required anti-affinity repels the incoming pod."""
        domains: set[Domain] = set()
        for placed, own in self._own_terms.items():
            for term in own.anti_affinity:
                if pod_affinity_term_matches(
                    term, placed.namespace, pod.namespace, pod.labels, self._namespace_labels
                ):
                    domain = _domain(placed, term.topology_key)
                    if domain is not None:
                        domains.add(domain)
        return domains

    # -- preferred: the InterPodAffinity score ---------------------------------------------------

    def preferred(
        self,
        pod_namespace: str,
        pod_labels: Mapping[str, str],
        affinity: Affinity | None,
        hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
    ) -> PreferredPodAffinity:
        """Resolve the score contributions of every placed pod (kube-scheduler's PreScore)."""
        pod = IncomingPod.of(pod_namespace, pod_labels, affinity, self._namespace_labels)
        scores = _ScoreMap()
        self._score_incoming_terms(pod, scores)
        self._score_existing_terms(pod, scores, hard_pod_affinity_weight)
        return PreferredPodAffinity(scores.by_key)

    def preferred_scores_for_nodes(
        self,
        pod_namespace: str,
        pod_labels: Mapping[str, str],
        affinity: Affinity | None,
        nodes: Sequence[tuple[str, Mapping[str, str]]],
        hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
    ) -> list[int]:
        """Raw InterPodAffinity scores for many `(node_name, node_labels)`; see `normalize_scores`."""
        state = self.preferred(pod_namespace, pod_labels, affinity, hard_pod_affinity_weight)
        return [state.score(labels) for _, labels in nodes]

    def _score_incoming_terms(self, pod: IncomingPod, scores: _ScoreMap) -> None:
        """+weight per placed pod a preferred affinity term selects, -weight for anti-affinity."""
        for sign, weighted_terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
            for weighted in weighted_terms:
                term = weighted.pod_affinity_term
                for placed in self.matching_pods(term.label_selector, pod.scope(term)):
                    scores.add(placed, term.topology_key, sign * weighted.weight)

    def _score_existing_terms(self, pod: IncomingPod, scores: _ScoreMap, hard_weight: int) -> None:
        """The symmetric part: placed pods' own terms that select the incoming pod."""
        for placed, own in self._own_terms.items():
            weighted: list[tuple[int, PodAffinityTerm]] = [
                (hard_weight, t) for t in own.affinity if hard_weight > 0
            ]
            weighted += [(w.weight, w.pod_affinity_term) for w in own.preferred_affinity]
            weighted += [(-w.weight, w.pod_affinity_term) for w in own.preferred_anti_affinity]
            for weight, term in weighted:
                if pod_affinity_term_matches(
                    term, placed.namespace, pod.namespace, pod.labels, self._namespace_labels
                ):
                    scores.add(placed, term.topology_key, weight)


def _equalities(selector: LabelSelector) -> Iterator[tuple[str, str]]:
    """Label pairs every selected pod must carry: matchLabels and single-valued In expressions."""
    yield from selector.match_labels.items()
    for expr in selector.match_expressions:
        if expr.operator == "In" and len(expr.values) == 1:
            yield expr.key, expr.values[0]


def _discard(index: dict[_K, dict[PlacedPod, None]], key: _K, pod: PlacedPod, *, required: bool) -> None:
    bucket = index.get(key)
    if bucket is None or pod not in bucket:
        if required:
            raise KeyError(
                f"pod on node {pod.node_name!r} in namespace {pod.namespace!r} is not in the index"
            )
        return
    del bucket[pod]
    if not bucket:
        del index[key]  # keep namespace iteration proportional to namespaces that still have pods


# --- one-node conveniences ----------------------------------------------------------------------


def _index_of(placed: Sequence[PlacedPod] | PlacedPodIndex) -> PlacedPodIndex:
    return placed if isinstance(placed, PlacedPodIndex) else PlacedPodIndex(placed)


def pod_affinity_required_ok(
    pod_namespace: str,
    pod_labels: Mapping[str, str],
    affinity: Affinity | None,
    node_labels: Mapping[str, str],
    placed: Sequence[PlacedPod] | PlacedPodIndex,
) -> bool:
    """The InterPodAffinity filter for one node. For many nodes, build a `PlacedPodIndex` once and use
    `required(...)`/`required_ok_for_nodes(...)`, which resolve the matching domains only once."""
    return _index_of(placed).required(pod_namespace, pod_labels, affinity).allows(node_labels)


def pod_affinity_preferred_score(
    pod_namespace: str,
    pod_labels: Mapping[str, str],
    affinity: Affinity | None,
    node_labels: Mapping[str, str],
    placed: Sequence[PlacedPod] | PlacedPodIndex,
    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
) -> int:
    """The raw InterPodAffinity score of one node: Σ weight × matching placed pods in the node's domain
    for preferred affinity, minus the same for preferred anti-affinity, plus the symmetric contributions
    of placed pods' own terms that select the incoming pod. Normalise across nodes with `normalize_scores`."""
    state = _index_of(placed).preferred(pod_namespace, pod_labels, affinity, hard_pod_affinity_weight)
    return state.score(node_labels)
