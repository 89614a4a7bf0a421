"""The plugin server (`/get-snapshot`, `/get-job-order`) on a state made by hand: answers, status codes,
and the replay command its snapshot carries, run as written."""

from __future__ import annotations

import json
import shlex
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import cluster_state, node, pod, pod_group, queue
from kai_scheduler.cli import main
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.k8s.scheduler.plugin_server import CycleState, PluginServer, endpoint_paths
from kai_scheduler.model.cache import build_snapshot

ORIGIN = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def get(server: PluginServer, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"{server.url}{path}", timeout=5) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def cycle_state() -> CycleState:
    objects = [
        node("n1", gpus=2),
        queue("q", gpu=2),
        pod("running", gpus=2, node_name="n1", priority_class="inference"),  # not preemptible
        pod_group("gang", min_member=2),
        pod("gang-0", group="gang", gpus=1),
        pod("gang-1", group="gang", gpus=1),
        pod("solo", gpus=1, priority_class="build-preemptible"),
    ]
    return CycleState(cycle=7, now=12.5, origin=ORIGIN, state=cluster_state(objects))


def replay(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> dict[str, Any]:
    """Save the snapshot as its comment says and run the command the comment gives (plus JSON output)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "snapshot.yaml").write_text(text)
    [command] = [line[1:].strip() for line in text.splitlines() if "kai-scheduler simulate" in line]
    words = shlex.split(command)
    assert words[:3] == ["kai-scheduler", "simulate", "snapshot.yaml"]
    assert main([*words[1:], "--output", "json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_answers_503_before_the_first_cycle_then_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    config = parse_config({"tiers": [{"plugins": [{"name": "proportion"}, {"name": "snapshot"}]}]})
    published: list[CycleState] = []
    with PluginServer(lambda: published[-1] if published else None, config, port=0) as server:
        assert server.host == "127.0.0.1"
        assert get(server, "/get-snapshot")[0] == 503
        published.append(cycle_state())
        status, content_type, text = get(server, "/get-snapshot")
        assert (status, content_type) == (200, "application/yaml; charset=utf-8")
        # The job order is not configured here, and other paths do not exist.
        assert get(server, "/get-job-order")[0] == 404
        assert get(server, "/metrics")[0] == 404
        assert get(server, "/get-snapshot?format=xml")[0] == 400
        status, content_type, body = get(server, "/get-snapshot?format=json")
        assert (status, content_type) == (200, "application/json")
        _, _, config_text = get(server, "/get-snapshot?format=config")
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert text.startswith("# kai-scheduler snapshot: the cluster as scheduling cycle 7 saw it, at ")
    assert "2026-03-01T12:00:12.500000Z" in header[0]
    assert yaml.safe_load(text) == json.loads(body)  # the same List either way
    assert parse_config(yaml.safe_load(config_text)) == config
    # Custom configuration: the comment gives it, and how to fetch and use it.
    assert any("--config scheduler-config.yaml" in line for line in header)
    (tmp_path / "scheduler-config.yaml").write_text(config_text)
    document = replay(text, tmp_path, monkeypatch, capsys)
    assert document["summary"]["cycles"] == 1
    pods = {p["name"]: p for p in document["pods"]}
    assert pods["running"]["node"] == "n1" and pods["gang-0"]["node"] is None


def test_the_replay_command_reproduces_the_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    cycle = cycle_state()
    with PluginServer(lambda: cycle, SchedulerConfig(), port=0) as server:
        _, _, text = get(server, "/get-snapshot")
    assert "--config" not in text  # the default configuration needs none
    assert "--start 2026-03-01T12:00:12.500000Z --cycles 1" in text
    document = replay(text, tmp_path, monkeypatch, capsys)
    # What the cycle itself decided, run directly on its state:
    result = Scheduler(SchedulerConfig()).run(build_snapshot(cycle.state), cycle=7, now=12.5)
    assert set(result.unschedulable) == {"default/gang", "default/pg-solo"} and result.decisions == []
    reasons = {f"default/{g['name']}": g["unschedulableReason"] for g in document["podGroups"]}
    assert {job: reasons[job] for job in result.unschedulable} == result.unschedulable
    assert document["decisions"] == []


def test_the_job_order_lists_pending_jobs_with_queue_and_priority() -> None:
    cycle = cycle_state()
    config = SchedulerConfig()
    # KAI's default lists the snapshot plugin only; with it we serve the cycle's fair share and usage too.
    assert endpoint_paths(config) == ("/get-snapshot", "/get-fair-share", "/get-queue-usage")
    config = parse_config({"tiers": [{"plugins": [{"name": "priority"}, {"name": "reflectjoborder"}]}]})
    assert endpoint_paths(config) == ("/get-job-order",)
    with PluginServer(lambda: cycle, config, port=0) as server:
        status, content_type, body = get(server, "/get-job-order")
        assert get(server, "/get-snapshot")[0] == 404
    assert (status, content_type) == (200, "application/json")
    # solo (build-preemptible, 75) before gang (train, 50), although the gang is older.
    assert json.loads(body) == [
        {"job": "default/pg-solo", "queue": "q", "priority": 75, "preemptible": True, "pendingPods": 1},
        {"job": "default/gang", "queue": "q", "priority": 50, "preemptible": True, "pendingPods": 2},
    ]


def test_each_cycle_is_answered_from_its_own_state() -> None:
    first = cycle_state()
    later = CycleState(cycle=8, now=13.5, origin=ORIGIN, state=cluster_state([node("n1", gpus=2)]))
    published = [first]
    with PluginServer(lambda: published[-1], SchedulerConfig(), port=0) as server:
        assert "cycle 7" in get(server, "/get-snapshot")[2]
        published.append(later)
        text = get(server, "/get-snapshot")[2]
    assert "cycle 8" in text and "kind: Pod" not in text
