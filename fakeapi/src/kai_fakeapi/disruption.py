"""PodDisruptionBudgets: the status kube-controller-manager's disruption controller keeps on each budget,
and the budget check of the `pods/eviction` subresource, as Kubernetes' eviction REST handler makes it
(pkg/registry/core/pod/storage/eviction.go).

The controller here is synchronous: it recomputes a budget's status when the budget or one of its pods is
written (`observe`, called by the store after every commit), and when an eviction is about to read it
(`current`), so that `kubectl get pdb` and evictions see what a controller that keeps up would have
written. Switched off (`enabled = False`, a cluster whose controller manager is down), a budget keeps the
status it has, and one never processed refuses evictions as "still being processed".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .jsoncopy import clone
from .meta import Obj, format_time, parse_time
from .resources import ResourceType
from .selectors import label_selector_matches
from .versioned import Event, VersionedStore

PDB_KEY = "poddisruptionbudgets.policy"
DELETION_TIMEOUT = 120.0
"""Seconds an eviction's entry in `status.disruptedPods` waits for its pod to go (the controller's
DeletionTimeout); after that the pod counts again."""
MAX_DISRUPTED_PODS = 2000
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)


@dataclass(frozen=True)
class EvictionRefusal:
    """An eviction a disruption budget refused (see `Store.refused_evictions`)."""

    namespace: str
    name: str
    budget: str
    code: int
    message: str


def is_ready(pod: Obj) -> bool:
    """Kubernetes' notion of a healthy pod for budgets: its Ready condition is True."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def can_ignore_budgets(pod: Obj) -> bool:
    """Finished, never started and already terminating pods are evicted without a budget check."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def selects(budget: Obj, pod: Obj) -> bool:
    """Whether a budget covers a pod: same namespace, selector matches (a null selector matches none)."""
    if budget["metadata"].get("namespace") != pod["metadata"].get("namespace"):
        return False
    labels = pod["metadata"].get("labels") or {}
    return label_selector_matches((budget.get("spec") or {}).get("selector"), labels)


def _scaled(value: Any, total: int) -> int:
    """An int-or-percent against `total`, percentages rounded up (as the controller does)."""
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return math.ceil(int(value[:-1]) * total / 100)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"invalid value for IntOrString: {value!r}")


def _desired(spec: Obj, expected: int) -> tuple[int, int]:
    """(expectedPods, desiredHealthy). The controller takes a percentage (and maxUnavailable) against the
    scale of the pods' controllers; here, as a simplification, against the number of matching pods."""
    if spec.get("maxUnavailable") is not None:
        return expected, max(0, expected - _scaled(spec["maxUnavailable"], expected))
    if spec.get("minAvailable") is not None:
        return expected, _scaled(spec["minAvailable"], expected)
    return 0, 0


def computed_status(budget: Obj, pods: list[Obj], now: float) -> Obj:
    """The status the disruption controller would write for `budget` given its `pods`."""
    status = budget.get("status") or {}
    try:
        expected, desired = _desired(budget.get("spec") or {}, len(pods))
    except ValueError as exc:  # the controller's fail-safe: nothing may be disrupted
        return _with_condition(
            {**status, "disruptionsAllowed": 0}, status, now, False, "SyncFailed", str(exc)
        )
    disrupted: dict[str, str] = {}
    for pod in pods:
        when = (status.get("disruptedPods") or {}).get(pod["metadata"]["name"])
        if (
            when
            and not pod["metadata"].get("deletionTimestamp")
            and parse_time(when) + DELETION_TIMEOUT >= now
        ):
            disrupted[pod["metadata"]["name"]] = when
    healthy = sum(
        1
        for pod in pods
        if not pod["metadata"].get("deletionTimestamp")
        and pod["metadata"]["name"] not in disrupted
        and is_ready(pod)
    )
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    out: Obj = {"observedGeneration": budget["metadata"].get("generation", 1)}
    if disrupted:
        out["disruptedPods"] = disrupted
    out.update(
        {
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
        }
    )
    return _with_condition(out, status, now, allowed > 0)


