"""The plugin server of a scheduler loop on the fake API server: `/get-snapshot` is a file that
`kai-scheduler simulate` loads and that replays the live cycle (same pending jobs, same reasons),
`/get-job-order` lists the pending jobs in allocate's order; other paths are 404, and nothing is served
before the first cycle."""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from identities import ALL_IN_ONE, client_as
from live_support import FakeGpuNodes, Live, eventually, in_thread, run
from ports import free_port

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.cli import main
from kai_scheduler.framework.config import DEFAULT_PLUGINS, SchedulerConfig, parse_config
from kai_scheduler.k8s.components import run_live
from kai_scheduler.k8s.scheduler.plugin_server import PluginServer


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except urllib.error.URLError as error:  # not listening (yet)
        return 0, str(error.reason)


def seed_full_cluster(server: FakeApiServer) -> None:
    """One 2-GPU node held by a non-preemptible pod; a gang and a more urgent bare pod wait: no room, and
    nothing to reclaim or preempt."""
    store = server.store
    for name, value in (("inference", 125), ("build-preemptible", 75)):  # as the chart ships them
        store.create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    store.create(node_manifest("n1", gpus=2, cpu="16", memory="64Gi"))
    store.create(queue_manifest("q", gpu=2))
    store.create(pod_manifest("busy", gpus=2, node_name="n1", priority_class="inference"))
    store.create(pod_group_manifest("gang", min_member=2))
    store.create(pod_manifest("gang-0", group="gang", gpus=1))
    store.create(pod_manifest("gang-1", group="gang", gpus=1))
    store.create(pod_manifest("solo", gpus=1, priority_class="build-preemptible"))


def test_snapshot_replays_the_live_cycle_and_job_order_lists_pending_jobs(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    seed_full_cluster(server)
    config = parse_config(
        {"tiers": [{"plugins": [{"name": n} for n in (*DEFAULT_PLUGINS, "reflectjoborder")]}]}
    )
    answers: dict[str, tuple[int, str]] = {}
    reasons: dict[str, str] = {}

    async def body() -> None:
        async with Live(server, binder=False, loop=False, gpus=False, config=config) as live:
            plugins = PluginServer(lambda: live.loop.last_cycle, config, port=0)
            async with plugins:
                answers["early"] = await in_thread(get, f"{plugins.url}/get-snapshot")
                report = await live.loop.run_once()
                assert report.result is not None and report.bind_requests == [] and report.evictions == []
                reasons.update(report.result.unschedulable)
                for name, path in {
                    "snapshot": "/get-snapshot",
                    "json": "/get-snapshot?format=json",
                    "config": "/get-snapshot?format=config",
                    "order": "/get-job-order",
                    "unknown": "/get-snapshots",
                }.items():
                    answers[name] = await in_thread(get, f"{plugins.url}{path}")

    run(body())
    assert answers["early"][0] == 503
    assert answers["unknown"][0] == 404
    assert set(reasons) == {"default/gang", "default/pg-solo"}

    # The snapshot, saved and replayed with the command its comment gives.
    status, text = answers["snapshot"]
    assert status == 200 and text.startswith("#")
    [command] = [line[1:].strip() for line in text.splitlines() if "kai-scheduler simulate snapshot" in line]
    words = shlex.split(command)
    assert words[2:5] == ["snapshot.yaml", "--config", "scheduler-config.yaml"]
    assert words[-2:] == ["--cycles", "1"] and "--start" in words
    monkeypatch.chdir(tmp_path)
    (tmp_path / "snapshot.yaml").write_text(text)
    (tmp_path / "scheduler-config.yaml").write_text(answers["config"][1])
    assert main([*words[1:], "--output", "json", "--out", "result.json"]) == 0
    document = json.loads((tmp_path / "result.json").read_text())
    replayed = {
        f"{g['namespace']}/{g['name']}": g["unschedulableReason"]
        for g in document["podGroups"]
        if g["unschedulableReason"] is not None
    }
    assert replayed == reasons
    assert document["decisions"] == []
    pods = {p["name"]: p for p in document["pods"]}
    assert pods["busy"]["node"] == "n1" and pods["busy"]["phase"] == "Running"

    # The JSON form loads as well (JSON is YAML).
    (tmp_path / "snapshot.json").write_text(answers["json"][1])
    assert main(["simulate", "snapshot.json", "--config", "scheduler-config.yaml", "--cycles", "1"]) == 0
    capsys.readouterr()

    # The job order: solo (priority 75) before the older gang (no class: the API server gave its pods 0).
    status, body_text = answers["order"]
    assert status == 200
    assert [(job["job"], job["priority"], job["pendingPods"]) for job in json.loads(body_text)] == [
        ("default/pg-solo", 75, 1),
        ("default/gang", 0, 2),
    ]


def test_run_live_serves_the_snapshot_when_the_configuration_lists_it(server: FakeApiServer) -> None:
    seed_full_cluster(server)
    port = free_port()
    answers: list[tuple[int, str]] = []

    async def body() -> None:
        stop = asyncio.Event()
        async with client_as(server, ALL_IN_ONE) as client, FakeGpuNodes(server):  # scheduler and binder
            task = asyncio.create_task(
                run_live(client, SchedulerConfig(), stop, period=0.05, plugin_server_port=port)
            )

            async def served() -> bool:
                answers.append(await in_thread(get, f"http://127.0.0.1:{port}/get-snapshot"))
                return answers[-1][0] == 200

            deadline = asyncio.get_running_loop().time() + 8
            while not await served():
                assert asyncio.get_running_loop().time() < deadline, answers[-1:]
                await asyncio.sleep(0.05)
            answers.append(await in_thread(get, f"http://127.0.0.1:{port}/get-job-order"))
            stop.set()
            await asyncio.wait_for(task, 5)
        # Stopped with the scheduler.
        await eventually(lambda: not _listening(port))

    run(body())
    assert "kind: Node" in answers[-2][1] and "name: gang-0" in answers[-2][1]
    assert answers[-1][0] == 404  # the default configuration lists snapshot, not reflectjoborder


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
