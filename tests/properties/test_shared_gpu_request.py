"""One answer for a shared-GPU pod at every edge that reads it (`api.gpu_request`).

The same pods - a `gpu-fraction` or `gpu-memory` request on one or more devices, one bound to a node and
one that no node can take - on nodes whose GPU memory is reported (at any size, on or off KAI's 100 MiB
grid) or not, are read by the simulator (the scheduler's queue accounting, the result document, the
report's replay), by the live status controllers (`controlplane.status` over the pods as `k8s.status` reads
them), by the scale adjuster's plan, and by `kubectl kai` (`why`'s amounts, `top`'s allocation). Each
must count the bound pod's GPUs and the waiting pod's GPUs the same; and a request admission refuses is
refused by every reader, not counted by one and dropped by another.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node_manifest, objects_of, open_session, pod_manifest, pods_by_name, queue_manifest, run
from kai_scheduler.api import constants as c
from kai_scheduler.api.manifests import InvalidField, check_gpu_sharing
from kai_scheduler.api.objects import Pod
from kai_scheduler.controlplane.status import PodFacts, pod_group_numbers
from kai_scheduler.k8s.runtime.objects import gpu_memory_mib_of
from kai_scheduler.k8s.scaleadjuster.plan import shared_gpu_request
from kai_scheduler.k8s.scaleadjuster.shapes import node_gpu_facts
from kai_scheduler.kubectl_plugin.amounts import pod_gpus
from kai_scheduler.kubectl_plugin.top import gpu_allocation
from kai_scheduler.model.builder import pod_request, reported_gpu_memory_range
from kai_scheduler.sim.results import result_document
from kai_scheduler.sim.timeseries import run_facts

EXAMPLES = int(os.environ.get("KAI_SHARED_GPU_EXAMPLES", "40"))
# The scale adjuster's ratio for a node shape whose GPU memory no node reports; it never meets the
# scheduler's numbers (KAI's nodescaleadjuster guesses there), so the comparisons below leave it out.
RATIO = Fraction(1, 10)


@dataclass(frozen=True)
class Request:
    fraction: str | None
    memory_mib: int | None
    devices: int | None

    def annotations(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.fraction is not None:
            out[c.GPU_FRACTION_ANNOTATION] = self.fraction
        if self.memory_mib is not None:
            out[c.GPU_MEMORY_ANNOTATION] = str(self.memory_mib)
        if self.devices is not None:
            out[c.GPU_FRACTION_NUM_DEVICES_ANNOTATION] = str(self.devices)
        return out


valid_requests = st.builds(
    Request,
    fraction=st.none(),
    memory_mib=st.integers(1, 120_000),
    devices=st.sampled_from((None, 1, 2, 3)),
) | st.builds(
    Request,
    fraction=st.sampled_from(("0.1", "0.25", "0.3", "0.5", ".75", "0.99", "5e-1")),
    memory_mib=st.none(),
    devices=st.sampled_from((None, 1, 2, 3)),
)
# Sizes on KAI's 100 MiB grid and off it (81920: the A100's label), and a node that does not say.
gpu_memories = st.sampled_from((None, None, 16_000, 40_000, 81_920, 24_576, 150))


def _pod_gpus(
    bound: dict[str, Any], node: dict[str, Any], waiting: dict[str, Any], smallest: float
) -> list[tuple[str, float, float]]:
    """(edge, the bound pod's GPUs, the waiting pod's GPUs) as each edge that reads pods counts them."""
    answers = []
    # The scheduler's model of a pod, as both edges build it (simulator input and live state alike).
    request_bound = pod_request(Pod.model_validate(bound))
    request_waiting = pod_request(Pod.model_validate(waiting))
    node_memory = gpu_memory_mib_of(node)
    answers.append(
        (
            "PodRequest.queue_gpus",
            request_bound.queue_gpus(node_memory),
            request_waiting.queue_gpus(None, smallest),
        )
    )
    # The live status controllers: PodGroup numbers from the pods' facts.
    numbers = pod_group_numbers(
        [
            PodFacts("Running", True, node_memory, request_bound),
            PodFacts("Pending", False, 0.0, request_waiting),
        ],
        preemptible=True,
        min_gpu_memory_mib=smallest,
    )
    answers.append(("status", numbers.allocated.gpu, numbers.requested.gpu - numbers.allocated.gpu))
    # kubectl kai: why's amounts, and top's allocation on the node.
    read_bound, read_waiting = pod_gpus(bound), pod_gpus(waiting)
    assert read_bound is not None and read_waiting is not None
    [row] = [r for r in gpu_allocation([node], [bound]) if r.name == node["metadata"]["name"]]
    top_bound = row.whole + sum(shared.allocated for shared in row.shared.values())
    answers.append(("kubectl kai", top_bound, read_waiting.gpus(None, smallest)))
    answers.append(("kubectl kai why", read_bound.gpus(node_memory), read_waiting.gpus(None, smallest)))
    return answers


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bound_request=valid_requests,
    waiting_request=valid_requests,
    node_memory=gpu_memories,
    other_memory=gpu_memories,
)
def test_every_edge_counts_a_shared_gpu_pod_the_same(
    bound_request: Request, waiting_request: Request, node_memory: int | None, other_memory: int | None
) -> None:
    node = node_manifest("n1", gpus=4, gpu_memory=node_memory)
    other = node_manifest("n2", gpus=4, gpu_memory=other_memory)
    bound = pod_manifest(
        "held", "a", node_name="n1", phase="Running", annotations=bound_request.annotations()
    )
    # No node has the label it selects: it waits, and asks its queue for what it would take.
    waiting = pod_manifest(
        "asks", "b", node_selector={"pool": "none"}, annotations=waiting_request.annotations()
    )
    smallest = reported_gpu_memory_range(np.array([gpu_memory_mib_of(node), gpu_memory_mib_of(other)]))[0]

    answers = _pod_gpus(bound, node, waiting, smallest)

    # The simulator: the scheduler's queues, the result document and the report's replay of it.
    objects = objects_of(node, other, queue_manifest("a"), queue_manifest("b"), bound, waiting)
    queues = open_session(objects).snapshot.queues
    answers.append(("scheduler queues", queues["a"].allocated.gpu, queues["b"].request.gpu))
    result = run(objects, cycles=1)
    pods = pods_by_name(result_document(result))
    assert (pods["held"]["node"], pods["asks"]["node"]) == ("n1", None)
    answers.append(("simulate result", pods["held"]["gpu"], pods["asks"]["gpu"]))
    facts = run_facts(result)
    answers.append(
        ("simulate report", facts.gpu_units("default/held", "n1"), facts.gpu_units("default/asks", None))
    )

    expected_bound, expected_waiting = answers[0][1], answers[0][2]
    for edge, held, asks in answers:
        assert held == pytest.approx(expected_bound), edge
        assert asks == pytest.approx(expected_waiting), edge

    # The scale adjuster reads the same request, and on a node shape whose GPU memory is known needs the
    # GPUs the pod would hold there.
    model = pod_request(Pod.model_validate(bound)).shared_gpu
    assert shared_gpu_request(bound) == model
    assert model is not None
    shape_memory = node_gpu_facts(node["metadata"]["labels"], node["status"]["allocatable"]).memory_mib
    if shape_memory:
        assert float(model.scaling_gpus(shape_memory, RATIO)) == pytest.approx(expected_bound)


invalid_annotations = st.sampled_from(
    (
        {c.GPU_FRACTION_ANNOTATION: "1.5"},
        {c.GPU_FRACTION_ANNOTATION: "0"},
        {c.GPU_FRACTION_ANNOTATION: "1/2"},
        {c.GPU_FRACTION_ANNOTATION: "half"},
        {c.GPU_FRACTION_ANNOTATION: " 0.5"},
        {c.GPU_FRACTION_ANNOTATION: "nan"},
        {c.GPU_MEMORY_ANNOTATION: "0"},
        {c.GPU_MEMORY_ANNOTATION: "-100"},
        {c.GPU_MEMORY_ANNOTATION: "10Gi"},
        {c.GPU_FRACTION_ANNOTATION: "0.5", c.GPU_MEMORY_ANNOTATION: "1000"},
        {c.GPU_FRACTION_ANNOTATION: "0.5", c.GPU_FRACTION_NUM_DEVICES_ANNOTATION: "0"},
        {c.GPU_MEMORY_ANNOTATION: "1000", c.GPU_FRACTION_NUM_DEVICES_ANNOTATION: "two"},
    )
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(annotations=invalid_annotations, bound=st.booleans())
def test_a_request_admission_refuses_is_refused_by_every_reader(
    annotations: dict[str, str], bound: bool
) -> None:
    manifest = pod_manifest("p", "a", node_name="n1" if bound else None, annotations=annotations)
    pod = Pod.model_validate(manifest)
    with pytest.raises(InvalidField) as refused:
        check_gpu_sharing(pod)
    assert str(refused.value.field).startswith("metadata.annotations")
    with pytest.raises(ValueError, match=r"^metadata\.annotations"):
        pod_request(pod)
    assert shared_gpu_request(manifest) is None
    assert pod_gpus(manifest) is None
