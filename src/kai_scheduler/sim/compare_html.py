"""`simulate --compare A B --report DIR`: `DIR/index.html`, one self-contained page for both runs (the
summary numbers of each with B - A, the pod groups whose start or fate changed, and plots of A and B
overlaid), and `DIR/summary.json`, the comparison document (`sim.compare.comparison`).

The page is made of the same pieces as the single run's report (`sim.html_parts`: its style, PNGs embedded
as data: URIs, no script, nothing fetched, matplotlib imported only when a plot is drawn).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kai_scheduler.sim.compare import FIGURES, fate_text, number, signed, start_text
from kai_scheduler.sim.html_parts import (
    busiest_queues,
    figure,
    image,
    page,
    png,
    queue_grid,
    steps,
    table,
    time_unit,
)
from kai_scheduler.sim.summary import completion_times, waits
from kai_scheduler.sim.timeline import FloatArray, Timeline

# A's and B's colours in every plot; A's lines wider, so that where the runs agree both stay visible.
COLOURS = {"A": "tab:blue", "B": "tab:orange"}
WIDTHS = {"A": 2.4, "B": 1.2}
_MAX_GROUP_ROWS = 200


def write_comparison_report(
    directory: Path, document: dict[str, Any], a: Timeline, b: Timeline, *, title: str
) -> None:
    """Write `index.html` and `summary.json` (the comparison document) into `directory` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    (directory / "index.html").write_text(_page(document, a, b, title), encoding="utf-8")


def _runs(a: Timeline, b: Timeline) -> list[tuple[str, Timeline]]:
    return [("A", a), ("B", b)]


def _line(axis: Any, xs: FloatArray, ys: FloatArray, scale: float, run: str, **style: Any) -> None:
    style.setdefault("linewidth", WIDTHS[run])
    axis.step(xs / scale, ys, where="post", color=COLOURS[run], **style)


# --- plots ---------------------------------------------------------------------------------------------


# A panel of a stacked plot: its y label, what its lines are, and a run's (times, values) step series.
Panel = tuple[str, str, Callable[[Timeline], tuple[FloatArray, FloatArray]]]


def _stacked_plot(
    a: Timeline,
    b: Timeline,
    panels: Sequence[Panel],
    *,
    title: str,
    legend: str,
    whole_span: bool = False,
    capacity: float | None = None,
) -> str:
    """Panels one above the other over simulated time, A's and B's lines on the same axes in each;
    `capacity` a dotted line on the first, `whole_span` the time axis from 0 to the later run's end."""
    end = max(a.end, b.end)
    scale, unit = time_unit(end)
    drawn, axes = figure(len(panels), 1, height=2.8)
    for row, (y_label, what, series) in enumerate(panels):
        axis = axes[row][0]
        for run, timeline in _runs(a, b):
            times, values = series(timeline)
            xs, ys = steps(times, values, timeline.end)
            _line(axis, xs, ys, scale, run, label=f"{run}: {what}")
        if row == 0 and capacity is not None:
            axis.axhline(capacity, color="grey", linestyle=":", label="capacity")
        axis.set_ylabel(y_label)
        if whole_span:
            axis.set_xlim(0, max(end, 1.0) / scale)
        axis.set_ylim(bottom=0)
        axis.legend(fontsize=8, loc=legend)
    axes[-1][0].set_xlabel(f"simulated time ({unit})")
    drawn.suptitle(title, fontsize=11)
    return png(drawn)


def _total_pending(timeline: Timeline) -> tuple[FloatArray, FloatArray]:
    total = np.sum([timeline.pending[q] for q in timeline.queues], axis=0)
    return timeline.times, np.asarray(total, dtype=float)


def _evictions_so_far(timeline: Timeline) -> tuple[FloatArray, FloatArray]:
    times = np.array([e.time for e in timeline.evictions], dtype=float)
    return times, np.arange(1, times.size + 1, dtype=float)


def _total_plot(a: Timeline, b: Timeline) -> str:
    """GPUs allocated and pending pods, all queues together, A and B on the same axes."""
    panels: list[Panel] = [
        ("GPUs", "GPUs allocated", lambda timeline: (timeline.times, timeline.total_allocated)),
        ("pending pods", "pending pods", _total_pending),
    ]
    capacity = max(a.capacity, b.capacity)
    title = "GPUs allocated and pods pending, A and B"
    return _stacked_plot(a, b, panels, title=title, legend="upper right", capacity=capacity)


def _queue_plot(a: Timeline, b: Timeline) -> str:
    """One panel per leaf queue (the busiest MAX_QUEUE_PANELS): A's and B's allocated GPUs, their fair
    shares dashed."""
    end = max(a.end, b.end)
    scale, unit = time_unit(end)
    queues = [q for q in a.leaf_queues if q in b.allocated]
    queues = busiest_queues(
        queues, {q: float(a.allocated[q].sum()) + float(b.allocated[q].sum()) for q in queues}
    )

    def draw(axis: Any, queue: str) -> None:
        for run, timeline in _runs(a, b):
            xs, ys = steps(timeline.times, timeline.allocated[queue], timeline.end)
            _line(axis, xs, ys, scale, run, label=f"{run} allocated")
            sx, sy = steps(timeline.fair_share_times, timeline.fair_share[queue], timeline.end)
            _line(axis, sx, sy, scale, run, linestyle="--", label=f"{run} fair share")

    title = "GPUs allocated per queue (solid) and fair share (dashed), A and B"
    return queue_grid(queues, draw, unit=unit, title=title)


