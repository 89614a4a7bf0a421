"""The memory of the last cycle, so that a cycle on an unchanged cluster is not evaluated again (issue #23,
point 1: a cycle starts from what changed; when nothing did, there is nothing to re-evaluate).

A cycle's result is a function of its snapshot, its queue usage, its configuration and its clock. The
last cycle's result is reused, and no session runs, exactly when all of these hold:

* the cache's `version` is the one the last cycle's snapshot was taken at: no delta changed anything the
  scheduler reads (pods, PodGroups, nodes, queues, priorities, DRA, storage, budgets, nominations, job
  times), no job was left marked invalid by a plugin, no pod turned stuck in releasing;
* the last cycle decided nothing: a decision changes tasks and nominations behind the cache's back until
  `after_cycle` puts them back, and its pipelines promise resources for one cycle only;
* the queue usage (time-based fairness) is the same, and no usage source records the cycle (it reads the
  queues a session accounts);
* the clock can change nothing: the last result has no `wake_at` (a victim's minimum runtime or a
  preemption delay runs out at a time, and their reasons say how long is left), no job is stale, newly
  or since an earlier cycle (stale gangs are evicted once their grace period has passed), and no victim
  search was cut short by its search budget (budgets are wall time: at another speed the search may end
  otherwise).

Anything else a session reads (priorities, fair shares, the order of jobs, what is free on which node,
topology, reclaim and consolidation) comes from the snapshot, so it is what it was. When in doubt the
cycle runs: `remember` keeps nothing a later cycle could not safely reuse.

With the environment variable `KAI_SCHEDULER_VERIFY_REUSE=1` every reusable cycle runs anyway and its
result is compared with the one that would have been reused; a difference raises `ReuseMismatch`. A
cycle after a change runs, but reads what the last one worked out per unchanged job
(`framework.job_memos`); the same variable has each of those answers worked out again and compared
(`CarriedMismatch`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.snapshot import ClusterSnapshot

VERIFY_ENV = "KAI_SCHEDULER_VERIFY_REUSE"


class ReuseMismatch(AssertionError):
    """A cycle's full evaluation differs from the result it would have reused (a bug in the rules above)."""


def verify_requested() -> bool:
    """Whether `KAI_SCHEDULER_VERIFY_REUSE` asks for every reused cycle to be evaluated as well."""
    return os.environ.get(VERIFY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class _Remembered:
    cache: ClusterCache  # versions count one cache's changes: another cache's may coincide
    version: int
    queue_usage: Mapping[str, Resources] | None
    snapshot: ClusterSnapshot
    result: SessionResult


class UnchangedCycles:
    """The last cycle worth remembering (see the module doc), for one cache."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: _Remembered | None = None

    def reusable(
        self, cache: ClusterCache, queue_usage: Mapping[str, Resources] | None
    ) -> tuple[ClusterSnapshot, SessionResult] | None:
        """The last cycle's snapshot (as its session left it) and result, when a cycle on `cache` (caught
        up) with `queue_usage` would decide exactly as it did; else None. No session ran: the result
        measured no time and its actions took nothing up (metrics count no work that was not done)."""
        last = self._last
        if (
            last is None
            or last.cache is not cache
            or last.version != cache.version
            or last.queue_usage != queue_usage
        ):
            return None
        result = replace(
            last.result,
            open_seconds=0.0,
            close_seconds=0.0,
            action_seconds={},
            plugin_open_seconds={},
            plugin_close_seconds={},
            counts={},
        )
        return last.snapshot, result

    def remember(
        self,
        cache: ClusterCache,
        version: int,
        queue_usage: Mapping[str, Resources] | None,
        snapshot: ClusterSnapshot,
        result: SessionResult,
        *,
        usage_recorded: bool,
    ) -> None:
        """A cycle ran on `cache` at `version` (its snapshot's); keep it when a later cycle may reuse it,
        else forget the last."""
        clock_free = (
            result.wake_at is None
            and all(since is None for since in result.stale_since.values())
            and all(job.stale_since is None for job in snapshot.jobs_at_open().may_go_stale)
            and not any(counts.search.clock_ran_out for counts in result.counts.values())
        )
        if result.decisions or result.ungates or usage_recorded or not clock_free:
            self._last = None
            return
        usage = None if queue_usage is None else dict(queue_usage)
        self._last = _Remembered(cache, version, usage, snapshot, result)

    def forget(self) -> None:
        self._last = None


def check_same(reused: SessionResult, evaluated: SessionResult) -> None:
    """Raise `ReuseMismatch` naming the first part of the results that differs."""
    for part in ("decisions", "ungates", "unschedulable", "fair_share", "stale_since", "wake_at"):
        if getattr(reused, part) != getattr(evaluated, part):
            raise ReuseMismatch(
                f"{VERIFY_ENV}: a reused cycle's {part} differ from a full evaluation's: "
                f"{getattr(reused, part)!r} != {getattr(evaluated, part)!r}"
            )
