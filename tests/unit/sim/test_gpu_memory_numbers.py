"""`simulate`'s result counts a gpu-memory pod's GPUs as the scheduler does
(`SharedGpuRequest.queue_gpus`): the pod's `gpu`, the queue's `allocated` and `requested`, the
summary's allocated GPUs and the report's queue figures, on a cluster with two GPU memory sizes and on
one where no node reports GPU memory (`gpu_memory_clusters`)."""

from __future__ import annotations

import pytest

from gpu_memory_clusters import CLUSTERS, GpuMemoryCluster
from helpers import objects_of, open_session, pods_by_name, queues_by_name, run
from kai_scheduler.sim.results import result_document
from kai_scheduler.sim.summary import queue_figures
from kai_scheduler.sim.timeline import replay
from kai_scheduler.sim.timeseries import run_facts


@pytest.mark.parametrize("cluster", CLUSTERS.values(), ids=CLUSTERS.keys())
def test_result_document_counts_gpu_memory_as_the_scheduler(cluster: GpuMemoryCluster) -> None:
    objects = objects_of(*cluster.manifests)
    scheduler = open_session(objects).snapshot.queues["q"]
    assert scheduler.allocated.gpu == pytest.approx(cluster.allocated)
    assert scheduler.request.gpu == pytest.approx(cluster.requested)

    result = run(objects, cycles=1)
    document = result_document(result)
    pods = pods_by_name(document)
    assert (pods["held"]["node"], pods["asks"]["node"]) == (cluster.held_node, None)
    assert pods["held"]["gpu"] == pytest.approx(cluster.held)
    assert pods["asks"]["gpu"] == pytest.approx(cluster.asks)
    q = queues_by_name(document)["q"]
    assert q["allocated"]["gpu"] == pytest.approx(cluster.allocated)
    assert q["requested"]["gpu"] == pytest.approx(cluster.requested)
    assert document["summary"]["gpu"]["allocated"] == pytest.approx(cluster.allocated)
    # The report's queue figures replay the same pods by the same rule.
    [figures] = [f for f in queue_figures(replay(document, run_facts(result))) if f["name"] == "q"]
    assert figures["allocatedGpu"] == pytest.approx(cluster.allocated)
