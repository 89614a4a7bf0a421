"""minruntime: a job that started recently is protected from preemption and reclaim for a while.

The protection is resolved per victim: for preempt from the victim's queue (walking up to the root until
a queue sets `preemptMinRuntime`); for reclaim either from the victim-side queue just below the lowest
common ancestor of the two queues (`lca`, the default) or from the victim's own queue (`queue`), again
walking up until set; the plugin's defaults apply when no queue sets one. A protected elastic job may
still lose the pods it runs above its minMember.
"""

from __future__ import annotations

from typing import Any

from kai_scheduler.api.durations import parse_duration
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.queues import QueueInfo, QueueTree

RESOLVE_METHODS = ("lca", "queue")


class MinRuntimePlugin:
    name = "minruntime"

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.default_preempt = _duration(arguments, "defaultPreemptMinRuntime")
        self.default_reclaim = _duration(arguments, "defaultReclaimMinRuntime")
        self.resolve_method = arguments.get("reclaimResolveMethod", "lca")
        if self.resolve_method not in RESOLVE_METHODS:
            raise ValueError(
                "minruntime.arguments.reclaimResolveMethod: expected lca or queue, "
                f"got {self.resolve_method!r}"
            )
        self._session: Session | None = None
        self._reclaim_runtimes: dict[tuple[str, str], float] = {}

    def on_session_open(self, session: Session) -> None:
        self._session = session
        # The reclaim minimum runtime by (reclaimer's queue, victim's queue): asked for every candidate
        # victim of every reclaim attempt.
        self._reclaim_runtimes = {}
        protection = session.points.victim_protection
        protection.setdefault("preempt", []).append(self.preempt_protected)
        protection.setdefault("reclaim", []).append(self.reclaim_protected)

    def on_session_close(self, session: Session) -> None:
        self._session = None

    def preempt_protected(self, preemptor: JobInfo, victim: JobInfo) -> bool:
        if victim.last_start is None:
            return False
        assert self._session is not None
        queues = self._session.snapshot.queues
        runtime = _walk_up(queues, victim.queue, "preempt_min_runtime", self.default_preempt)
        return self._younger_than(victim, runtime)

    def reclaim_protected(self, reclaimer: JobInfo, victim: JobInfo) -> bool:
        if victim.last_start is None:
            return False
        runtime = self._reclaim_runtimes.get((reclaimer.queue, victim.queue))
        if runtime is None:
            assert self._session is not None
            queues = self._session.snapshot.queues
            start = victim.queue
            if self.resolve_method == "lca":
                start = _victim_side_below_lca(queues, reclaimer.queue, victim.queue)
            runtime = _walk_up(queues, start, "reclaim_min_runtime", self.default_reclaim)
            self._reclaim_runtimes[(reclaimer.queue, victim.queue)] = runtime
        return self._younger_than(victim, runtime)

    def _younger_than(self, job: JobInfo, runtime: float) -> bool:
        assert self._session is not None
        if runtime <= 0 or job.last_start is None:
            return False
        if self._session.now - job.last_start >= runtime:
            return False
        # The protection ends by itself: the cycle at that time may decide differently.
        self._session.wake_at(job.last_start + runtime)
        return True


def _duration(arguments: dict[str, Any], key: str) -> float:
    value = arguments.get(key, "0s")
    try:
        seconds = parse_duration(str(value))
    except ValueError as error:
        raise ValueError(f"minruntime.arguments.{key}: {error}") from None
    if seconds < 0:
        raise ValueError(f"minruntime.arguments.{key}: must not be negative, got {value!r}")
    return seconds


def _walk_up(queues: QueueTree, name: str, attribute: str, default: float) -> float:
    for queue in queues.ancestry(name):
        value: float | None = getattr(queue, attribute)
        if value is not None:
            return value
    return default


def _victim_side_below_lca(queues: QueueTree, reclaimer: str, victim: str) -> str:
    reclaimer_path = [q.name for q in reversed(queues.ancestry(reclaimer))]
    victim_path: list[QueueInfo] = list(reversed(queues.ancestry(victim)))
    for depth, queue in enumerate(victim_path):
        if depth >= len(reclaimer_path) or reclaimer_path[depth] != queue.name:
            return queue.name
    return victim
