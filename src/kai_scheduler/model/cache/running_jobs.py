"""The jobs with a running pod, as a set each cycle may keep, made in what changed (issue #23, point 1).

A large cluster has tens of thousands of running jobs, and the driver asks for them twice a cycle (when
the cycle starts and after its decisions are carried out, to tell which jobs started or stopped). A set
made afresh each time walks every one of them; a `RunningJobs` is instead a base set, shared by every
answer until it is made again, with the few jobs added to it and taken from it since, found among the jobs
the cache's change log names (every job whose running pods may have changed is noted there). Two answers
on one base tell their difference from their overlays alone (`RunningJobs.__sub__`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Set
from itertools import chain
from typing import Final

from kai_scheduler.model.job_changes import JobChangeLog

# The base is made again once the jobs named since it was made reach this share of it (and at least
# `_LEAST_CHANGES`): the overlays then stay small beside it, and walking the log costs no more than the
# walks it saves.
_REBASE_SHARE: Final = 16
_LEAST_CHANGES: Final = 256


class RunningJobsMismatch(AssertionError):
    """The running jobs made from what changed differ from those counted afresh (a bug: a job's running
    pods changed without the change log noting it)."""


class RunningJobs(Set[str]):
    """The jobs `base` holds but `removed`, and those in `added` (which `base` does not hold); immutable."""

    __slots__ = ("_added", "_base", "_removed")

    def __init__(self, base: frozenset[str], added: frozenset[str], removed: frozenset[str]) -> None:
        self._base, self._added, self._removed = base, added, removed

    def __contains__(self, key: object) -> bool:
        return key in self._added or (key in self._base and key not in self._removed)

    def __iter__(self) -> Iterator[str]:
        removed = self._removed
        return chain((key for key in self._base if key not in removed), self._added)

    def __len__(self) -> int:
        return len(self._base) - len(self._removed) + len(self._added)

    def __sub__(self, other: Set[object]) -> frozenset[str]:
        """The jobs here and not in `other`: from the two overlays when `other` shares this base."""
        if isinstance(other, RunningJobs) and other._base is self._base:
            return (self._added - other._added) | (other._removed - self._removed)
        return frozenset(key for key in self if key not in other)

    def __repr__(self) -> str:
        return f"RunningJobs({sorted(self)!r})"


class RunningJobsKeeper:
    """Answers `ClusterCache.running_jobs` from the jobs' running counts and the change log that notes
    every job whose counts may move. With `verify`, each answer is compared with the set made afresh."""

    __slots__ = ("_base", "_base_stamp", "_log", "verify")

    def __init__(self, log: JobChangeLog) -> None:
        self._log = log
        self._base: frozenset[str] = frozenset()
        self._base_stamp = -1  # the log's stamp when the base was made (none made yet: no stamp is -1)
        self.verify = False

    def of(self, running_counts: Mapping[str, int]) -> RunningJobs:
        """The jobs with a running pod, `running_counts` being current and every job whose count moved
        since the last answer noted in the log."""
        changed = self._log.since(self._base_stamp, self._log.stamp)
        base = self._base
        if changed is None or len(changed) >= max(_LEAST_CHANGES, len(base) // _REBASE_SHARE):
            base = self._base = frozenset(running_counts)
            self._base_stamp = self._log.stamp
            answer = RunningJobs(base, frozenset(), frozenset())
        else:
            added = frozenset(key for key in changed if key in running_counts and key not in base)
            removed = frozenset(key for key in changed if key in base and key not in running_counts)
            answer = RunningJobs(base, added, removed)
        if self.verify and frozenset(answer) != running_counts.keys():
            differing = sorted(answer ^ running_counts.keys())
            raise RunningJobsMismatch(f"running jobs made from what changed differ from counted: {differing}")
        return answer
