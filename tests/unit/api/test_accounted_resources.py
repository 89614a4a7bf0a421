"""AccountedResource and Queue.spec.accountedResources as the simulator loads them: the KAI design's own
examples load unchanged, and what its webhook refuses is refused with one line naming the object."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import AccountedResource, Queue

# The design's "Example AccountedResources" (docs/developer/designs/accounted-resource-api.md), as written.
DESIGN_EXAMPLES = """
apiVersion: scheduling.run.ai/v1alpha1
kind: AccountedResource
metadata:
  name: gpu-gb200
spec:
  defaults:
    limit: "-1"
  sources:
  - dra:
      deviceClassName: gpu.nvidia.com
    match:
      dra:
        deviceAttributes:
          productName:
            string: GB200
---
apiVersion: scheduling.run.ai/v1alpha1
kind: AccountedResource
metadata:
  name: gpu-memory
spec:
  defaults:
    limit: "-1"
  sources:
  - dra:
      deviceClassName: gpu.nvidia.com
    quantity:
      dra:
        selectedCapacity:
          capacityName: memory
  - dra:
      deviceClassName: gpu.nvidia.com
    quantity:
      dra:
        opaqueConfigField:
          driver: gpu.nvidia.com
          path: sharing.mpsConfig.defaultPinnedDeviceMemoryLimit
          unit: Mi
  - podAnnotation:
      key: gpu-memory
      unit: Mi
---
apiVersion: scheduling.run.ai/v1alpha1
kind: AccountedResource
metadata:
  name: gpu-compute
spec:
  defaults:
    limit: "-1"
  sources:
  - podAnnotation:
      key: gpu-compute
      unit: percent
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: team-a
spec:
  resources:
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
  accountedResources:
  - resourceRef: gpu
    limit: "16"
  - resourceRef: gpu-h200
    limit: "4"
  - resourceRef: gpu-memory
    limit: "320Gi"
"""


def _parse(doc: dict[str, Any]) -> Any:
    return parse_object(doc, "input.yaml", 1, strict=True)


def test_the_designs_examples_load_as_written() -> None:
    objects = [_parse(doc) for doc in yaml.safe_load_all(DESIGN_EXAMPLES)]
    gb200, memory, compute, queue = objects
    assert isinstance(gb200, AccountedResource) and isinstance(queue, Queue)
    assert gb200.spec.sources[0].match is not None
    assert gb200.spec.sources[0].match.dra is not None
    assert gb200.spec.sources[0].match.dra.device_attributes["productName"].string == "GB200"
    assert [s.pod_annotation.key for s in memory.spec.sources if s.pod_annotation] == ["gpu-memory"]
    assert compute.spec.sources[0].pod_annotation.unit == "percent"
    limits = {entry.resource_ref: entry.limit for entry in queue.spec.accounted_resources}
    assert limits == {"gpu": 16, "gpu-h200": 4, "gpu-memory": 320 * 2**30}


def _queue(entries: list[dict[str, Any]]) -> dict[str, Any]:
    resources = {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("gpu", "cpu", "memory")}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "team-a"},
        "spec": {"resources": resources, "accountedResources": entries},
    }


def test_a_duplicate_reference_is_refused_naming_the_queue() -> None:
    with pytest.raises(ManifestError) as error:
        _parse(_queue([{"resourceRef": "gpu", "limit": "4"}, {"resourceRef": "gpu", "limit": 2}]))
    assert str(error.value) == (
        "input.yaml: document 1 (Queue team-a): spec.accountedResources[1].resourceRef: "
        "duplicate resourceRef 'gpu' (also spec.accountedResources[0])"
    )


def test_a_limit_must_be_a_quantity() -> None:
    with pytest.raises(ManifestError, match=r"spec\.accountedResources\[0\]\.limit"):
        _parse(_queue([{"resourceRef": "gpu", "limit": "lots"}]))


def _resource(sources: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v1alpha1",
        "kind": "AccountedResource",
        "metadata": {"name": "efa"},
        "spec": {"sources": sources},
    }


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([{}], "spec.sources[0]: set exactly one of resourceName, dra and podAnnotation (found: none)"),
        (
            [{"resourceName": "a"}, {"resourceName": "b", "podAnnotation": {"key": "k"}}],
            "spec.sources[1]: set exactly one of resourceName, dra and podAnnotation "
            "(found: resourceName, podAnnotation)",
        ),
        (
            [{"resourceName": "a", "quantity": {"dra": {"selectedCapacity": {"capacityName": "memory"}}}}],
            "spec.sources[0].quantity.dra: a DRA quantity needs a dra source",
        ),
        (
            [{"podAnnotation": {"key": "gpu-memory", "unit": "Mx"}}],
            "spec.sources[0].podAnnotation.unit: unknown unit 'Mx': a quantity suffix (Ki, Mi, Gi, k, M, G, "
            "...) or percent",
        ),
    ],
)
def test_a_source_breaking_the_designs_rules_is_refused(sources: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ManifestError) as error:
        _parse(_resource(sources))
    assert str(error.value) == f"input.yaml: document 1 (AccountedResource efa): {message}"


def test_sources_are_required() -> None:
    with pytest.raises(ManifestError, match=r"\(AccountedResource efa\): spec\.sources"):
        _parse(_resource([]))
