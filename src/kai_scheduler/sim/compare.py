"""`simulate --compare A.yaml B.yaml`: two runs of one input side by side, as a document (`--output json`,
and the report's summary.json) and as text: the summary numbers of each with B - A, and the pod groups
whose start time or fate changed.

Pure: two `Outcome`s in, a JSON-able dict out; `render` prints that dict.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from kai_scheduler.sim.variants import GroupFate, Outcome

# The summary numbers compared, as paths into summary.json, with their labels.
FIGURES: tuple[tuple[str, str], ...] = (
    ("gpuAllocationRatio", "GPU allocation ratio"),
    ("waitSeconds.mean", "wait seconds, mean"),
    ("waitSeconds.p50", "wait seconds, p50"),
    ("waitSeconds.p99", "wait seconds, p99"),
    ("jctSeconds.mean", "JCT seconds, mean"),
    ("jctSeconds.p50", "JCT seconds, p50"),
    ("jctSeconds.p99", "JCT seconds, p99"),
    ("podGroups.started", "pod groups started"),
    ("podGroups.completed", "pod groups completed"),
    ("evictions", "evictions"),
    ("gpuHoursLostToPreemption", "GPU-hours lost to preemption"),
    ("jainFairness", "Jain's fairness index"),
    ("fragmentedGpus.mean", "fragmented idle GPUs, mean"),
    ("time", "simulated seconds"),
)
_EPS = 1e-9
_MAX_GROUP_ROWS = 25


def figure(summary: dict[str, Any], path: str) -> float | None:
    """The number at `path` ("waitSeconds.p99") of a summary; None where it has none."""
    value: Any = summary
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _delta(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    delta = round(b - a, 9)
    return 0.0 if delta == 0 else delta


def _side(fate: GroupFate | None) -> dict[str, Any] | None:
    if fate is None:
        return None
    return {"start": fate.start, "fate": fate.fate, "evictions": fate.evictions}


def _changed(a: GroupFate | None, b: GroupFate | None) -> bool:
    if a is None or b is None:
        return True
    if a.fate != b.fate or a.evictions != b.evictions:
        return True
    if (a.start is None) != (b.start is None):
        return True
    return a.start is not None and b.start is not None and abs(a.start - b.start) > _EPS


def comparison(a: Outcome, b: Outcome, *, a_name: str, b_name: str) -> dict[str, Any]:
    """The two runs' summaries, each figure with B - A, and the pod groups whose start, fate or evictions
    differ (in the order they arrived; a group only one run made has null for the other)."""
    keys = list(a.groups) + [key for key in b.groups if key not in a.groups]
    changed = []
    for key in keys:
        in_a, in_b = a.groups.get(key), b.groups.get(key)
        if not _changed(in_a, in_b):
            continue
        either = in_a or in_b
        assert either is not None
        start_a = in_a.start if in_a else None
        start_b = in_b.start if in_b else None
        changed.append(
            {
                "podGroup": key,
                "queue": either.queue,
                "a": _side(in_a),
                "b": _side(in_b),
                "startDelta": _delta(start_a, start_b),
            }
        )
    return {
        "a": {"config": a_name, "summary": a.summary},
        "b": {"config": b_name, "summary": b.summary},
        "figures": [
            {
                "figure": path,
                "a": figure(a.summary, path),
                "b": figure(b.summary, path),
                "delta": _delta(figure(a.summary, path), figure(b.summary, path)),
            }
            for path, _ in FIGURES
        ],
        "podGroups": {"total": len(keys), "changed": changed},
    }


# --- text ----------------------------------------------------------------------------------------------


def number(value: float | None) -> str:
    """At most three decimals; a value too small for them keeps two significant digits (a difference of
    0.0004 is not shown as 0)."""
    if value is None:
        return "–"
    if value == int(value):
        return f"{value:,.0f}"
    if abs(value) < 0.001:
        return f"{value:.2g}"
    return f"{value:,.3f}".rstrip("0").rstrip(".")


def signed(value: float | None) -> str:
    if value is None:
        return "–"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "−") + number(abs(value))


def start_text(side: dict[str, Any] | None) -> str:
    """A pod group's start in one run: seconds, "never", or that the run did not have it."""
    if side is None:
        return "(not in this run)"
    return "never" if side["start"] is None else f"{number(side['start'])}s"


def fate_text(side: dict[str, Any] | None) -> str:
    if side is None:
        return "–"
    evictions = side["evictions"]
    if not evictions:
        return str(side["fate"])
    return f"{side['fate']}, {evictions} eviction{'s' if evictions != 1 else ''}"


def render(document: dict[str, Any], console: Console) -> None:
    a_name, b_name = document["a"]["config"], document["b"]["config"]
    console.print(
        f"[bold]kai-scheduler simulate --compare[/bold]: A = {a_name}, B = {b_name}", soft_wrap=True
    )
    labels = dict(FIGURES)
    figures = Table(title="Summary (summary.json's numbers)", title_justify="left")
    figures.add_column("figure")
    for column in ("A", "B", "B − A"):
        figures.add_column(column, justify="right")
    for row in document["figures"]:
        figures.add_row(labels[row["figure"]], number(row["a"]), number(row["b"]), signed(row["delta"]))
    console.print(figures)
    groups = document["podGroups"]
    changed = groups["changed"]
    if not changed:
        console.print(f"pod groups: all {groups['total']} started at the same time, with the same fate")
        return
    table = Table(
        title=f"Pod groups whose start or fate changed ({len(changed)} of {groups['total']})",
        title_justify="left",
    )
    table.add_column("pod group")
    table.add_column("queue")
    table.add_column("start A", justify="right")
    table.add_column("start B", justify="right")
    table.add_column("B − A", justify="right")
    table.add_column("fate A")
    table.add_column("fate B")
    for row in changed[:_MAX_GROUP_ROWS]:
        table.add_row(
            row["podGroup"],
            row["queue"] or "",
            start_text(row["a"]),
            start_text(row["b"]),
            f"{signed(row['startDelta'])}s" if row["startDelta"] is not None else "–",
            fate_text(row["a"]),
            fate_text(row["b"]),
        )
    if len(changed) > _MAX_GROUP_ROWS:
        table.caption = f"... and {len(changed) - _MAX_GROUP_ROWS} more (see --output json)"
    console.print(table)
