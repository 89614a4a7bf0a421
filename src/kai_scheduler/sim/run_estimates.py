"""When the simulated cluster's pods are expected to end, for reservation and backfill: the rule of
`controlplane.run_times` applied to the simulator's pods, with the run times of the pods that completed
so far as the history (as live mode learns them from the pods it sees succeed). A pod's run is kept from
cycle to cycle until its pod object, PodGroup, node or placement time changes
(`controlplane.kept_run_estimates`, as live mode keeps it)."""

from __future__ import annotations

from collections.abc import Callable

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import Pod, PodGroup
from kai_scheduler.controlplane.kept_run_estimates import KeptRunEstimates, RunLog
from kai_scheduler.controlplane.run_times import PodRun, pod_run, shape_of
from kai_scheduler.model.reservations import RunEstimates
from kai_scheduler.sim.in_memory_cluster import SimCluster, SimPod


def estimates_of(cluster: SimCluster) -> Callable[[float], RunEstimates]:
    """The estimates of `cluster`'s pods at a cycle's time, learning from the pods that completed."""
    history = RunLog()
    kept = KeptRunEstimates(history)
    counted: set[SimPod] = set()  # Succeeded pods whose run is in the history
    # The PodGroups by key, the later of two of one key kept; the cluster only appends to its list.
    groups: dict[str, PodGroup] = {}
    grouped = 0

    def estimate(now: float) -> RunEstimates:
        nonlocal grouped
        for group, _, _ in cluster.pod_groups[grouped:]:
            groups[group.key] = group
        grouped = len(cluster.pod_groups)
        # Every completed run is in the history before any estimate is worked out from it.
        pods: dict[str, tuple[Pod, bool, float | None, PodGroup | None]] = {}
        arrived, ours = cluster.now, c.SCHEDULER_NAME
        for pod in cluster.pods:
            if pod.arrival > arrived or pod.pod.spec.scheduler_name != ours:
                continue
            if pod.phase == "Succeeded" and pod.duration is not None and pod not in counted:
                counted.add(pod)
                history.add(pod.key, shape_of(pod.pod, groups.get(pod.job_key)), pod.duration)
            if pod.phase in ("Succeeded", "Failed"):
                continue
            begun = None
            if pod.node is not None:
                begun = pod.scheduled_at if pod.scheduled_at is not None else pod.arrival
            pods[pod.key] = (pod.pod, pod.node is not None, begun, groups.get(pod.job_key))

        def work_out(key: str, last: PodRun | None) -> PodRun:
            pod, on_node, begun, group = pods[key]
            return pod_run(pod, group, history, on_node=on_node, begun=begun)

        return kept.at(pods.items(), work_out, now)

    return estimate


__all__ = ["estimates_of"]
