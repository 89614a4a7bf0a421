"""DRA-backed extended resources (KEP-5004): the names a DeviceClass answers to, the claim a pod gets on a
node whose devices serve them, and what simulate does with it (model/dra_extended.py,
plugins/dynamicresources.py, sim/claims.py).

The e2e cases are KAI v0.17.0 `test/e2e/suites/allocate/resources/dra_extended_resources_test.go` (cited
by their `It`), run here on simulate's cluster."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from helpers import (
    GPU_DRIVER,
    node,
    objects_of,
    pod_manifest,
    queue,
    resource_slice_manifest,
    run,
)
from kai_scheduler.api.objects import ApiObject, DeviceClass, Pod
from kai_scheduler.model.dra_extended import (
    EXTENDED_CLAIM_ANNOTATION,
    classes_by_resource,
    extended_ask,
    requests_and_mappings,
)

DRA = "resource.k8s.io/v1"


def _class(name: str, extended: str | None = None, created: int = 0) -> dict[str, Any]:
    spec = {"extendedResourceName": extended} if extended else {}
    meta: dict[str, Any] = {"name": name}
    if created:
        meta["creationTimestamp"] = datetime(2026, 1, created, tzinfo=UTC).isoformat()
    return {"apiVersion": DRA, "kind": "DeviceClass", "metadata": meta, "spec": spec}


def test_a_class_answers_to_its_implicit_name_and_the_newest_class_wins_an_explicit_one() -> None:
    classes = [
        DeviceClass.model_validate(_class("old", "example.com/gpu", created=1)),
        DeviceClass.model_validate(_class("new", "example.com/gpu", created=2)),
    ]
    assert classes_by_resource(classes) == {
        "deviceclass.resource.kubernetes.io/old": "old",
        "deviceclass.resource.kubernetes.io/new": "new",
        "example.com/gpu": "new",
    }
    assert classes_by_resource(reversed(classes))["example.com/gpu"] == "new"


def _pod(init: list[dict[str, Any]], containers: list[dict[str, Any]]) -> Pod:
    def container(i: int, spec: dict[str, Any]) -> dict[str, Any]:
        asked = {"example.com/dev": str(spec["n"])} if spec.get("n") else {}
        extra = {"restartPolicy": "Always"} if spec.get("sidecar") else {}
        return {"name": f"c{i}", "resources": {"limits": {"cpu": "1", **asked}}, **extra}

    return Pod.model_validate(
        {
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [container(i, s) for i, s in enumerate(init)],
                "containers": [container(len(init) + i, s) for i, s in enumerate(containers)],
            },
        }
    )


def _requests(pod: Pod) -> tuple[dict[str, int], dict[str, str]]:
    ask = extended_ask(pod, {"example.com/dev": "dev"})
    assert ask is not None
    requests, mappings = requests_and_mappings(ask, ["example.com/dev"])
    counts = {r.name: r.exactly.count for r in requests if r.exactly is not None}
    return counts, {m.container_name: m.request_name for m in mappings}


def test_one_request_per_container_named_by_container_and_resource_index() -> None:
    # Resource index 1: "cpu" sorts before "example.com/dev" among the container's resources.
    counts, mapped = _requests(_pod([], [{"n": 2}, {"n": 1}]))
    assert counts == {"container-0-request-1": 2, "container-1-request-1": 1}
    assert mapped == {"c0": "container-0-request-1", "c1": "container-1-request-1"}


def test_init_containers_reuse_the_devices_of_the_containers_after_them_or_share_the_largest_request() -> (
    None
):
    # The init container's 1 device is covered by the main container's 2: no request of its own.
    counts, mapped = _requests(_pod([{"n": 1}], [{"n": 2}]))
    assert counts == {"container-1-request-1": 2} and mapped["c0"] == "container-1-request-1"
    # Two init containers asking more than the main one: one request, the largest, for both.
    counts, mapped = _requests(_pod([{"n": 3}, {"n": 2}], [{"n": 1}]))
    assert counts == {"container-0-request-1": 2, "container-2-request-1": 1}
    assert mapped["c1"] == "container-0-request-1"
    # A sidecar runs on beside what starts after it: an init container before it may reuse its devices,
    # one after it may not.
    counts, mapped = _requests(_pod([{"n": 1}, {"n": 1, "sidecar": True}], [{}]))
    assert counts == {"container-1-request-1": 1} and mapped["c0"] == "container-1-request-1"
    counts, _ = _requests(_pod([{"n": 1, "sidecar": True}, {"n": 1}], [{}]))
    assert counts == {"container-0-request-1": 1, "container-1-request-1": 1}


# --- simulate -----------------------------------------------------------------------------------------


def _cluster(*pods: dict[str, Any], classes: tuple[dict[str, Any], ...] | None = None) -> list[ApiObject]:
    """Node "dra" (2 GPUs in a ResourceSlice, none of the device plugin) and node "plugin" (2 of the device
    plugin); a DeviceClass mapping nvidia.com/gpu to the slice's devices."""
    mapping = classes if classes is not None else (_class(GPU_DRIVER, "nvidia.com/gpu"),)
    return [
        node("dra", gpus=0),
        node("plugin", gpus=2),
        queue("q"),
        *objects_of(*mapping, resource_slice_manifest("dra-gpus", "dra", 2), *pods),
    ]


