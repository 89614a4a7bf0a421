"""When the simulated cluster's pods are expected to end, for reservation and backfill: the rule of
`controlplane.run_times` applied to the simulator's pods, with the run times of the pods that completed
so far as the history (as live mode learns them from the pods it sees succeed)."""

from __future__ import annotations

from collections.abc import Callable

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import Pod
from kai_scheduler.controlplane.run_times import RunHistory, run_estimates, shape_of
from kai_scheduler.model.reservations import RunEstimates
from kai_scheduler.sim.in_memory_cluster import SimCluster


def estimates_of(cluster: SimCluster) -> Callable[[float], RunEstimates]:
    """The estimates of `cluster`'s pods at a cycle's time, learning from the pods that completed."""
    history = RunHistory()

    def estimate(now: float) -> RunEstimates:
        groups = {group.key: group for group, _, _ in cluster.pod_groups}
        pods: list[tuple[Pod, bool]] = []
        started: dict[str, float] = {}
        for pod in cluster.arrived_pods():
            if pod.pod.spec.scheduler_name != c.SCHEDULER_NAME:
                continue
            if pod.phase == "Succeeded" and pod.duration is not None:
                history.add(pod.key, shape_of(pod.pod, groups.get(pod.job_key)), pod.duration)
            if pod.phase in ("Succeeded", "Failed"):
                continue
            on_node = pod.node is not None
            if on_node:
                started[pod.key] = pod.scheduled_at if pod.scheduled_at is not None else pod.arrival
            pods.append((pod.pod, on_node))
        return run_estimates(pods, groups, started, history, now)

    return estimate


__all__ = ["estimates_of"]
