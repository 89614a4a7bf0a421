"""What of a pod the numa plugin aligns, and the zones' ledger at session open, ported by name from KAI
v0.17.0's `pkg/scheduler/plugins/numa/numa_test.go` (TestNonGuaranteedIgnoresCPU, TestBuildNumaRequests,
TestBuildNumaRequestsNonIntegralCPU, TestFractionalSidecarAdmits, TestPredicateOrdinaryInitContainer,
TestPredicate) and `reconstruct_test.go` (TestNewReconstructAvailableFlag, TestReconstructNodeAvailable).
As in KAI's tests, a pod's QoS is given (KAI sets `status.qosClass`); CPU reads in millicores."""

from __future__ import annotations

import json
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import pytest

from helpers import node, open_session, queue
from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import ApiObject, Pod
from kai_scheduler.k8s.scheduler.numa_state import with_predicted_zones
from kai_scheduler.plugins.numa.evaluator import solve
from kai_scheduler.plugins.numa.plugin import NumaPlugin
from kai_scheduler.plugins.numa.records import placement_record
from kai_scheduler.plugins.numa.requests import NumaRequests, numa_requests, qos_class
from kai_scheduler.plugins.numa.zones import NodeZones, node_zones
from numa_support import guaranteed_pod_manifest, nrt, numa_config, observed, zone, zone_room

GPU = "nvidia.com/gpu"
OBSERVED, PREDICTED = c.NUMA_PLACEMENT_OBSERVED_ANNOTATION, c.NUMA_PLACEMENT_PREDICTED_ANNOTATION
GiB = float(1 << 30)


def container(
    cpu: str | None = None, memory: str | None = None, gpus: str | None = None, **extra: Any
) -> Any:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory), (GPU, gpus)) if v is not None}
    return {"name": f"c{id(requests)}", "resources": {"requests": requests}, **extra}


def pod(containers: list[Any], inits: Sequence[Any] = ()) -> Pod:
    return Pod.model_validate(
        {"metadata": {"name": "p"}, "spec": {"containers": containers, "initContainers": list(inits)}}
    )


def sidecar(cpu: str, memory: str | None = None) -> Any:
    return container(cpu, memory, restartPolicy="Always")


def zones(policy: str, scope: str, *specs: Any) -> NodeZones:
    built = node_zones(nrt("n", policy, scope, *specs))
    assert built is not None
    return built


def admits(topology: NodeZones, requests: NumaRequests) -> bool:
    """The predicate on one node: every aligned resource (CPU and memory only when Guaranteed)."""
    aligned = [r for r in topology.aware if requests.guaranteed or r not in ("cpu", "memory")]
    concurrent, serial = requests.for_scope(topology.scope)
    return solve(topology, aligned, concurrent, serial)


def test_non_guaranteed_ignores_cpu() -> None:
    """TestNonGuaranteedIgnoresCPU."""
    node_ = zones("restricted", "pod", *(zone(f"node-{i}", {GPU: "4", "cpu": "8"}) for i in range(2)))
    both = pod([container("4", gpus="6")])
    assert not admits(node_, numa_requests(both, guaranteed=True)), "6 GPUs need 2 zones, 4 CPUs 1"
    assert admits(node_, numa_requests(both, guaranteed=False)), "a Burstable pod's CPU is not aligned"


def test_build_numa_requests() -> None:
    """TestBuildNumaRequests: pod scope folds the init containers into one request, container scope
    splits native sidecars and app containers (concurrent) from ordinary init containers (serial)."""
    requests = numa_requests(pod([container("2"), container("2")], [container("10"), sidecar("1")]), True)
    concurrent, serial = requests.for_scope("pod")
    assert [unit["cpu"] for unit in concurrent] == [10_000] and serial == ()
    concurrent, serial = requests.for_scope("container")
    assert [unit["cpu"] for unit in concurrent] == [1_000, 2_000, 2_000]
    assert [unit["cpu"] for unit in serial] == [10_000]


MAIN = container("44", "16Gi")


