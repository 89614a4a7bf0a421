"""The pieces both HTML reports are made of (`report_html` for one run, `compare_html` for two): the time
axis, step series, matplotlib figures embedded as PNG data, the grid of per-queue panels, and the page's
frame, tables and images. One place, so that the two pages look and read alike.

matplotlib (Agg: no display) is imported inside the functions that draw, so importing this module (and
`simulate` without `--report`) does not pay for it.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kai_scheduler.sim.timeline import FloatArray

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# The most queues drawn one panel each; the rest are left to the table.
MAX_QUEUE_PANELS = 12


# --- time axis ---------------------------------------------------------------------------------------


def time_unit(end: float) -> tuple[float, str]:
    """The unit a time axis ending at `end` seconds is drawn in: (seconds per unit, its name)."""
    if end > 7200:
        return 3600.0, "hours"
    if end > 120:
        return 60.0, "minutes"
    return 1.0, "seconds"


def steps(times: FloatArray, values: FloatArray, end: float) -> tuple[FloatArray, FloatArray]:
    """A step function's points for `step(where="post")`, from 0 (value 0 before its first step) to `end`."""
    if times.size == 0:
        return np.array([0.0, end]), np.zeros(2)
    xs = np.concatenate(([0.0], times, [max(end, float(times[-1]))]))
    ys = np.concatenate(([0.0], values, [values[-1]]))
    return xs, ys


# --- figures -------------------------------------------------------------------------------------------


def figure(
    rows: int = 1, columns: int = 1, *, height: float = 3.2, sharex: bool = True
) -> tuple[Figure, Any]:
    """A figure of `rows` x `columns` axes (always a 2-D array), the page's width."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 10.0
    made, axes = plt.subplots(
        rows, columns, figsize=(width, height * rows), squeeze=False, sharex=sharex, layout="constrained"
    )
    return made, axes


def png(drawn: Figure) -> str:
    """The figure as base64 PNG data, the figure closed (pyplot would otherwise keep every one)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    drawn.savefig(buffer, format="png", dpi=90)
    plt.close(drawn)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def busiest_queues(queues: list[str], weight: dict[str, float]) -> list[str]:
    """The MAX_QUEUE_PANELS queues of the largest weight, in their order (all of them when fewer)."""
    if len(queues) <= MAX_QUEUE_PANELS:
        return queues
    keep = set(sorted(queues, key=lambda q: -weight[q])[:MAX_QUEUE_PANELS])
    return [q for q in queues if q in keep]


def queue_grid(queues: list[str], draw: Callable[[Axes, str], None], *, unit: str, title: str) -> str:
    """One panel per queue (3 a row beyond 4, else up to 2), each drawn by `draw(axis, queue)`, titled with
    its queue; the first panel carries the legend, the bottom row the time axis' unit. As PNG data."""
    count = len(queues)
    columns = 3 if count > 4 else max(1, min(2, count))
    rows = max(1, -(-count // columns))
    drawn, axes = figure(rows, columns, height=2.4)
    for i, axis in enumerate(axes.flat):
        if i >= count:
            axis.set_visible(False)
            continue
        draw(axis, queues[i])
        axis.set_title(queues[i], fontsize=9)
        axis.set_ylim(bottom=0)
        axis.tick_params(labelsize=8)
        if i == 0:
            axis.legend(fontsize=7, loc="upper right")
    for axis in axes[-1]:
        axis.set_xlabel(f"simulated time ({unit})", fontsize=8)
    drawn.suptitle(title, fontsize=11)
    return png(drawn)


# --- the page ------------------------------------------------------------------------------------------


def number(value: Any, digits: int = 3) -> str:
    """A value as the pages show it: thousands separated, at most `digits` decimals, – for none."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:,.0f}"
    return html.escape(f"{value:,}" if isinstance(value, int) else str(value))


def table(header: list[str], rows: list[list[Any]]) -> str:
    """An HTML table; each cell as `number` shows it."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{number(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def image(data: str, alt: str) -> str:
    """A paragraph with the PNG data as an embedded image."""
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def page(title: str, body: list[str]) -> str:
    """The whole page: its inline style (no style sheet, no script), the title as heading, then `body`."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;"
        "text-align:left}img{max-width:100%}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        *body,
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
