"""Against the fake API server: a PyTorchJob whose Worker template asks for segments with a placement but
names no topology is grouped as KAI v0.17's pod grouper groups it (the segments without a constraint,
pytorch_grouper.go's getSegmentTopologyConstraints), where KAI says nothing: here each pod gets a Warning
Event naming the job and the key, and the log one line for the PodGroup."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from live_support import eventually, run
from test_podgrouper_controller import MakeClient, annotation, grouper, groups, owned_pod, pod, pytorch_job

from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.podgrouper.controller import DROPPED_REASON

REQUIRED = "kai.scheduler/segment-topology-required-placement"
TEMPLATE_ANNOTATIONS = {"kai.scheduler/segment-size": "2", REQUIRED: "rack"}
PODS = ("seg-master-0", "seg-worker-0", "seg-worker-1", "seg-worker-2", "seg-worker-3")


def seed(server: FakeApiServer) -> dict[str, Any]:
    manifest = pytorch_job("seg", 4)
    manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] = {
        "metadata": {"annotations": TEMPLATE_ANNOTATIONS}
    }
    job = server.store.create(manifest)
    for name in PODS:
        role, index = name.split("-")[1:]
        p = owned_pod(name, job, role)
        p["metadata"]["labels"]["training.kubeflow.org/replica-index"] = index
        if role == "worker":
            p["metadata"]["annotations"] = dict(TEMPLATE_ANNOTATIONS)
        server.store.create(p)
    return job


def test_segment_placement_without_topology_is_grouped_and_said(
    server: FakeApiServer, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    seed(server)

    def dropped_events() -> list[dict[str, Any]]:
        return [e for e in server.store.list("events", "default") if e.get("reason") == DROPPED_REASON]

    async def body() -> None:
        async with grouper(make_client):
            await eventually(lambda: all(annotation(pod(server, name)) for name in PODS))
            await eventually(lambda: len(dropped_events()) == len(PODS))

    with caplog.at_level(logging.WARNING, logger="kai_scheduler.k8s.podgrouper.controller"):
        run(body())

    (group,) = groups(server).values()
    segments = [g for g in group["spec"]["subGroups"] if g.get("parent") == "worker"]
    assert [g["name"] for g in segments] == ["worker-segment-0", "worker-segment-1"]
    assert all("topologyConstraint" not in g for g in segments)
    assert (
        pod(server, "seg-worker-3")["metadata"]["labels"]["kai.scheduler/subgroup-name"] == "worker-segment-1"
    )

    events = dropped_events()
    assert sorted(e["involvedObject"]["name"] for e in events) == sorted(PODS)
    assert all(e["type"] == "Warning" for e in events)
    message = events[0]["message"]
    assert message.startswith(
        "PyTorchJob default/seg: spec.pytorchReplicaSpecs.Worker.template.metadata."
        f'annotations["{REQUIRED}"]: dropped: no kai.scheduler/topology names the topology'
    )
    logged = [r.getMessage() for r in caplog.records if "made without some of its input" in r.getMessage()]
    assert len(logged) == 1
    assert message in logged[0]
