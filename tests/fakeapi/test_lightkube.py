"""lightkube (the client live mode builds on) against the fake: typed and generic resources."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.models.core_v1 import Container, ObjectReference, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

PodGroup = create_namespaced_resource("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups")
Queue = create_global_resource("scheduling.run.ai", "v2", "Queue", "queues")
BindRequest = create_namespaced_resource("scheduling.run.ai", "v1alpha2", "BindRequest", "bindrequests")


@pytest.fixture
def client(server: Any, tmp_path: Path) -> Iterator[Client]:
    config = KubeConfig.from_file(server.write_kubeconfig(tmp_path / "kubeconfig"))
    with Client(config, field_manager="kai-test") as c:
        yield c


def test_generic_resources_for_kai_crds(client: Any, server: Any) -> None:
    client.create(Queue(metadata=ObjectMeta(name="team-a"), spec={"priority": 100}))
    pg = client.create(
        PodGroup(
            metadata=ObjectMeta(name="pg", namespace="default"), spec={"minMember": 1, "queue": "team-a"}
        )
    )
    assert pg.spec == {"minMember": 1, "queue": "team-a"} and pg.metadata.uid
    assert [q.metadata.name for q in client.list(Queue)] == ["team-a"]
    listing = client.list(PodGroup, namespace="*")
    assert [p.metadata.name for p in listing] == ["pg"]
    assert int(listing.resourceVersion) == server.store.resource_version
    updated = client.patch(
        PodGroup.Status,
        "pg",
        {"status": {"phase": "Running"}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert updated.status == {"phase": "Running"}
    br = client.create(
        BindRequest(
            metadata=ObjectMeta(name="p", namespace="default"),
            spec={"podName": "p", "selectedNode": "n1", "backoffLimit": 3},
        )
    )
    assert br.spec["selectedNode"] == "n1"
    with pytest.raises(ApiError) as err:
        client.patch(PodGroup, "pg", {"spec": {"minMember": 2}}, namespace="default")  # strategic by default
    assert err.value.status.code == 415
    stale = client.get(PodGroup, "pg", namespace="default")
    stale.spec["minMember"] = 5
    client.replace(stale)
    stale.spec["minMember"] = 6  # still the old resourceVersion
    with pytest.raises(ApiError) as err:
        client.replace(stale)
    assert err.value.status.code == 409


def test_binding_answers_status_that_lightkube_cannot_decode_as_binding(client: Any, server: Any) -> None:
    client.create(
        Pod(
            metadata=ObjectMeta(name="p", namespace="default"),
            spec=PodSpec(containers=[Container(name="c", image="x")]),
        )
    )
    binding = Pod.Binding(metadata=ObjectMeta(name="p"), target=ObjectReference(kind="Node", name="n1"))
    # As with a real API server: the bind happens, but the reply is a Status, not a Binding.
    with pytest.raises(Exception, match="target"):
        client.create(binding, name="p", namespace="default")
    assert client.get(Pod, "p", namespace="default").spec.nodeName == "n1"
    with pytest.raises(ApiError) as err:
        client.create(binding, name="p", namespace="default")
    assert err.value.status.code == 409


def test_watch_with_resource_version(client: Any, server: Any) -> None:
    client.create(Queue(metadata=ObjectMeta(name="a")))
    rv = str(server.store.resource_version)
    client.create(Queue(metadata=ObjectMeta(name="b")))
    client.delete(Queue, "a")
    events = []
    for kind, obj in client.watch(Queue, resource_version=rv):
        events.append((kind, obj.metadata.name))
        if len(events) == 2:
            break
    assert events == [("ADDED", "b"), ("DELETED", "a")]
