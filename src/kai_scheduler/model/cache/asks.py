"""What a pod asks for as the cache accounts it: its own request, placement and host ports
(`model.builder.PodDerivations`, once per pod object), with what its DRA claims add."""

from __future__ import annotations

from kai_scheduler.api.objects import Pod
from kai_scheduler.model.builder import PodDerivations
from kai_scheduler.model.cache.dra_inputs import Derived, DraInputs


class PodAsks:
    """`derivations` may be replaced by one another cache shares (`model.shard_caches`): a pod's own ask does
    not depend on which cache holds it. Its claims' part does (each cache holds its own claims)."""

    __slots__ = ("derivations", "dra")

    def __init__(self, dra: DraInputs) -> None:
        self.derivations = PodDerivations()
        self.dra = dra

    def of(self, pod: Pod) -> Derived:
        derived = self.derivations.of(pod)
        if not pod.spec.resource_claims:
            return derived
        return self.dra.derive(pod.key, derived)
