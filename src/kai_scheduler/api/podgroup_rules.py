"""How many members a PodGroup and its sub-groups require, checked as KAI v0.17's PodGroup webhook checks it
(`podgroup_webhook.go`: `validatePodGroupSpec`, `validateSubGroupMinFields`), with KAI's words.

A PodGroup states its threshold with `minMember` (pods) or `minSubGroup` (direct sub-groups), never both;
a leaf sub-group needs `minMember`, a sub-group with children takes `minSubGroup` (unset: all of them)
and no `minMember`. Most breaches are refused; two only warn: a `minSubGroup` larger than the number of
children (on create and update), and `minMember` on a sub-group with children, refused on create but
only warned of on update so that PodGroups written before the rule can still change.

The graph itself (unique names, parents that exist, no cycles) is `manifests.check_sub_groups`'s, which
runs first; `min_findings` assumes it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kai_scheduler.api.objects import PodGroupSpec, SubGroup


class Severity(Enum):
    STRUCTURAL = "structural"  # refused, and nothing else is looked at
    ERROR = "error"  # refused
    WARN_ON_UPDATE = "warn-on-update"  # refused on create, a warning on update
    WARNING = "warning"  # never refused


@dataclass(frozen=True)
class Finding:
    field: str
    message: str
    severity: Severity

    def refused(self, *, update: bool) -> bool:
        if self.severity is Severity.WARN_ON_UPDATE:
            return not update
        return self.severity is not Severity.WARNING


def min_findings(spec: PodGroupSpec) -> list[Finding]:
    """What KAI's webhook finds wrong with the PodGroup's minimums, in its order: a structural finding
    alone, else the sub-groups' (by name) and then the PodGroup's own."""
    if spec.min_member is not None and spec.min_sub_group is not None:
        message = (
            f"minMember and minSubGroup are mutually exclusive: set minMember ({spec.min_member}) to "
            "schedule a fixed number of pods, or set minSubGroup to require a minimum number of child "
            "SubGroups, but not both"
        )
        return [Finding("spec.minSubGroup", message, Severity.STRUCTURAL)]
    children: dict[str, int] = {}
    for sub in spec.sub_groups:
        if sub.parent is not None:
            children[sub.parent] = children.get(sub.parent, 0) + 1
    position = {sub.name: index for index, sub in enumerate(spec.sub_groups)}
    found: list[Finding] = []
    for name in sorted(position):
        index = position[name]
        sub = spec.sub_groups[index]
        problems = _sub_group_findings(sub, f"spec.subGroups[{index}]", children.get(name, 0))
        if problems and problems[0].severity is Severity.STRUCTURAL:
            return problems
        found += problems
    if spec.min_sub_group is not None:
        if spec.min_sub_group < 1:
            message = "minSubGroup at the podgroup level must be equal to or greater than 1"
            return [*found, Finding("spec.minSubGroup", message, Severity.ERROR)]
        roots = sum(1 for sub in spec.sub_groups if sub.parent is None)
        if spec.min_sub_group > roots:
            message = (
                f"minSubGroup ({spec.min_sub_group}) exceeds the number of direct child SubGroups ({roots})"
            )
            found.append(Finding("spec.minSubGroup", message, Severity.WARNING))
    return found


def _sub_group_findings(sub: SubGroup, path: str, children: int) -> list[Finding]:
    name = sub.name
    if sub.min_member is not None and sub.min_sub_group is not None:
        message = f'subgroup "{name}": minMember and minSubGroup are mutually exclusive'
        return [Finding(f"{path}.minSubGroup", message, Severity.STRUCTURAL)]
    found = []
    if children == 0:
        if sub.min_sub_group is not None:
            message = f'subgroup "{name}": minSubGroup cannot be set on a leaf SubGroup (no child SubGroups)'
            found.append(Finding(f"{path}.minSubGroup", message, Severity.ERROR))
        if sub.min_member is None:
            found.append(
                Finding(f"{path}.minMember", f"subgroup {name}: minMember is required", Severity.ERROR)
            )
        return found
    if sub.min_member is not None:
        message = (
            f'subgroup "{name}": minMember cannot be set on a mid-level SubGroup (has child SubGroups); '
            "use minSubGroup instead"
        )
        found.append(Finding(f"{path}.minMember", message, Severity.WARN_ON_UPDATE))
    if sub.min_sub_group is not None and sub.min_sub_group > children:
        message = (
            f'subgroup "{name}": minSubGroup ({sub.min_sub_group}) exceeds the number of direct child '
            f"SubGroups ({children})"
        )
        found.append(Finding(f"{path}.minSubGroup", message, Severity.WARNING))
    return found
