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
    groups_by_name,
    node,
    node_manifest,
    objects_of,
    pod_group_manifest,
    pod_manifest,
    priority_class_manifest,
    queue,
    queue_manifest,
    resource_slice_manifest,
    run,
    simulate,
)
from kai_scheduler.api.objects import ApiObject, DeviceClass, Pod
from kai_scheduler.model.dra_extended import (
    EXTENDED_CLAIM_ANNOTATION,
    classes_by_resource,
    extended_ask,
    may_ask_extended,
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
    """It "schedules a pod using classic extended resource syntax without spec.resourceClaims"; the bind
    carries the claim and simulate's binder writes it as KAI's does."""
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
    """It "schedules a pod on a device-plugin node when the resource is also DRA-backed on other nodes":
    the node's own allocatable serves the resource there."""
    pod = pod_manifest("p", gpus=1, node_selector={"kubernetes.io/hostname": "plugin"})
    (bind,) = [d for d in run(_cluster(pod), cycles=1).cycles[0].decisions if d.type == "bind"]
    assert bind.node == "plugin" and bind.extended_claim is None


def test_a_pod_asking_more_devices_than_the_node_publishes_waits() -> None:
    """More devices than any node publishes: no node, and no claim."""
    pod = pod_manifest("p", gpus=3, node_selector={"kubernetes.io/hostname": "dra"})
    result = run(_cluster(pod), cycles=1)
    assert not [d for d in result.cycles[0].decisions if d.type == "bind"]


def test_two_pods_take_distinct_devices_and_a_third_waits() -> None:
    """It "fills a DRA node with extended resource pods and blocks the next": one pod per device, each its
    own device, and the next one waits."""
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
    """The design's implicit name (`deviceclass.resource.kubernetes.io/<class>`): the node has no
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


def test_a_gang_of_two_takes_devices_on_two_dra_nodes() -> None:
    """It "schedules a gang job (minMember=2) using extended resource syntax across DRA nodes"."""
    objects = [
        node("dra-a", gpus=0),
        node("dra-b", gpus=0),
        queue("q"),
        *objects_of(
            _class(GPU_DRIVER, "nvidia.com/gpu"),
            resource_slice_manifest("a-gpus", "dra-a", 1),
            resource_slice_manifest("b-gpus", "dra-b", 1),
            pod_group_manifest("gang", "q", min_member=2),
            *(pod_manifest(f"w{i}", gpus=1, group="gang") for i in range(2)),
        ),
    ]
    binds = [d for d in run(objects, cycles=1).cycles[0].decisions if d.type == "bind"]
    assert sorted(d.node for d in binds) == ["dra-a", "dra-b"]
    assert all(d.extended_claim is not None for d in binds)


def test_init_container_requests_count_as_the_largest_not_the_sum() -> None:
    """It "aggregates init-container GPU requests correctly (max, not sum)": an init container and the
    main one each asking all the node's devices fit, and share them (the init container's request reuses
    the main one's)."""
    pod = pod_manifest("p", gpus=2, node_selector={"kubernetes.io/hostname": "dra"})
    pod["spec"]["initContainers"] = [
        {
            "name": "init",
            "resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}},
        }
    ]
    (bind,) = [d for d in run(_cluster(pod), cycles=1).cycles[0].decisions if d.type == "bind"]
    assert bind.node == "dra" and bind.extended_claim is not None
    assert [r.exactly and r.exactly.count for r in bind.extended_claim.device_requests] == [2]
    mapped = {m.container_name: m.request_name for m in bind.extended_claim.container_mappings}
    assert mapped["init"] == mapped["main"]


def test_a_higher_priority_pod_preempts_an_extended_resource_pod_and_takes_its_devices() -> None:
    """KAI v0.17.0 test/e2e/suites/preempt/preempt_test.go, Context "Dynamic Resources - Extended
    Resources", It "preempts an extended-resource pod using classic nvidia.com/gpu syntax": the node is
    filled with low-priority pods; the victim's claim goes with it and its devices go to the preemptor."""
    on_dra = {"node_selector": {"kubernetes.io/hostname": "dra"}}
    objects = [
        *_cluster(
            *(pod_manifest(f"low-{i}", gpus=1, priority_class="low", **on_dra) for i in range(2)),
            pod_manifest("high", gpus=1, priority_class="high", arrival=10, **on_dra),
        ),
        *objects_of(priority_class_manifest("low", 50), priority_class_manifest("high", 100)),
    ]
    result = run(objects, until=60)
    decisions = [d for cycle in result.cycles for d in cycle.decisions]
    evicted = [d.pod for d in decisions if d.type == "evict"]
    assert len(evicted) == 1
    (high,) = [d for d in decisions if d.type == "bind" and d.pod == "default/high"]
    (victim,) = [d for d in decisions if d.type == "bind" and d.pod == evicted[0]]
    assert high.extended_claim is not None and victim.extended_claim is not None
    taken = [r.device for r in high.extended_claim.allocation.devices.results]
    assert taken == [r.device for r in victim.extended_claim.allocation.devices.results]
    names = sorted(c.metadata.name.split("-extended-")[0] for c in result.cluster.claims.claims.values())
    assert "high" in names and evicted[0].split("/")[1] not in names


def test_a_non_gpu_resource_in_a_topology_domain_is_left_to_the_allocator() -> None:
    """A resource of a non-GPU class (no node has allocatable for it): neither the node's fit nor the
    topology domain's counts it (KAI skips such dimensions in both), only the slice's devices do; and
    it is no GPU for the queue."""
    pods = [pod_manifest(f"p{i}", group="pair", extra_requests={"example.com/fpga": 1}) for i in range(2)]
    group = pod_group_manifest("pair", "q", min_member=2)
    group["spec"]["topologyConstraint"] = {"topology": "dc", "requiredTopologyLevel": "rack"}
    objects = [
        node_manifest("fpga-node", gpus=0, labels={"rack": "r1"}),
        queue_manifest("q", gpu=0, gpu_limit=0),
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "rack"}]},
        },
        _class("fpga.example.com", "example.com/fpga"),
        resource_slice_manifest("fpgas", "fpga-node", 2, driver="fpga.example.com"),
        group,
        *pods,
    ]
    result = run(objects_of(*objects), cycles=1)
    binds = [d for d in result.cycles[0].decisions if d.type == "bind"]
    assert sorted(d.pod for d in binds) == ["default/p0", "default/p1"]
    devices = sorted(
        r.device for d in binds if d.extended_claim for r in d.extended_claim.allocation.devices.results
    )
    assert devices == ["gpu-0", "gpu-1"]  # (the helper names every slice's devices gpu-<i>)


