"""The scale adjuster's pure plan: which pods count, shapes, ceil of sums, gpu-memory conversion, split by
node size, replacement and deletion of scaling pods, deterministic names; and the GPU Operator facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest

from helpers import node_manifest, pod_manifest
from kai_scheduler.k8s.scaleadjuster.plan import (
    DO_NOT_DISRUPT_ANNOTATION,
    SHAPE_LABEL,
    ScalingPlan,
    is_unschedulable,
    plan_scaling_pods,
    requested_gpus,
    shared_gpu_request,
)
from kai_scheduler.k8s.scaleadjuster.shapes import (
    GpuFacts,
    node_fits_shape,
    node_gpu_facts,
    pod_shape,
    shape_gpu_facts,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
OLD = (NOW - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
FRESH = (NOW - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
A100 = {"gpu-type": "a100"}


def frac(name: str, fraction: float | None = 0.5, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("created", OLD)
    kwargs.setdefault("namespace", "default")
    return pod_manifest(name, fraction=fraction, **kwargs)


def plan(pods: list[dict[str, Any]], existing: list[dict[str, Any]] | None = None, **kw: Any) -> ScalingPlan:
    kw.setdefault("now", NOW)
    return plan_scaling_pods(pods, existing or [], **kw)


def gpus_by_name(p: ScalingPlan) -> dict[str, int]:
    return {m["metadata"]["name"]: requested_gpus(m) for m in p.create}


def as_existing(manifest: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A created scaling pod as the informer would show it."""
    pod = {**manifest, "metadata": {**manifest["metadata"], "uid": "u-" + manifest["metadata"]["name"]}}
    pod["spec"] = {**manifest["spec"], **changes}
    pod["status"] = {"phase": "Pending"}
    return pod


def test_one_scaling_pod_per_shape_with_ceil_of_the_sum() -> None:
    pods = [frac("a", 0.5), frac("b", 0.5), frac("c", 0.3)]  # 1.3 -> 2 GPUs
    pods += [frac("d", 0.7, node_selector=A100), frac("e", 0.2, node_selector=A100)]  # 0.9 -> 1
    pods += [frac("f", 0.7), frac("g", 0.1, node_selector=A100)]  # exact sums: 0.7+0.2+0.1 is 1, not 2
    result = plan(pods)
    plain, a100 = pod_shape(pods[0]), pod_shape(pods[3])
    assert plain.key != a100.key
    assert result.needs[plain.key].units == Fraction(2)
    assert result.needs[a100.key].units == Fraction(1)
    assert gpus_by_name(result) == {
        f"scaling-pod-{plain.key}-0": 2,
        f"scaling-pod-{a100.key}-0": 1,
    }
    assert result.delete == [] and result.released_shapes == []
    by_shape = {m["metadata"]["labels"][SHAPE_LABEL]: m for m in result.create}
    pod = by_shape[a100.key]
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["namespace"] == "kai-scale-adjust"
    assert meta["labels"]["app"] == "kai-scale-adjust"
    assert meta["annotations"][DO_NOT_DISRUPT_ANNOTATION] == "true"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["nodeSelector"] == A100
    assert spec["priorityClassName"] == "kai-scale-adjust"
    (container,) = spec["containers"]
    assert "pause" in container["image"]
    assert container["resources"] == {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    assert "nodeSelector" not in by_shape[plain.key]["spec"]


def test_shapes_follow_selector_tolerations_affinity_and_node_pool() -> None:
    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    default = {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        },
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
    }
    plain = pod_shape(frac("a"))
    assert pod_shape(frac("b", tolerations=[default])) == plain  # the API server's defaults do not count
    tolerant = pod_shape(frac("c", tolerations=[toleration, default]))
    assert tolerant != plain and tolerant.spec == {"tolerations": [toleration]}
    zoned = pod_shape(frac("d", affinity=affinity))
    assert zoned.spec == {"affinity": {"nodeAffinity": affinity["nodeAffinity"]}}  # pod affinity left out
    pooled = pod_shape(frac("e", labels={"kai.scheduler/node-pool": "pool-1"}))
    assert pooled.spec == {"nodeSelector": {"kai.scheduler/node-pool": "pool-1"}}
    # Same constraints written in another order: the same shape.
    two = {"key": "x", "operator": "Exists"}
    assert pod_shape(frac("f", tolerations=[toleration, two])) == pod_shape(
        frac("g", tolerations=[two, toleration])
    )
    result = plan([frac("c", tolerations=[toleration]), frac("d", affinity=affinity)])
    specs = {m["metadata"]["labels"][SHAPE_LABEL]: m["spec"] for m in result.create}
    assert specs[tolerant.key]["tolerations"] == [toleration]
    assert specs[zoned.key]["affinity"] == {"nodeAffinity": affinity["nodeAffinity"]}


