"""Which admission webhooks a request goes to, as kube-apiserver decides it: a webhook's `rules`
(operations, API groups and versions, resources with `*/status`-style subresources, scope), its
`namespaceSelector` (the namespace's labels), its `objectSelector` (the new or the old object's labels),
and its `matchPolicy` (Equivalent: a rule for another version of the same resource matches too)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .admission_request import Attributes, Kind
from .errors import not_found
from .meta import Obj
from .resources import Registry, ResourceType
from .selectors import label_selector_matches

EXEMPT_GROUP = "admissionregistration.k8s.io"
"""Webhook configurations themselves are never sent to webhooks (one could lock the cluster out)."""

NamespaceLabels = Callable[[str], "dict[str, str] | None"]
"""A namespace's labels, None when there is no such namespace."""


@dataclass(frozen=True)
class Invocation:
    """A webhook to call, and the resource and kind it gets the object as (another version of the
    request's own under matchPolicy Equivalent)."""

    rt: ResourceType
    kind: Kind


def invocation(
    hook: Obj, attrs: Attributes, registry: Registry, namespace_labels: NamespaceLabels
) -> Invocation | None:
    """The webhook's invocation for this request, or None when the webhook is not for it. A namespace that
    does not exist is the server's 404 (only for a webhook whose rules match)."""
    if attrs.rt.group == EXEMPT_GROUP:
        return None
    found = _by_rules(hook, attrs, registry)
    if found is None or not _object_selected(hook, attrs):
        return None
    return found if _namespace_selected(hook, attrs, namespace_labels) else None


def _by_rules(hook: Obj, attrs: Attributes, registry: Registry) -> Invocation | None:
    rules = [r for r in hook.get("rules") or [] if isinstance(r, dict)]
    if any(rule_matches(r, attrs, attrs.rt) for r in rules):
        return Invocation(attrs.rt, attrs.object_kind)
    if (hook.get("matchPolicy") or "Equivalent") != "Equivalent":
        return None
    others = [rt for rt in registry if rt.key == attrs.rt.key and rt.version != attrs.rt.version]
    for rule in rules:  # earlier rules first, as the API server honours them
        for other in others:
            if rule_matches(rule, attrs, other):
                group, _, kind = attrs.object_kind
                return Invocation(other, (group, other.version, kind))
    return None


def rule_matches(rule: Obj, attrs: Attributes, rt: ResourceType) -> bool:
    """One rule against the request, taken as a request for `rt` (the request's resource or an equivalent)."""
    operations = rule.get("operations") or []
    if "*" not in operations and attrs.operation not in operations:
        return False
    if not _listed(rule.get("apiGroups"), rt.group) or not _listed(rule.get("apiVersions"), rt.version):
        return False
    if not any(
        _resource_matches(str(entry), rt.plural, attrs.subresource or "")
        for entry in rule.get("resources") or []
    ):
        return False
    scope = rule.get("scope") or "*"
    is_namespace = rt.key == "namespaces"
    if scope == "Namespaced":
        return not is_namespace and bool(attrs.namespace)
    if scope == "Cluster":
        return is_namespace or not attrs.namespace
    return True


def _listed(values: object, value: str) -> bool:
    return isinstance(values, list) and ("*" in values or value in values)


def _resource_matches(entry: str, plural: str, subresource: str) -> bool:
    """`pods` is the resource alone, `pods/status` one subresource, `*/status` that subresource of any
    resource, `pods/*` the resource and all its subresources, `*` every resource without subresources."""
    resource, _, sub = entry.partition("/")
    return resource in ("*", plural) and sub in ("*", subresource)


def _object_selected(hook: Obj, attrs: Attributes) -> bool:
    selector = hook.get("objectSelector")
    if _everything(selector):
        return True
    return any(
        isinstance(obj, dict)
        and label_selector_matches(selector, (obj.get("metadata") or {}).get("labels") or {})
        for obj in (attrs.object, attrs.old_object)
    )


def _namespace_selected(hook: Obj, attrs: Attributes, namespace_labels: NamespaceLabels) -> bool:
    selector = hook.get("namespaceSelector")
    is_namespace = attrs.rt.key == "namespaces"
    if (not attrs.namespace and not is_namespace) or _everything(selector):
        return True  # a cluster-scoped object other than a namespace is never exempted
    if is_namespace and not attrs.subresource:
        # A namespace's own request: its labels are the object's (the old one's for a delete).
        obj = attrs.object if attrs.object is not None else attrs.old_object
        labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    else:
        found = namespace_labels(str(attrs.namespace))
        if found is None:
            raise not_found("namespaces", str(attrs.namespace))
        labels = found
    return label_selector_matches(selector, labels)


def _everything(selector: object) -> bool:
    """An absent or empty selector selects everything."""
    return selector is None or (
        isinstance(selector, dict)
        and not selector.get("matchLabels")
        and not selector.get("matchExpressions")
    )
