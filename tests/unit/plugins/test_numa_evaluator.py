"""The numa plugin's decisions on one node, ported by name from KAI v0.17.0's
`pkg/scheduler/plugins/numa/`: `evaluator_test.go` (TestSingleNUMASolve, TestSingleNUMAContainerScope-
SharesHeadroom, TestRestrictedAllocatableVsAvailable, TestRestrictedSelectsLowestMask),
`restricted_evaluator_test.go` (TestRestrictedScopeAndInit, 8 rows; TestRestrictedMaskSelection, 4 rows)
and `scoring_test.go` (TestBestEffortEvaluatorSpan, TestBestEffortEvaluatorMoreThanStackZones,
TestNodeScoreTiers, TestWantsNuma). As there, `node-N` are zones; amounts read back in their units
(CPU in millicores here, as the plugin counts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from helpers import node, open_session
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import ApiObject, NodeResourceTopology, Pod
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.plugins.numa.evaluator import Allocation, solve
from kai_scheduler.plugins.numa.plugin import parse_ignore_list
from kai_scheduler.plugins.numa.requests import NumaRequests, numa_requests
from kai_scheduler.plugins.numa.zones import NodeZones, amount, node_zones, policy_and_scope
from kai_scheduler.plugins.scoring import NUMA
from numa_support import ledger_of, nrt, nrt_manifest, numa_config, zone

GPU = "nvidia.com/gpu"
Gi = 1024**3


def zones_of(policy: str, *zones: Any, scope: str = "container") -> NodeZones:
    built = node_zones(nrt("n", policy, scope, *zones))
    assert built is not None
    return built


def two_zone_node(policy: str, per_zone: dict[str, str]) -> NodeZones:
    return zones_of(policy, zone("node-0", per_zone), zone("node-1", per_zone))


def req(**amounts: str) -> dict[str, float]:
    """A unit from resource=quantity pairs (`gpu` for nvidia.com/gpu)."""
    names = {"gpu": GPU}
    return {names.get(k, k): amount(names.get(k, k), parse_quantity(v)) for k, v in amounts.items()}


def evaluate(
    zones: NodeZones, units: list[dict[str, float]], ignore: frozenset[str] = frozenset()
) -> Allocation | None:
    """KAI's `evalPlacement`: the units as the concurrent set, every reported resource aligned."""
    allocation: Allocation = {}
    aware = [name for name in zones.aware if name not in ignore]
    return allocation if solve(zones, aware, units, (), allocation) else None


# --- evaluator_test.go ---------------------------------------------------------------------------------


def test_single_numa_solve() -> None:
    """TestSingleNUMASolve, its five subtests."""
    node_ = two_zone_node("single-numa-node", {GPU: "4", "cpu": "16"})
    fits = evaluate(node_, [req(gpu="2", cpu="4")])
    assert fits is not None and sorted(fits) == [0], "fits the lowest zone"
    assert fits[0][GPU] == 2
    assert evaluate(node_, [req(gpu="6")]) is None, "rejects a request larger than any single zone"
    split = zones_of("single-numa-node", zone("node-0", {GPU: "4"}), zone("node-1", {"cpu": "16"}))
    assert evaluate(split, [req(gpu="1", cpu="1")]) is None, "rejects when resources cannot co-locate"
    small = two_zone_node("single-numa-node", {GPU: "2", "cpu": "4"})
    assert evaluate(small, [req(gpu="3", cpu="6")]) is None, "total fits across zones, no single zone"
    memory_on_one = zones_of(
        "single-numa-node", zone("node-0", {"cpu": "4"}), zone("node-1", {"cpu": "4", "memory": "16Gi"})
    )
    assert evaluate(memory_on_one, [req(cpu="2", memory="8Gi")], frozenset({"memory"})) is not None, (
        "ignored resource is not aligned"
    )


