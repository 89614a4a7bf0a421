"""Informers against the fake API server: list + watch, bookmarks, 410 Gone, dropped watches, downtime (as
the test's own client: what the informers do, not what a component may read)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from identities import ADMIN, account
from live_support import eventually, in_thread, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.client import PODS, QUEUES, JsonObject
from kai_scheduler.k8s.runtime.informer import Informer
from kai_scheduler.k8s.runtime.informers import (
    INDEXERS,
    POD_GROUP_INDEX,
    POD_NODE_INDEX,
    QUEUE_INDEX,
    InformerSet,
)
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.runtime.objects import object_key

MakeClient = Callable[..., LightkubeClient]


class Recorder:
    """Every handler call, as (event, key, resourceVersion)."""

    def __init__(self, informer: Informer) -> None:
        self.calls: list[tuple[str, str, str]] = []
        informer.add_handler(self.add, self.update, self.delete)

    def add(self, obj: JsonObject) -> None:
        self.calls.append(("add", object_key(obj), obj["metadata"]["resourceVersion"]))

    def update(self, old: JsonObject, new: JsonObject) -> None:
        assert object_key(old) == object_key(new)
        self.calls.append(("update", object_key(new), new["metadata"]["resourceVersion"]))

    def delete(self, obj: JsonObject) -> None:
        self.calls.append(("delete", object_key(obj), obj["metadata"]["resourceVersion"]))

    def of(self, kind: str) -> list[str]:
        return [key for what, key, _ in self.calls if what == kind]


def store_pods(server: FakeApiServer) -> dict[str, str]:
    return {object_key(p): p["metadata"]["resourceVersion"] for p in server.store.list("pods")}


def cached(informer: Informer) -> dict[str, str]:
    return {key: obj["metadata"]["resourceVersion"] for key, obj in informer.cache.items()}


def test_list_then_watch_with_handlers_and_indexes(make_client: MakeClient, server: FakeApiServer) -> None:
    server.store.create(node_manifest("n1"))
    server.store.create(pod_manifest("a", "team-a", node_name="n1", group="pg-1"))

    async def body() -> None:
        async with make_client(ADMIN) as client:
            informer = Informer(client, PODS, indexers=INDEXERS[PODS], backoff=FAST_BACKOFF)
            recorder = Recorder(informer)
            informer.start()
            assert await informer.wait_synced(5)
            assert recorder.of("add") == ["default/a"]
            assert [p["metadata"]["name"] for p in informer.by_index(POD_NODE_INDEX, "n1")] == ["a"]
            assert informer.index_keys(POD_GROUP_INDEX, "default/pg-1") == {"default/a"}

            await client.create(PODS, pod_manifest("b", "team-b", namespace="default"))
            await client.bind("default", "b", "n1")
            await client.delete(PODS, "a", "default")
            await eventually(lambda: cached(informer) == store_pods(server))
            assert recorder.of("add") == ["default/a", "default/b"]
            assert recorder.of("update") == ["default/b"]
            assert recorder.of("delete") == ["default/a"]
            assert informer.index_keys(POD_NODE_INDEX, "n1") == {"default/b"}
            assert informer.index_values(QUEUE_INDEX) == ["team-b"]
            assert informer.index_keys(POD_GROUP_INDEX, "default/pg-1") == set()
            await informer.stop()

    run(body())


def test_bookmarks_advance_the_version(make_client: MakeClient, server: FakeApiServer) -> None:
    async def body() -> None:
        async with make_client(ADMIN) as client:
            informer = Informer(client, PODS, backoff=FAST_BACKOFF)
            informer.start()
            await informer.wait_synced(5)
            listed = int(informer.resource_version)
            for i in range(3):  # writes to another kind: no pod event, but the version moves on
                server.store.create(queue_manifest(f"q{i}"))
            await eventually(lambda: int(informer.resource_version) == server.store.resource_version)
            assert int(informer.resource_version) > listed
            assert informer.stats.bookmarks > 0 and informer.stats.events == 0
            await informer.stop()

    run(body())


def test_410_relists_and_reports_what_vanished(make_client: MakeClient, server: FakeApiServer) -> None:
    for name in ("a", "b", "c"):
        server.store.create(pod_manifest(name))

    async def body() -> None:
        async with make_client(ADMIN) as client:
            informer = Informer(client, PODS, backoff=FAST_BACKOFF)
            recorder = Recorder(informer)
            informer.start()
            await informer.wait_synced(5)
            await eventually(lambda: int(informer.resource_version) == server.store.resource_version)
            await in_thread(server.stop)
            # While the informer cannot watch: a deletion, an update and a creation, then the history is
            # compacted, so the informer's version is too old when it comes back.
            server.store.delete("pods", "a")
            server.store.patch("pods", "b", {"metadata": {"labels": {"x": "y"}}})
            server.store.create(pod_manifest("d"))
            server.compact()
            await in_thread(server.start)
            await eventually(lambda: cached(informer) == store_pods(server))
            assert informer.stats.relists_after_gone == 1
            assert recorder.of("delete") == ["default/a"]
            assert recorder.of("update") == ["default/b"]
            assert recorder.of("add") == ["default/a", "default/b", "default/c", "default/d"]
            await informer.stop()

    run(body())


def test_dropped_watches_resume_without_loss_or_duplicates(
    make_client: MakeClient, server: FakeApiServer
) -> None:
    count = 40

    async def body() -> None:
        async with make_client(ADMIN) as client:
            informer = Informer(client, PODS, backoff=FAST_BACKOFF)
            recorder = Recorder(informer)
            informer.start()
            await informer.wait_synced(5)

            async def writer() -> None:
                for i in range(count):
                    await client.create(PODS, pod_manifest(f"p{i:02d}", namespace="default"))
                    await client.patch(PODS, f"p{i:02d}", {"metadata": {"labels": {"seen": "1"}}}, "default")
                    if i % 3 == 0:
                        await client.delete(PODS, f"p{i:02d}", "default")
                    await asyncio.sleep(0.005)

            async def dropper() -> int:
                # Each round waits for the informer's watch to be back (a loaded machine may take a while)
                # before cutting it, so every round really drops a stream.
                drops = 0
                for round_ in range(8):
                    await asyncio.sleep(0.04)
                    assert await asyncio.to_thread(server.wait_for_watches, 1, "pods", 10.0)
                    drops += server.drop_watches("pods", graceful=round_ % 2 == 1)
                return drops

            _, drops = await asyncio.gather(writer(), dropper())
            assert drops >= 4
            await eventually(lambda: cached(informer) == store_pods(server))
            names = [f"default/p{i:02d}" for i in range(count)]
            assert recorder.of("add") == names  # each exactly once, in order
            assert recorder.of("update") == names
            assert recorder.of("delete") == names[::3]
            assert informer.stats.relists_after_gone == 0 and informer.stats.lists == 1
            assert informer.stats.watches > drops // 2
            await informer.stop()

    run(body())


def test_api_server_down_for_a_while(make_client: MakeClient, server: FakeApiServer) -> None:
    server.store.create(pod_manifest("before"))

    async def body() -> None:
        async with make_client(ADMIN) as client:
            informers = InformerSet(client, backoff=FAST_BACKOFF)
            async with informers:
                assert await informers.wait_synced(5)
                await in_thread(server.stop)
                server.store.create(pod_manifest("during"))
                server.store.create(queue_manifest("q-during"))
                await asyncio.sleep(1.5)
                await in_thread(server.start)
                await eventually(lambda: cached(informers.pods) == store_pods(server), timeout=8)
                await eventually(lambda: "q-during" in informers[QUEUES].cache, timeout=8)
                assert informers.pods.stats.reconnects >= 1
                assert informers.pods.stats.relists_after_gone == 0  # resumed from its version

    run(body())


@pytest.mark.refusals_expected
def test_a_kind_it_may_not_list_is_not_taken_for_an_empty_one(
    make_client: MakeClient, server: FakeApiServer
) -> None:
    """A 403 is no answer: the informer stays unsynced (its component waits, the log says why) and lists
    again until it is allowed, rather than working from an empty cache. Only a kind the server does not
    serve (404) counts as empty. (The binder's account may read pods, not queues, until it is granted.)"""
    server.store.create(queue_manifest("q"))

    def refused() -> list[tuple[str | None, str | None]]:
        return [(r.verb, r.resource) for r in server.forbidden()]

    async def body() -> None:
        async with make_client("binder") as client:
            informers = InformerSet(client, backoff=FAST_BACKOFF, kinds=(QUEUES, PODS))
            async with informers:
                assert await informers.pods.wait_synced(5)
                await eventually(lambda: len(refused()) >= 2)  # refused, and tried again
                assert not informers[QUEUES].synced.is_set() and informers[QUEUES].cache == {}
                grant_queue_reads(server, "binder")
                assert await informers.wait_synced(5)
                assert list(informers[QUEUES].cache) == ["q"]

    run(body())
    assert set(refused()) == {("list", "queues.scheduling.run.ai")}


def grant_queue_reads(server: FakeApiServer, identity: str) -> None:
    """An administrator lets `identity` list and watch queues (a ClusterRole and its binding)."""
    found = account(identity)
    assert found is not None
    namespace, name = found
    rbac = "rbac.authorization.k8s.io/v1"
    rules = [{"apiGroups": ["scheduling.run.ai"], "resources": ["queues"], "verbs": ["list", "watch"]}]
    server.store.create(
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "read-queues"}, "rules": rules}
    )
    server.store.create(
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "read-queues"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "read-queues",
            },
            "subjects": [{"kind": "ServiceAccount", "namespace": namespace, "name": name}],
        }
    )
