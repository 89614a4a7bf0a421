"""RBAC's objects as the authorizer reads them: policy rules and their matching, bindings and their
subjects, and the default policy every cluster starts with.

Rule matching is Kubernetes' (`rbac/v1` evaluation helpers): `*` matches every verb, API group and
resource, `*/status` the `status` subresource of every resource, a rule with `resourceNames` only
requests that name one of them, and `nonResourceURLs` match a path exactly or by a prefix ending in `*`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .auth import UserInfo, split_service_account
from .request_info import Attributes

ALL = "*"


@dataclass(frozen=True)
class Rule:
    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    resource_names: frozenset[str]
    urls: tuple[str, ...]

    @classmethod
    def of(cls, rule: Any) -> Rule:
        if not isinstance(rule, dict):
            rule = {}

        def strings(key: str) -> list[str]:
            value = rule.get(key) or []
            return [str(v) for v in value] if isinstance(value, list) else []

        return cls(
            frozenset(strings("verbs")),
            frozenset(strings("apiGroups")),
            frozenset(strings("resources")),
            frozenset(strings("resourceNames")),
            tuple(strings("nonResourceURLs")),
        )

    def allows(self, a: Attributes) -> bool:
        if ALL not in self.verbs and a.verb not in self.verbs:
            return False
        if not a.resource_request:
            return any(_url_matches(url, a.path) for url in self.urls)
        return (
            (ALL in self.api_groups or a.api_group in self.api_groups)
            and self._resource_matches(a)
            and (not self.resource_names or a.name in self.resource_names)
        )

    def _resource_matches(self, a: Attributes) -> bool:
        if ALL in self.resources or a.combined_resource in self.resources:
            return True
        return bool(a.subresource) and f"*/{a.subresource}" in self.resources


def _url_matches(rule_url: str, path: str) -> bool:
    if rule_url in (ALL, path):
        return True
    return rule_url.endswith("*") and path.startswith(rule_url.rstrip("*"))


@dataclass(frozen=True)
class Subject:
    kind: str
    name: str
    namespace: str

    def applies_to(self, user: UserInfo, binding_namespace: str) -> bool:
        if self.kind == "User":
            return user.username == self.name
        if self.kind == "Group":
            return self.name in user.groups
        if self.kind == "ServiceAccount":
            # A RoleBinding's ServiceAccount subject defaults to the binding's namespace.
            namespace = self.namespace or binding_namespace
            return bool(namespace) and split_service_account(user.username) == (namespace, self.name)
        return False

    def describe(self, binding_namespace: str) -> str:
        if self.kind == "ServiceAccount":
            return f'{self.kind} "{self.name}/{self.namespace or binding_namespace}"'
        return f'{self.kind} "{self.name}"'


@dataclass(frozen=True)
class Binding:
    """A ClusterRoleBinding (`namespace` "") or a RoleBinding."""

    name: str
    namespace: str
    role_kind: str
    role_name: str
    subjects: tuple[Subject, ...]

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Binding:
        metadata = obj.get("metadata") or {}
        ref = obj.get("roleRef") or {}
        subjects = tuple(
            Subject(str(s.get("kind", "")), str(s.get("name", "")), str(s.get("namespace") or ""))
            for s in obj.get("subjects") or []
            if isinstance(s, dict)
        )
        return cls(
            str(metadata.get("name", "")),
            str(metadata.get("namespace") or ""),
            str(ref.get("kind", "")),
            str(ref.get("name", "")),
            subjects,
        )

    def subject_for(self, user: UserInfo) -> Subject | None:
        return next((s for s in self.subjects if s.applies_to(user, self.namespace)), None)

    def describe(self, subject: Subject) -> str:
        """The binding as an allowing decision's reason names it."""
        if self.namespace:
            return (
                f'RoleBinding "{self.name}/{self.namespace}" of {self.role_kind} "{self.role_name}" '
                f"to {subject.describe(self.namespace)}"
            )
        return (
            f'ClusterRoleBinding "{self.name}" of {self.role_kind} "{self.role_name}" '
            f"to {subject.describe('')}"
        )


# The API server's bootstrap policy, as far as this server needs it: every authenticated user may read
# discovery, version and health (system:discovery, system:public-info-viewer) and review its own access
# (system:basic-user); system:masters is bound to cluster-admin. Objects of the same names in the store
# take their place.
_READ_DISCOVERY = {
    "verbs": ["get"],
    "nonResourceURLs": [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ],
}
DEFAULT_CLUSTER_ROLES: dict[str, tuple[Rule, ...]] = {
    "cluster-admin": (
        Rule.of({"apiGroups": [ALL], "resources": [ALL], "verbs": [ALL]}),
        Rule.of({"nonResourceURLs": [ALL], "verbs": [ALL]}),
    ),
    "system:discovery": (Rule.of(_READ_DISCOVERY),),
    "system:basic-user": (
        Rule.of(
            {
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                "verbs": ["create"],
            }
        ),
        Rule.of(
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}
        ),
    ),
    "system:public-info-viewer": (
        Rule.of(
            {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]}
        ),
    ),
}


def _group_binding(name: str, *groups: str) -> Binding:
    return Binding(name, "", "ClusterRole", name, tuple(Subject("Group", g, "") for g in groups))


DEFAULT_CLUSTER_ROLE_BINDINGS: tuple[Binding, ...] = (
    _group_binding("cluster-admin", "system:masters"),
    _group_binding("system:basic-user", "system:authenticated"),
    _group_binding("system:discovery", "system:authenticated"),
    _group_binding("system:public-info-viewer", "system:authenticated", "system:unauthenticated"),
)
