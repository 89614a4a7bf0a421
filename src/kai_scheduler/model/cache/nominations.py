"""The pods a cycle pipelined, each with its nominated node and shared GPUs: a promise for the next cycle
only (KAI's pipelined tasks), which the cache hands to that cycle's tasks and then forgets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kai_scheduler.model.snapshot import PodState

Nomination = tuple[str, tuple[str, ...]]  # node name, shared GPU groups


class Nominations:
    __slots__ = ("by_pod",)

    def __init__(self) -> None:
        self.by_pod: dict[str, Nomination] = {}

    def replace(self, pipelined: Mapping[str, Nomination]) -> list[str]:
        """Every earlier nomination gives way to `pipelined` (pod key -> nomination); the pods whose
        nomination changed."""
        by_pod = self.by_pod
        changed = [key for key in by_pod.keys() | pipelined.keys() if by_pod.get(key) != pipelined.get(key)]
        self.by_pod = dict(pipelined)
        return changed

    def of(self, state: PodState) -> PodState:
        """`state` with the cache's nomination of its pod (none: as it is)."""
        by_pod = self.by_pod
        if not by_pod:  # the usual case, and every pod of a first cycle: no key to work out
            return state
        nominated = by_pod.get(state.pod.key)
        if nominated is None:
            return state
        return replace(state, nominated_node=nominated[0], nominated_gpu_groups=nominated[1])