def test_gpus_asked_through_a_mapped_name_count_toward_the_queue() -> None:
    """The GPU vector: a queue limited to 1 GPU does not take a pod asking 2 on a DRA-only node."""
    pod = pod_manifest("p", gpus=2, node_selector={"kubernetes.io/hostname": "dra"})
    objects = [node("dra", gpus=0), queue("q", gpu=1, gpu_limit=1)]
    objects += objects_of(
        _class(GPU_DRIVER, "nvidia.com/gpu"), resource_slice_manifest("dra-gpus", "dra", 2), pod
    )
    document = simulate(objects, cycles=1)
    assert [p["phase"] for p in document["pods"]] == ["Pending"]
    assert "OverLimit" in groups_by_name(document)["pg-p"]["unschedulableReason"]


def test_a_pod_may_ask_extended_resources_by_any_container_request_or_limit_but_hugepages() -> None:
    def pod(init: dict[str, Any] | None = None, **resources: dict[str, str]) -> Pod:
        manifest = pod_manifest("p", cpu="1")
        manifest["spec"]["containers"][0]["resources"] = resources
        if init is not None:
            manifest["spec"]["initContainers"] = [{"name": "init", "resources": init}]
        return Pod.model_validate(manifest)

    plain = {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi", "pods": "1"}
    assert not may_ask_extended(pod(requests=plain, limits=plain))
    assert not may_ask_extended(pod(requests={**plain, "hugepages-2Mi": "1Gi"}))
    assert may_ask_extended(pod(requests={**plain, "hugepages-2Mi": "1Gi", "example.com/fpga": "1"}))
    assert may_ask_extended(pod(requests=plain, limits={"nvidia.com/gpu": "1"}))
    assert may_ask_extended(pod({"requests": {"example.com/fpga": "1"}}, requests=plain))
