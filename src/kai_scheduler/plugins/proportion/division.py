"""Fair-share division of one resource over a queue tree (KAI ``proportion`` plugin, resource division).

Implements kai-reference §5.2 for a single resource (callers run it once per resource):

1. Deserved phase: every queue of a level gets ``min(deserved (-1 => level total), request, limit)``.
2. Over-quota phase: what is left of the level total is handed out by priority bucket, highest first.
   Inside a bucket, rounds offer ``amount_at_round_start * normalised share weight`` to every unsatisfied
   queue; a queue whose remaining request fits in its offer gets it, otherwise it gets whole units and the
   fractional leftover is recorded.  When rounds stop making progress, the rest is handed out one unit (or
   the fractional rest) per queue, largest recorded leftover first.
3. A lower-priority bucket only sees what the higher buckets did not request.

The division is top-down: top-level queues share ``total``; each parent's fair share is then divided
among its children with the same algorithm.

A ``DivisionRecorder`` passed to ``divide`` is told every step as it is taken (``kubectl kai fairshare``
shows them); without one nothing is recorded and the loops allocate nothing more.

A level's division reads only its total and its siblings' own inputs and subtree requests, so ``divide``
given the ``LevelShares`` of an earlier division gives each level whose inputs are the same bits the shares
it got then, and divides again only the levels that moved (issue #23, point 1: a cycle after one pod
arrived moves the levels on that pod's queue path, and the levels below whose parent's share moved).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kai_scheduler.model.fair_share_record import DivisionRecorder, Grant, QueueAtLevel
from kai_scheduler.model.queues import is_unlimited

# Relative tolerance (in units) for float noise: an offer of 2.9999999999999996 GPUs is 3 whole GPUs, and a
# remaining request of 4.000000000000001 is "satisfied" by an offer of 4.
_EPSILON = 1e-9
# Leftovers are compared at this many decimals so that float noise cannot override the documented
# tie-breakers (older queue, then name).
_LEFTOVER_DECIMALS = 9

# Per parent (None: the top level), the inputs its level was last divided with and the shares it gave.
LevelShares = dict[str | None, tuple[Hashable, dict[str, float]]]


class QueueShareInput(NamedTuple):
    """One queue's inputs for one resource (Queue CRD ``resources.<r>`` + cluster state, §2.1 / §5.1). A
    named tuple: every session makes one per queue and resource whose division's inputs moved, and a
    frozen dataclass sets each field through ``object.__setattr__`` (twice the cost)."""

    name: str
    parent: str | None
    priority: int
    creation_rank: int
    deserved: float
    limit: float
    over_quota_weight: float
    request: float
    usage: float = 0.0


class TreeOrder(NamedTuple):
    """The shape of a queue tree as `divide` walks it (`tree_order`), by the queues' positions in their
    inputs: each parent's children (None: the top level) in the order a level is divided in, with their
    names, priorities and ranks (what a level's inputs hold of them), and every queue after its children."""

    children: dict[str | None, list[int]]
    names: dict[str | None, tuple[tuple[str, int, int], ...]]
    bottom_up: list[int]


@dataclass(slots=True)
class _LevelQueue:
    """Mutable per-level bookkeeping of one sibling while its level is being divided."""

    queue: QueueShareInput
    # min(request, limit): the most this queue may ever be given (KAI's "requestable share").
    requestable: float
    fair_share: float = 0.0
    leftover: float = 0.0

    @property
    def missing(self) -> float:
        return self.requestable - self.fair_share

    def wants_over_quota(self, unit: float) -> bool:
        # §5.2 candidate rule: request > fairShare, fairShare < limit (both folded into `requestable`), and a
        # positive over-quota weight (weight 0 => never any share above deserved, §2.1).
        return self.queue.over_quota_weight > 0 and self.missing > _EPSILON * unit


def divide(
    total: float,
    queues: Sequence[QueueShareInput],
    *,
    k_value: float = 1.0,
    unit: float = 1.0,
    recorder: DivisionRecorder | None = None,
    carried: LevelShares | None = None,
    order: TreeOrder | None = None,
) -> dict[str, float]:
    """Return the fair share of one resource for every queue of the tree.

    ``unit`` is the granularity of the whole-unit rounding of the over-quota phase.  Parent requests are the
    sum of their children's requests; a queue's own ``request`` is only used when it has no children.
    With ``carried`` (the same dict each time, for one resource) and no ``recorder`` (which is told every
    step), a level divided before with the same inputs gets the shares it got then, and every level
    divided now is kept in it for the next call. ``order`` is `tree_order` of ``queues`` (or of another
    resource's inputs of the same queues, in the same order), worked out here when not given.
    Raises ``ValueError`` on duplicate names, unknown parents, cycles or a non-positive unit.
    """
    if unit <= 0:
        raise ValueError(f"unit must be positive, got {unit}")
    if order is None:
        order = tree_order(queues)
    children = {parent: [queues[at] for at in positions] for parent, positions in order.children.items()}
    requests = _subtree_requests(queues, order)
    shares: dict[str, float] = {}
    pending: list[tuple[str | None, float, list[QueueShareInput]]] = [(None, total, children.get(None, []))]
    while pending:
        parent, level_total, siblings = pending.pop()
        if carried is None or recorder is not None:
            level_shares = _divide_level(level_total, siblings, requests, k_value, unit, recorder)
        else:
            # (A tree without queues has no top level's names.)
            names = order.names.get(parent, ())
            inputs = _level_inputs(level_total, siblings, names, requests, k_value, unit)
            known = carried.get(parent)
            if known is not None and known[0] == inputs:
                level_shares = known[1]
            else:
                level_shares = _divide_level(level_total, siblings, requests, k_value, unit, recorder)
                carried[parent] = (inputs, level_shares)
        shares.update(level_shares)
        for queue in siblings:
            if queue.name in children:
                pending.append((queue.name, level_shares[queue.name], children[queue.name]))
    return shares


def _level_inputs(
    total: float,
    siblings: Sequence[QueueShareInput],
    names: tuple[tuple[str, int, int], ...],
    requests: dict[str, float],
    k_value: float,
    unit: float,
) -> Hashable:
    """Everything `_divide_level` reads but the recorder: the siblings' `names` (`TreeOrder.names`), the
    numbers as their bits (0.0 and -0.0 differ: the shares given could differ in sign)."""
    numbers = [total, k_value, unit]
    for queue in siblings:
        numbers += (queue.deserved, queue.limit, queue.over_quota_weight, queue.usage, requests[queue.name])
    return (names, float_bits(numbers))


def float_bits(numbers: list[float]) -> bytes:
    """`numbers` as the bits of doubles: what an array of them would hold, packed without one (an array
    converts each item it is given through a format string, several times the cost)."""
    return struct.pack(f"{len(numbers)}d", *numbers)


def tree_order(queues: Sequence[QueueShareInput]) -> TreeOrder:
    """How `divide` walks the tree of `queues`: each level's queues in a fixed order (age, then name), so
    that neither float sums nor tie-breaks depend on the input order. It reads the queues' names, parents,
    priorities and ranks alone, the same in every resource's inputs of one tree: worked out once for all
    of them. Raises ``ValueError`` on duplicate names, unknown parents or cycles."""
    by_name: dict[str, QueueShareInput] = {}
    for queue in queues:
        if queue.name in by_name:
            raise ValueError(f"duplicate queue {queue.name!r}")
        by_name[queue.name] = queue
    children: dict[str | None, list[int]] = {}
    for position, queue in enumerate(queues):
        if queue.parent is not None and queue.parent not in by_name:
            raise ValueError(f"queue {queue.name!r} has unknown parent {queue.parent!r}")
        children.setdefault(queue.parent, []).append(position)
    for positions in children.values():
        positions.sort(key=lambda at: (queues[at].creation_rank, queues[at].name))
    bottom_up = _bottom_up(queues, children)
    if len(bottom_up) != len(queues):
        # Every queue must be reachable from the top level; queues on a parent cycle never are.
        raise ValueError("queue hierarchy contains a cycle")
    names = {
        parent: tuple((queues[at].name, queues[at].priority, queues[at].creation_rank) for at in positions)
        for parent, positions in children.items()
    }
    return TreeOrder(children, names, bottom_up)


def _bottom_up(queues: Sequence[QueueShareInput], children: dict[str | None, list[int]]) -> list[int]:
    """The positions of the queues reachable from the top level, every queue after its children."""
    order: list[int] = []
    # Iterative post-order so that deep hierarchies cannot hit the recursion limit.
    stack: list[tuple[int, bool]] = [(at, False) for at in children.get(None, [])]
    while stack:
        at, expanded = stack.pop()
        kids = children.get(queues[at].name)
        if not kids or expanded:
            order.append(at)
        else:
            stack.append((at, True))
            stack.extend((kid, False) for kid in kids)
    return order


def _subtree_requests(queues: Sequence[QueueShareInput], order: TreeOrder) -> dict[str, float]:
    """Request of every queue: leaves carry requests, parents sum their children's (§5.1 propagation)."""
    requests: dict[str, float] = {}
    children = order.children
    for at in order.bottom_up:
        queue = queues[at]
        kids = children.get(queue.name)
        if kids:
            requests[queue.name] = sum(requests[queues[kid].name] for kid in kids)
        else:
            requests[queue.name] = queue.request
    return requests


def _divide_level(
    total: float,
    siblings: Sequence[QueueShareInput],
    requests: dict[str, float],
    k_value: float,
    unit: float,
    recorder: DivisionRecorder | None = None,
) -> dict[str, float]:
    level = [_LevelQueue(queue, _requestable(requests[queue.name], queue.limit)) for queue in siblings]
    remaining = _give_deserved(total, level)
    if recorder is not None:
        # Only the top level can be empty (a cluster without queues): a parent is one for its children.
        parent = siblings[0].parent if siblings else None
        recorder.level(parent, total, [_at_level(entry, requests) for entry in level], remaining)
    if remaining > 0:
        _give_over_quota(remaining, level, k_value, unit, recorder)
    shares = {entry.queue.name: entry.fair_share for entry in level}
    if recorder is not None:
        recorder.level_done(shares)
    return shares


def _at_level(entry: _LevelQueue, requests: dict[str, float]) -> QueueAtLevel:
    queue = entry.queue
    return QueueAtLevel(
        name=queue.name,
        priority=queue.priority,
        deserved=queue.deserved,
        limit=queue.limit,
        over_quota_weight=queue.over_quota_weight,
        request=requests[queue.name],
        usage=queue.usage,
        requestable=entry.requestable,
        quota_share=entry.fair_share,
    )


def _requestable(request: float, limit: float) -> float:
    # limit 0 really means "nothing allowed" (reference gotcha 2). (`min` and `max` written out, as they
    # pick: the first of equals, 0.0 only when above.)
    requestable = float(request) if is_unlimited(limit) else float(limit if limit < request else request)
    return 0.0 if requestable < 0.0 else requestable


def _give_deserved(total: float, level: list[_LevelQueue]) -> float:
    """§5.2 step 1.  The result can be negative when deserved quotas are oversubscribed."""
    remaining = total
    for entry in level:
        deserved = entry.queue.deserved
        if is_unlimited(deserved):
            deserved = total
        requestable = entry.requestable
        given = float(requestable if requestable < deserved else deserved)
        entry.fair_share = 0.0 if given < 0.0 else given
        remaining -= entry.fair_share
    return remaining


def _give_over_quota(
    remaining: float,
    level: list[_LevelQueue],
    k_value: float,
    unit: float,
    recorder: DivisionRecorder | None = None,
) -> None:
    """§5.2 steps 2-3: a bucket is fully served (rounds, then leftovers) before the next one sees anything."""
    for priority in sorted({entry.queue.priority for entry in level}, reverse=True):
        if remaining <= _EPSILON * unit:
            return
        bucket = [entry for entry in level if entry.queue.priority == priority]
        if recorder is not None:
            recorder.bucket(priority, remaining)
        remaining = _run_rounds(remaining, bucket, k_value, unit, recorder)
        remaining = _hand_out_leftovers(remaining, bucket, unit, recorder)


def _run_rounds(
    remaining: float,
    bucket: list[_LevelQueue],
    k_value: float,
    unit: float,
    recorder: DivisionRecorder | None = None,
) -> float:
    """Weighted rounds over the unsatisfied queues of one priority bucket.

    A new round runs only if some queue got less than offered (so something is left to re-offer) *and*
    this round handed something out; otherwise the remainder is left for the leftover hand-out.  Each
    continuing round either satisfies a queue or hands out at least one whole unit, which bounds the loop.
    """
    while remaining > _EPSILON * unit:
        candidates = [entry for entry in bucket if entry.wants_over_quota(unit)]
        if not candidates:
            break
        amount = remaining
        handed_out = 0.0
        someone_got_less = False
        relative, weights = _normalised_share_weights(candidates, k_value)
        grants: list[Grant] | None = [] if recorder is not None else None
        for entry, weight in zip(candidates, weights, strict=True):
            offer = amount * weight
            granted = min(_grant(entry, offer, unit), remaining)
            entry.fair_share += granted
            remaining -= granted
            handed_out += granted
            someone_got_less = someone_got_less or granted < offer - _EPSILON * unit
            if grants is not None:
                grants.append(Grant(entry.queue.name, granted, offer, weight, entry.leftover))
        if recorder is not None and grants is not None:
            recorder.round(amount, relative, grants)
        if handed_out <= 0 or not someone_got_less:
            break
    return remaining


def _grant(entry: _LevelQueue, offer: float, unit: float) -> float:
    """What a queue takes from its offer: its whole remaining request if that fits, else whole units."""
    missing = entry.missing
    if missing <= offer + _EPSILON * unit:
        return missing
    whole = math.floor(offer / unit + _EPSILON) * unit
    # Recorded per round (the latest round wins): it decides the order of the final hand-out.
    entry.leftover = max(offer - whole, 0.0)
    return whole


def _normalised_share_weights(
    candidates: list[_LevelQueue], k_value: float
) -> tuple[list[float], list[float]]:
    """§5.2: w' = weight / Σ weights(unsatisfied); shareWeight = max(0, w' + k·(w' − usage')), normalised.
    Both: (w' per candidate, the normalised shareWeight per candidate)."""
    total_weight = sum(entry.queue.over_quota_weight for entry in candidates)
    relative = [entry.queue.over_quota_weight / total_weight for entry in candidates]
    share = [max(0.0, w + k_value * (w - e.queue.usage)) for w, e in zip(relative, candidates, strict=True)]
    share_total = sum(share)
    if share_total <= 0:
        # Usage so high that every shareWeight clamps to 0: fall back to the plain weights rather than
        # offering nothing to anybody.
        return relative, relative
    return relative, [s / share_total for s in share]


def _hand_out_leftovers(
    remaining: float, bucket: list[_LevelQueue], unit: float, recorder: DivisionRecorder | None = None
) -> float:
    """Final hand-out: one unit (or the fractional rest) per queue, largest recorded leftover first.

    Ties go to the older queue (smaller creation rank), then the smaller name.  When the rounds stop making
    progress every candidate was offered less than a unit, so a single pass is enough to hand out the rest.
    """
    candidates = [entry for entry in bucket if entry.wants_over_quota(unit)]
    candidates.sort(
        key=lambda e: (-round(e.leftover / unit, _LEFTOVER_DECIMALS), e.queue.creation_rank, e.queue.name)
    )
    grants: list[Grant] | None = [] if recorder is not None else None
    for entry in candidates:
        if remaining <= _EPSILON * unit:
            break
        granted = min(unit, entry.missing, remaining)
        entry.fair_share += granted
        remaining -= granted
        if grants is not None:
            grants.append(Grant(entry.queue.name, granted, unit, 0.0, entry.leftover))
    if recorder is not None and grants is not None:
        recorder.leftovers(grants, remaining)
    return remaining
