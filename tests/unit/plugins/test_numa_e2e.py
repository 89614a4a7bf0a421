"""KAI v0.17.0's NUMA end-to-end specs (`test/e2e/suites/numa/`), run by the simulator on the node their
helpers look for: two NUMA zones of 4 GPUs, 16 CPUs and 32Gi each (NodeResourceTopology as NFD writes
it), the numa plugin on (KAI's `EnableNUMA`), pods Guaranteed with KAI's `gpuResourceList` (100m CPU,
128Mi, the GPUs), one queue of 64 GPUs under a parent (`gpuQueues(64)`). Ported by It name:
`modes_specs_test.go` (6), `qos_specs_test.go` (3), `preempt_specs_test.go` (1), `reclaim_specs_test.go`
(6). KAI checks a pod's zones on its observed placement; here they are its bind's predicted zones.
`operand_specs_test.go` (4) is KAI's operator deploying its placement-exporter DaemonSet: not here.
"""

from __future__ import annotations

from typing import Any

from helpers import node, pod, priority_class, queue, run
from kai_scheduler.api.objects import ApiObject, Pod, PodGroup
from kai_scheduler.sim.engine import SimulationResult
from numa_support import guaranteed_pod_manifest, nrt, numa_config, observed, zone

ZONE = {"nvidia.com/gpu": "4", "cpu": "16", "memory": "32Gi"}
MAX_ZONE_GPUS, TOTAL_GPUS = 4, 8
TWO_ZONE_CPU, TWO_ZONE_MEMORY = "17", "32769Mi"  # KAI's TwoZoneCPU / TwoZoneMemory: a zone's + 1 / + 1Mi


def numa_node(policy: str) -> list[ApiObject]:
    return [
        node("n0", gpus=TOTAL_GPUS, cpu="32", memory="64Gi"),
        nrt("n0", policy, "container", zone("node-0", ZONE), zone("node-1", ZONE)),
    ]


def gpu_queues(quota: float = 64) -> list[ApiObject]:
    return [queue("parent", gpu=quota), queue("child", parent="parent", gpu=quota)]


def guaranteed(name: str, gpus: int, cpu: str = "100m", memory: str = "128Mi", **kwargs: Any) -> Pod:
    kwargs.setdefault("queue", "child")
    return Pod.model_validate(guaranteed_pod_manifest(name, cpu, memory, gpus=gpus, **kwargs))


def placement(result: SimulationResult, name: str) -> tuple[int, int] | None:
    """(zones, GPUs) of the pod's last bind, as KAI's expectGPUPlacement reads them; None: never bound."""
    binds = [d for r in result.cycles for d in r.decisions if d.type == "bind" and d.pod == f"default/{name}"]
    if not binds:
        return None
    zones = binds[-1].numa_zones
    gpus = sum(int(dict(z.amount).get("nvidia.com/gpu", "0")) for z in zones)
    return len(zones), gpus


def bound(result: SimulationResult, name: str) -> bool:
    return any(p.node is not None for p in result.cluster.pods if p.pod.metadata.name == name)


# --- modes_specs_test.go: "NUMA modes" -----------------------------------------------------------------


def test_single_numa_node_request_fitting_one_zone_is_scheduled() -> None:
    result = run(
        [*numa_node("single-numa-node"), *gpu_queues(), guaranteed("p", MAX_ZONE_GPUS)], numa_config()
    )
    assert placement(result, "p") == (1, MAX_ZONE_GPUS)


def test_single_numa_node_request_spanning_two_zones_stays_pending() -> None:
    objects = [*numa_node("single-numa-node"), *gpu_queues(), guaranteed("span", MAX_ZONE_GPUS + 1)]
    objects.append(guaranteed("fit", MAX_ZONE_GPUS, arrival=5))
    result = run(objects, numa_config())
    assert placement(result, "span") is None
    assert "cannot NUMA-align" in result.reasons["default/pg-span"]
    assert placement(result, "fit") == (1, MAX_ZONE_GPUS)


