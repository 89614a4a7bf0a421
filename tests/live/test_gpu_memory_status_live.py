"""PodGroup and Queue status and the queue metrics count a gpu-memory pod's GPUs as the scheduler does
(`SharedGpuRequest.queue_gpus`), against the fake API server: on a cluster with two GPU memory sizes
and on one where no node reports GPU memory (`gpu_memory_clusters`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from live_support import eventually, run

from gpu_memory_clusters import CLUSTERS, GpuMemoryCluster
from kai_fakeapi import FakeApiServer
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.client import NODES, POD_GROUPS, PODS, PRIORITY_CLASSES, QUEUES
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.status.metrics import QueueMetrics
from kai_scheduler.k8s.status.podgroups import PodGroupStatusController
from kai_scheduler.k8s.status.queues import QueueStatusController
from kai_scheduler.kubectl_plugin import queues, top, why
from kai_scheduler.kubectl_plugin.amounts import show
from kai_scheduler.kubectl_plugin.api_client import Cluster

MakeClient = Callable[..., LightkubeClient]
KINDS = (PODS, POD_GROUPS, QUEUES, NODES, PRIORITY_CLASSES)


def resources(server: FakeApiServer, kind: str, name: str, *path: str) -> dict[str, Any]:
    obj = server.store.get(kind, name, "default" if kind == "podgroups" else None)
    value = obj.get("status") or {}
    for key in path:
        value = value.get(key) or {}
    return dict(value)


def gpus(server: FakeApiServer, kind: str, name: str, *path: str) -> float | None:
    amount = resources(server, kind, name, *path).get("nvidia.com/gpu")
    return float(parse_quantity(amount)) if amount is not None else None


def settled(server: FakeApiServer) -> bool:
    """The PodGroup's numbers are written and its queue has summed them."""
    lists = ("allocated", "requested")
    group = [gpus(server, "podgroups", "work", "resourcesStatus", name) for name in lists]
    return None not in group and group == [gpus(server, "queues", "q", name) for name in lists]


def write_statuses(server: FakeApiServer, make_client: MakeClient, cluster: GpuMemoryCluster) -> QueueMetrics:
    """Create the cluster and run the status controllers until the queue has summed its PodGroup."""
    for manifest in cluster.manifests:
        server.store.create(manifest)
    metrics = QueueMetrics()

    async def body() -> None:
        async with (
            make_client("status-controllers") as client,
            InformerSet(client, backoff=FAST_BACKOFF, kinds=KINDS) as informers,
        ):
            groups = PodGroupStatusController(client, informers, resync_period=0.2, debounce=0.01, settle=0)
            queue_status = QueueStatusController(
                client, informers, metrics=metrics, resync_period=0.2, debounce=0.01, write_period=0
            )
            stop = asyncio.Event()
            tasks = [asyncio.create_task(groups.run(stop)), asyncio.create_task(queue_status.run(stop))]
            await eventually(lambda: settled(server))
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 5)

    run(body())
    return metrics


@pytest.mark.parametrize("cluster", CLUSTERS.values(), ids=CLUSTERS.keys())
def test_statuses_and_metrics_count_gpu_memory_as_the_scheduler(
    server: FakeApiServer, make_client: MakeClient, cluster: GpuMemoryCluster
) -> None:
    metrics = write_statuses(server, make_client, cluster)
    group = ("podgroups", "work", "resourcesStatus")
    assert gpus(server, *group, "allocated") == pytest.approx(cluster.allocated)
    assert gpus(server, *group, "requested") == pytest.approx(cluster.requested)
    assert gpus(server, "queues", "q", "allocated") == pytest.approx(cluster.allocated)
    assert gpus(server, "queues", "q", "requested") == pytest.approx(cluster.requested)
    # KAI's podgroupcontroller (and so its queuecontroller) also lists the GPU memory asked for: KAI
    # v0.17 pkg/podgroupcontroller/controllers/resources/requested_test.go, Test_extractRequestedResources,
    # case "Pod with gpu memory" (run.ai/gpu.memory: 2000 for gpu-memory 2000), ported here by name.
    asked = str(cluster.memory_mib)
    assert resources(server, *group)["requested"]["run.ai/gpu.memory"] == asked
    assert resources(server, "queues", "q")["requested"]["run.ai/gpu.memory"] == asked
    sample = metrics.registry.get_sample_value("kai_queue_allocated_gpus", {"queue_name": "q"})
    assert sample == pytest.approx(cluster.allocated)


@pytest.mark.parametrize("cluster", CLUSTERS.values(), ids=CLUSTERS.keys())
def test_kubectl_plugin_counts_gpu_memory_as_the_scheduler(
    server: FakeApiServer, make_client: MakeClient, cluster: GpuMemoryCluster
) -> None:
    """`kubectl kai queues` and `top` show the same numbers, and `why` weighs what the job asks with the
    cluster's smallest GPU memory, as the scheduler's fair-share check does."""
    write_statuses(server, make_client, cluster)
    # The scheduler's word on the job and its queue's fair share, as it would write them.
    condition = {"type": "UnschedulableOnNodePool", "status": "True", "reason": "Unschedulable"}
    condition |= {"message": "no node fits", "nodePool": "default", "transitionID": "1"}
    condition["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    server.store.patch(
        "podgroups", "work", {"status": {"schedulingConditions": [condition]}}, subresource="status"
    )
    server.store.patch(
        "queues", "q", {"status": {"fairShare": {"nvidia.com/gpu": "10"}}}, subresource="status"
    )

    async def body() -> tuple[list[queues.QueueRow], list[top.NodeGpus], why.Explanation]:
        async with make_client("admin") as client:
            cluster_view = Cluster(client, "default")
            rows = queues.queue_tree(await queues.fetch(cluster_view))
            nodes = top.gpu_allocation(*await top.fetch(cluster_view))
            return rows, nodes, await why.explain(cluster_view, "podgroup/work")

    rows, nodes, explanation = run(body())
    [row] = [row for row in rows if row.name == "q"]
    assert row.allocated["gpu"] == pytest.approx(cluster.allocated)
    assert row.requested["gpu"] == pytest.approx(cluster.requested)
    [held_node] = [node for node in nodes if node.name == cluster.held_node]
    assert held_node.allocated == pytest.approx(cluster.held)
    within = [hint for hint in explanation.to_start if "within its fair share" in hint]
    if cluster.asks:
        held, asks = show("gpu", cluster.held), show("gpu", cluster.asks)
        [hint] = within
        assert hint.startswith(f"queue q is within its fair share ({held} + {asks} of 10 GPUs):")
    else:
        assert within == []  # it asks nothing of its queue
