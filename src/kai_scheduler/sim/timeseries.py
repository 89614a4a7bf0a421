"""What a report needs beyond the result document, gathered from the run: the queues' fair shares as each
cycle computed them (recorded while the run goes, only when a report was asked for), and each pod's
arrival, duration and request and each node's GPUs (read once from the final state).

Everything else a report shows (allocations, pending pods, starts, completions, evictions) is replayed from
the result document's decisions (`sim.timeline`), so the report's numbers are the document's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kai_scheduler.api.constants import SCHEDULER_NAME
from kai_scheduler.api.labels import pod_gpu_groups
from kai_scheduler.controlplane.bookkeeping import FINISHED_PHASES, scheduler_phase
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.resources import PodRequest
from kai_scheduler.sim.engine import CycleRecord, SimulationResult


class FairShareRecorder:
    """A simulation observer: each queue's GPU fair share, kept only when a cycle changed it (a busy run
    recomputes the same shares cycle after cycle). The shares hold from their cycle to the next change."""

    def __init__(self) -> None:
        self.changes: list[tuple[float, dict[str, float]]] = []
        self._last: dict[str, tuple[float, float, float]] | None = None

    def __call__(self, record: CycleRecord, result: SessionResult) -> None:
        shares = result.fair_share
        if shares == self._last:
            return
        self._last = shares
        self.changes.append((record.time, {queue: share[0] for queue, share in shares.items()}))


@dataclass(frozen=True, slots=True)
class PodFacts:
    arrival: float
    duration: float | None
    request: PodRequest
    # Where the input had it running (bound in the manifests), and on which shared GPUs.
    initial_node: str | None = None
    initial_groups: tuple[str, ...] = ()
    # When its controller deleted it unfinished (a Job past its deadline, a RayJob's cluster).
    deleted_at: float | None = None
    # It had ended already in the input (Succeeded or Failed, e.g. a past run a start-time estimate
    # learns from): it neither waits nor runs.
    ended_before: bool = False


@dataclass(frozen=True, slots=True)
class RunFacts:
    pods: dict[str, PodFacts]
    node_gpus: dict[str, int]
    node_gpu_memory_mib: dict[str, float]
    # The device memory a pending gpu-memory request is counted against (as the result document does).
    min_gpu_memory_mib: float
    fair_shares: list[tuple[float, dict[str, float]]] = field(default_factory=list)

    def gpu_units(self, pod: str, node: str | None) -> float:
        """The pod's GPU units on `node` (None: as a pending pod counts)."""
        return self.pods[pod].request.queue_gpus(self._node_memory(node), self.min_gpu_memory_mib)

    def gpu_portion(self, pod: str, node: str | None) -> float:
        """The part of each shared GPU the pod takes (0: it takes whole GPUs, or none)."""
        shared = self.pods[pod].request.shared_gpu
        if shared is None:
            return 0.0
        # A physical part, not a queue number: a waiting pod's is its part of the smallest GPU.
        memory = self._node_memory(node)
        return shared.held_portion(memory if memory is not None else self.min_gpu_memory_mib)

    def _node_memory(self, node: str | None) -> float | None:
        return self.node_gpu_memory_mib.get(node, 0.0) if node is not None else None


def run_facts(result: SimulationResult, fair_shares: FairShareRecorder | None = None) -> RunFacts:
    """The facts of the pods the result document lists (arrived, of this scheduler) and of the nodes."""
    cluster = result.cluster
    derivations = cluster.cache.derivations
    snapshot = cluster.cache.snapshot()
    pods: dict[str, PodFacts] = {}
    for sim_pod in cluster.arrived_pods():
        pod = sim_pod.pod
        if pod.spec.scheduler_name != SCHEDULER_NAME:
            continue
        # The task's request has what the pod's DRA claims ask for, as the result document counts it.
        task = snapshot.tasks.get(sim_pod.key)
        request = task.request if task is not None else derivations.of(pod)[0]
        node, _ = scheduler_phase(pod.spec.node_name, pod.status.phase)
        groups = pod_gpu_groups(pod.metadata.labels) if node is not None else ()
        pods[sim_pod.key] = PodFacts(
            sim_pod.arrival,
            sim_pod.duration,
            request,
            node,
            groups,
            sim_pod.deleted_at,
            ended_before=pod.status.phase in FINISHED_PHASES,
        )
    nodes = snapshot.nodes
    return RunFacts(
        pods=pods,
        node_gpus={name: int(nodes.cap_gpus[i]) for name, i in nodes.index.items()},
        node_gpu_memory_mib={name: float(nodes.gpu_memory_mib[i]) for name, i in nodes.index.items()},
        min_gpu_memory_mib=snapshot.min_gpu_memory_mib,
        fair_shares=list(fair_shares.changes) if fair_shares is not None else [],
    )
