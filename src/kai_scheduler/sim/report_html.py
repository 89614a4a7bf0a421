"""`simulate --report DIR`: `DIR/index.html`, one self-contained page (its PNG plots embedded as data: URIs,
no script, no style sheet, nothing fetched: it opens from disk, mailed or copied anywhere), and
`DIR/summary.json` (`sim.summary`). See docs/reports.md.

Pure but for writing the two files: the result document and the run's facts in. matplotlib (Agg: no
display) is imported here only, so `simulate` without `--report` does not pay for it.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kai_scheduler.sim.summary import completion_times, summary, waits
from kai_scheduler.sim.timeline import FloatArray, Timeline, replay
from kai_scheduler.sim.timeseries import RunFacts

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# The most queues drawn one by one; the rest are summed ("other queues") or left to the table.
MAX_QUEUE_PANELS = 12
MAX_QUEUE_LINES = 10


def write_report(directory: Path, document: dict[str, Any], facts: RunFacts, *, title: str) -> dict[str, Any]:
    """Write `index.html` and `summary.json` into `directory` (made if missing); return the summary."""
    timeline = replay(document, facts)
    numbers = summary(timeline)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(numbers, indent=2) + "\n", encoding="utf-8")
    (directory / "index.html").write_text(_page(timeline, numbers, title), encoding="utf-8")
    return numbers


# --- time axis ---------------------------------------------------------------------------------------


def _time_unit(end: float) -> tuple[float, str]:
    if end > 7200:
        return 3600.0, "hours"
    if end > 120:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _steps(times: FloatArray, values: FloatArray, end: float) -> tuple[FloatArray, FloatArray]:
    """A step function's points for `step(where="post")`, from 0 (value 0 before its first step) to `end`."""
    if times.size == 0:
        return np.array([0.0, end]), np.zeros(2)
    xs = np.concatenate(([0.0], times, [max(end, float(times[-1]))]))
    ys = np.concatenate(([0.0], values, [values[-1]]))
    return xs, ys


# --- plots ---------------------------------------------------------------------------------------------