def test_single_numa_container_scope_shares_headroom() -> None:
    """TestSingleNUMAContainerScopeSharesHeadroom."""
    node_ = two_zone_node("single-numa-node", {"cpu": "4"})
    units = [req(cpu="3"), req(cpu="3"), req(cpu="2")]
    assert evaluate(node_, units) is None
    assert evaluate(node_, units[:2]) is not None


def test_restricted_allocatable_vs_available() -> None:
    """TestRestrictedAllocatableVsAvailable, its six subtests."""
    node_ = two_zone_node("restricted", {GPU: "4", "cpu": "16"})
    assert evaluate(node_, [req(gpu="6", cpu="10")]) is None, "per-resource minimal widths disagree"
    both = evaluate(node_, [req(gpu="6", cpu="24")])
    assert both is not None and sorted(both) == [0, 1], "admit on the common width-2 mask"
    assert both[0][GPU] + both[1][GPU] == 6
    footgun = two_zone_node("restricted", {GPU: "2", "cpu": "100"})
    assert evaluate(footgun, [req(gpu="4", cpu="1")]) is None, "4-GPU + 1-CPU footgun"
    one = evaluate(node_, [req(gpu="2", cpu="8")])
    assert one is not None and sorted(one) == [0], "admit on a single zone when width is 1"
    partly_used = zones_of(
        "restricted",
        zone("node-0", {GPU: "4", "cpu": "95"}, {GPU: "3", "cpu": "45"}),
        zone("node-1", {GPU: "4", "cpu": "96"}, {GPU: "3", "cpu": "46"}),
    )
    assert evaluate(partly_used, [req(gpu="4", cpu="50")]) is None, "single zone preferred, infeasible now"
    assert evaluate(partly_used, [req(gpu="1", cpu="50")]) is None, "CPU fragmented in what is free"


def test_restricted_selects_lowest_mask() -> None:
    """TestRestrictedSelectsLowestMask."""
    node_ = zones_of(
        "restricted", zone("node-0", {GPU: "2"}), zone("node-1", {GPU: "2"}), zone("node-2", {GPU: "2"})
    )
    chosen = evaluate(node_, [req(gpu="4")])
    assert chosen is not None and sorted(chosen) == [0, 1]


# --- restricted_evaluator_test.go ----------------------------------------------------------------------


def guaranteed(apps: list[dict[str, str]], inits: Sequence[tuple[dict[str, str], bool]] = ()) -> NumaRequests:
    """KAI's `restrictedPod`: a pod with these app and init containers (True: a native sidecar), its
    QoS given as Guaranteed as the test's `status.qosClass` does."""
    names = {"gpu": GPU}
    init_containers = [
        {
            "name": f"i{i}",
            "resources": {"requests": {names.get(k, k): v for k, v in r.items()}},
            **({"restartPolicy": "Always"} if sidecar else {}),
        }
        for i, (r, sidecar) in enumerate(inits)
    ]
    containers = [
        {"name": f"c{i}", "resources": {"requests": {names.get(k, k): v for k, v in r.items()}}}
        for i, r in enumerate(apps)
    ]
    pod = Pod.model_validate(
        {"metadata": {"name": "p"}, "spec": {"containers": containers, "initContainers": init_containers}}
    )
    return numa_requests(pod, guaranteed=True)


BASE = [
    zone("node-0", {GPU: "4", "cpu": "8", "memory": "16Gi"}),
    zone("node-1", {GPU: "4", "cpu": "8", "memory": "16Gi"}),
]


def run_pod(zones: NodeZones, requests: NumaRequests) -> Allocation | None:
    concurrent, serial = requests.for_scope(zones.scope)
    allocation: Allocation = {}
    return allocation if solve(zones, list(zones.aware), concurrent, serial, allocation) else None


