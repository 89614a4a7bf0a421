"""What `simulate` shows of reservation and backfill (issue #24), on results made by hand: each pod group's
`reservation` in the JSON document (as the cluster's job times leave it at the end of the run) and the
pod groups backfilled, in the text output and the report; a configuration without the `reservation`
plugin gets the document, text and page it always had."""

from __future__ import annotations

from dataclasses import replace
from io import StringIO
from pathlib import Path
from typing import Any

from rich.console import Console

from helpers import groups_by_name, node, pod, pod_group, queue, run
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.model.reservations import Reservation
from kai_scheduler.model.snapshot import JobTimes
from kai_scheduler.sim.engine import SimulationResult
from kai_scheduler.sim.report import render
from kai_scheduler.sim.report_html import write_report
from kai_scheduler.sim.results import result_document
from kai_scheduler.sim.timeseries import run_facts


def _cluster() -> list[ApiObject]:
    """Two full 8-GPU nodes; a 2 x 8-GPU gang and a one-GPU job wait."""
    return [
        node("n1", gpus=8),
        node("n2", gpus=8),
        queue("q"),
        pod("busy-1", gpus=8, node_name="n1"),
        pod("busy-2", gpus=8, node_name="n2"),
        pod_group("big", min_member=2),
        *(pod(f"big-{i}", gpus=8, group="big") for i in range(2)),
        pod("small", gpus=1),
    ]


def _reserving(result: SimulationResult) -> SimulationResult:
    """The result as the `reservation` plugin would leave it: big holds both nodes from 3600 s; small was
    backfilled in the first cycle and big-less in the second."""
    result.reserving = True
    result.cluster.cache.set_job_times(
        "default/big", JobTimes(reservation=Reservation(("n1", "n2"), 3600.0, 16.0))
    )
    result.cycles[0] = replace(result.cycles[0], backfilled=["default/small"])
    result.cycles[1] = replace(result.cycles[1], backfilled=["default/other"])
    return result


def _text(document: dict[str, Any]) -> str:
    out = StringIO()
    render(document, Console(file=out, width=140), title="t")
    return out.getvalue()


def test_each_pod_group_shows_its_reservation_and_the_run_its_backfilled_jobs() -> None:
    result = _reserving(run(_cluster(), cycles=2))
    document = result_document(result)
    groups = groups_by_name(document)
    assert groups["big"]["reservation"] == {"nodes": ["n1", "n2"], "gpus": 16.0, "expectedStart": 3600.0}
    # Every pod group has the field: null for one that holds nothing.
    assert groups["pg-small"]["reservation"] is None
    assert document["backfilled"] == [
        {"cycle": 1, "time": 0.0, "podGroup": "default/small"},
        {"cycle": 2, "time": 1.0, "podGroup": "default/other"},
    ]
    text = _text(document)
    row = next(line for line in text.splitlines() if "default/big" in line and "n1, n2" in line)
    assert "16" in row and "3600s" in row
    assert "Reservations at the end of the run (1)" in text
    assert "backfilled onto reserved capacity: 2 pod groups: default/small at 0s, default/other at 1s" in text


def test_a_run_that_reserved_and_backfilled_nothing_says_so() -> None:
    result = run(_cluster(), cycles=2)
    result.reserving = True
    document = result_document(result)
    assert document["backfilled"] == []
    assert all(group["reservation"] is None for group in document["podGroups"])
    text = _text(document)
    assert "backfilled onto reserved capacity: none" in text
    assert "Reservations at the end" not in text


def test_without_the_plugin_the_outputs_are_as_they_were(tmp_path: Path) -> None:
    result = run(_cluster(), cycles=2)
    document = result_document(result)
    assert "backfilled" not in document
    assert all("reservation" not in group for group in document["podGroups"])
    assert "backfilled" not in _text(document) and "Reservation" not in _text(document)
    write_report(tmp_path, document, run_facts(result), title="t")
    assert "Reservation and backfill" not in (tmp_path / "index.html").read_text(encoding="utf-8")


def test_the_report_lists_the_reservations_and_the_backfilled_pod_groups(tmp_path: Path) -> None:
    result = _reserving(run(_cluster(), cycles=2))
    write_report(tmp_path, result_document(result), run_facts(result), title="t")
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "<h2>Reservation and backfill</h2>" in page
    assert "1 pod groups hold a reservation" in page and "2 pod groups were backfilled" in page
    assert "<td>default/big</td><td>q</td><td>n1, n2</td><td>16</td><td>3,600</td>" in page
    assert "<td>1</td><td>0</td><td>default/small</td>" in page
    assert "<td>2</td><td>1</td><td>default/other</td>" in page