def _distribution_plot(a: Timeline, b: Timeline) -> str:
    """The waiting and completion times as cumulative distributions, A and B on the same axes."""
    drawn, axes = figure(1, 2, sharex=False)
    for axis, measure, what in (
        (axes[0][0], waits, "waiting time (arrival to start)"),
        (axes[0][1], completion_times, "job completion time (arrival to completion)"),
    ):
        values = {run: sorted(measure(timeline)) for run, timeline in _runs(a, b)}
        longest = max((v[-1] for v in values.values() if v), default=0.0)
        scale, unit = time_unit(longest)
        axis.set_title(what, fontsize=10)
        for run, sample in values.items():
            if not sample:
                continue
            xs = np.concatenate(([0.0], np.asarray(sample) / scale))
            ys = np.concatenate(([0.0], np.arange(1, len(sample) + 1) / len(sample)))
            axis.step(
                xs,
                ys,
                where="post",
                color=COLOURS[run],
                linewidth=WIDTHS[run],
                label=f"{run} ({len(sample)} pod groups)",
            )
        if not any(values.values()):
            axis.text(0.5, 0.5, "none", ha="center", va="center", transform=axis.transAxes)
        else:
            axis.legend(fontsize=8, loc="lower right")
        axis.set_xlabel(unit)
        axis.set_ylabel("fraction of pod groups")
        axis.set_ylim(0, 1.02)
    return png(drawn)


def _fragmentation_and_evictions_plot(a: Timeline, b: Timeline) -> str:
    panels: list[Panel] = [
        ("GPUs", "fragmented idle GPUs", lambda timeline: (timeline.times, timeline.fragmented)),
        ("evictions", "evictions so far", _evictions_so_far),
    ]
    title = "Fragmented idle GPUs and evictions, A and B"
    return _stacked_plot(a, b, panels, title=title, legend="upper left", whole_span=True)


# --- the page ------------------------------------------------------------------------------------------


def _queue_table(document: dict[str, Any]) -> str:
    """Each leaf queue's time-weighted allocated GPUs and allocated / fair share in A and in B."""
    a = {q["name"]: q for q in document["a"]["summary"]["queues"]}
    b = {q["name"]: q for q in document["b"]["summary"]["queues"]}
    rows = []
    for name in list(a) + [n for n in b if n not in a]:
        in_a, in_b = a.get(name, {}), b.get(name, {})
        rows.append(
            [
                name,
                number(in_a.get("allocatedGpu")),
                number(in_b.get("allocatedGpu")),
                number(in_a.get("allocatedOverFairShare")),
                number(in_b.get("allocatedOverFairShare")),
            ]
        )
    header = ["leaf queue", "allocated GPUs A", "allocated GPUs B", "allocated / fair share A", "... B"]
    return table(header, rows)


def _page(document: dict[str, Any], a: Timeline, b: Timeline, title: str) -> str:
    a_name, b_name = document["a"]["config"], document["b"]["config"]
    labels = dict(FIGURES)
    figures = table(
        ["figure", "A", "B", "B − A"],
        [
            [labels[row["figure"]], number(row["a"]), number(row["b"]), signed(row["delta"])]
            for row in document["figures"]
        ],
    )
    queues = _queue_table(document)
    groups = document["podGroups"]
    changed = groups["changed"]
    if changed:
        shown = changed[:_MAX_GROUP_ROWS]
        group_table = table(
            ["pod group", "queue", "start A", "start B", "B − A (s)", "fate A", "fate B"],
            [
                [
                    row["podGroup"],
                    row["queue"] or "",
                    start_text(row["a"]),
                    start_text(row["b"]),
                    signed(row["startDelta"]),
                    fate_text(row["a"]),
                    fate_text(row["b"]),
                ]
                for row in shown
            ],
        )
        more = len(changed) - len(shown)
        if more:
            group_table += f"<p>... and {more} more: every one is in summary.json.</p>"
        group_part = (
            f"<h2>Pod groups whose start or fate changed ({len(changed)} of {groups['total']})</h2>"
            + group_table
        )
    else:
        group_part = (
            f"<h2>Pod groups</h2><p>All {groups['total']} started at the same time, with the same fate.</p>"
        )
    return page(
        title,
        [
            f"<p>The same input under two scheduler configurations: <b>A</b> = {html.escape(a_name)} "
            f"(blue), <b>B</b> = {html.escape(b_name)} (orange).</p>",
            "<h2>Summary</h2>",
            figures,
            "<p>Each run's numbers are defined as in a single run's report (docs/reports.md); "
            "summary.json has both runs' summaries, these differences and the pod groups below.</p>",
            "<h2>Queues</h2>",
            queues,
            group_part,
            "<h2>Over time</h2>",
            image(_total_plot(a, b), "GPUs allocated and pods pending, A and B"),
            image(_queue_plot(a, b), "GPUs allocated per queue and fair share, A and B"),
            "<h2>Waiting and completion times</h2>",
            image(_distribution_plot(a, b), "waiting and completion time distributions, A and B"),
            "<h2>Fragmentation and evictions</h2>",
            image(_fragmentation_and_evictions_plot(a, b), "fragmented GPUs and evictions, A and B"),
        ],
    )