@pytest.mark.parametrize(
    ("scope", "apps", "inits", "want"),
    [
        pytest.param(
            "container",
            [{"gpu": "3"}, {"gpu": "3"}],
            [],
            {0: {GPU: 3}, 1: {GPU: 3}},
            id="container scope: second container spills to the second zone",
        ),
        pytest.param(
            "pod",
            [{"gpu": "3"}, {"gpu": "3"}],
            [],
            {0: {GPU: 4}, 1: {GPU: 2}},
            id="pod scope: the same pod aggregates into a width-2 mask",
        ),
        pytest.param(
            "container",
            [{"gpu": "3", "memory": "8Gi"}] * 2,
            [],
            {0: {GPU: 3, "memory": 8 * Gi}, 1: {GPU: 3, "memory": 8 * Gi}},
            id="container scope: per-container widths agree, admits across zones",
        ),
        pytest.param(
            "pod",
            [{"gpu": "3", "memory": "8Gi"}] * 2,
            [],
            None,
            id="pod scope: the same pod rejects on aggregate width disagreement",
        ),
        pytest.param(
            "container",
            [{"gpu": "4"}],
            [({"gpu": "4"}, False)],
            {0: {GPU: 4}},
            id="container scope: ordinary init is checked alone, not accumulated",
        ),
        pytest.param(
            "container",
            [{"gpu": "1"}],
            [({"gpu": "9"}, False)],
            None,
            id="container scope: an init larger than any mask rejects the pod",
        ),
        pytest.param(
            "container",
            [{"gpu": "3"}],
            [({"gpu": "3"}, True)],
            {0: {GPU: 3}, 1: {GPU: 3}},
            id="container scope: a native sidecar is accumulated with the app container",
        ),
        pytest.param(
            "pod",
            [{"gpu": "2"}],
            [({"gpu": "8"}, False)],
            {0: {GPU: 4}, 1: {GPU: 4}},
            id="pod scope: the request uses the init peak",
        ),
    ],
)
def test_restricted_scope_and_init(
    scope: str, apps: list[dict[str, str]], inits: list[tuple[dict[str, str], bool]], want: Any
) -> None:
    """TestRestrictedScopeAndInit: two zones of 4 GPUs, 8 CPUs, 16Gi."""
    assert run_pod(zones_of("restricted", *BASE, scope=scope), guaranteed(apps, inits)) == want


@pytest.mark.parametrize(
    ("zones", "request_", "want"),
    [
        pytest.param(
            [zone("node-0", {GPU: "4"}, {GPU: "1"}), zone("node-1", {GPU: "4"})],
            {"gpu": "3"},
            {1: {GPU: 3}},
            id="width-1 mask lands on the second zone",
        ),
        pytest.param(
            [zone("node-0", {GPU: "4"}, {GPU: "1"}), zone("node-1", {GPU: "4"}), zone("node-2", {GPU: "4"})],
            {"gpu": "6"},
            {1: {GPU: 4}, 2: {GPU: 2}},
            id="width-2 mask excludes the first zone",
        ),
        pytest.param(
            BASE, {"gpu": "2", "memory": "20Gi"}, None, id="memory-driven width disagreement rejects"
        ),
        pytest.param(
            [zone("node-0", {GPU: "4"}), zone("node-1", {GPU: "4"})],
            {"cpu": "2"},
            {},
            id="a non-reported resource is trivially aligned",
        ),
    ],
)
def test_restricted_mask_selection(zones: list[Any], request_: dict[str, str], want: Any) -> None:
    """TestRestrictedMaskSelection."""
    assert run_pod(zones_of("restricted", *zones), guaranteed([request_])) == want


# --- scoring_test.go -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "span"),
    [("1", 1), ("2", 2), ("4", 4), ("5", None)],
    ids=["single zone", "spans two zones", "full spread", "over total capacity"],
)
def test_best_effort_evaluator_span(gpus: str, span: int | None) -> None:
    """TestBestEffortEvaluatorSpan: four zones of one GPU each."""
    node_ = zones_of("best-effort", *(zone(f"node-{i}", {GPU: "1"}) for i in range(4)))
    placed = evaluate(node_, [req(gpu=gpus)])
    assert (None if placed is None else len(placed)) == span