def test_restricted_two_zone_request_at_matching_minimal_width_is_scheduled() -> None:
    pod_ = guaranteed("p", MAX_ZONE_GPUS + 1, TWO_ZONE_CPU, TWO_ZONE_MEMORY)
    result = run([*numa_node("restricted"), *gpu_queues(), pod_], numa_config())
    assert placement(result, "p") == (2, MAX_ZONE_GPUS + 1)


def test_restricted_request_exceeding_summed_capacity_stays_pending() -> None:
    result = run([*numa_node("restricted"), *gpu_queues(), guaranteed("p", TOTAL_GPUS + 1)], numa_config())
    assert placement(result, "p") is None


def test_best_effort_none_pass_through_even_for_cross_zone_requests() -> None:
    for policy in ("best-effort", "none"):
        objects = [*numa_node(policy), *gpu_queues(), guaranteed("p", MAX_ZONE_GPUS + 1)]
        assert bound(run(objects, numa_config()), "p"), policy


def test_node_without_nrt_passes_through() -> None:
    objects = [node("plain", gpus=0, cpu="4"), *gpu_queues(), guaranteed("p", 0, "250m")]
    assert bound(run(objects, numa_config()), "p")


# --- qos_specs_test.go: "NUMA QoS gating" ---------------------------------------------------------------


def test_guaranteed_cross_zone_request_is_filtered() -> None:
    result = run(
        [*numa_node("single-numa-node"), *gpu_queues(), guaranteed("p", MAX_ZONE_GPUS + 1)], numa_config()
    )
    assert placement(result, "p") is None


def test_burstable_cross_zone_request_passes_through() -> None:
    """KAI's spec and KAI's code disagree, and KAI's code decides here: the spec expects a Burstable pod
    asking a zone's GPUs + 1 on a single-numa-node node to be scheduled, but v0.17's plugin aligns devices
    at every QoS (numa.go shouldFilter/requestsAlignedDevice; numa_test.go "non-guaranteed GPU pod is
    handled (device alignment is QoS-independent)"), so it stays pending as the kubelet would refuse it.
    What does pass through is the Burstable pod's CPU: a CPU request no zone holds is not refused."""
    span = pod("span", "child", gpus=MAX_ZONE_GPUS + 1, cpu="100m", memory=None)
    cpu_heavy = pod("cpu-heavy", "child", cpu="20", memory=None)  # a zone has 16 CPUs
    result = run([*numa_node("single-numa-node"), *gpu_queues(), span, cpu_heavy], numa_config())
    assert not bound(result, "span")
    assert "cannot NUMA-align" in result.reasons["default/pg-span"]
    assert bound(result, "cpu-heavy")


def test_best_effort_pod_passes_through() -> None:
    best_effort = pod("p", "child", cpu=None, memory=None)
    assert bound(run([*numa_node("single-numa-node"), *gpu_queues(), best_effort], numa_config()), "p")


# --- preempt_specs_test.go: "NUMA preempt" -------------------------------------------------------------


def test_high_priority_pod_preempts_a_single_victim_to_open_a_numa_zone() -> None:
    """The node filled with one-GPU low-priority pods, then one per zone deleted (each zone has one GPU
    free): a two-GPU high-priority pod needs one zone's second GPU, so exactly one more victim goes."""
    fillers = []
    for zone_name in ("node-0", "node-1"):
        for i in range(MAX_ZONE_GPUS - 1):
            amounts = {"nvidia.com/gpu": "1", "memory": "128Mi"}
            fillers.append(
                guaranteed(
                    f"filler-{zone_name}-{i}",
                    1,
                    priority_class="low",
                    node_name="n0",
                    annotations=observed({zone_name: amounts}),
                )
            )
    objects = [
        *numa_node("single-numa-node"),
        *gpu_queues(TOTAL_GPUS),
        priority_class("low", 25),  # KAI: NonPreemptiblePriorityThreshold / 4
        priority_class("high", 50),  # and / 2
        *fillers,
        guaranteed("high-pod", 2, priority_class="high", arrival=1),
    ]
    result = run(objects, numa_config())
    evictions = [d.pod for r in result.cycles for d in r.decisions if d.type == "evict"]
    assert len(evictions) == 1
    assert placement(result, "high-pod") == (1, 2)


