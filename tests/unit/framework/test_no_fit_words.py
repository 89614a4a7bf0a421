"""Explanations' words kept by what they read (`no_fit_counts.NoFitWords`): counts alike under one head
are worded once and read the same; other counts, names or heads are worded again."""

from __future__ import annotations

from kai_scheduler.framework.no_fit_counts import NoFitCounts, NoFitWords

NAMES = ("node(s) were unschedulable", "Insufficient GPUs")


def test_counts_alike_are_worded_once() -> None:
    words = NoFitWords()
    worded: list[str] = []

    def wording(counts: NoFitCounts) -> str:
        worded.append(counts.detail())
        return counts.detail()

    first = NoFitCounts(NAMES, [1, 3, 0], 0, None)
    same = NoFitCounts(NAMES, [1, 3, 0], 7, None)
    moved = NoFitCounts(NAMES, [0, 4, 0], 7, None)
    other_names = NoFitCounts(("node(s) were not ready", "Insufficient GPUs"), [1, 3, 0], 7, None)
    assert (
        words.of("head", first, lambda: wording(first)) == "1 node(s) were unschedulable, 3 Insufficient GPUs"
    )
    assert (
        words.of("head", same, lambda: wording(same)) == "1 node(s) were unschedulable, 3 Insufficient GPUs"
    )
    assert len(worded) == 1
    assert words.of("head", moved, lambda: wording(moved)) == "4 Insufficient GPUs"
    assert words.of("head", other_names, lambda: wording(other_names)).startswith("1 node(s) were not ready")
    assert words.of("other head", same, lambda: "another") == "another"
    assert len(worded) == 3
