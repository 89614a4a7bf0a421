"""Proportion's reclaim victim filter (`ProportionPlugin.may_reclaim_from`), which keeps per pair of queues
what is fixed for the session (where their branches split, the reclaimer side's deserved quota, the victim
side's allocatable share), answers exactly as the rule worked out from the queue tree at every call, while
allocations move between calls as actions place and evict pods.

Generated trees (flat, under departments, or a level deeper) with quotas, limits and fair shares of 0,
unlimited or finite in every resource get allocations that change from round to round, often right at a
bound; every queue asks of every other for random requests.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, open_session, pod, queue
from kai_scheduler.model.queues import QueueInfo, QueueTree, effective_deserved, effective_limit
from kai_scheduler.model.resources import EPSILON, RESOURCE_NAMES, Resources

AMOUNTS = st.sampled_from([-1.0, 0.0, 1.0, 2.0, 4.0, 8.0])


def reference(queues: QueueTree, total: Resources, reclaimer: str, victim: str, request: Resources) -> bool:
    """KAI's filter as written: the queues just below where the two root-first paths split; the
    reclaimer side within its deserved quota with the request added; the victim side above its
    allocatable share, min(limit, max(deserved, fair share))."""
    paths = list(reversed(queues.ancestry(reclaimer))), list(reversed(queues.ancestry(victim)))
    split = next(((a, b) for a, b in zip(*paths, strict=False) if a.name != b.name), None)
    if split is None:
        return False
    reclaimer_side, victim_side = split
    within = all(
        reclaimer_side.allocated.get(r) + request.get(r)
        <= effective_deserved(reclaimer_side, r, total.get(r)) + EPSILON
        for r in RESOURCE_NAMES
    )
    above = any(
        victim_side.allocated.get(r)
        > min(
            effective_limit(victim_side, r),
            max(effective_deserved(victim_side, r, total.get(r)), victim_side.fair_share.get(r)),
        )
        + EPSILON
        for r in RESOURCE_NAMES
    )
    if not within:
        return above
    # GuaranteeDeservedQuota, or MaintainFairShare at the quota: over the resources the request asks for
    # and the victim side's quota bounds, above it in one, or below it in none.
    asked = [r for r in RESOURCE_NAMES if request.get(r) > 0 and victim_side.deserved.get(r) >= 0]
    held, deserved = victim_side.allocated, victim_side.deserved
    return any(held.get(r) > deserved.get(r) + EPSILON for r in asked) or not any(
        held.get(r) < deserved.get(r) - EPSILON for r in asked
    )


@st.composite
def trees(draw: st.DrawFn) -> list[Any]:
    objects: list[Any] = [node("n0", gpus=8)]
    depth = draw(st.integers(0, 2))  # flat, under departments, or under teams of departments
    parents: list[str | None] = [None]
    if depth >= 1:
        objects += [queue(d, gpu=draw(AMOUNTS), cpu=draw(AMOUNTS) * 1000) for d in ("dept-a", "dept-b")]
        parents = ["dept-a", "dept-b"]
    if depth == 2:
        teams = [("team-a1", "dept-a"), ("team-a2", "dept-a"), ("team-b1", "dept-b")]
        objects += [queue(t, parent=d, gpu=draw(AMOUNTS), gpu_limit=draw(AMOUNTS)) for t, d in teams]
        parents = [t for t, _ in teams]
    for i in range(draw(st.integers(2, 5))):
        objects.append(
            queue(
                f"q{i}",
                parent=parents[i % len(parents)],
                gpu=draw(AMOUNTS),
                gpu_limit=draw(AMOUNTS),
                cpu=draw(AMOUNTS) * 1000,
                cpu_limit=draw(AMOUNTS) * 1000,
                memory=draw(AMOUNTS) * 1000,
            )
        )
        objects.append(pod(f"p{i}", f"q{i}", gpus=1))
    return objects


def _near_a_bound(data: st.DataObject, q: QueueInfo, r: str) -> float:
    bound = data.draw(st.sampled_from([q.limit.get(r), q.deserved.get(r), q.fair_share.get(r), 0.0]))
    return max(0.0, bound) + data.draw(st.sampled_from([0.0, -1.0, 1e-10, 1e-8, 0.5, 3.0]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=trees(), data=st.data())
def test_the_filter_answers_as_the_rule_worked_out_each_call(objects: list[Any], data: st.DataObject) -> None:
    session = open_session(objects)
    (may_reclaim_from,) = session.points.reclaim_victim_filters
    snapshot = session.snapshot
    queues = snapshot.queues
    for q in queues:
        for r in RESOURCE_NAMES:
            q.fair_share.set(r, max(0.0, data.draw(AMOUNTS)))
    jobs = {job.queue: job for job in snapshot.jobs.values()}
    for _ in range(3):  # allocations move between rounds, as placements and evictions move them
        for q in queues:
            for r in RESOURCE_NAMES:
                q.allocated.set(r, _near_a_bound(data, q, r))
        for reclaimer, job in jobs.items():
            request = Resources(*(data.draw(st.sampled_from([0.0, 1e-10, 1.0, 3.0])) for _ in range(3)))
            for victim in jobs:
                expected = reference(queues, snapshot.capacity, reclaimer, victim, request)
                assert may_reclaim_from(job, request, victim) is expected
