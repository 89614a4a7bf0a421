"""proportion's work at session open that does not grow with the cluster (55 queues whatever the size,
issue #23 row 5): the fair-share division's tree walked out once for the three resources, zero usages
not rounded, the queues' bounds made from their parents', and each two siblings' allocatable shares
compared once each way. Each answer is the one worked out the plain way."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from helpers import node, open_session, pod, queue
from kai_scheduler.model.queues import QueueInfo, effective_limit, is_unlimited
from kai_scheduler.model.resources import EPSILON, RESOURCE_NAMES, Resources
from kai_scheduler.plugins.proportion import plugin as proportion
from kai_scheduler.plugins.proportion.plugin import ProportionPlugin, allocatable_share, allocatable_shares


def tree() -> list[Any]:
    """Two departments of two leaves each, with quotas, limits and pods of every resource."""
    return [
        node("n0", gpus=8),
        node("n1", gpus=8),
        queue("d1", gpu=6, gpu_limit=10),
        queue("d2", gpu=4, cpu=16000),
        queue("d1-a", parent="d1", gpu=2, gpu_weight=2),
        queue("d1-b", parent="d1", gpu=4, cpu_limit=8000),
        queue("d2-a", parent="d2", gpu=1, memory_limit=2**36),
        queue("d2-b", parent="d2", gpu=3),
        *[
            pod(f"{leaf}-{i}", leaf, gpus=1 + i % 2)
            for leaf in ("d1-a", "d1-b", "d2-a", "d2-b")
            for i in range(4)
        ],
    ]


def test_the_division_tree_is_walked_out_once_for_the_three_resources(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    orders = []

    def counted(queues: Any) -> Any:
        orders.append(queues)
        return tree_order(queues)

    tree_order = proportion.tree_order
    monkeypatch.setattr(proportion, "tree_order", counted)
    session = open_session(tree())
    assert len(orders) == 1
    assert session.snapshot.queues["d1-a"].fair_share.gpu > 0


def test_zero_usages_are_not_rounded_others_are(monkeypatch: pytest.MonkeyPatch) -> None:
    rounded: list[float] = []

    def counted(value: float, decimals: int) -> float:
        rounded.append(value)
        return round(value, decimals)

    monkeypatch.setattr(proportion, "round", counted, raising=False)
    queues = open_session(tree()).snapshot.queues
    assert rounded == []
    queues["d1-a"].usage = Resources(0.123456, 0.0, -0.0)
    gpu, cpu, memory = proportion._share_inputs(queues)
    assert (gpu[2].usage, cpu[2].usage) == (0.12, 0.0)
    assert math.copysign(1.0, memory[2].usage) == -1.0  # -0.0 kept, as `round` keeps it
    assert len(rounded) == 3  # that queue's three usages, no other queue's


def test_allocatable_shares_are_allocatable_share_of_each_resource() -> None:
    rng = random.Random(7)
    amounts = (-1.0, 0.0, 0.5, 2.0, 3.0, 8.0, 1e9)
    total = Resources(8.0, 64000.0, 2.0**39)
    for _ in range(500):
        info = QueueInfo(
            "q",
            None,
            100,
            0,
            Resources(*(rng.choice(amounts) for _ in RESOURCE_NAMES)),
            Resources(*(rng.choice(amounts) for _ in RESOURCE_NAMES)),
            Resources(1.0, 1.0, 1.0),
            fair_share=Resources(*(rng.choice(amounts[1:]) for _ in RESOURCE_NAMES)),
        )
        expected = tuple(allocatable_share(info, r, total.get(r)) for r in RESOURCE_NAMES)
        assert allocatable_shares(info, total) == expected


def test_a_queues_bounds_are_made_from_its_parents() -> None:
    session = open_session(tree())
    plugin = ProportionPlugin({})
    plugin.on_session_open(session)
    queues = session.snapshot.queues
    bounds = plugin._bounds("d1-b")
    assert "d1" in plugin._path_bounds  # (its parent's path, made on the way)
    assert plugin._bounds("d1") == bounds[1:]
    for (queue_info, limits, deserved), expected in zip(bounds, queues.ancestry("d1-b"), strict=True):
        assert queue_info is expected
        assert limits == tuple(effective_limit(expected, r) for r in RESOURCE_NAMES)
        assert deserved == tuple(math.inf if is_unlimited(d) else d for d in expected.deserved.values())


def _plainly_total(shares: set[tuple[float, float, float]]) -> bool:
    """`_dominance_is_total` the plain way: every two compare, and the i-th dominates n - 1 - i others."""

    def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
        return all(x <= y + EPSILON for x, y in zip(a, b, strict=True)) and any(
            x < y - EPSILON for x, y in zip(a, b, strict=True)
        )

    distinct = list(shares)
    if any(not dominates(a, b) and not dominates(b, a) for a in distinct for b in distinct if a != b):
        return False
    return sorted(sum(dominates(a, b) for b in distinct) for a in distinct) == list(range(len(distinct)))


def test_dominance_is_total_compares_each_pair_once_each_way(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    dominates = proportion._dominates

    def counted(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
        calls.append((a, b))
        return dominates(a, b)

    monkeypatch.setattr(proportion, "_dominates", counted)
    chain = {(1.0, 1.0, 1.0), (2.0, 1.0, 1.0), (2.0, 2.0, 1.0), (2.0, 2.0, 2.0), (3.0, 2.0, 2.0)}
    assert proportion._dominance_is_total(chain)
    assert len(calls) == len(chain) * (len(chain) - 1)
    assert len(set(calls)) == len(calls)


def test_dominance_is_total_answers_as_the_plain_way() -> None:
    rng = random.Random(11)
    # Amounts apart by less than, about and more than EPSILON, where the relation need not be transitive.
    amounts = (0.0, EPSILON * 0.6, EPSILON * 1.2, 1.0, 1.0 + EPSILON * 0.6, 1.0 + EPSILON * 1.5, 2.0)
    for size in range(1, 7):
        for _ in range(300):
            shares = {tuple(rng.choice(amounts) for _ in RESOURCE_NAMES) for _ in range(size)}
            assert proportion._dominance_is_total(shares) == _plainly_total(shares)  # type: ignore[arg-type]