@pytest.mark.parametrize(
    ("containers", "inits", "guaranteed", "scope", "cpus", "memory"),
    [
        pytest.param(
            [MAIN, container("4500m", "2Gi")],
            [],
            True,
            "pod",
            [44_000],
            [18 * GiB],
            id="fractional sidecar does not inflate the pod-scope cpu request",
        ),
        pytest.param(
            [MAIN, container("5", "2Gi")],
            [],
            True,
            "pod",
            [49_000],
            [18 * GiB],
            id="integral sidecar is charged in full",
        ),
        pytest.param(
            [container("700m", "16Gi"), container("5", "2Gi")],
            [],
            True,
            "container",
            [0, 5_000],
            [16 * GiB, 2 * GiB],
            id="integral sidecar is charged when the main container is fractional",
        ),
        pytest.param(
            [MAIN, container("4500m", "2Gi")],
            [],
            True,
            "container",
            [44_000, 0],
            [16 * GiB, 2 * GiB],
            id="container scope zeroes only the fractional container's cpu",
        ),
        pytest.param(
            [MAIN, container("4500m", "2Gi")],
            [],
            False,
            "pod",
            [0],
            [18 * GiB],
            id="non-Guaranteed pod aligns no cpu at all",
        ),
        pytest.param(
            [MAIN],
            [container("10500m", "1Gi"), sidecar("1500m", "1Gi")],
            True,
            "pod",
            [44_000],
            [17 * GiB],
            id="fractional init containers are zeroed in both roles",
        ),
    ],
)
def test_build_numa_requests_non_integral_cpu(
    containers: list[Any],
    inits: list[Any],
    guaranteed: bool,
    scope: str,
    cpus: list[int],
    memory: list[float],
) -> None:
    """TestBuildNumaRequestsNonIntegralCPU: only whole CPUs of a Guaranteed pod are pinned (and so
    aligned); memory is summed over every container."""
    concurrent, _ = numa_requests(pod(containers, inits), guaranteed).for_scope(scope)
    assert [unit.get("cpu", 0) for unit in concurrent[-len(cpus) :]] == cpus
    assert [unit.get("memory", 0) for unit in concurrent[-len(memory) :]] == memory


def test_fractional_init_containers_are_zeroed_in_container_scope_too() -> None:
    """TestBuildNumaRequestsNonIntegralCPU, "fractional init containers are zeroed in both roles"."""
    requests = numa_requests(pod([MAIN], [container("10500m", "1Gi"), sidecar("1500m", "1Gi")]), True)
    concurrent, serial = requests.for_scope("container")
    assert serial[0].get("cpu", 0) == 0 and concurrent[0].get("cpu", 0) == 0


def test_fractional_sidecar_admits() -> None:
    """TestFractionalSidecarAdmits: 44 CPUs and a 4500m sidecar fit one 47-CPU zone; a 5-CPU one not."""
    node_ = zones(
        "single-numa-node",
        "pod",
        zone("node-0", {GPU: "4", "cpu": "47"}),
        zone("node-1", {GPU: "4", "cpu": "48"}),
    )
    assert admits(node_, numa_requests(pod([container("44", gpus="1"), container("4500m")]), True))
    assert not admits(node_, numa_requests(pod([container("44", gpus="1"), container("5")]), True))


@pytest.mark.parametrize(("init_cpu", "admitted"), [("4", True), ("5", False)])
def test_predicate_ordinary_init_container(init_cpu: str, admitted: bool) -> None:
    """TestPredicateOrdinaryInitContainer: an init container is aligned alone, not with the app's 2."""
    node_ = zones("single-numa-node", "container", zone("node-0", {"cpu": "4"}), zone("node-1", {"cpu": "4"}))
    assert admits(node_, numa_requests(pod([container("2")], [container(init_cpu)]), True)) is admitted


def test_predicate() -> None:
    """TestPredicate: 3 CPUs fit a 4-CPU zone, 5 do not; a node without a NodeResourceTopology passes."""
    objects: list[ApiObject] = [
        node("numa", gpus=0, cpu=8),
        nrt("numa", "single-numa-node", "pod", zone("node-0", {"cpu": "4"}), zone("node-1", {"cpu": "4"})),
        node("plain", gpus=0, cpu=8),
    ]
    pods = [
        Pod.model_validate(guaranteed_pod_manifest(name, cpu)) for name, cpu in (("fits", "3"), ("big", "5"))
    ]
    session = open_session([*objects, *pods], numa_config())
    index = session.snapshot.nodes.index
    predicate = next(p for p in session.points.task_predicates if p.name == "numa")
    for name, on_numa in (("fits", True), ("big", False)):
        passing = predicate.nodes_passing(session.snapshot.tasks[f"default/{name}"])
        assert (bool(passing[index["numa"]]), bool(passing[index["plain"]])) == (on_numa, True)


