"""The rules of an `AccountedResource` (scheduling.run.ai/v1alpha1, cluster-scoped; its model is in
`objects.py`) that its schema cannot say, as KAI's phase-1 design (`docs/developer/designs/
accounted-resource-api.md`, KAI issue #1087) leaves them to its admission webhook: one source kind per
source, a quantity or match only where the source can use it, units that are units. What the scheduler
charges for each source is `model.accounted`'s.
"""

from __future__ import annotations

from kai_scheduler.api.objects import AccountedResource, AccountedResourceSource
from kai_scheduler.api.quantity import parse_quantity

# A quantity's unit as a source gives it: a Kubernetes suffix (Mi, Gi, k, ...), or `percent` for a plain
# number (GPU compute), or nothing (a plain number).
PLAIN_UNITS = frozenset({"", "percent"})


class SourceProblem(ValueError):
    """A source breaks one of the design's rules: `field` (under spec) and the message."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def check_accounted_resource(resource: AccountedResource) -> None:
    """The design's cross-field rules, which its admission webhook enforces: each source sets exactly one of
    resourceName, dra and podAnnotation; a DRA quantity only for a DRA source, an annotation quantity only
    for an annotation source; a DRA match only for a DRA source. Raises SourceProblem."""
    for index, source in enumerate(resource.spec.sources):
        where = f"spec.sources[{index}]"
        kinds = [
            name
            for name, value in (
                ("resourceName", source.resource_name),
                ("dra", source.dra),
                ("podAnnotation", source.pod_annotation),
            )
            if value is not None
        ]
        if len(kinds) != 1:
            found = ", ".join(kinds) if kinds else "none"
            raise SourceProblem(
                where, f"set exactly one of resourceName, dra and podAnnotation (found: {found})"
            )
        quantity = source.quantity
        if quantity is not None and quantity.dra is not None and source.dra is None:
            raise SourceProblem(f"{where}.quantity.dra", "a DRA quantity needs a dra source")
        if quantity is not None and quantity.pod_annotation is not None and source.pod_annotation is None:
            raise SourceProblem(
                f"{where}.quantity.podAnnotation", "an annotation quantity needs a podAnnotation source"
            )
        if source.match is not None and source.match.dra is not None and source.dra is None:
            raise SourceProblem(f"{where}.match.dra", "a DRA match needs a dra source")
        for unit_field, unit in _units(source):
            if not unit_valid(unit):
                raise SourceProblem(
                    f"{where}.{unit_field}",
                    f"unknown unit {unit!r}: a quantity suffix (Ki, Mi, Gi, k, M, G, ...) or percent",
                )


def _units(source: AccountedResourceSource) -> list[tuple[str, str]]:
    units = []
    if source.pod_annotation is not None:
        units.append(("podAnnotation.unit", source.pod_annotation.unit))
    quantity = source.quantity
    if quantity is not None and quantity.pod_annotation is not None:
        units.append(("quantity.podAnnotation.unit", quantity.pod_annotation.unit))
    if quantity is not None and quantity.dra is not None and quantity.dra.opaque_config_field is not None:
        units.append(("quantity.dra.opaqueConfigField.unit", quantity.dra.opaque_config_field.unit))
    return units


def unit_valid(unit: str) -> bool:
    return unit in PLAIN_UNITS or unit_factor(unit) is not None


def unit_factor(unit: str) -> float | None:
    """What one of `unit` is as a plain number (Mi: 2**20); None for a unit that is not one."""
    if unit in PLAIN_UNITS:
        return 1.0
    try:
        return float(parse_quantity(f"1{unit}"))
    except ValueError:
        return None
