"""What KAI v0.17 refuses in a Topology's levels beyond their schema (#1788): its validating webhook's
alias rules (`topologyhooks/topology_validator.go`, same words) and its CRD's rule that the node labels,
in order, never change while the aliases may."""

from __future__ import annotations

from collections.abc import Sequence

from kai_scheduler.api.objects import TopologyLevel

IMMUTABLE_NODE_LABELS = "nodeLabel structure is immutable; only aliases may be edited"


def alias_problem(levels: Sequence[TopologyLevel]) -> str | None:
    """Why the levels' aliases are refused: one used twice, or one that is a level's node label."""
    node_labels = {level.node_label for level in levels}
    seen: set[str] = set()
    duplicates: list[str] = []
    collisions: list[str] = []
    for level in levels:
        if not level.alias:
            continue
        if level.alias in seen:
            duplicates.append(level.alias)
        seen.add(level.alias)
        if level.alias in node_labels:
            collisions.append(level.alias)
    problems = []
    if duplicates:
        problems.append(f"aliases must be unique within the topology; duplicated: {_go_list(duplicates)}")
    if collisions:
        problems.append(f"an alias must not equal a nodeLabel; conflicting: {_go_list(collisions)}")
    return f"invalid topology aliases: {'; '.join(problems)}" if problems else None


def update_problem(old: Sequence[TopologyLevel], new: Sequence[TopologyLevel]) -> str | None:
    """Why a change of the levels is refused: their node labels, in order, are not those they were."""
    if [level.node_label for level in old] != [level.node_label for level in new]:
        return IMMUTABLE_NODE_LABELS
    return None


def _go_list(values: list[str]) -> str:
    """A sorted []string as Go's %v prints it."""
    return f"[{' '.join(sorted(values))}]"