def test_qos_class_as_the_api_server_sets_it() -> None:
    limits = {"cpu": "2", "memory": "1Gi"}
    assert qos_class(Pod.model_validate(guaranteed_pod_manifest("g", "2"))) == "Guaranteed"
    only_limits = pod([{"name": "c", "resources": {"limits": limits}}])
    assert qos_class(only_limits) == "Guaranteed"  # requests default to the limits
    assert qos_class(pod([container("2", "1Gi")])) == "Burstable"
    assert qos_class(pod([{"name": "c"}])) == "BestEffort"


# --- reconstruct_test.go ---------------------------------------------------------------------------


def test_new_reconstruct_available_flag() -> None:
    """TestNewReconstructAvailableFlag."""
    assert NumaPlugin({}).reconstruct
    assert not NumaPlugin({"reconstructAvailable": "false"}).reconstruct
    with pytest.raises(ValueError, match=r"^numa\.arguments\.reconstructAvailable: expected true or false"):
        NumaPlugin({"reconstructAvailable": "sometimes"})


@pytest.mark.parametrize(("reconstruct", "room"), [(True, [4.0, 2.0]), (False, [99.0, 99.0])])
def test_reconstruct_node_available(reconstruct: bool, room: list[float]) -> None:
    """TestReconstructNodeAvailable: the zones' stale `available` (99) is replaced by allocatable less
    the running pods' recorded zones; a pending pod's record and a running pod without one count for
    nothing. (KAI's case also counts a Pipelined pod with a record; here a pod pipelined in an earlier
    cycle is pending with a nomination, and has no record before its bind.) With the argument false the
    exporter's `available` stands."""
    objects: list[ApiObject] = [
        node("node-a", gpus=0, cpu=16),
        nrt(
            "node-a",
            "single-numa-node",
            "pod",
            zone("node-0", {"cpu": "4"}, {"cpu": "99"}),
            zone("node-1", {"cpu": "4"}, {"cpu": "99"}),
        ),
    ]
    for name, cpu, node_name, zone_name in (
        ("bound", "2", "node-a", "node-1"),
        ("pending", "1", None, "node-0"),
        ("norecord", "2", "node-a", None),
    ):
        annotations = observed({zone_name: {"cpu": cpu}}) if zone_name else None
        manifest = guaranteed_pod_manifest(name, cpu, node_name=node_name, annotations=annotations)
        objects.append(Pod.model_validate(manifest))
    config = numa_config(reconstructAvailable=str(reconstruct).lower())
    assert zone_room(open_session(objects, config), "node-a", "cpu") == room


# --- numa_test.go: TestResolvePlacementRecord, TestShouldFilter --------------------------------------


def record(zone_name: str, cpu: str) -> str:
    return json.dumps([{"zone": zone_name, "amount": {"cpu": cpu}}])


@pytest.mark.parametrize(
    ("annotations", "bind_request", "zone_name"),
    [
        pytest.param(
            {OBSERVED: record("node-0", "1"), PREDICTED: record("node-1", "2")},
            "node-2",
            "node-0",
            id="observed annotation wins over everything",
        ),
        pytest.param(
            {PREDICTED: record("node-1", "2")},
            "node-2",
            "node-2",
            id="BindRequest beats predicted annotation when no observed",
        ),
        pytest.param(
            {PREDICTED: record("node-1", "2")},
            None,
            "node-1",
            id="predicted annotation used when no observed and no BindRequest",
        ),
        pytest.param({}, None, None, id="none present yields nil"),
        pytest.param(
            {OBSERVED: "{not json", PREDICTED: record("node-1", "2")},
            None,
            "node-1",
            id="malformed observed is ignored, falls through to predicted",
        ),
    ],
)
def test_resolve_placement_record(
    annotations: dict[str, str], bind_request: str | None, zone_name: str | None
) -> None:
    """TestResolvePlacementRecord: observed, then the outstanding BindRequest's predictedNUMAZones (live
    mode puts them on the pod as its predicted record while the bind is outstanding), then predicted."""
    manifest = guaranteed_pod_manifest("p", "1", annotations=annotations)
    request = None
    if bind_request is not None:
        request = {"spec": {"predictedNUMAZones": [{"zone": bind_request, "amount": {"cpu": "3"}}]}}
    live_pod = with_predicted_zones(Pod.model_validate(manifest), request)
    found = placement_record(live_pod.metadata.annotations)
    assert (found[0][0] if found else None) == zone_name


