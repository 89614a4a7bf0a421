"""Which jobs changed between two snapshots of one cluster cache (issue #23, point 1: a cycle after a
small change costs what changed).

The cluster cache keeps its `JobInfo` objects across cycles and changes few of them per delta: a job is
made again (a new object), removed, or changed in place (a task's status, node or nomination; its
`version` moves). It notes each such job's key in a `JobChangeLog`, and every snapshot carries a
`JobChangeMark`: the log and how far it had got. What was worked out over all jobs of one snapshot can
then be brought up to date for a later snapshot of the same cache by working out again only the jobs
`JobChangeMark.since` names, instead of walking the whole cluster.

A session changes the snapshot's jobs too (a placed pod's task) without the log knowing; the cache puts
every decided pod's task back after the cycle (`ClusterCache.after_cycle`, which notes the job), and a
discarded statement puts its tasks back as they were, so between two snapshots a job whose content
changed is always noted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# The log keeps this many keys at most; past it the older half is forgotten, and a reader whose mark is
# older than what is kept is told that anything may have changed (it works everything out again).
_KEPT: Final = 1 << 17


class JobChangeLog:
    """The keys of the jobs changed, in the order noted; a position in it is a `stamp`."""

    __slots__ = ("_first", "_keys")

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._first = 1  # the stamp of `_keys[0]`; no reader holds a stamp at or past it before a note

    @property
    def stamp(self) -> int:
        """How far the log has got: what a snapshot marks."""
        return self._first + len(self._keys)

    def note(self, key: str) -> None:
        """Job `key` was made again, removed or changed in place."""
        keys = self._keys
        keys.append(key)
        if len(keys) > _KEPT:
            self._trim()

    def _trim(self) -> None:
        """Past `_KEPT` keys, forget the older half (at once: a batch may have added many)."""
        keys = self._keys
        while len(keys) > _KEPT:
            half = len(keys) // 2
            del keys[:half]
            self._first += half

    def note_all(self, keys: list[str]) -> None:
        """`note` of each of `keys` in turn."""
        self._keys += keys
        self._trim()

    def note_everything(self) -> None:
        """Every job was made again: nothing worked out before this is of any use."""
        self._first = self.stamp + 1
        self._keys = []

    def since(self, old: int, new: int) -> set[str] | None:
        """The keys noted after stamp `old` up to stamp `new`; None when the log no longer knows (or
        everything changed in between)."""
        if old < self._first or new < old:
            return None
        return set(self._keys[old - self._first : new - self._first])


@dataclass(frozen=True, slots=True)
class JobChangeMark:
    """How far one cache's log had got when a snapshot was taken."""

    log: JobChangeLog
    stamp: int

    def since(self, earlier: JobChangeMark | None) -> set[str] | None:
        """The jobs that changed between the snapshot of `earlier` and this one; None when that is not
        known (another cache's snapshot, no earlier one, or the log forgot)."""
        if earlier is None or earlier.log is not self.log:
            return None
        return self.log.since(earlier.stamp, self.stamp)