def _figure(
    rows: int = 1, columns: int = 1, *, height: float = 3.2, sharex: bool = True
) -> tuple[Figure, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 10.0
    figure, axes = plt.subplots(
        rows, columns, figsize=(width, height * rows), squeeze=False, sharex=sharex, layout="constrained"
    )
    return figure, axes


def _png(figure: Figure) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _busiest(timeline: Timeline, series: dict[str, FloatArray], times: FloatArray, limit: int) -> list[str]:
    from kai_scheduler.sim.timeline import integral

    weight = {q: integral(times, series[q], max(timeline.end, 1e-9)) for q in timeline.queues}
    if timeline.end <= 0:
        weight = {q: float(series[q][-1]) if series[q].size else 0.0 for q in timeline.queues}
    chosen = sorted(timeline.queues, key=lambda q: -weight[q])[:limit]
    return [q for q in timeline.queues if q in chosen]


def busiest_queues(queues: list[str], weight: dict[str, float]) -> list[str]:
    """The MAX_QUEUE_PANELS queues of the largest weight, in their order (all of them when fewer)."""
    if len(queues) <= MAX_QUEUE_PANELS:
        return queues
    keep = set(sorted(queues, key=lambda q: -weight[q])[:MAX_QUEUE_PANELS])
    return [q for q in queues if q in keep]


def queue_panels(count: int) -> tuple[Any, Any]:
    """A figure with a grid of `count` queue panels (3 a row beyond 4, else up to 2)."""
    columns = 3 if count > 4 else max(1, min(2, count))
    rows = max(1, -(-count // columns))
    return _figure(rows, columns, height=2.4)


def _allocation_plot(timeline: Timeline) -> str:
    scale, unit = _time_unit(timeline.end)
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
    figure, axes = queue_panels(len(queues))
    for i, axis in enumerate(axes.flat):
        if i >= len(queues):
            axis.set_visible(False)
            continue
        queue = queues[i]
        xs, ys = _steps(timeline.times, timeline.allocated[queue], timeline.end)
        axis.fill_between(xs / scale, ys, step="post", alpha=0.35, color="tab:blue", label="allocated")
        axis.step(xs / scale, ys, where="post", color="tab:blue", linewidth=1.2)
        sx, sy = _steps(timeline.fair_share_times, shares[queue], timeline.end)
        axis.step(sx / scale, sy, where="post", color="tab:red", linestyle="--", label="fair share")
        axis.set_title(queue, fontsize=9)
        axis.set_ylim(bottom=0)
        axis.tick_params(labelsize=8)
        if i == 0:
            axis.legend(fontsize=7, loc="upper right")
    for axis in axes[-1]:
        axis.set_xlabel(f"simulated time ({unit})", fontsize=8)
    figure.suptitle("GPUs allocated per queue, against its fair share", fontsize=11)
    return _png(figure)


def _pending_plot(timeline: Timeline) -> str:
    scale, unit = _time_unit(timeline.end)
    figure, axes = _figure()
    axis: Axes = axes[0][0]
    queues = _busiest(timeline, timeline.pending, timeline.times, MAX_QUEUE_LINES)
    for queue in queues:
        xs, ys = _steps(timeline.times, timeline.pending[queue], timeline.end)
        axis.step(xs / scale, ys, where="post", label=queue)
    rest = [q for q in timeline.queues if q not in queues]
    if rest:
        total = np.sum([timeline.pending[q] for q in rest], axis=0)
        xs, ys = _steps(timeline.times, total, timeline.end)
        axis.step(xs / scale, ys, where="post", label=f"{len(rest)} other queues", color="grey")
    axis.set_ylim(bottom=0)
    axis.set_xlabel(f"simulated time ({unit})")
    axis.set_ylabel("pending pods")
    axis.set_title("Pending pods per queue")
    if queues:
        axis.legend(fontsize=8, loc="upper right", ncols=2)
    return _png(figure)


def _distribution_plot(timeline: Timeline) -> str:
    figure, axes = _figure(1, 2, sharex=False)
    for axis, values, what in (
        (axes[0][0], waits(timeline), "waiting time (arrival to start)"),
        (axes[0][1], completion_times(timeline), "job completion time (arrival to completion)"),
    ):
        axis.set_title(f"{what}\n{len(values)} pod groups", fontsize=10)
        if not values:
            axis.text(0.5, 0.5, "none", ha="center", va="center", transform=axis.transAxes)
            continue
        scale, unit = _time_unit(max(values))
        array = np.asarray(values) / scale
        axis.hist(array, bins=min(40, max(5, len(values) // 3)), color="tab:blue", alpha=0.7)
        for q, style in ((50, "-"), (99, "--")):
            axis.axvline(float(np.percentile(array, q)), color="tab:red", linestyle=style, label=f"p{q}")
        axis.set_xlabel(unit)
        axis.set_ylabel("pod groups")
        axis.legend(fontsize=8)
    return _png(figure)


def _fragmentation_plot(timeline: Timeline) -> str:
    scale, unit = _time_unit(timeline.end)
    figure, axes = _figure()
    axis: Axes = axes[0][0]
    idle = np.maximum(timeline.capacity - timeline.total_allocated, 0.0)
    xs, ys = _steps(timeline.times, idle, timeline.end)
    axis.step(xs / scale, ys, where="post", color="tab:grey", label="idle GPUs")
    xs, ys = _steps(timeline.times, timeline.fragmented, timeline.end)
    axis.fill_between(xs / scale, ys, step="post", alpha=0.4, color="tab:orange")
    axis.step(xs / scale, ys, where="post", color="tab:orange", label="fragmented idle GPUs")
    axis.set_ylim(bottom=0)
    axis.set_xlabel(f"simulated time ({unit})")
    axis.set_ylabel("GPUs")
    axis.set_title("GPU fragmentation: idle GPUs no waiting request can use")
    axis.legend(fontsize=8, loc="upper right")
    return _png(figure)


def _evictions_plot(timeline: Timeline) -> str:
    scale, unit = _time_unit(timeline.end)
    figure, axes = _figure()
    axis: Axes = axes[0][0]
    actions = sorted({e.action for e in timeline.evictions})
    for action in actions:
        times = np.array([e.time for e in timeline.evictions if e.action == action])
        counts = np.arange(1, times.size + 1, dtype=float)
        xs, ys = _steps(times, counts, timeline.end)
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
    return _png(figure)


# --- the page ------------------------------------------------------------------------------------------


def _number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:,.0f}"
    return html.escape(f"{value:,}" if isinstance(value, int) else str(value))


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_number(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _image(data: str, alt: str) -> str:
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def _page(timeline: Timeline, numbers: dict[str, Any], title: str) -> str:
    wait, jct = numbers["waitSeconds"], numbers["jctSeconds"]
    groups = numbers["podGroups"]
    overview = _table(
        ["figure", "value"],
        [
            ["simulated seconds", numbers["time"]],
            ["GPU capacity", numbers["gpuCapacity"]],
            ["GPU allocation ratio (time-weighted)", numbers["gpuAllocationRatio"]],
            [
                "pod groups: total / started / completed",
                f"{groups['total']} / {groups['started']} / {groups['completed']}",
            ],
            ["wait seconds: mean / p50 / p99", " / ".join(_number(wait[k]) for k in ("mean", "p50", "p99"))],
            ["JCT seconds: mean / p50 / p99", " / ".join(_number(jct[k]) for k in ("mean", "p50", "p99"))],
            ["evictions", numbers["evictions"]],
            ["GPU-hours lost to preemption", numbers["gpuHoursLostToPreemption"]],
            ["Jain's fairness index (allocated / fair share)", numbers["jainFairness"]],
            [
                "fragmented idle GPUs: mean / max",
                f"{_number(numbers['fragmentedGpus']['mean'])} / {_number(numbers['fragmentedGpus']['max'])}",
            ],
        ],
    )
    queues = _table(
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
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;"
        "text-align:left}img{max-width:100%}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        "<h2>Summary</h2>",
        overview,
        "<p>Waits count pod groups from their first pod's arrival until they first had minMember pods "
        "running; completion times until their last pod succeeded. The same numbers are in "
        "summary.json.</p>",
        "<h2>Queues</h2>",
        queues,
        _image(_allocation_plot(timeline), "GPUs allocated per queue against its fair share"),
        _image(_pending_plot(timeline), "pending pods per queue"),
        "<h2>Waiting and completion times</h2>",
        _image(_distribution_plot(timeline), "waiting and job completion time distributions"),
        "<h2>Fragmentation</h2>",
        "<p>Fragmented idle GPUs: idle GPU capacity that none of the waiting GPU requests can use, counting "
        "GPUs only. A node's idle whole GPUs count when they are fewer than the smallest waiting whole-GPU "
        "request (and no fractional request waits); the idle part of a shared GPU counts when it is smaller "
        "than the smallest waiting fraction. With nothing waiting, nothing is fragmented.</p>",
        _image(_fragmentation_plot(timeline), "GPU fragmentation over time"),
        "<h2>Evictions</h2>",
        _image(_evictions_plot(timeline), "evictions over time"),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