def test_best_effort_evaluator_more_than_stack_zones() -> None:
    """TestBestEffortEvaluatorMoreThanStackZones (17 zones: more than KAI's stack buffers hold)."""
    node_ = zones_of("best-effort", *(zone(f"node-{i}", {GPU: "1"}) for i in range(17)))
    placed = evaluate(node_, [req(gpu="17")])
    assert placed is not None and len(placed) == 17


def score_nodes() -> list[ApiObject]:
    """TestNodeScoreTiers' nodes; the `none` node's four zones make the no-NRT node's assumed span 4."""
    objects: list[ApiObject] = []
    for name, policy, zones in [
        ("aligned", "single-numa-node", [zone(f"node-{i}", {GPU: "4", "cpu": "16"}) for i in range(2)]),
        ("restricted-span2", "restricted", [zone(f"node-{i}", {GPU: "1"}) for i in range(2)]),
        ("best-effort", "best-effort", [zone(f"node-{i}", {GPU: "1"}) for i in range(2)]),
        ("none-4zone", "none", [zone(f"node-{i}", {GPU: "1"}) for i in range(4)]),
    ]:
        objects += [node(name, gpus=8, cpu=64), nrt(name, policy, "container", *zones)]
    objects.append(node("no-nrt", gpus=8, cpu=64))
    return objects


def task_pod(name: str, qos: str, gpus: int) -> Pod:
    """KAI's `makeTask`: a pod of the QoS asking for `gpus` GPUs."""
    resources: dict[str, Any] = {"requests": {GPU: str(gpus)}} if gpus else {}
    if qos == "Guaranteed":
        resources = {"requests": {"cpu": "1", "memory": "1Gi", **({GPU: str(gpus)} if gpus else {})}}
        resources["limits"] = dict(resources["requests"])
    elif qos == "Burstable":
        resources.setdefault("requests", {})["cpu"] = "1"
    manifest = {
        "metadata": {"name": name, "labels": {"kai.scheduler/queue": "q"}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "resources": resources}]},
    }
    return Pod.model_validate(manifest)


@pytest.mark.parametrize(
    ("qos", "gpus", "node_name", "score"),
    [
        pytest.param("Guaranteed", 1, "aligned", NUMA / 1, id="aligned single zone"),
        pytest.param("Guaranteed", 2, "restricted-span2", NUMA / 2, id="restricted forced span 2"),
        pytest.param("Guaranteed", 3, "restricted-span2", 0.0, id="restricted infeasible"),
        pytest.param("Guaranteed", 1, "best-effort", NUMA / 1, id="best-effort aligned"),
        pytest.param("Guaranteed", 2, "best-effort", NUMA / 2, id="best-effort full spread"),
        pytest.param("Guaranteed", 1, "none-4zone", NUMA / 4, id="none worst-case full span"),
        pytest.param("Guaranteed", 1, "no-nrt", NUMA / 4, id="no-nrt uses maxZones"),
        pytest.param("BestEffort", 0, "aligned", 0.0, id="non-numa task is silent"),
    ],
)
def test_node_score_tiers(qos: str, gpus: int, node_name: str, score: float) -> None:
    """TestNodeScoreTiers (the cpu the Guaranteed pod asks for is not reported by these zones' nodes
    but `aligned`'s, where 1 CPU fits one zone with its GPU)."""
    session = open_session([*score_nodes(), task_pod("t", qos, gpus)], numa_config())
    task = session.snapshot.tasks["default/t"]
    row = np.array([session.snapshot.nodes.index[node_name]])
    scores = ledger_of(session).scores(task, row)
    assert (scores if isinstance(scores, float) else float(scores[0])) == score


