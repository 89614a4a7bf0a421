"""LightkubeClient against the fake API server: CRUD, subresources, watch, and how errors surface. The client
is the test's own (an administrator), except where tokens are the point."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from identities import ADMIN, account, kubeconfig_as
from lightkube.config.kubeconfig import KubeConfig
from live_support import run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.runtime.client import BIND_REQUESTS, NODES, PODS, QUEUES, ApiStatusError, WatchEvent
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

MakeClient = Callable[..., LightkubeClient]


def test_crud_paging_and_conflicts(make_client: MakeClient, server: FakeApiServer) -> None:
    async def body() -> None:
        async with make_client(ADMIN, page_size=2) as client:
            for i in range(5):
                await client.create(NODES, node_manifest(f"n{i}"))
            nodes, version = await client.list_objects(NODES)
            assert [n["metadata"]["name"] for n in nodes] == [f"n{i}" for i in range(5)]
            assert nodes[0]["kind"] == "Node" and int(version) == server.store.resource_version
            assert len(server.requests(verb="list", resource="nodes")) == 3  # pages of 2

            queue = await client.create(QUEUES, queue_manifest("team-a"))
            queue["spec"]["priority"] = 7
            fresh = await client.replace(QUEUES, queue)
            with pytest.raises(ApiStatusError) as stale:
                await client.replace(QUEUES, queue)  # the old resourceVersion
            assert stale.value.code == 409 and stale.value.reason == "Conflict"
            patched = await client.patch(
                QUEUES, "team-a", {"status": {"childQueues": ["x"]}}, subresource="status"
            )
            assert patched["status"] == {"childQueues": ["x"]} and patched["spec"]["priority"] == 7
            assert int(patched["metadata"]["resourceVersion"]) > int(fresh["metadata"]["resourceVersion"])
            labelled = await client.patch(
                QUEUES,
                "team-a",
                [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}],
                patch_type="json",
            )
            assert labelled["metadata"]["labels"] == {"a": "b"}

            await client.create(
                BIND_REQUESTS, {"metadata": {"name": "p", "namespace": "default"}, "spec": {}}
            )
            assert (await client.get(BIND_REQUESTS, "p", "default"))["kind"] == "BindRequest"
            await client.delete(BIND_REQUESTS, "p", "default")
            with pytest.raises(ApiStatusError) as missing:
                await client.get(BIND_REQUESTS, "p", "default")
            assert (missing.value.code, missing.value.reason) == (404, "NotFound")

    run(body())


def test_bind_answers_a_status_and_a_second_bind_conflicts(
    make_client: MakeClient, server: FakeApiServer
) -> None:
    server.store.create(node_manifest("n1"))
    server.store.create(pod_manifest("p", namespace="default"))

    async def body() -> None:
        async with make_client(ADMIN) as client:
            await client.bind("default", "p", "n1")
            assert (await client.get(PODS, "p", "default"))["spec"]["nodeName"] == "n1"
            with pytest.raises(ApiStatusError) as again:
                await client.bind("default", "p", "n1")
            assert again.value.code == 409 and "already assigned" in again.value.message
            await client.evict("default", "p")
            with pytest.raises(ApiStatusError) as gone:
                await client.get(PODS, "p", "default")
            assert gone.value.code == 404

    run(body())
    assert [(b.name, b.node) for b in server.store.binds] == [("p", "n1")]
    assert [e.name for e in server.store.evictions] == ["p"]


def test_watch_events_bookmarks_and_410(make_client: MakeClient, server: FakeApiServer) -> None:
    async def body() -> None:
        async with make_client(ADMIN) as client:
            _, version = await client.list_objects(QUEUES)
            await client.create(QUEUES, queue_manifest("a"))
            await client.create(NODES, node_manifest("n1"))  # moves the global version on
            seen: list[WatchEvent] = []
            async for event in client.watch(QUEUES, version):
                seen.append(event)
                if event.type == "BOOKMARK":
                    break
            assert [e.type for e in seen] == ["ADDED", "BOOKMARK"]
            assert seen[0].object["kind"] == "Queue"
            assert int(seen[1].object["metadata"]["resourceVersion"]) == server.store.resource_version

            server.fail_next(1, 410, verb="watch", resource="queues")
            with pytest.raises(ApiStatusError) as injected:
                async for _ in client.watch(QUEUES, version):
                    pass
            assert injected.value.code == 410

            server.compact()
            with pytest.raises(ApiStatusError) as expired:
                async for _ in client.watch(QUEUES, version):
                    pass
            assert (expired.value.code, expired.value.reason) == (410, "Expired")

    run(body())


def test_unreachable_server_raises_connection_error(make_client: MakeClient, server: FakeApiServer) -> None:
    async def body() -> None:
        async with make_client(ADMIN) as client:
            await client.list_objects(NODES)
            server.stop()
            with pytest.raises(ConnectionError):
                await client.list_objects(NODES)
            with pytest.raises(ConnectionError):
                async for _ in client.watch(NODES, "1"):
                    pass

    run(body())


def test_from_kubeconfig(server: FakeApiServer, tmp_path: Path) -> None:
    path = kubeconfig_as(server, tmp_path / "kubeconfig", ADMIN, namespace="team")

    async def body() -> Any:
        async with LightkubeClient.from_kubeconfig(path) as client:
            assert client.namespace == "team"
            return await client.list_objects(NODES)

    assert run(body())[0] == []


def test_a_binding_carries_annotations_onto_the_pod(make_client: MakeClient, server: FakeApiServer) -> None:
    server.store.create(pod_manifest("p", gpus=1))

    async def body() -> None:
        async with make_client(ADMIN) as client:
            await client.bind("default", "p", "n1", annotations={"received-resource-type": "Regular"})

    run(body())
    pod = server.store.get("pods", "p", "default")
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["metadata"]["annotations"]["received-resource-type"] == "Regular"


def kubeconfig_with(server: FakeApiServer, **user: str) -> KubeConfig:
    """The server's kubeconfig (its CA) with these credentials instead of the administrator's."""
    config = server.kubeconfig()
    config["users"][0]["user"] = user
    return KubeConfig.from_dict(config)


@pytest.mark.refusals_expected
def test_a_token_file_is_read_again_after_a_401(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-cluster service account tokens expire and the kubelet rotates the file: lightkube's flow re-reads
    # it once on a 401.
    scheduler = account("scheduler")
    assert scheduler is not None
    token = tmp_path / "token"
    token.write_text(server.service_account_token(*scheduler, expiration_seconds=3600))
    config = kubeconfig_with(server, tokenFile=str(token))

    async def body() -> Any:
        async with LightkubeClient(config, timeout=5.0) as client:
            await client.list_objects(NODES)
            later = time.time() + 3600
            monkeypatch.setattr(server.tokens, "clock", lambda: later)  # the token has expired
            token.write_text(server.service_account_token(*scheduler, expiration_seconds=3600))
            return await client.list_objects(NODES)

    assert run(body())[0] == []
    assert [r.code for r in server.requests(verb="list", resource="nodes")] == [200, 401, 200]
    assert [(r.code, r.user) for r in server.forbidden()] == [(401, None)]


@pytest.mark.refusals_expected
def test_a_401_without_a_way_to_renew_is_an_api_error(server: FakeApiServer) -> None:
    async def body() -> None:
        async with LightkubeClient(kubeconfig_with(server, token="static"), timeout=5.0) as client:
            with pytest.raises(ApiStatusError) as denied:
                await client.get(NODES, "n1")
            assert denied.value.code == 401

    run(body())
    assert [(r.code, r.verb, r.resource) for r in server.forbidden()] == [(401, "get", "nodes")]
