"""A PodGroup's `kai.scheduler/reservation` in `simulate`'s input (reservation and backfill, issue #24):
read into the job's times on the simulated clock, written back by the state export (so a replay and the
start-time look-ahead start from the reservations the cluster holds), and refused with its place when it
is not a reservation."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import (
    node,
    node_manifest,
    pod,
    pod_group,
    pod_group_manifest,
    pod_manifest,
    queue,
    queue_manifest,
    run,
)
from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import ApiObject, Node, PodGroup, Queue
from kai_scheduler.cli import main
from kai_scheduler.cli.flags import scheduler_config
from kai_scheduler.model.reservation_annotation import format_reservation, parse_reservation
from kai_scheduler.model.reservations import Reservation
from kai_scheduler.model.snapshot import ClusterState, JobTimes, PodGroupState
from kai_scheduler.model.state_export import export_objects, export_state, manifest_list, session_instant
from kai_scheduler.sim.in_memory_cluster import build_cluster
from kai_scheduler.sim.loader import load_manifests

ORIGIN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_the_annotation_reads_back_what_was_written() -> None:
    reservation = Reservation(("n1", "n2"), 3600.25, 16.0)
    text = format_reservation(reservation, ORIGIN)
    assert json.loads(text) == {"nodes": ["n1", "n2"], "start": "2026-03-01T13:00:00.250000Z", "gpus": 16}
    assert parse_reservation(text, ORIGIN) == reservation
    # On a clock that starts an hour later, the same instant is second 0.25.
    later = parse_reservation(text, ORIGIN + timedelta(hours=1))
    assert later.start == 0.25
    # Nodes are kept sorted and once; gpus may be left out.
    loose = parse_reservation('{"nodes": ["b", "a", "b"], "start": "2026-03-01T12:00:10Z"}', ORIGIN)
    assert loose == Reservation(("a", "b"), 10.0, 0.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("n1,n2", "not JSON"),
        ('["n1"]', "expected a JSON object"),
        ('{"nodes": [], "start": "2026-03-01T12:00:00Z"}', "nodes: expected a non-empty list"),
        ('{"nodes": ["n1", 3], "start": "2026-03-01T12:00:00Z"}', "nodes: expected a non-empty list"),
        ('{"nodes": ["n1"]}', "start: expected an RFC 3339 time, got null"),
        ('{"nodes": ["n1"], "start": "tomorrow"}', "start: not an RFC 3339 time: 'tomorrow'"),
        ('{"nodes": ["n1"], "start": "2026-03-01T12:00:00Z", "gpus": -1}', "gpus: expected a number"),
        ('{"nodes": ["n1"], "start": "2026-03-01T12:00:00Z", "gpus": "8"}', "gpus: expected a number"),
        ('{"nodes": ["n1"], "start": "2026-03-01T12:00:00Z", "node": "n2"}', "unknown key 'node'"),
    ],
)
def test_what_is_not_a_reservation_says_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace("[", r"\[")) as caught:
        parse_reservation(text, ORIGIN)
    assert "\n" not in str(caught.value)


def _input(reservation: str | None) -> list[dict[str, Any]]:
    group = pod_group_manifest("big", "q", min_member=2)
    if reservation is not None:
        group["metadata"]["annotations"][c.RESERVATION_ANNOTATION] = reservation
    return [
        node_manifest("n1", gpus=8),
        node_manifest("n2", gpus=8),
        queue_manifest("q", gpu=-1),
        group,
        *(pod_manifest(f"big-{i}", "q", gpus=8, group="big") for i in range(2)),
    ]


def _write(tmp_path: Path, documents: list[dict[str, Any]]) -> Path:
    file = tmp_path / "input.yaml"
    file.write_text(yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
    return file


def test_the_input_reservation_is_the_jobs_on_the_simulated_clock(tmp_path: Path) -> None:
    text = '{"nodes": ["n2", "n1"], "start": "2026-03-01T12:30:00Z", "gpus": 16}'
    file = _write(tmp_path, _input(text))
    objects = [entry.obj for entry in load_manifests([str(file)])]
    cluster = build_cluster(objects, ORIGIN)
    cluster.admit_arrivals()
    assert cluster.cache.job_times["default/big"].reservation == Reservation(("n1", "n2"), 1800.0, 16.0)
    assert cluster.cache.snapshot().jobs["default/big"].reservation == Reservation(("n1", "n2"), 1800.0, 16.0)


def test_the_export_writes_the_reservation_a_replay_reads_back(tmp_path: Path) -> None:
    """The state as live mode or the look-ahead hands it on: the reservation keeps its distance to the
    cycle, whatever the replay's clock."""
    file = _write(tmp_path, _input(None))
    objects = [entry.obj for entry in load_manifests([str(file)])]
    group = next(o for o in objects if isinstance(o, PodGroup))
    now = 100.5
    held = Reservation(("n1", "n2"), now + 900.0, 16.0)
    state = ClusterState(
        nodes=[o for o in objects if isinstance(o, Node)],
        pods=[],
        pod_groups=[PodGroupState(group, 0)],
        queues=[o for o in objects if isinstance(o, Queue)],
        priority_classes=dict(c.BUILTIN_PRIORITY_CLASSES),
        job_times={"default/big": JobTimes(reservation=held)},
    )
    exported = next(o for o in export_objects(state, origin=ORIGIN, now=now) if o.kind == "PodGroup")
    assert parse_reservation(exported.metadata.annotations[c.RESERVATION_ANNOTATION], ORIGIN) == held
    # Through a file and the loader, replayed with second 0 at the cycle's moment.
    again = tmp_path / "again.yaml"
    again.write_text(
        yaml.safe_dump(manifest_list(export_state(state, origin=ORIGIN, now=now)), sort_keys=False)
    )
    replayed = build_cluster([e.obj for e in load_manifests([str(again)])], session_instant(ORIGIN, now))
    assert replayed.cache.job_times["default/big"].reservation == Reservation(("n1", "n2"), 900.0, 16.0)
    # A job without one gets none written (an old one on the PodGroup is not carried over).
    stale = group.model_copy(
        update={
            "metadata": group.metadata.model_copy(
                update={"annotations": {c.RESERVATION_ANNOTATION: format_reservation(held, ORIGIN)}}
            )
        }
    )
    bare = replace(state, pod_groups=[PodGroupState(stale, 0)], job_times={})
    written = next(o for o in export_objects(bare, origin=ORIGIN, now=now) if o.kind == "PodGroup")
    assert c.RESERVATION_ANNOTATION not in written.metadata.annotations