# --- reclaim_specs_test.go: "NUMA reclaim" --------------------------------------------------------------


def reclaim(policy: str, victim_gpus: int, reclaimer_gpus: int) -> SimulationResult:
    """KAI's runReclaim: queues of the node's GPUs (parent quota and limit), a reclaimee of quota 0 and a
    reclaimer of the node's GPUs; the reclaimee's pods of `victim_gpus` fill the node; the reclaimer's pod
    asks `reclaimer_gpus` (with two zones' worth of CPU and memory when it needs two zones)."""
    two_zones = reclaimer_gpus > MAX_ZONE_GPUS
    objects: list[ApiObject] = [
        *numa_node(policy),
        queue("parent", gpu=TOTAL_GPUS, gpu_limit=TOTAL_GPUS),
        queue("reclaimee", parent="parent", gpu=0),
        queue("reclaimer", parent="parent", gpu=TOTAL_GPUS),
        *[
            guaranteed(f"filler-{i}", victim_gpus, queue="reclaimee")
            for i in range(TOTAL_GPUS // victim_gpus)
        ],
    ]
    if two_zones:
        objects.append(
            guaranteed(
                "reclaimer-pod", reclaimer_gpus, TWO_ZONE_CPU, TWO_ZONE_MEMORY, queue="reclaimer", arrival=5
            )
        )
    else:
        objects.append(guaranteed("reclaimer-pod", reclaimer_gpus, queue="reclaimer", arrival=5))
    return run(objects, numa_config(), until=60)


def test_single_numa_node_reclaim_frees_one_zone_width_1() -> None:
    assert placement(reclaim("single-numa-node", MAX_ZONE_GPUS, MAX_ZONE_GPUS), "reclaimer-pod") == (1, 4)


def test_restricted_reclaim_frees_one_zone_width_1() -> None:
    assert placement(reclaim("restricted", MAX_ZONE_GPUS, MAX_ZONE_GPUS), "reclaimer-pod") == (1, 4)


def test_restricted_two_zone_reclaim_from_full_zone_victims_width_2() -> None:
    assert placement(reclaim("restricted", MAX_ZONE_GPUS, MAX_ZONE_GPUS + 1), "reclaimer-pod") == (2, 5)


def test_restricted_two_zone_reclaim_from_fragmented_victims_width_2() -> None:
    assert placement(reclaim("restricted", 1, MAX_ZONE_GPUS + 1), "reclaimer-pod") == (2, 5)


def test_restricted_full_node_reclaim_across_both_zones_width_2() -> None:
    assert placement(reclaim("restricted", MAX_ZONE_GPUS, TOTAL_GPUS), "reclaimer-pod") == (2, TOTAL_GPUS)


def test_restricted_gang_reclaim_spanning_both_zones() -> None:
    """KAI's runGangReclaim: a batch Job of two pods of a zone's GPUs each, a gang of two, reclaims both
    zones' fillers; each of its pods takes one zone whole."""
    objects: list[ApiObject] = [
        *numa_node("restricted"),
        queue("parent", gpu=TOTAL_GPUS, gpu_limit=TOTAL_GPUS),
        queue("reclaimee", parent="parent", gpu=0),
        queue("reclaimer", parent="parent", gpu=TOTAL_GPUS),
        *[guaranteed(f"filler-{i}", MAX_ZONE_GPUS, queue="reclaimee") for i in range(2)],
    ]
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "gang", "annotations": {"simulation.kai.scheduler/arrival": "5"}},
        "spec": {"queue": "reclaimer", "minMember": 2},
    }
    objects.append(PodGroup.model_validate(group))
    objects += [
        guaranteed(f"gang-{i}", MAX_ZONE_GPUS, queue="reclaimer", group="gang", arrival=5) for i in range(2)
    ]
    result = run(objects, numa_config(), until=60)
    assert placement(result, "gang-0") == (1, MAX_ZONE_GPUS)
    assert placement(result, "gang-1") == (1, MAX_ZONE_GPUS)
