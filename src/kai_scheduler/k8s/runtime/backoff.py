"""The one backoff of the live edge: exponential, capped, jittered delays between attempts."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: attempt n waits `initial * factor**n`, capped at `maximum`, of
    which a random part up to `jitter` (a fraction) is taken off, so that many clients that lost the server
    together do not come back together."""

    initial: float = 0.2
    maximum: float = 5.0
    factor: float = 2.0
    jitter: float = 0.5

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        base = min(self.maximum, self.initial * self.factor ** min(attempt, 64))
        draw = (rng or random).random()
        return base * (1.0 - self.jitter * draw)


DEFAULT_BACKOFF = Backoff()
"""The informers' reconnects and the reservation pods' retries."""

FAST_BACKOFF = Backoff(initial=0.01, maximum=0.2)
"""For tests: reconnect within a fraction of a second."""

RETRY_BACKOFF = Backoff(initial=0.5, maximum=30.0)
"""The controllers' delays between attempts at an object (a pod to group, a status to write) after the API
server failed."""

__all__ = ["DEFAULT_BACKOFF", "FAST_BACKOFF", "RETRY_BACKOFF", "Backoff"]
