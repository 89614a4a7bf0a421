"""`simulate --report DIR`: `DIR/index.html`, one self-contained page (its PNG plots embedded as data: URIs,
no script, no style sheet, nothing fetched: it opens from disk, mailed or copied anywhere), and
`DIR/summary.json` (`sim.summary`). See docs/reports.md.

Pure but for writing the two files: the result document and the run's facts in. Drawn with the pieces the
comparison page shares (`sim.html_parts`), which import matplotlib only when a plot is drawn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kai_scheduler.sim.html_parts import (
    busiest_queues,
    figure,
    image,
    number,
    page,
    png,
    queue_grid,
    steps,
    table,
    time_unit,
)
from kai_scheduler.sim.summary import completion_times, summary, waits
from kai_scheduler.sim.timeline import FloatArray, Timeline, replay
from kai_scheduler.sim.timeseries import RunFacts

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# The most queues drawn one by one in the pending plot; the rest are summed ("other queues").
MAX_QUEUE_LINES = 10


def write_report(directory: Path, document: dict[str, Any], facts: RunFacts, *, title: str) -> dict[str, Any]:
    """Write `index.html` and `summary.json` into `directory` (made if missing); return the summary."""
    timeline = replay(document, facts)
    numbers = summary(timeline)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(numbers, indent=2) + "\n", encoding="utf-8")
    page_text = _page(timeline, numbers, title, _reservation_parts(document))
    (directory / "index.html").write_text(page_text, encoding="utf-8")
    return numbers


# --- plots ---------------------------------------------------------------------------------------------


def _busiest(timeline: Timeline, series: dict[str, FloatArray], times: FloatArray, limit: int) -> list[str]:
    from kai_scheduler.sim.timeline import integral

    weight = {q: integral(times, series[q], max(timeline.end, 1e-9)) for q in timeline.queues}
    if timeline.end <= 0:
        weight = {q: float(series[q][-1]) if series[q].size else 0.0 for q in timeline.queues}
    chosen = sorted(timeline.queues, key=lambda q: -weight[q])[:limit]
    return [q for q in timeline.queues if q in chosen]


def _allocation_plot(timeline: Timeline) -> str:
    scale, unit = time_unit(timeline.end)
    shares = timeline.fair_share
    both = {q: timeline.allocated[q] for q in timeline.leaf_queues}
    queues = [q for q in timeline.leaf_queues if q in both]
    queues = busiest_queues(
        queues,
        {
            q: float(timeline.allocated[q].sum()) + float(shares[q].sum() if shares[q].size else 0.0)
            for q in queues
        },
    )

    def draw(axis: Axes, queue: str) -> None:
        xs, ys = steps(timeline.times, timeline.allocated[queue], timeline.end)
        axis.fill_between(xs / scale, ys, step="post", alpha=0.35, color="tab:blue", label="allocated")
        axis.step(xs / scale, ys, where="post", color="tab:blue", linewidth=1.2)
        sx, sy = steps(timeline.fair_share_times, shares[queue], timeline.end)
        axis.step(sx / scale, sy, where="post", color="tab:red", linestyle="--", label="fair share")

    return queue_grid(queues, draw, unit=unit, title="GPUs allocated per queue, against its fair share")


def _pending_plot(timeline: Timeline) -> str:
    scale, unit = time_unit(timeline.end)
    drawn, axes = figure()
    axis: Axes = axes[0][0]
    queues = _busiest(timeline, timeline.pending, timeline.times, MAX_QUEUE_LINES)
    for queue in queues:
        xs, ys = steps(timeline.times, timeline.pending[queue], timeline.end)
        axis.step(xs / scale, ys, where="post", label=queue)
    rest = [q for q in timeline.queues if q not in queues]
    if rest:
        total = np.sum([timeline.pending[q] for q in rest], axis=0)
        xs, ys = steps(timeline.times, total, timeline.end)
        axis.step(xs / scale, ys, where="post", label=f"{len(rest)} other queues", color="grey")
    axis.set_ylim(bottom=0)
    axis.set_xlabel(f"simulated time ({unit})")
    axis.set_ylabel("pending pods")
    axis.set_title("Pending pods per queue")
    if queues:
        axis.legend(fontsize=8, loc="upper right", ncols=2)
    return png(drawn)


def _distribution_plot(timeline: Timeline) -> str:
    drawn, axes = figure(1, 2, sharex=False)
    for axis, values, what in (
        (axes[0][0], waits(timeline), "waiting time (arrival to start)"),
        (axes[0][1], completion_times(timeline), "job completion time (arrival to completion)"),
    ):
        axis.set_title(f"{what}\n{len(values)} pod groups", fontsize=10)
        if not values:
            axis.text(0.5, 0.5, "none", ha="center", va="center", transform=axis.transAxes)
            continue
        scale, unit = time_unit(max(values))
        array = np.asarray(values) / scale
        axis.hist(array, bins=min(40, max(5, len(values) // 3)), color="tab:blue", alpha=0.7)
        for q, style in ((50, "-"), (99, "--")):
            axis.axvline(float(np.percentile(array, q)), color="tab:red", linestyle=style, label=f"p{q}")
        axis.set_xlabel(unit)
        axis.set_ylabel("pod groups")
        axis.legend(fontsize=8)
    return png(drawn)


def _fragmentation_plot(timeline: Timeline) -> str:
    scale, unit = time_unit(timeline.end)
    drawn, axes = figure()
    axis: Axes = axes[0][0]
    idle = np.maximum(timeline.capacity - timeline.total_allocated, 0.0)
    xs, ys = steps(timeline.times, idle, timeline.end)
    axis.step(xs / scale, ys, where="post", color="tab:grey", label="idle GPUs")
    xs, ys = steps(timeline.times, timeline.fragmented, timeline.end)
    axis.fill_between(xs / scale, ys, step="post", alpha=0.4, color="tab:orange")
    axis.step(xs / scale, ys, where="post", color="tab:orange", label="fragmented idle GPUs")
    axis.set_ylim(bottom=0)
    axis.set_xlabel(f"simulated time ({unit})")
    axis.set_ylabel("GPUs")
    axis.set_title("GPU fragmentation: idle GPUs no waiting request can use")
    axis.legend(fontsize=8, loc="upper right")
    return png(drawn)


def _evictions_plot(timeline: Timeline) -> str:
    scale, unit = time_unit(timeline.end)
    drawn, axes = figure()
    axis: Axes = axes[0][0]
    actions = sorted({e.action for e in timeline.evictions})
    for action in actions:
        times = np.array([e.time for e in timeline.evictions if e.action == action])
        counts = np.arange(1, times.size + 1, dtype=float)
        xs, ys = steps(times, counts, timeline.end)
        axis.step(xs / scale, ys, where="post", label=action)
    if not actions:
        axis.text(0.5, 0.5, "no evictions", ha="center", va="center", transform=axis.transAxes)
    axis.set_xlim(0, max(timeline.end, 1.0) / scale)
    axis.set_ylim(bottom=0)
    axis.set_xlabel(f"simulated time ({unit})")
    axis.set_ylabel("evictions so far")
    axis.set_title("Evictions over time, by the action that took them")
    if actions:
        axis.legend(fontsize=8, loc="upper left")
    return png(drawn)


# --- the page ------------------------------------------------------------------------------------------


_FRAGMENTATION = (
    "<p>Fragmented idle GPUs: idle GPU capacity that none of the waiting GPU requests can use, counting "
    "GPUs only. A node's idle whole GPUs count when they are fewer than the smallest waiting whole-GPU "
    "request (and no fractional request waits); the idle part of a shared GPU counts when it is smaller "
    "than the smallest waiting fraction. With nothing waiting, nothing is fragmented.</p>"
)


# The most rows the reservation and backfill tables show; the JSON document has them all.
MAX_RESERVATION_ROWS = 50


def _reservation_parts(document: dict[str, Any]) -> list[str]:
    """With the `reservation` plugin configured: the reservations held at the end of the run and the pod
    groups backfilled onto reserved capacity. Without it: nothing (the page is as it was)."""
    if "backfilled" not in document:
        return []
    held = [g for g in document["podGroups"] if g.get("reservation")]
    backfilled = document["backfilled"]
    parts = [
        "<h2>Reservation and backfill</h2>",
        f"<p>{len(held)} pod groups hold a reservation at the end of the run: nodes kept for a pod group "
        "that cannot start yet, from when it is expected to start there. "
        f"{len(backfilled)} pod groups were backfilled: placed on reserved capacity because they were "
        "expected to end before the reservation starts.</p>",
    ]
    if held:
        rows: list[list[Any]] = [
            [
                f"{g['namespace']}/{g['name']}",
                g["queue"],
                ", ".join(g["reservation"]["nodes"]),
                g["reservation"]["gpus"],
                g["reservation"]["expectedStart"],
            ]
            for g in held[:MAX_RESERVATION_ROWS]
        ]
        parts.append(table(["pod group", "queue", "nodes", "GPUs", "expected start (s)"], rows))
    if backfilled:
        rows = [[b["cycle"], b["time"], b["podGroup"]] for b in backfilled[:MAX_RESERVATION_ROWS]]
        parts.append(table(["cycle", "time (s)", "backfilled pod group"], rows))
    if max(len(held), len(backfilled)) > MAX_RESERVATION_ROWS:
        parts.append(f"<p>The first {MAX_RESERVATION_ROWS} rows of each; --output json has them all.</p>")
    return parts


def _page(timeline: Timeline, numbers: dict[str, Any], title: str, reservations: list[str]) -> str:
    wait, jct = numbers["waitSeconds"], numbers["jctSeconds"]
    groups = numbers["podGroups"]
    overview = table(
        ["figure", "value"],
        [
            ["simulated seconds", numbers["time"]],
            ["GPU capacity", numbers["gpuCapacity"]],
            ["GPU allocation ratio (time-weighted)", numbers["gpuAllocationRatio"]],
            [
                "pod groups: total / started / completed",
                f"{groups['total']} / {groups['started']} / {groups['completed']}",
            ],
            ["wait seconds: mean / p50 / p99", " / ".join(number(wait[k]) for k in ("mean", "p50", "p99"))],
            ["JCT seconds: mean / p50 / p99", " / ".join(number(jct[k]) for k in ("mean", "p50", "p99"))],
            ["evictions", numbers["evictions"]],
            ["GPU-hours lost to preemption", numbers["gpuHoursLostToPreemption"]],
            ["Jain's fairness index (allocated / fair share)", numbers["jainFairness"]],
            [
                "fragmented idle GPUs: mean / max",
                f"{number(numbers['fragmentedGpus']['mean'])} / {number(numbers['fragmentedGpus']['max'])}",
            ],
        ],
    )
    queues = table(
        [
            "leaf queue",
            "allocated GPUs (mean)",
            "fair share GPUs (mean)",
            "allocated / fair share",
            "GPU-hours",
        ],
        [
            [q["name"], q["allocatedGpu"], q["fairShareGpu"], q["allocatedOverFairShare"], q["gpuHours"]]
            for q in numbers["queues"]
        ],
    )
    return page(
        title,
        [
            "<h2>Summary</h2>",
            overview,
            "<p>Waits count pod groups from their first pod's arrival until they first had minMember pods "
            "running; completion times until their last pod succeeded. The same numbers are in "
            "summary.json.</p>",
            "<h2>Queues</h2>",
            queues,
            image(_allocation_plot(timeline), "GPUs allocated per queue against its fair share"),
            image(_pending_plot(timeline), "pending pods per queue"),
            "<h2>Waiting and completion times</h2>",
            image(_distribution_plot(timeline), "waiting and job completion time distributions"),
            "<h2>Fragmentation</h2>",
            _FRAGMENTATION,
            image(_fragmentation_plot(timeline), "GPU fragmentation over time"),
            "<h2>Evictions</h2>",
            image(_evictions_plot(timeline), "evictions over time"),
            *reservations,
        ],
    )
