"""Reservation and backfill live (issue #24), against the fake API server, with the scheduler configured as
the chart configures it: `examples/backfill-config.yaml` as `scheduler.config`, rendered into its
ConfigMap and read as `kai-scheduler run --config` reads it.

Three 8-GPU nodes are busy: n1 for another 50 minutes, n2 for 110 (their pods' `duration` annotations,
counted from their `startTime`), n3 for good (no duration). A gang of two 8-GPU pods cannot start now:
its reservation holds n1 and n2 from when n2 frees. The reservation is on the PodGroup (annotation and a
`Reserved` event), in `kubectl kai why` and in the reserved-GPU gauge; a scheduler started afresh reads it
back and keeps it as it is: no write, no `ReservationMoved`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from identities import ADMIN
from live_support import Live, run

from chart_support import render_chart
from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.api import constants as c
from kai_scheduler.api.timestamps import parse_rfc3339
from kai_scheduler.cli.flags import scheduler_config
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.scheduler.metrics import SchedulerMetrics
from kai_scheduler.kubectl_plugin import why
from kai_scheduler.kubectl_plugin.api_client import Cluster

ANNOTATION = c.RESERVATION_ANNOTATION
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "backfill-config.yaml"


def chart_config(tmp_path: Path) -> SchedulerConfig:
    """The documented configuration (`examples/backfill-config.yaml`: KAI's plugins and `reservation`) as a
    user gives it to the chart's `scheduler.config`, read from the rendered ConfigMap as the scheduler's
    container reads its mounted file."""
    values = {"scheduler": {"config": yaml.safe_load(EXAMPLE.read_text())}}
    [config_map] = [
        document
        for _, document in render_chart(values)
        if document["kind"] == "ConfigMap" and document["metadata"]["name"].endswith("-scheduler-config")
    ]
    path = tmp_path / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    config = scheduler_config(str(path))
    assert config.plugin("reservation") is not None
    return config


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def busy(name: str, node: str, started: float, duration: str | None) -> dict[str, Any]:
    """A pod running on `node` since `started`, as its kubelet reports it."""
    pod = pod_manifest(name, group=name, gpus=8, node_name=node, duration=duration)
    pod["status"] = {"phase": "Running", "startTime": _stamp(started)}
    return pod


def reservation(server: FakeApiServer) -> dict[str, Any] | None:
    raw = (server.store.get("podgroups", "big")["metadata"].get("annotations") or {}).get(ANNOTATION)
    if raw is None:
        return None
    value: dict[str, Any] = json.loads(raw)
    return value


def events(server: FakeApiServer, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in server.store.list("events", "default")
        if e.get("reason") == reason and e["involvedObject"]["kind"] == "PodGroup"
    ]


def big_patches(server: FakeApiServer) -> int:
    """Patches of the PodGroup `big` itself (its annotations; not its status)."""
    return sum(
        1
        for r in server.requests(verb="patch", resource="podgroups")
        if r.name == "big" and r.subresource is None
    )


def test_a_reservation_is_on_the_pod_group_and_survives_a_scheduler_restart(
    server: FakeApiServer, make_client: Callable[..., LightkubeClient], tmp_path: Path
) -> None:
    config = chart_config(tmp_path)
    now = float(int(time.time()))
    store = server.store
    for node in ("n1", "n2", "n3"):
        store.create(node_manifest(node, gpus=8))
    store.create(queue_manifest("q"))
    for name, node, duration in (("one", "n1", "1h"), ("two", "n2", "2h"), ("three", "n3", None)):
        store.create(pod_group_manifest(name))
        store.create(busy(f"{name}-0", node, now - 600, duration))
    store.create(pod_group_manifest("big", min_member=2))
    for i in range(2):
        store.create(pod_manifest(f"big-{i}", group="big", gpus=8, duration="30m"))
    metrics = SchedulerMetrics()

    async def first_life() -> None:
        async with Live(server, binder=False, config=config, metrics=metrics) as live:
            await live.until(lambda: reservation(server) is not None and bool(events(server, "Reserved")))
            await live.settle(cycles=2)
            client = make_client(ADMIN)
            try:
                explained = await why.explain(Cluster(client, "default"), "podgroup/big")
            finally:
                await client.aclose()
            assert explained.state == "Waiting" and explained.reservation is not None
            assert explained.reservation["nodes"] == ["n1", "n2"]
            assert "Reservation: 16 GPUs on nodes n1, n2, expected to start at " in why.text(explained)
            assert metrics.registry.get_sample_value("kai_cluster_reserved_gpus") == 16

    run(first_life(), timeout=60)
    held = reservation(server)
    assert held is not None and held["nodes"] == ["n1", "n2"] and held["gpus"] == 16
    # n2 frees 110 minutes from now (2h counted from its pod's start): the gang starts there and then.
    assert abs(parse_rfc3339(held["start"]).timestamp() - (now + 6600)) <= 2
    [made] = events(server, "Reserved")
    assert made["message"].startswith("16 GPUs reserved on nodes n1, n2, expected to start at ")
    written = store.get("podgroups", "big")["metadata"]["annotations"][ANNOTATION]
    patches = big_patches(server)

    async def restarted() -> None:
        async with Live(server, binder=False, config=config) as live:
            await live.settle(cycles=5)
            assert live.loop.pod_groups.held.gpus() == 16  # read back from the annotation

    run(restarted(), timeout=60)
    assert store.get("podgroups", "big")["metadata"]["annotations"][ANNOTATION] == written
    assert big_patches(server) == patches  # nothing written again
    assert events(server, "ReservationMoved") == [] and events(server, "ReservationReleased") == []
    assert [e.get("count", 1) for e in events(server, "Reserved")] == [1]
    assert not store.get("pods", "big-0")["spec"].get("nodeName")
