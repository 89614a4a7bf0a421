"""Pod (anti-)affinity's namespaceSelector in live mode: the scheduler watches Namespaces and matches the
selector against their labels (the simulator has no Namespace input, so there only the name label is
known); the other components do not watch Namespaces (their ClusterRoles may not list them)."""

from __future__ import annotations

import asyncio
from typing import Any

from identities import client_as, run_as
from live_support import Live, eventually, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.components import RunOptions, run_components

HOSTNAME = "kubernetes.io/hostname"


def namespace_manifest(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def team_a_anti_affinity(app: str) -> dict[str, Any]:
    term = {
        "labelSelector": {"matchLabels": {"app": app}},
        "namespaceSelector": {"matchLabels": {"team": "a"}},
        "topologyKey": HOSTNAME,
    }
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_anti_affinity_namespace_selector_uses_the_namespaces_labels(server: FakeApiServer) -> None:
    # One node, running a db pod in namespace ns-x. The web pod's anti-affinity term selects db pods in
    # namespaces labelled team=a: while ns-x carries team=a the node is off limits; relabelled team=b
    # (seen through the Namespace watch), the term selects nothing and the pod binds.
    store = server.store
    store.create(namespace_manifest("ns-x", {"team": "a"}))
    store.create(node_manifest("a", gpus=4, labels={HOSTNAME: "a"}))
    store.create(queue_manifest("q"))
    store.create(pod_manifest("db", gpus=1, namespace="ns-x", node_name="a", labels={"app": "db"}))
    store.create(pod_manifest("web", gpus=1, labels={"app": "web"}, affinity=team_a_anti_affinity("db")))

    def ns_x_team(live: Live) -> str | None:
        informer = live.informers.namespaces
        assert informer is not None
        obj = informer.get("ns-x") or {}
        return ((obj.get("metadata") or {}).get("labels") or {}).get("team")

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            for _ in range(2):
                report = await live.loop.run_once()
                assert report.bind_requests == [] and report.errors == []
            store.patch("namespaces", "ns-x", {"metadata": {"labels": {"team": "b"}}})
            await live.until(lambda: ns_x_team(live) == "b")
            report = await live.loop.run_once()
            assert report.bind_requests == ["default/web"]

    run(body())


def test_only_the_scheduler_watches_namespaces(server: FakeApiServer) -> None:
    def namespace_reads() -> list[str]:
        return [
            str(r.verb)
            for r in server.requests(resource="namespaces")
            if r.verb in ("list", "watch") and r.name is None
        ]

    async def components(names: set[str], synced: Any) -> None:
        stop = asyncio.Event()
        options = RunOptions(
            components=frozenset(names), config=SchedulerConfig(), metrics_port=0, plugin_server_port=0
        )
        async with client_as(server, run_as(options.components)) as client:
            task = asyncio.create_task(run_components(options, stop, client))
            await eventually(synced, timeout=8)
            stop.set()
            await asyncio.wait_for(task, 10)

    # The binder, pod grouper and status controllers of one process share their informers (one list of
    # nodes, for the status controllers); the scale adjuster lists nodes with its own. None of them reads
    # topologies either.
    controllers = {"binder", "podgrouper", "status-controllers", "scale-adjuster"}
    run(components(controllers, lambda: len(server.requests(verb="list", resource="nodes")) >= 2), timeout=30)
    assert namespace_reads() == []
    assert server.requests(resource="topologies.kai.scheduler") == []
    run(components({"scheduler"}, lambda: "list" in namespace_reads()), timeout=30)
