"""How long the pods of a live cluster ran, as both of live mode's users of run times read it: the
start-time estimates (`start_times.py`) and reservation and backfill's run estimates (`run_estimates.py`).

A pod's run is what its kubelet reports: it began at `status.startTime` and, once Succeeded, ended when
its last container finished (`containerStatuses[].state.terminated.finishedAt`). A completed run is
counted once (by the pod's uid) in the process's one `RunHistory`, which both users share: a Succeeded pod
may be deleted before either looks again, so whichever sees it first records it for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai_scheduler.api.objects import Pod, PodGroup
from kai_scheduler.api.timestamps import parse_rfc3339
from kai_scheduler.controlplane.run_times import RunHistory, shape_of
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.runtime.objects import metadata_of
from kai_scheduler.k8s.scheduler.live_state import SessionClock


def seconds_of(clock: SessionClock, stamp: Any) -> float | None:
    """An RFC 3339 status time on the session clock (None: none, or not a time)."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return clock.seconds(parse_rfc3339(stamp))
    except ValueError:
        return None


def started_at(clock: SessionClock, raw: JsonObject) -> float | None:
    """When the pod began to run, as its kubelet reports it (`status.startTime`)."""
    return seconds_of(clock, (raw.get("status") or {}).get("startTime"))


def finished_at(clock: SessionClock, status: Mapping[str, Any]) -> float | None:
    """When a completed pod's last container finished (None: not said)."""
    times = []
    for container in status.get("containerStatuses") or []:
        terminated = ((container or {}).get("state") or {}).get("terminated") or {}
        seconds = seconds_of(clock, terminated.get("finishedAt"))
        if seconds is not None:
            times.append(seconds)
    return max(times) if times else None


def count_completed(
    history: RunHistory, clock: SessionClock, raw: JsonObject, pod: Pod, group: PodGroup | None
) -> None:
    """Count the run of the Succeeded pod `raw` (parsed: `pod`, of the PodGroup `group`) in `history`,
    when its kubelet said when it began and ended."""
    status = raw.get("status") or {}
    begun, ended = started_at(clock, raw), finished_at(clock, status)
    if begun is not None and ended is not None:
        run_id = str(metadata_of(raw).get("uid") or pod.key)
        history.add(run_id, shape_of(pod, group), ended - begun)


__all__ = ["count_completed", "finished_at", "seconds_of", "started_at"]