def test_which_pods_count() -> None:
    counted = frac("counted")
    others = [
        frac("theirs", scheduler="default-scheduler"),
        frac("placed", node_name="n1"),
        frac("done", phase="Succeeded"),
        frac("leaving", terminating=True),
        frac("whole", None, gpus=1),
        frac("cpu", None),
        frac("fresh", created=FRESH),  # pending for 5 s only: within the grace
        frac("binding"),  # has a BindRequest
        frac("bad", None, annotations={"gpu-fraction": "1.5"}),
        frac("both", gpu_memory=1000),  # a fraction and memory: invalid
    ]
    result = plan([counted, *others], being_bound={"default/binding"})
    (need,) = result.needs.values()
    assert need.pods == ["default/counted"]
    # Without a clock every pending pod counts; a fresh pod marked unschedulable counts at once.
    assert len(next(iter(plan([frac("fresh", created=FRESH)], now=None).needs.values())).pods) == 1
    marked = frac("marked", created=FRESH)
    marked["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    assert is_unschedulable(marked, now=NOW, grace=30)
    assert not is_unschedulable(frac("fresh", created=FRESH), now=NOW, grace=30)


def test_pod_group_reasons_decide() -> None:
    def group(reason: str) -> dict[str, Any]:
        condition = {
            "type": "UnschedulableOnNodePool",
            "status": "True",
            "reason": reason,
            "nodePool": "default",
        }
        return {"metadata": {"name": "g"}, "status": {"schedulingConditions": [condition]}}

    fresh = frac("fresh", created=FRESH, group="g")
    old = frac("old", group="g")
    assert is_unschedulable(fresh, now=NOW, grace=30, pod_groups={"default/g": group("Unschedulable")})
    assert not is_unschedulable(old, now=NOW, grace=30, pod_groups={"default/g": group("OverLimit")})
    result = plan([old], pod_groups={"default/g": group("NonPreemptibleOverQuota")})
    assert not result and result.needs == {}


def test_gpu_memory_converts_with_the_ratio_or_the_nodes_memory() -> None:
    mem = [pod_manifest(f"m{i}", gpu_memory=20000, created=OLD, namespace="default") for i in range(3)]
    shape = pod_shape(mem[0])
    # No node of the shape: each gpu-memory pod counts as the ratio (0.1 by default).
    result = plan(mem)
    assert result.needs[shape.key].units == Fraction(3, 10)
    assert gpus_by_name(result) == {f"scaling-pod-{shape.key}-0": 1}
    assert plan(mem, gpu_memory_to_fraction_ratio=0.5).needs[shape.key].units == Fraction(3, 2)
    # A node of the shape says 40 GB per GPU: 20000 MiB is 1/2 of one, three of them need 2 GPUs.
    facts = {shape.key: GpuFacts(8, 40000, "NVIDIA-A100-SXM4-40GB")}
    result = plan(mem, shape_facts=facts)
    assert result.needs[shape.key].units == Fraction(3, 2)
    assert gpus_by_name(result) == {f"scaling-pod-{shape.key}-0": 2}
    # Never more than a whole GPU per device; devices multiply.
    big = pod_manifest("big", gpu_memory=90000, num_devices=2, created=OLD)
    request = shared_gpu_request(big)
    assert request is not None and request.devices == 2
    assert request.scaling_gpus(40000, Fraction(1, 10)) == 2
    assert request.scaling_gpus(0, Fraction(1, 10)) == Fraction(1, 5)
    with pytest.raises(ValueError):
        plan(mem, gpu_memory_to_fraction_ratio=0)


def test_multi_device_pods_get_at_least_their_devices() -> None:
    pods = [frac("a", 0.25, num_devices=4)]  # 1 GPU worth, but on 4 distinct GPUs
    result = plan(pods)
    assert list(gpus_by_name(result).values()) == [4]


def test_split_by_node_size() -> None:
    pods = [frac(f"p{i}", 0.5) for i in range(20)]  # 10 GPUs
    shape = pod_shape(pods[0])
    result = plan(pods, shape_facts={shape.key: GpuFacts(4, 0, "")})
    assert gpus_by_name(result) == {f"scaling-pod-{shape.key}-{i}": g for i, g in enumerate([4, 4, 2])}
    assert list(gpus_by_name(plan(pods, max_gpus_per_pod=8)).values()) == [8, 2]
    assert list(gpus_by_name(plan(pods)).values()) == [10]


def test_names_are_deterministic_and_existing_pods_are_kept() -> None:
    pods = [frac("a"), frac("b"), frac("c", node_selector=A100)]
    first = plan(pods)
    again = plan(list(reversed(pods)))
    assert [m["metadata"]["name"] for m in first.create] == [m["metadata"]["name"] for m in again.create]
    assert first.create == again.create
    assert all(m["metadata"]["name"].startswith("scaling-pod-") for m in first.create)
    existing = [as_existing(m) for m in first.create]
    steady = plan(pods, existing)
    assert not steady and steady.create == [] and steady.delete == []


def test_scaling_pods_are_replaced_and_deleted_when_no_longer_needed() -> None:
    pods = [frac(f"p{i}", 0.5) for i in range(4)]  # 2 GPUs
    (created,) = plan(pods).create
    name = created["metadata"]["name"]
    existing = [as_existing(created)]
    # Two pods were placed: 1 GPU is enough; the pod is replaced (same name, new count).
    fewer = plan(pods[:2], existing)
    assert fewer.delete == [name]
    assert gpus_by_name(fewer) == {name: 1}
    # None left: deleted, nothing created.
    gone = plan([], existing)
    assert gone.delete == [name] and gone.create == []
    # A shape that split in three and now needs one pod: the extra ones go.
    many = [frac(f"q{i}", 0.5) for i in range(16)]
    shape = pod_shape(many[0])
    facts = {shape.key: GpuFacts(4, 0, "")}
    split = [as_existing(m) for m in plan(many, shape_facts=facts).create]
    assert len(split) == 2
    shrunk = plan(many[:8], split, shape_facts=facts)
    assert shrunk.create == [] and shrunk.delete == [f"scaling-pod-{shape.key}-1"]
    # A terminating scaling pod is left alone, and not created again until it is gone.
    leaving = as_existing(created)
    leaving["metadata"]["deletionTimestamp"] = OLD
    assert not plan(pods, [leaving])


def test_bound_scaling_pods_are_deleted_and_their_shape_waits() -> None:
    pods = [frac(f"p{i}", 0.5) for i in range(4)]
    (created,) = plan(pods).create
    shape = created["metadata"]["labels"][SHAPE_LABEL]
    bound = as_existing(created, nodeName="new-node")
    result = plan(pods, [bound])
    assert result.delete == [created["metadata"]["name"]]
    assert result.create == []  # the new node is the kai-scheduler's to fill first
    assert result.released_shapes == [shape]
    # Held (cooldown): no scaling pod for that shape; other shapes go on.
    other = frac("other", node_selector=A100)
    held = plan([*pods, other], held_shapes={shape})
    assert [m["spec"].get("nodeSelector") for m in held.create] == [A100]


def test_node_gpu_facts_and_shape_matching() -> None:
    labels = {
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "40960",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    }
    assert node_gpu_facts(labels, {}) == (8, 40900, "NVIDIA-A100-SXM4-40GB")  # floored to 100 MiB
    assert node_gpu_facts({}, {"nvidia.com/gpu": "4"}) == (4, 0, "")
    assert node_gpu_facts({"nvidia.com/gpu.count": "x", "nvidia.com/gpu.memory": "-1"}, {}) == (0, 0, "")
    tainted = node_manifest(
        "t", gpus=8, labels=A100, gpu_memory=81920, taints=[{"key": "gpu", "effect": "NoSchedule"}]
    )
    small = node_manifest("s", gpus=4, labels=A100, gpu_memory=40960)
    cpu = node_manifest("c", gpus=0, labels=A100)
    plain = pod_shape(frac("a", node_selector=A100))
    tolerant = pod_shape(
        frac(
            "b",
            node_selector=A100,
            tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        )
    )
    assert node_fits_shape(small, plain) and not node_fits_shape(tainted, plain)
    assert node_fits_shape(tainted, tolerant)
    assert not node_fits_shape(node_manifest("other", gpus=8), plain)
    assert shape_gpu_facts(plain, [tainted, small, cpu]) == GpuFacts(4, 40900, "")
    # Both fit: the largest count, the smallest memory.
    assert shape_gpu_facts(tolerant, [tainted, small]) == GpuFacts(8, 40900, "")
    assert shape_gpu_facts(pod_shape(frac("c", node_selector={"gpu-type": "h100"})), [small]) is None
