"""`CreationRanks`: live mode's creation order as ranks, objects arriving in any order.

The ranks must follow the sort keys at all times, and a rank may only change when the insertion that
changed it says so (the state builder hands exactly those objects to the cache again). Making room must
stay local: objects arriving nearly in order (two sorted streams interleaved, as a second's pods and its
PodGroups arrive) must not move every object again and again.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from kai_scheduler.controlplane.ranks import CreationRanks


def check_order(ranks: CreationRanks, known: dict[int, float]) -> None:
    ordered = [known[key] for key in sorted(known)]
    assert all(a < b for a, b in pairwise(ordered))
    assert all(rank == int(rank) and 0 <= rank < 2**53 for rank in ordered)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=300))
def test_ranks_follow_the_sort_keys_and_moves_are_reported(operations: list[tuple[bool, int]]) -> None:
    ranks = CreationRanks()
    known: dict[int, float] = {}
    for add, key in operations:
        if not add:
            ranks.forget(key)
            known.pop(key, None)
            continue
        rank, moved = ranks.rank(key)
        assert key not in moved
        for other in moved:
            assert other in known
            known[other] = ranks.rank(other)[0]
        if key in known:
            assert (rank, moved) == (known[key], [])
        known[key] = rank
        # Nothing moved without being reported.
        assert all(ranks.rank(other) == (known[other], []) for other in known)
        check_order(ranks, known)


def test_a_stream_into_one_gap_moves_few_objects() -> None:
    """Every pod of a second sorts before that second's PodGroups but arrives after some of them: each new
    pod lands in the same gap, after the previous one (or, names counting down, before it). The old scheme
    renumbered every object each time the gap was used up: about 44 moves per object here."""
    count = 4000
    for direction in (1, -1):
        ranks = CreationRanks()
        keys = [key for i in range(count) for key in ((1, "pg", direction * i), (1, "job", direction * i))]
        moved = sum(len(ranks.rank(key)[1]) for key in keys)
        known = {key: ranks.rank(key)[0] for key in keys}
        ordered = [known[key] for key in sorted(known)]
        assert all(a < b for a, b in pairwise(ordered))
        assert moved < 4 * len(keys)
