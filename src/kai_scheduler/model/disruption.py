"""PodDisruptionBudgets as the victim search sees them: which pods each budget covers, and how many of
them may still be disrupted in this cycle.

Kubernetes' eviction API refuses an eviction beyond a budget; KAI deletes its victims instead, so a budget
never blocks a preemption there. We delete too, but go beyond KAI as kube-scheduler's preemption does: the
victim search first looks for victims within every budget, and takes victims beyond one only when no such
choice makes room, saying so in the eviction's reason (`actions.solvers.victim_search`, `Statement.commit`).

A budget's allowed disruptions are those its status gives when the status is current (live mode: the
disruption controller keeps it), else what that controller would compute from the pods: healthy pods
(running, not terminating) minus the desired healthy count from `minAvailable` or `maxUnavailable`, where
a percentage is of the budget's pods that have not finished (the controller asks the pods' owner for its
scale; the pods themselves are what a snapshot has).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kai_scheduler.api.objects import PodDisruptionBudget
from kai_scheduler.model.matching import label_selector_matches
from kai_scheduler.model.snapshot import PodState

_FINISHED = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class Budget:
    key: str  # namespace/name
    allowed: int  # disruptions allowed when the cycle began


class DisruptionBudgets:
    """The budgets of one snapshot, with the disruptions the session has committed against them."""

    def __init__(self, budgets: Sequence[Budget], covering: dict[str, tuple[int, ...]]) -> None:
        self.budgets = list(budgets)
        self.covering = covering  # pod key -> the indexes of the budgets that cover it
        self.used = [0] * len(self.budgets)

    @staticmethod
    def of(budgets: Sequence[PodDisruptionBudget], pods: Iterable[PodState]) -> DisruptionBudgets | None:
        """The budgets that cover some running pod (None when none does: the search then works as KAI's)."""
        by_namespace: dict[str, list[tuple[int, PodDisruptionBudget]]] = {}
        for index, budget in enumerate(budgets):
            if budget.spec.selector is not None:  # policy/v1: a null selector selects no pod
                by_namespace.setdefault(budget.namespace, []).append((index, budget))
        if not by_namespace:
            return None
        members: dict[int, list[PodState]] = {}
        for state in pods:
            for index, budget in by_namespace.get(state.pod.namespace, ()):
                if label_selector_matches(budget.spec.selector, state.pod.metadata.labels):
                    members.setdefault(index, []).append(state)
        chosen: list[Budget] = []
        covering: dict[str, list[int]] = {}
        for index, states in members.items():
            running = [s for s in states if s.phase == "Running" and not s.terminating]
            if not running:
                continue
            budget = budgets[index]
            for state in running:
                covering.setdefault(state.pod.key, []).append(len(chosen))
            chosen.append(Budget(budget.key, allowed_disruptions(budget, states)))
        if not chosen:
            return None
        return DisruptionBudgets(chosen, {key: tuple(indexes) for key, indexes in covering.items()})

    def remaining(self) -> list[int]:
        """Disruptions each budget still allows in this cycle."""
        return [budget.allowed - used for budget, used in zip(self.budgets, self.used, strict=True)]

    def covers(self, pod: str) -> tuple[int, ...]:
        return self.covering.get(pod, ())

    def disrupt(self, pod: str) -> list[Budget]:
        """Count a committed eviction of `pod`; the budgets it takes beyond what they allow."""
        beyond = []
        for index in self.covering.get(pod, ()):
            self.used[index] += 1
            if self.used[index] > self.budgets[index].allowed:
                beyond.append(self.budgets[index])
        return beyond


def beyond_note(beyond: Sequence[Budget]) -> str:
    """What an eviction's reason adds when it goes beyond budgets (empty when it does not)."""
    if not beyond:
        return ""
    names = ", ".join(f"{budget.key} (allowed {budget.allowed})" for budget in beyond)
    plural = "s" if len(beyond) > 1 else ""
    return f"; beyond PodDisruptionBudget{plural} {names}: no choice of victims within the budgets made room"


def allowed_disruptions(budget: PodDisruptionBudget, pods: Sequence[PodState]) -> int:
    """The budget's current `disruptionsAllowed`: from its status when that is current, else computed as the
    disruption controller does from `pods` (the pods the budget selects)."""
    status = budget.status
    if (
        status is not None
        and status.disruptions_allowed is not None
        and status.observed_generation >= budget.metadata.generation
    ):
        return max(0, status.disruptions_allowed)
    expected = sum(1 for state in pods if state.phase not in _FINISHED)
    healthy = sum(1 for state in pods if state.phase == "Running" and not state.terminating)
    spec = budget.spec
    if spec.max_unavailable is not None:
        desired = max(0, expected - _scaled(spec.max_unavailable, expected))
    elif spec.min_available is not None:
        desired = _scaled(spec.min_available, expected)
    else:
        desired = 0
    return max(0, healthy - desired)


def _scaled(value: int | str, total: int) -> int:
    """An IntOrString against `total`: a count as it is, a percentage rounded up (as Kubernetes does for
    both fields of a budget)."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


__all__ = ["Budget", "DisruptionBudgets", "allowed_disruptions", "beyond_note"]