GPU_CPU_ZONE = zone("node-0", {GPU: "4", "cpu": "8"})


def filter_pod(qos: str, gpus: int = 0, annotations: dict[str, str] | None = None) -> Pod:
    """KAI's `makeTask`: a pod of the QoS with `gpus` whole GPUs (CPU 1, memory 1Gi; Guaranteed: limits)."""
    requests = {"cpu": "1", "memory": "1Gi", **({GPU: str(gpus)} if gpus else {})}
    resources: dict[str, Any] = {"requests": requests}
    if qos == "Guaranteed":
        resources["limits"] = dict(requests)
    elif qos == "BestEffort":
        resources = {}
    meta = {"name": "t", "labels": {"kai.scheduler/queue": "q"}, "annotations": annotations or {}}
    spec = {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "resources": resources}]}
    return Pod.model_validate({"metadata": meta, "spec": spec})


@pytest.mark.parametrize(
    ("task", "policy", "zones_", "filtered"),
    [
        pytest.param(
            filter_pod("Guaranteed", 2),
            "single-numa-node",
            [GPU_CPU_ZONE],
            True,
            id="guaranteed whole-GPU on single-numa-node",
        ),
        pytest.param(
            filter_pod("Guaranteed", 1),
            "restricted",
            [GPU_CPU_ZONE],
            True,
            id="guaranteed whole-GPU on restricted",
        ),
        pytest.param(filter_pod("Guaranteed", 1), None, [], False, id="nil node topology passes through"),
        pytest.param(
            filter_pod("Guaranteed", 1),
            "best-effort",
            [GPU_CPU_ZONE],
            False,
            id="best-effort policy passes through",
        ),
        pytest.param(
            filter_pod("Burstable", 1),
            "single-numa-node",
            [GPU_CPU_ZONE],
            True,
            id="non-guaranteed GPU pod is handled (device alignment is QoS-independent)",
        ),
        pytest.param(
            filter_pod("Burstable"),
            "restricted",
            [GPU_CPU_ZONE],
            False,
            id="non-guaranteed cpu-only pod passes through (cpu aligns only for Guaranteed)",
        ),
        pytest.param(
            filter_pod("Burstable", 1),
            "restricted",
            [zone("node-0", {"cpu": "8"})],
            False,
            id="non-guaranteed GPU pod on a node that doesn't track gpu per-zone passes through",
        ),
        pytest.param(
            filter_pod("BestEffort"),
            "single-numa-node",
            [GPU_CPU_ZONE],
            False,
            id="best-effort QoS passes through",
        ),
        pytest.param(
            filter_pod("Guaranteed", annotations={"gpu-fraction": "0.5"}),
            "single-numa-node",
            [GPU_CPU_ZONE],
            True,
            id="guaranteed fraction request is handled (cpu/memory still aligned)",
        ),
        pytest.param(
            filter_pod("Guaranteed"),
            "single-numa-node",
            [GPU_CPU_ZONE],
            True,
            id="guaranteed cpu/memory-only pod is handled",
        ),
    ],
)
def test_should_filter(task: Pod, policy: str | None, zones_: list[Any], filtered: bool) -> None:
    """TestShouldFilter (its MIG row left out: a MIG pod is a Guaranteed pod like the cpu/memory-only
    one here). Whether the node's filter looks at the pod at all: a pod it looks at and cannot align is
    kept off, so each case asks for more than the one zone holds when it is looked at (9 CPUs, 5 GPUs)."""
    big = task.model_copy(deep=True)
    container_ = big.spec.containers[0]
    for part in (container_.resources.requests, container_.resources.limits):
        if "cpu" in part:
            part["cpu"] = Fraction(9)
        if GPU in part:
            part[GPU] = Fraction(5)
    objects: list[ApiObject] = [node("n", gpus=8, cpu=64), queue("q"), big]
    if policy is not None:
        objects.append(nrt("n", policy, "pod", *zones_))
    session = open_session(objects, numa_config())
    predicates = [p for p in session.points.task_predicates if p.name == "numa"]
    passing = predicates[0].nodes_passing(session.snapshot.tasks["default/t"]) if predicates else None
    assert (passing is not None and not bool(passing[0])) is filtered
