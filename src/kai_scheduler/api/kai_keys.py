"""Every `kai.scheduler/*` label and annotation key that KAI (v0.17) or this project reads or writes, and
the closest of them to a key that is none of these.

KAI reads a key under its own prefix or nothing: a `kai.scheduler/preemtion-delay` is taken by the cluster
and ignored by every component, so the job is evicted at once. Any other `kai.scheduler/` key on a pod,
PodGroup, Queue or node is therefore a warning (`api.strict.notices`), with the known key it is closest to.

The keys are those of `api.constants` (found there, so a key added to it is known here), plus KAI's that
this project keeps elsewhere or does not model yet (KAI's `pkg/common/constants/constants.go` and
`pkg/podgrouper/podgrouper/plugins/constants/constants.go` at v0.17.0), plus the ones this project's own
components write.
"""

from __future__ import annotations

import difflib
from typing import Final

from kai_scheduler.api import constants as c

KAI_PREFIX: Final = "kai.scheduler/"

# KAI v0.17.0's keys that `api.constants` does not hold (yet): each is read or written by KAI.
_KAI_V017_KEYS: Final = (
    "kai.scheduler/preemption-delay",
    "kai.scheduler/last-eviction-timestamp",
    "kai.scheduler/staleness-grace-period",
    "kai.scheduler/skip-podgrouper",
    "kai.scheduler/batch-min-member",
    "kai.scheduler/numa-placement-predicted",
    "kai.scheduler/numa-placement-observed",
    "kai.scheduler/segment-size",
    "kai.scheduler/segment-topology-required-placement",
    "kai.scheduler/segment-topology-preferred-placement",
    "kai.scheduler/top-owner-metadata",
    "kai.scheduler/accounting",
)
# Written by this project's components (the node scale adjuster's shape and sizes).
_OWN_KEYS: Final = (
    "kai.scheduler/scale-adjust-shape",
    "kai.scheduler/scale-adjust-gpu-units",
    "kai.scheduler/scale-adjust-pods",
    # Queue admission gating (KAI's design, not in v0.17): the gate and the admission's stamp on a pod.
    "kai.scheduler/queue-admission",
    "kai.scheduler/queue-admitted-timestamp",
)

KNOWN_KAI_KEYS: Final[frozenset[str]] = frozenset(
    {value for value in vars(c).values() if isinstance(value, str) and value.startswith(KAI_PREFIX)}
    | set(_KAI_V017_KEYS)
    | set(_OWN_KEYS)
)
_SORTED_KEYS: Final = sorted(KNOWN_KAI_KEYS)


def unknown_kai_key(key: str) -> str | None:
    """For a `kai.scheduler/` key that no component reads, the known key closest to it; None for every
    other key (known ones, and keys under other prefixes)."""
    if not key.startswith(KAI_PREFIX) or key in KNOWN_KAI_KEYS:
        return None
    # Always a suggestion: a key under KAI's prefix was meant for KAI, and the closest one is the best
    # guess at which (sorted, so that ties pick the same key on every run).
    close = difflib.get_close_matches(key, _SORTED_KEYS, n=1, cutoff=0.0)
    return close[0] if close else _SORTED_KEYS[0]