def test_wants_numa() -> None:
    """TestWantsNuma: a Guaranteed pod or one asking for a device some zone reports is scored."""
    objects: list[ApiObject] = [
        node("gpu-node", gpus=4, cpu=16),
        nrt("gpu-node", "single-numa-node", "container", zone("node-0", {GPU: "4", "cpu": "16"})),
    ]
    pods = [
        task_pod("guaranteed", "Guaranteed", 0),
        task_pod("burstable-gpu", "Burstable", 1),
        task_pod("burstable-cpu", "Burstable", 0),
        task_pod("best-effort", "BestEffort", 0),
    ]
    session = open_session([*objects, *pods], numa_config())
    ledger = ledger_of(session)
    row = np.array([0])
    wants = {p.metadata.name: ledger.scores(session.snapshot.tasks[p.key], row) != 0.0 for p in pods}
    assert wants == {"guaranteed": True, "burstable-gpu": True, "burstable-cpu": False, "best-effort": False}


def test_ignore_list_is_resource_names_separated_by_commas() -> None:
    assert parse_ignore_list({"ignoreList": " memory, hugepages-2Mi ,"}) == {"memory", "hugepages-2Mi"}
    assert parse_ignore_list({}) == frozenset()
    with pytest.raises(ValueError, match=r"^numa\.arguments\.ignoreList: expected resource names"):
        parse_ignore_list({"ignoreList": ["memory"]})


# --- reading NodeResourceTopology objects (KAI's numa_topology_test.go, as facts) ----------------------


def test_zones_are_ordered_by_their_number_not_their_place_in_the_object() -> None:
    """KAI's sortZones: the kubelet prefers the numerically lowest NUMA node, whatever the list order."""
    zones = zones_of(
        "single-numa-node",
        zone("node-10", {"cpu": "4"}),
        zone("node-2", {"cpu": "4"}),
        zone("node-0", {"cpu": "4"}),
    )
    assert [z.id for z in zones.zones] == ["node-0", "node-2", "node-10"]


@pytest.mark.parametrize(
    ("attributes", "legacy", "expected"),
    [
        ([("topologyManagerPolicy", "restricted")], [], ("restricted", "container")),
        (
            [("topologyManagerPolicy", "best-effort"), ("topologyManagerScope", "pod")],
            [],
            ("best-effort", "pod"),
        ),
        ([], ["SingleNUMANodePodLevel"], ("single-numa-node", "pod")),
        ([], ["Restricted"], ("restricted", "container")),
        ([("topologyManagerPolicy", "something-new")], [], ("none", "container")),
        ([], [], ("none", "container")),
    ],
)
def test_policy_and_scope_from_attributes_else_the_deprecated_field(
    attributes: list[tuple[str, str]], legacy: list[str], expected: tuple[str, str]
) -> None:
    manifest = nrt_manifest("n", "none", "container", zone("node-0", {"cpu": "4"}))
    manifest["attributes"] = [{"name": k, "value": v} for k, v in attributes]
    manifest["topologyPolicies"] = legacy
    topology = NodeResourceTopology.model_validate(manifest)
    assert policy_and_scope(topology) == expected


def test_only_numa_node_zones_are_modeled() -> None:
    manifest = nrt_manifest(
        "n", "restricted", "pod", zone("socket-0", {"cpu": "8"}), zone("node-0", {"cpu": "4"})
    )
    manifest["zones"][0]["type"] = "Socket"
    built = node_zones(NodeResourceTopology.model_validate(manifest))
    assert built is not None and [z.id for z in built.zones] == ["node-0"]
    manifest["zones"] = manifest["zones"][:1]
    assert node_zones(NodeResourceTopology.model_validate(manifest)) is None


def test_a_bad_topology_object_is_one_line_naming_the_field() -> None:
    manifest = nrt_manifest("n0", "restricted", "pod", zone("node-0", {"cpu": "lots"}))
    with pytest.raises(
        ManifestError, match=r"NodeResourceTopology n0\): zones\[0\]\.resources\[0\]\.capacity"
    ):
        parse_object(manifest, "in.yaml", 1, strict=True)
