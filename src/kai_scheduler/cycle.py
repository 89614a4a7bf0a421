"""One scheduling cycle: open a session on a snapshot, let the plugins register, run the actions in the
configured order, and return the decisions. The registry maps configuration names to implementations.
`Scheduler.job_order` is the allocate action's job order without the allocating (`/get-job-order`)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from time import perf_counter
from typing import Any, Final

from kai_scheduler.actions.allocate import Allocate
from kai_scheduler.actions.consolidation import Consolidation
from kai_scheduler.actions.job_queue import QueueOrderedJobs, with_pending
from kai_scheduler.actions.preempt import Preempt
from kai_scheduler.actions.reclaim import Reclaim
from kai_scheduler.actions.stale_gang_eviction import StaleGangEviction
from kai_scheduler.actions.ungate import Ungate, gated_jobs
from kai_scheduler.framework.config import ConfigError, SchedulerConfig
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.framework.job_memos import JobMemos
from kai_scheduler.framework.session import Action, Plugin, Session
from kai_scheduler.model.jobs import ACTIVE_ALLOCATED, JobInfo
from kai_scheduler.model.snapshot import ClusterSnapshot
from kai_scheduler.plugins.dynamicresources import DynamicResourcesPlugin
from kai_scheduler.plugins.endpoints import ReflectJobOrderPlugin, SnapshotPlugin
from kai_scheduler.plugins.fragmentation import GpuFragmentationPlugin
from kai_scheduler.plugins.gpu_order import GpuPackPlugin, GpuSpreadPlugin
from kai_scheduler.plugins.minruntime import MinRuntimePlugin
from kai_scheduler.plugins.numa import NumaPlugin
from kai_scheduler.plugins.ordering import (
    ElasticPlugin,
    KubeflowPlugin,
    PriorityPlugin,
    RayPlugin,
    SubGroupOrderPlugin,
    TaskOrderPlugin,
)
from kai_scheduler.plugins.pod_affinity import PodAffinityPlugin
from kai_scheduler.plugins.predicates import PredicatesPlugin
from kai_scheduler.plugins.proportion.plugin import ProportionPlugin
from kai_scheduler.plugins.reservation import ReservationPlugin
from kai_scheduler.plugins.scoring import (
    GpuSharingOrderPlugin,
    NodeAvailabilityPlugin,
    NodePlacementPlugin,
    NominatedNodePlugin,
    ResourceTypePlugin,
)
from kai_scheduler.plugins.sg_generators import MultiNodeGangPlugin, NodeLocalGreedyPlugin
from kai_scheduler.plugins.topology import TopologyPlugin

PLUGINS: Final[dict[str, Callable[[dict[str, Any]], Plugin]]] = {
    "predicates": PredicatesPlugin,
    "proportion": ProportionPlugin,
    "priority": PriorityPlugin,
    "elastic": ElasticPlugin,
    "kubeflow": KubeflowPlugin,
    "ray": RayPlugin,
    "taskorder": TaskOrderPlugin,
    "subgrouporder": SubGroupOrderPlugin,
    "nodeavailability": NodeAvailabilityPlugin,
    "resourcetype": ResourceTypePlugin,
    "gpusharingorder": GpuSharingOrderPlugin,
    "nominatednode": NominatedNodePlugin,
    "nodeplacement": NodePlacementPlugin,
    "gpupack": GpuPackPlugin,
    "gpuspread": GpuSpreadPlugin,
    "gpufragmentation": GpuFragmentationPlugin,
    "minruntime": MinRuntimePlugin,
    "podaffinity": PodAffinityPlugin,
    "topology": TopologyPlugin,
    "dynamicresources": DynamicResourcesPlugin,
    "numa": NumaPlugin,
    "snapshot": SnapshotPlugin,
    "reflectjoborder": ReflectJobOrderPlugin,
    "sg-nodelocalgreedy": NodeLocalGreedyPlugin,
    "sg-multinodegang": MultiNodeGangPlugin,
    "reservation": ReservationPlugin,
}
ACTIONS: Final[dict[str, Callable[[], Action]]] = {
    "allocate": Allocate,
    "consolidation": Consolidation,
    "reclaim": Reclaim,
    "preempt": Preempt,
    "stalegangeviction": StaleGangEviction,
    "ungate": Ungate,
}


class Scheduler:
    """Validated plugins and actions for a configuration; `run` is one cycle and decides as if it were
    the first (what it carries to the next, `memos`, is what the next would work out again)."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.memos = JobMemos()
        for option in config.plugins():
            if option.name not in PLUGINS:
                raise ConfigError(
                    f"tiers: unknown plugin {option.name!r} (known: {', '.join(sorted(PLUGINS))})"
                )
            try:
                PLUGINS[option.name](option.arguments)
            except ValueError as error:
                raise ConfigError(str(error)) from None
        for name in config.actions:
            if name not in ACTIONS:
                raise ConfigError(f"actions: unknown action {name!r} (known: {', '.join(sorted(ACTIONS))})")

    def _open(
        self,
        snapshot: ClusterSnapshot,
        cycle: int,
        now: float,
        timings: dict[str, float] | None = None,
        record_fair_share: bool = False,
    ) -> tuple[Session, list[Plugin]]:
        """With `timings`, each plugin's on_session_open is timed into it (plugin -> seconds)."""
        session = Session(snapshot, self.config, cycle=cycle, now=now, record_fair_share=record_fair_share)
        self.memos.hand_to_plugins(session)
        options = list(self.config.plugins())
        plugins = [PLUGINS[o.name](o.arguments) for o in options]
        for plugin in plugins:
            began = perf_counter()
            plugin.on_session_open(session)
            if timings is not None:
                timings[plugin.name] = timings.get(plugin.name, 0.0) + perf_counter() - began
        return session, plugins

    def run(
        self, snapshot: ClusterSnapshot, *, cycle: int, now: float, record_fair_share: bool = False
    ) -> SessionResult:
        """One cycle. The result also carries what the session measured about itself, for metrics: open,
        close, each plugin's on_session_open/close and each action's execute in seconds, and the counts
        the actions kept (`Session.counts`); with `record_fair_share`, the fair-share division's steps."""
        plugin_open: dict[str, float] = {}
        plugin_close: dict[str, float] = {}
        action_seconds: dict[str, float] = {}
        began = perf_counter()
        session, plugins = self._open(snapshot, cycle, now, plugin_open, record_fair_share)
        self.memos.hand_to(session)
        opened = mark = perf_counter()
        for name in self.config.actions:
            ACTIONS[name]().execute(session)
            done = perf_counter()
            action_seconds[name] = action_seconds.get(name, 0.0) + done - mark
            mark = done
        if Ungate.name not in self.config.actions and gated_jobs(snapshot, verify=session.verify_carried):
            # Our gate on pods with no `ungate` configured (the feature switched off, or never on): the
            # action runs anyway, and off it lets them all go, so a rollback needs no one to clean up.
            Ungate().execute(session)
            action_seconds[Ungate.name] = perf_counter() - mark
        closing = mark = perf_counter()
        for plugin in plugins:
            plugin.on_session_close(session)
            done = perf_counter()
            plugin_close[plugin.name] = plugin_close.get(plugin.name, 0.0) + done - mark
            mark = done
        result = session.result()
        self.memos.session_ended(session, result)
        session.close()
        self.memos.keep_only(snapshot)
        return replace(
            result,
            open_seconds=opened - began,
            close_seconds=perf_counter() - closing,
            action_seconds=action_seconds,
            plugin_open_seconds=plugin_open,
            plugin_close_seconds=plugin_close,
            counts=dict(session.counts),
        )

    def victim_order(
        self, snapshot: ClusterSnapshot, *, cycle: int, now: float, queues: Collection[str]
    ) -> list[JobInfo]:
        """The jobs of `queues` that hold resources, in the order the victim actions take them within a
        queue: the job that ranks last in job order first (`Session.victim_order_key`: the lowest
        priority, one above its minMember before one at it, the newest). On `snapshot` as a session opens
        it (queues accounted, `JobInfo.queue_sums` filled); nothing is evicted (`kubectl kai usage`)."""
        session, plugins = self._open(snapshot, cycle, now)
        ranked = []
        for job in snapshot.jobs.values():
            held = sum(1 for task in job.tasks if task.status in ACTIVE_ALLOCATED)
            if job.queue in queues and held:
                ranked.append((session.victim_order_key(job, held), job))
        ranked.sort(key=lambda entry: entry[0], reverse=True)
        for plugin in plugins:
            plugin.on_session_close(session)
        return [job for _, job in ranked]

    def job_order(self, snapshot: ClusterSnapshot, *, cycle: int, now: float) -> list[JobInfo]:
        """The jobs the allocate action would take up on `snapshot`, in the order it would take them up if
        it placed none of them (KAI's `reflectjoborder`): pending jobs that are valid as they are, through
        the queue tree by fair share (`QueueOrderedJobs`), at most `queueDepthPerAction.allocate` per queue.
        Nothing is allocated; once allocate places a job its queue's share grows, which may move that
        queue's later jobs behind others. Mutates `snapshot` no more than opening a session does."""
        session, plugins = self._open(snapshot, cycle, now)
        jobs = [job for job in with_pending(snapshot) if job.invalid_reason is None]
        queue = QueueOrderedJobs(session, jobs, self.config.queue_depth_per_action.get(Allocate.name))
        order = []
        while (job := queue.pop()) is not None:
            order.append(job)
        for plugin in plugins:
            plugin.on_session_close(session)
        return order