def test_a_gpu_pod_on_a_dra_only_node_gets_a_claim_of_its_own() -> None:
    """It "should schedule pod requesting DRA-backed extended resource"; the bind carries the claim and
    simulate's binder writes it as KAI's does."""
    pod = pod_manifest("p", gpus=2, node_selector={"kubernetes.io/hostname": "dra"})
    result = run(_cluster(pod), cycles=1)
    (bind,) = [d for d in result.cycles[0].decisions if d.type == "bind"]
    assert bind.node == "dra" and bind.extended_claim is not None
    extended = bind.extended_claim
    # The container asks for cpu, memory and nvidia.com/gpu: the GPUs are its resource 2.
    assert [(r.name, r.exactly and r.exactly.count) for r in extended.device_requests] == [
        ("container-0-request-2", 2)
    ]
    assert sorted(r.device for r in extended.allocation.devices.results) == ["gpu-0", "gpu-1"]
    (claim,) = result.cluster.claims.claims.values()
    assert claim.metadata.name.startswith("p-extended-resources-")
    assert claim.metadata.annotations == {EXTENDED_CLAIM_ANNOTATION: "true"}
    assert [(o.kind, o.name, o.controller) for o in claim.metadata.owner_references] == [("Pod", "p", True)]
    assert claim.status.allocation == extended.allocation
    assert [r.name for r in claim.status.reserved_for] == ["p"]
    (sim_pod,) = [p for p in result.cluster.pods if p.key == "default/p"]
    status = sim_pod.pod.status.extended_resource_claim_status
    assert status is not None and status.resource_claim_name == claim.metadata.name
    assert [m.resource_name for m in status.request_mappings] == ["nvidia.com/gpu"]


def test_on_a_device_plugin_node_the_same_pod_needs_no_claim() -> None:
    """The mixed cluster of the design: the node's own allocatable serves the resource there."""
    pod = pod_manifest("p", gpus=1, node_selector={"kubernetes.io/hostname": "plugin"})
    (bind,) = [d for d in run(_cluster(pod), cycles=1).cycles[0].decisions if d.type == "bind"]
    assert bind.node == "plugin" and bind.extended_claim is None


def test_a_pod_asking_more_devices_than_the_node_publishes_waits() -> None:
    """It "should not schedule pod when DRA-backed resources are insufficient"."""
    pod = pod_manifest("p", gpus=3, node_selector={"kubernetes.io/hostname": "dra"})
    result = run(_cluster(pod), cycles=1)
    assert not [d for d in result.cycles[0].decisions if d.type == "bind"]


def test_two_pods_take_distinct_devices_and_a_third_waits() -> None:
    """It "should allocate distinct devices to multiple pods"."""
    on_dra = {"node_selector": {"kubernetes.io/hostname": "dra"}}
    pods = [pod_manifest(name, gpus=1, **on_dra) for name in ("a", "b", "c")]
    result = run(_cluster(*pods), cycles=2)
    binds = [d for cycle in result.cycles for d in cycle.decisions if d.type == "bind"]
    assert len(binds) == 2
    devices = [
        r.device for d in binds if d.extended_claim for r in d.extended_claim.allocation.devices.results
    ]
    assert sorted(devices) == ["gpu-0", "gpu-1"]


def test_the_implicit_name_works_and_a_non_gpu_resource_is_left_to_the_allocator() -> None:
    """It "should schedule pod using implicit deviceclass extended resource name": the node has no
    allocatable for it, and fit leaves it to the DRA allocator (no vector check, no charge)."""
    pod = pod_manifest(
        "p",
        node_selector={"kubernetes.io/hostname": "dra"},
        extra_requests={f"deviceclass.resource.kubernetes.io/{GPU_DRIVER}": 1},
    )
    result = run(_cluster(pod, classes=(_class(GPU_DRIVER),)), cycles=1)
    (bind,) = [d for d in result.cycles[0].decisions if d.type == "bind"]
    assert bind.node == "dra" and bind.extended_claim is not None


def test_without_a_class_the_resource_is_an_ordinary_extended_resource() -> None:
    pod = pod_manifest("p", extra_requests={"example.com/dev": 1})
    result = run(_cluster(pod), cycles=1)
    assert not [d for d in result.cycles[0].decisions if d.type == "bind"]


def test_a_finished_pod_gives_its_devices_to_the_next() -> None:
    """Its claim goes with it (its owner reference): the devices are free for the next pod."""
    on_dra = {"node_selector": {"kubernetes.io/hostname": "dra"}}
    pods = [pod_manifest("first", gpus=2, duration=10, **on_dra), pod_manifest("second", gpus=2, **on_dra)]
    result = run(_cluster(*pods), until=60)
    binds = [d.pod for cycle in result.cycles for d in cycle.decisions if d.type == "bind"]
    assert binds == ["default/first", "default/second"]
    names = [c.metadata.name for c in result.cluster.claims.claims.values()]
    assert len(names) == 1 and names[0].startswith("second-extended-resources-")
