"""RBAC authorization with Kubernetes' semantics, from the Roles, ClusterRoles, RoleBindings and
ClusterRoleBindings in the store (`rbac_rules.py`: the rules, subjects and default policy).

A ClusterRoleBinding grants its ClusterRole everywhere; a RoleBinding in namespace N grants its Role (of
N) or ClusterRole in N only. `system:masters` is not asked about (the API server lets it through before
RBAC). A ClusterRole with an `aggregationRule` has the rules of the ClusterRoles its selectors pick, as
the aggregation controller would write them. A binding whose role is missing does not stop the search;
if nothing allows the request, the reason names what was missing (`RBAC: clusterrole... not found`), as
the real authorizer's does.

The store's objects are read again after any of them changed: the authorizer follows its own watches on
the store (as the real one follows informers), so a `kubectl apply` of a chart's RBAC takes effect for
the next request. Decisions are remembered until then.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .auth import UserInfo
from .meta import Obj
from .rbac_rules import DEFAULT_CLUSTER_ROLE_BINDINGS, DEFAULT_CLUSTER_ROLES, Binding, Rule
from .request_info import Attributes
from .selectors import label_selector_matches
from .store import Store
from .versioned import Watcher

PRIVILEGED_GROUP = "system:masters"
RBAC_RESOURCES = ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
_RBAC_GROUP = "rbac.authorization.k8s.io"
_MAX_REMEMBERED = 50_000


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


@dataclass
class Policy:
    """The store's RBAC objects at one moment, indexed for evaluation."""

    cluster_bindings: list[Binding] = field(default_factory=list)
    bindings: dict[str, list[Binding]] = field(default_factory=dict)  # by namespace
    roles: dict[tuple[str, str], tuple[Rule, ...]] = field(default_factory=dict)
    cluster_roles: dict[str, tuple[Rule, ...]] = field(default_factory=dict)

    def rules_of(self, binding: Binding) -> tuple[Rule, ...] | str:
        """The rules a binding grants, or the error the real resolver reports when its role is missing."""
        if binding.role_kind == "ClusterRole":
            rules = self.cluster_roles.get(binding.role_name)
            return rules if rules is not None else _not_found("clusterrole", binding.role_name)
        if binding.role_kind == "Role":
            rules = self.roles.get((binding.namespace, binding.role_name))
            return rules if rules is not None else _not_found("role", binding.role_name)
        return f'unsupported role reference kind: "{binding.role_kind}"'

    def evaluate(self, user: UserInfo, a: Attributes) -> Decision:
        errors: list[str] = []
        candidates = list(self.cluster_bindings)
        if a.namespace:
            candidates += self.bindings.get(a.namespace, [])
        for binding in candidates:
            subject = binding.subject_for(user)
            if subject is None:
                continue
            rules = self.rules_of(binding)
            if isinstance(rules, str):
                errors.append(rules)
                continue
            if any(rule.allows(a) for rule in rules):
                return Decision(True, f"RBAC: allowed by {binding.describe(subject)}")
        if not errors:
            return Decision(False)
        unique = list(dict.fromkeys(errors))
        return Decision(False, "RBAC: " + (unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]"))


def _not_found(kind: str, name: str) -> str:
    return f'{kind}.{_RBAC_GROUP} "{name}" not found'


def build_policy(objects: dict[str, list[Obj]]) -> Policy:
    """The policy of the RBAC objects (by resource name), over the default one."""
    policy = Policy()
    named = {str(b.name): b for b in DEFAULT_CLUSTER_ROLE_BINDINGS}
    for obj in objects["clusterrolebindings"]:
        binding = Binding.of(obj)
        named[binding.name] = binding
    policy.cluster_bindings = [named[name] for name in sorted(named)]
    for obj in sorted(objects["rolebindings"], key=lambda o: o["metadata"]["name"]):
        binding = Binding.of(obj)
        policy.bindings.setdefault(binding.namespace, []).append(binding)
    for obj in objects["roles"]:
        metadata = obj["metadata"]
        policy.roles[(metadata.get("namespace", ""), metadata["name"])] = _rules(obj)
    policy.cluster_roles = dict(DEFAULT_CLUSTER_ROLES)
    stored = {o["metadata"]["name"]: o for o in objects["clusterroles"]}
    for name in sorted(stored):
        policy.cluster_roles[name] = _aggregated(name, stored, set())
    return policy


def _rules(obj: Obj) -> tuple[Rule, ...]:
    return tuple(Rule.of(r) for r in obj.get("rules") or [])


def _aggregated(name: str, stored: dict[str, Obj], seen: set[str]) -> tuple[Rule, ...]:
    """A ClusterRole's rules; for an aggregated one, the rules of the ClusterRoles its selectors pick
    (transitively, in name order, without repeats), in place of its own."""
    role = stored[name]
    aggregation = role.get("aggregationRule")
    if not isinstance(aggregation, dict):
        return _rules(role)
    seen = seen | {name}
    out: dict[Rule, None] = {}
    for selector in aggregation.get("clusterRoleSelectors") or []:
        for other in sorted(stored):
            labels = stored[other]["metadata"].get("labels") or {}
            if other in seen or not label_selector_matches(selector, labels):
                continue
            out.update(dict.fromkeys(_aggregated(other, stored, seen)))
    return tuple(out)


class RbacAuthorizer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._types = [store.resource(f"{plural}.{_RBAC_GROUP}") for plural in RBAC_RESOURCES]
        self._watches: list[Watcher] = [store.objects.open_watch(rt, None)[0] for rt in self._types]
        self._lock = threading.Lock()
        self._policy: Policy | None = None
        self._decisions: dict[tuple[UserInfo, Attributes], Decision] = {}

    def authorize(self, user: UserInfo, a: Attributes) -> Decision:
        if PRIVILEGED_GROUP in user.groups:
            return Decision(True)
        with self._lock:
            policy = self._current()
            key = (user, a)
            decision = self._decisions.get(key)
            if decision is None:
                decision = policy.evaluate(user, a)
                if len(self._decisions) >= _MAX_REMEMBERED:
                    self._decisions.clear()
                self._decisions[key] = decision
            return decision

    def _current(self) -> Policy:
        """The policy, read again when a watch saw a change (lock held)."""
        changed = False
        for watcher in self._watches:
            while not watcher.items.empty():
                watcher.items.get_nowait()
                changed = True
        if self._policy is None or changed:
            with self.store.objects.lock:
                objects = {rt.plural: list(self.store.objects.of_type(rt.key).values()) for rt in self._types}
                self._policy = build_policy(objects)
            self._decisions.clear()
        return self._policy
