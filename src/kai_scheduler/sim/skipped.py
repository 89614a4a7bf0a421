"""Objects of kinds the scheduler does not model, which the simulator's input may hold all the same: a KAI
user applies a whole folder (a `ComputeDomain`, a `Service`, a `Secret` beside the pods), and the run must
go on without them rather than stop. They are skipped, and one warning lists them by kind.

What is still an error: a document without `apiVersion` or `kind`, a kind the simulator reads under the
wrong apiVersion (`v2 Queue`), and a kind close to one it reads (`Nod`): those are typos, not other kinds.

A pod can depend on a skipped object in one way the scheduler sees: through a ResourceClaimTemplate that
the skipped object's controller makes. KAI's DRA example does exactly that: a `ComputeDomain` names, in
`spec.channel.resourceClaimTemplate.name`, the template that the NVIDIA DRA driver's controller creates
in its namespace, and the pod's `resourceClaims` name that template. Here no controller makes it, so the
pod waits (KAI's reason: no resource claim name found for the pod); the warning names the pod, the
template and the object that would have made it. (Other references a pod can make to an arbitrary kind,
an owner reference for one, change nothing the scheduler decides: such pods are scheduled as usual.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kai_scheduler.api.manifests import SUPPORTED_KINDS
from kai_scheduler.api.objects import Pod, ResourceClaimTemplate
from kai_scheduler.api.strict import did_you_mean

_MODELLED_KINDS = frozenset(kind for _, kind in SUPPORTED_KINDS)
# Where an object names a ResourceClaimTemplate its controller makes: the mapping under this key holds
# its `name` (ComputeDomain's `spec.channel.resourceClaimTemplate`).
_TEMPLATE_KEY = "resourceClaimTemplate"
_MAX_NAMED = 3


@dataclass(frozen=True, slots=True)
class SkippedObject:
    """An input object of a kind the scheduler does not model; `where` locates it as messages do."""

    api_version: str
    kind: str
    namespace: str
    name: str
    where: str
    templates: tuple[str, ...]  # ResourceClaimTemplates (names, in `namespace`) that its controller makes

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


def is_unmodelled(doc: Any) -> bool:
    """Whether `doc` is of a kind the scheduler does not model (see the module doc for what stays an error).
    Workload kinds, which the simulator runs, are the caller's to tell apart."""
    if not isinstance(doc, dict):
        return False
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        return False
    return kind not in _MODELLED_KINDS and not _near_a_modelled_kind(kind)


@cache
def _near_a_modelled_kind(kind: str) -> bool:
    # Once per kind: an input can hold thousands of objects of one kind the scheduler does not model.
    return did_you_mean(kind, _MODELLED_KINDS) is not None


def skipped_object(doc: dict[str, Any], where: str) -> SkippedObject:
    """An unmodelled document (`is_unmodelled`) as what the warnings say of it."""
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    namespace, name = meta.get("namespace"), meta.get("name")
    spec = doc.get("spec")
    return SkippedObject(
        doc["apiVersion"],
        doc["kind"],
        namespace if isinstance(namespace, str) else "",
        name if isinstance(name, str) and name else "(no name)",
        where,
        tuple(sorted(set(_templates_named(spec)))),
    )


def _templates_named(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == _TEMPLATE_KEY and isinstance(item, Mapping) and isinstance(item.get("name"), str):
                yield item["name"]
            else:
                yield from _templates_named(item)
    elif isinstance(value, list):
        for item in value:
            yield from _templates_named(item)


def skipped_warnings(skipped: Sequence[SkippedObject], objects: Sequence[Any]) -> list[str]:
    """One line listing the skipped objects by kind (count and first names), then one per pod that waits
    for a ResourceClaimTemplate only a skipped object's controller would make. `objects` are the loaded
    ones (pods and claim templates among them)."""
    if not skipped:
        return []
    by_kind: dict[str, list[SkippedObject]] = {}
    for entry in skipped:
        by_kind.setdefault(f"{entry.api_version} {entry.kind}", []).append(entry)
    parts = []
    for kind, entries in sorted(by_kind.items()):
        names = ", ".join(entry.ref.split(" ", 1)[1] for entry in entries[:_MAX_NAMED])
        more = f", ... ({len(entries) - _MAX_NAMED} more)" if len(entries) > _MAX_NAMED else ""
        parts.append(f"{kind} x{len(entries)} ({names}{more})")
    lines = [
        f"skipped {len(skipped)} objects of kinds the scheduler does not model: {'; '.join(parts)}; "
        f"the first is in {skipped[0].where}"
    ]
    return lines + list(_waiting_pods(skipped, objects))


def _waiting_pods(skipped: Sequence[SkippedObject], objects: Sequence[Any]) -> Iterator[str]:
    makers: dict[str, SkippedObject] = {}
    for entry in skipped:
        for template in entry.templates:
            makers.setdefault(f"{entry.namespace or 'default'}/{template}", entry)
    if not makers:
        return
    given = {obj.key for obj in objects if isinstance(obj, ResourceClaimTemplate)}
    counts: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], Pod] = {}
    for obj in objects:
        if not isinstance(obj, Pod):
            continue
        for claim in obj.spec.resource_claims:
            key = f"{obj.namespace}/{claim.resource_claim_template_name}"
            if claim.resource_claim_template_name and key not in given and key in makers:
                counts[(key, makers[key].ref)] += 1
                first.setdefault((key, makers[key].ref), obj)
    for (key, maker), count in counts.items():
        pod = first[(key, maker)]
        others = f" (and {count - 1} more pods)" if count > 1 else ""
        yield (
            f"Pod {pod.key}{others} waits: its ResourceClaimTemplate {key} is made by {maker}'s "
            f"controller, and {maker.split(' ', 1)[0]} is not modelled here (give the template in the "
            "input to schedule the pod)"
        )