def _with_condition(
    new: Obj, old: Obj, now: float, allowed: bool, reason: str = "", message: str = ""
) -> Obj:
    """`new` with the DisruptionAllowed condition set as `meta.SetStatusCondition` sets it: the transition
    time moves only when the condition's status does."""
    reason = reason or ("SufficientPods" if allowed else "InsufficientPods")
    value = "True" if allowed else "False"
    conditions = [clone(c) for c in old.get("conditions") or [] if c.get("type") != "DisruptionAllowed"]
    previous = next((c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
    since = (
        previous["lastTransitionTime"] if previous and previous.get("status") == value else format_time(now)
    )
    conditions.append(
        {
            "type": "DisruptionAllowed",
            "status": value,
            "observedGeneration": new.get("observedGeneration", old.get("observedGeneration", 0)),
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }
    )
    return {**new, "conditions": conditions}


class DisruptionBudgets:
    """The disruption controller (statuses) and the eviction handler's budget check, on the store."""

    def __init__(
        self,
        objects: VersionedStore,
        budgets: ResourceType,
        clock: Callable[[], float],
        *,
        enabled: bool = True,
    ) -> None:
        self.objects = objects
        self.budgets = budgets
        self.clock = clock
        self.enabled = enabled
        self.refused: list[EvictionRefusal] = []

    # ------------------------------------------------------------------------------------- controller

    def observe(self, ev: Event) -> None:
        """After a commit (lock held): a budget written, or a pod a budget selects (before or after the
        change), gets its status recomputed."""
        if not self.enabled or ev.key not in ("pods", PDB_KEY):
            return
        if ev.key == PDB_KEY:
            if ev.type != "DELETED":
                self.current(ev.obj)
            return
        namespace = ev.obj["metadata"].get("namespace") or ""
        for (ns, _), budget in list(self.objects.of_type(PDB_KEY).items()):
            if ns == namespace and (
                selects(budget, ev.obj) or (ev.prev is not None and selects(budget, ev.prev))
            ):
                self.current(budget)

    def current(self, budget: Obj) -> Obj:
        """The stored budget, its status brought up to date first when the controller runs (lock held)."""
        metadata = budget["metadata"]
        stored = self.objects.find(self.budgets, metadata.get("namespace"), metadata["name"])
        if stored is None or not self.enabled:
            return stored if stored is not None else budget
        pods = [p for p in self.objects.of_type("pods").values() if selects(stored, p)]
        status = computed_status(stored, pods, self.clock())
        if status == stored.get("status"):
            return stored
        new = clone(stored)
        new["status"] = status
        return self.objects.commit(self.budgets, "MODIFIED", new, stored)

    # ---------------------------------------------------------------------------------------- evictions

    def admit_eviction(self, pod: Obj, *, dry_run: bool) -> None:
        """The eviction handler's budget check for a pod that budgets guard (lock held): returns when the
        pod may go (the budget's status updated unless `dry_run`), raises the API server's refusal."""
        namespace = pod["metadata"]["namespace"]
        matching = [
            b for (ns, _), b in self.objects.of_type(PDB_KEY).items() if ns == namespace and selects(b, pod)
        ]
        if len(matching) > 1:
            self._refuse(
                pod,
                ", ".join(b["metadata"]["name"] for b in matching),
                ApiError(500, MULTIPLE_BUDGETS, reason=""),
            )
        if not matching:
            return
        budget = self.current(matching[0])
        status = budget.get("status") or {}
        policy = (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy")
        if not is_ready(pod):
            # An unhealthy pod does not count as healthy: evicting it leaves the budget as it is, when the
            # policy says so or the guarded application is not disrupted now.
            if policy == "AlwaysAllow":
                return
            desired = int(status.get("desiredHealthy", 0))
            if desired > 0 and int(status.get("currentHealthy", 0)) >= desired:
                return
        self._check_and_decrement(pod, budget, dry_run=dry_run)

    def _check_and_decrement(self, pod: Obj, budget: Obj, *, dry_run: bool) -> None:
        name = budget["metadata"]["name"]
        status = budget.get("status") or {}
        if int(status.get("observedGeneration", 0)) < int(budget["metadata"].get("generation", 1)):
            self._refuse(
                pod,
                name,
                _too_many_requests(
                    f"The disruption budget {name} is still being processed by the server.", 10
                ),
            )
        allowed = int(status.get("disruptionsAllowed", 0))
        if allowed < 0:
            self._refuse(pod, name, _forbidden(name, "pdb disruptions allowed is negative"))
        if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
            self._refuse(
                pod,
                name,
                _forbidden(
                    name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
                ),
            )
        if allowed == 0:
            self._refuse(
                pod,
                name,
                _too_many_requests(
                    f"The disruption budget {name} needs {int(status.get('desiredHealthy', 0))} healthy pods "
                    f"and has {int(status.get('currentHealthy', 0))} currently"
                ),
            )
        if dry_run:
            return
        new = clone(budget)
        new_status = new.setdefault("status", {})
        new_status["disruptionsAllowed"] = allowed - 1
        if allowed == 1:
            new["status"] = _with_condition(new_status, status, self.clock(), False)
        new["status"].setdefault("disruptedPods", {})[pod["metadata"]["name"]] = format_time(self.clock())
        self.objects.commit(self.budgets, "MODIFIED", new, budget)

    def _refuse(self, pod: Obj, budget: str, error: ApiError) -> None:
        metadata = pod["metadata"]
        self.refused.append(
            EvictionRefusal(metadata["namespace"], metadata["name"], budget, error.code, error.message)
        )
        raise error


def _too_many_requests(cause: str, retry_after: int | None = None) -> ApiError:
    return ApiError(
        429,
        VIOLATION,
        details={"causes": [{"reason": "DisruptionBudget", "message": cause}]},
        retry_after=retry_after,
    )


def _forbidden(name: str, why: str) -> ApiError:
    return ApiError(
        403,
        f'poddisruptionbudget.policy "{name}" is forbidden: {why}',
        details={"name": name, "group": "policy", "kind": "poddisruptionbudget"},
    )
