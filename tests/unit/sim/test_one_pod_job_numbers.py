"""The result document's numbers of one-pod jobs whose pods ask alike (the same request): each job counts
its own pod's phase and node, and its queue sums them, although the document works the numbers of alike
one-pod jobs out once (`sim.results._status_numbers`)."""

from __future__ import annotations

import pytest

from helpers import (
    groups_by_name,
    node_manifest,
    objects_of,
    pod_manifest,
    queue_manifest,
    queues_by_name,
    run,
)
from kai_scheduler.sim.results import result_document


def test_alike_one_pod_jobs_count_their_own_phase_and_node() -> None:
    objects = objects_of(
        queue_manifest("q"),
        node_manifest("full", gpus=1),
        node_manifest("large", gpus=1, gpu_memory=80000),
        node_manifest("small", gpus=1, gpu_memory=40000),
        # Alike whole-GPU pods: one runs, one finds no room and waits.
        pod_manifest("runs", gpus=1, node_name="full"),
        pod_manifest("waits", gpus=1, node_selector={"kubernetes.io/hostname": "full"}),
        # Alike 20000 MiB pods on GPUs of 80000 and 40000 MiB: a quarter and a half of a GPU.
        pod_manifest("quarter", gpu_memory=20000, node_name="large"),
        pod_manifest("half", gpu_memory=20000, node_name="small"),
    )
    document = result_document(run(objects, cycles=1))

    groups = groups_by_name(document)
    counts = {name: (group["running"], group["pending"]) for name, group in groups.items()}
    assert counts == {"pg-runs": (1, 0), "pg-waits": (0, 1), "pg-quarter": (1, 0), "pg-half": (1, 0)}
    q = queues_by_name(document)["q"]
    assert q["allocated"]["gpu"] == pytest.approx(1 + 0.25 + 0.5)
    assert q["requested"]["gpu"] == pytest.approx(1 + 0.25 + 0.5 + 1)
