"""The nodes passing each placement's static predicates, kept from one session to the next while what they
read stays (issue #23, point 1: a cycle after one change costs what changed).

A static predicate (`ExtensionPoints.static_predicates`: cordon, readiness, node affinity and selector,
taints, volume binding) reads of a pod only its placement constraints, and of the cluster only the node
table's static facts (`NodeTable.specs`, a new list once any node's facts change) and the storage objects
(the same object until they change). So while the specs list and the storage are the same objects and the
session's static predicates are the same by name and words (the plugins and their configuration are
those of one scheduler), each placement's masks (`Session._static`) and the few rows they leave
(`Session._few_candidates`) are those the last session worked out: a trickle cycle at 5,000 nodes asks
some 180 placements, each a walk over every node, while a pod arrived or completed.

With `verify` (`KAI_SCHEDULER_VERIFY_REUSE=1`) every carried mask is worked out again when a session
starts from it, and a difference raises `CarriedMismatch`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kai_scheduler.model.nodes import BoolArray, IntArray, NodeSpecInfo
from kai_scheduler.model.storage import Storage

if TYPE_CHECKING:
    from kai_scheduler.framework.session import Session

# A placement's masks: the nodes passing every static predicate, and each predicate's (its words, the
# nodes passing it), in order.
Masks = tuple[BoolArray, list[tuple[str, BoolArray]]]
# More placements than this kept, and the next session starts afresh (a long run meets many placements;
# each is a few masks over every node).
_MOST_KEPT = 4096


class StaticMasks:
    """Carried from one session to the next (`JobMemos`): the masks by placement key and what they read."""

    __slots__ = ("_facts", "masks", "rows")

    def __init__(self) -> None:
        self._facts: tuple[list[NodeSpecInfo], Storage, tuple[tuple[str, str], ...]] | None = None
        self.masks: dict[str, Masks] = {}
        self.rows: dict[str, IntArray | None] = {}

    def hand_to(self, session: Session, *, verify: bool) -> None:
        """Let `session` (its plugins opened) start from the masks kept, when they read what it would,
        and keep what it works out for the next session."""
        snapshot = session.snapshot
        facts = (
            snapshot.nodes.specs,
            snapshot.storage,
            tuple((name, rejection) for name, rejection, _ in session.points.static_predicates),
        )
        last = self._facts
        if (
            last is None
            or last[0] is not facts[0]
            or last[1] is not facts[1]
            or last[2] != facts[2]
            or len(self.masks) > _MOST_KEPT
        ):
            self.masks, self.rows = {}, {}
        elif verify:
            _check(session, self.masks)
        self._facts = facts
        session.use_static_masks(self.masks, self.rows)


def _check(session: Session, masks: dict[str, Masks]) -> None:
    from kai_scheduler.framework.job_memos import CarriedMismatch

    placements = {task.placement.key: task.placement for task in session.snapshot.tasks.values()}
    for key, (kept, kept_parts) in masks.items():
        placement = placements.get(key)
        if placement is None:
            continue  # no pod of this session has it: never asked
        fresh, parts = session.static_masks_of(placement)
        same = np.array_equal(kept, fresh) and [words for words, _ in kept_parts] == [
            words for words, _ in parts
        ]
        if not same or not all(
            np.array_equal(a, b) for (_, a), (_, b) in zip(kept_parts, parts, strict=True)
        ):
            raise CarriedMismatch(
                f"the nodes passing the static predicates of placement {key!r}, kept from the last cycle, "
                "differ from those worked out again"
            )
