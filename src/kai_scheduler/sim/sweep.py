"""`simulate --sweep FILE`: the sweep's runs as a document (`--output json`) and as a table with one row
per combination of values (`sim.sweep_file` reads the file, `sim.variants` runs the combinations).

Pure: the sweep and its outcomes in, a JSON-able dict out; `render` prints that dict.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from kai_scheduler.sim.compare import figure, number
from kai_scheduler.sim.sweep_file import Sweep
from kai_scheduler.sim.variants import Outcome

# The columns of the table, as paths into summary.json (every number is in the JSON document).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("gpuAllocationRatio", "GPU alloc"),
    ("waitSeconds.mean", "wait s"),
    ("waitSeconds.p99", "wait p99"),
    ("jctSeconds.mean", "JCT s"),
    ("jctSeconds.p99", "JCT p99"),
    ("podGroups.started", "started"),
    ("evictions", "evictions"),
    ("gpuHoursLostToPreemption", "GPU-h lost"),
    ("jainFairness", "Jain"),
)


def sweep_document(sweep: Sweep, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Every combination's values and the summary numbers of its run, in the sweep's order."""
    return {
        "sweep": sweep.source,
        "config": sweep.base,
        "parameters": list(sweep.parameters),
        "runs": [
            {"values": values, "summary": outcome.summary}
            for values, outcome in zip(sweep.values, outcomes, strict=True)
        ],
    }


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def render(document: dict[str, Any], console: Console) -> None:
    runs = document["runs"]
    base = document["config"] or "KAI's default configuration"
    console.print(
        f"[bold]kai-scheduler simulate --sweep {document['sweep']}[/bold]: "
        f"{len(runs)} run{'s' if len(runs) != 1 else ''} on {base}",
        soft_wrap=True,
    )
    table = Table(caption="wait and JCT: mean and p99, in simulated seconds; every number: --output json")
    for parameter in document["parameters"]:
        table.add_column(parameter, no_wrap=True)
    for _, label in COLUMNS:
        table.add_column(label, justify="right")
    for run in runs:
        table.add_row(
            *(_value(run["values"][p]) for p in document["parameters"]),
            *(number(figure(run["summary"], path)) for path, _ in COLUMNS),
        )
    # The table at its natural width, also when that is more than the console's: a row squeezed into
    # "0.…" says nothing.
    width = console.measure(table, options=console.options.update_width(1000)).maximum
    was = console.width
    console.width = max(width, was)
    try:
        console.print(table)
    finally:
        console.width = was