def test_a_bad_reservation_is_a_one_line_error_naming_the_pod_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = _write(tmp_path, _input('{"nodes": ["n1"], "start": "soon"}'))
    assert main(["simulate", str(file)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    assert "input.yaml: document 4" in error
    assert "PodGroup default/big" in error
    assert f"metadata.annotations.{c.RESERVATION_ANNOTATION}: start: not an RFC 3339 time: 'soon'" in error


def test_the_run_starts_from_the_input_reservation() -> None:
    """Two nodes from which `big` starts equally early (400 s): it keeps the node its input reservation
    names, and `small`, which would end after that, goes on the other one."""
    reserving = scheduler_config(
        str(Path(__file__).resolve().parents[2] / "examples" / "backfill-config.yaml")
    )

    def nodes_taken(held: str) -> tuple[str | None, str | None]:
        group = pod_group("big")
        start = "2026-01-01T00:06:40Z"  # 400 s after the simulation's second 0
        annotation = {c.RESERVATION_ANNOTATION: f'{{"nodes": ["{held}"], "start": "{start}", "gpus": 4}}'}
        group.metadata.annotations.update(annotation)
        objects: list[ApiObject] = [node("n1", gpus=4), node("n2", gpus=4), queue("q"), group]
        for name in ("n1", "n2"):
            ends = (100, 400, 400, 400)
            objects += [
                pod(f"busy-{name}-{i}", gpus=1, node_name=name, duration=d) for i, d in enumerate(ends)
            ]
        objects += [pod("big-0", gpus=4, duration=100, group="big"), pod("small", gpus=1, duration=500)]
        pods = {p.key: p.node for p in run(objects, reserving).cluster.pods}
        return pods["default/big-0"], pods["default/small"]

    assert nodes_taken("n1") == ("n1", "n2")
    assert nodes_taken("n2") == ("n2", "n1")
