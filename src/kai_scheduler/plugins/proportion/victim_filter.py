"""Which queues' jobs a reclaimer may take at all, decided before its victims are ordered (KAI v0.17's
`ReclaimVictimFilterFn`, `pkg/scheduler/plugins/proportion/reclaimable/filter_victims.go`, #1764).

A victim is only worth offering if some reclaim strategy could take it. Both sides are the queues just
below where the reclaimer's and the victim's branches of the queue tree split:

* the reclaimer's side would go above its deserved quota: only MaintainFairShare can take, so the victim's
  side must hold more than its allocatable share in some resource;
* otherwise the victim's side must be above its deserved quota in some resource the reclaimer asks for
  (GuaranteeDeservedQuota), or exactly at it in every such resource (then MaintainFairShare decides).

Without it, a queue that can give nothing but ranks first in victim order ended the search of a reclaimer
whose valid victims came later (KAI #1750).
"""

from __future__ import annotations

from kai_scheduler.model.queues import QueueInfo, is_unlimited
from kai_scheduler.model.resources import EPSILON, Resources


def may_be_reclaimed(
    victim_side: QueueInfo, request: Resources, *, reclaimer_within_deserved: bool, above_share: bool
) -> bool:
    """Whether the victim side's jobs stay candidates. `reclaimer_within_deserved`: the reclaimer's side
    stays within its deserved quota with `request` added; `above_share`: the victim's side holds more than
    its allocatable share in some resource."""
    if not reclaimer_within_deserved:
        return above_share
    # Resource by resource (gpu, cpu, memory) read as fields, not by name: reclaim asks this of every
    # victim queue in each attempt.
    quota, held = victim_side.deserved, victim_side.allocated
    under = False
    for asked, deserved, amount in (
        (request.gpu, quota.gpu, held.gpu),
        (request.cpu, quota.cpu, held.cpu),
        (request.memory, quota.memory, held.memory),
    ):
        if asked <= 0 or is_unlimited(deserved):  # not asked for; an unlimited quota is never exceeded
            continue
        if amount > deserved + EPSILON:
            return True
        if amount < deserved - EPSILON:
            under = True
    return not under
