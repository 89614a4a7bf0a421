"""Pods stuck in releasing (KAI v0.17, #1578): a running pod whose deletionTimestamp is more than the
threshold old (KAI's `--stuck-in-releasing-threshold`, 2m) is StuckInReleasing. Like a releasing pod it
counts toward no queue's allocation and is no victim; unlike one, what it holds is used, not releasing, so
no pod is pipelined onto it: a pod that does not go away in time may never go.

The answer changes with time alone, so the cache asks `advance` at each snapshot which deleted pods
crossed the threshold since the last one, and accounts their nodes again.
"""

from __future__ import annotations

from typing import Final

from kai_scheduler.model.snapshot import PodState

DEFAULT_STUCK_IN_RELEASING_THRESHOLD: Final = 120.0  # seconds: KAI's DefaultStuckInReleasingThreshold


class StuckReleases:
    def __init__(self) -> None:
        # Seconds after its deletionTimestamp a running pod is stuck; KAI takes a threshold that is not
        # positive as its default.
        self.threshold = DEFAULT_STUCK_IN_RELEASING_THRESHOLD
        self._now: float | None = None
        self._deleted: dict[str, float] = {}  # running pods being deleted: key -> deletionTimestamp
        self._stuck: set[str] = set()

    def track(self, key: str, state: PodState | None) -> None:
        """A pod added, changed (`state`) or gone (None)."""
        if state is not None and state.deleted is not None and state.phase == "Running":
            self._deleted[key] = state.deleted
            if self._is_stuck(state.deleted):
                self._stuck.add(key)
            else:
                self._stuck.discard(key)
        else:
            self._deleted.pop(key, None)
            self._stuck.discard(key)

    def releasing(self, key: str, state: PodState) -> bool:
        """Whether what the pod holds on its node is being released (a terminating pod not stuck)."""
        return state.terminating and key not in self._stuck

    def is_stuck(self, key: str) -> bool:
        return key in self._stuck

    def advance(self, now: float) -> list[str]:
        """Move the clock to `now`: the pods whose stuck-ness changed since."""
        self._now = now
        changed = []
        for key, deleted in self._deleted.items():
            stuck = self._is_stuck(deleted)
            if stuck != (key in self._stuck):
                changed.append(key)
                if stuck:
                    self._stuck.add(key)
                else:
                    self._stuck.discard(key)
        return changed

    def _is_stuck(self, deleted: float) -> bool:
        threshold = self.threshold if self.threshold > 0 else DEFAULT_STUCK_IN_RELEASING_THRESHOLD
        return self._now is not None and self._now - deleted > threshold
