"""Live mode's start-time estimates on the fake API server: the look-ahead of the scheduler's state written
to each waiting PodGroup as `kai.scheduler/estimated-start`, rewritten only when it moves, removed when the
group starts."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from identities import client_as
from live_support import Live, eventually, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.api import constants as c
from kai_scheduler.api.timestamps import parse_rfc3339
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.components import run_live
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.k8s.scheduler.start_times import StartTimeAnnotations
from kai_scheduler.sim.estimates import estimate_starts

ANNOTATION = c.ESTIMATED_START_ANNOTATION


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _running(name: str, group: str, started: float, **kwargs: Any) -> dict[str, Any]:
    """A pod of `group` running on n1 since `started` (wall-clock seconds), as its kubelet reports it."""
    manifest = pod_manifest(name, group=group, node_name="n1", **kwargs)
    manifest["status"] = {"phase": "Running", "startTime": _stamp(started)}
    return manifest


def _estimate(server: FakeApiServer, group: str) -> float | None:
    annotations = server.store.get("podgroups", group)["metadata"].get("annotations") or {}
    stamp = annotations.get(ANNOTATION)
    return None if stamp is None else parse_rfc3339(stamp).timestamp()


def test_waiting_pod_groups_get_their_estimated_start(server: FakeApiServer) -> None:
    started = float(int(time.time()) - 100)
    store = server.store
    store.create(node_manifest("n1", gpus=8))
    store.create(queue_manifest("q"))
    for name in ("first", "second", "third"):
        store.create(pod_group_manifest(name))
    store.create(_running("first-0", "first", started, gpus=8, duration="1h"))
    store.create(pod_manifest("second-0", group="second", gpus=8, duration="10m"))
    store.create(pod_manifest("third-0", group="third", gpus=8))  # no duration: runs for good
    clock = SessionClock()

    async def body() -> None:
        async with Live(server, binder=False, clock=clock) as live:
            estimates = StartTimeAnnotations(
                live.client,
                live.informers,
                live.config,
                clock,
                estimate_starts,
                cycles=lambda: live.loop.last_cycle,
                request_state=live.loop.request_state,
            )
            assert await estimates.run_once() == 2
            await eventually(lambda: _estimate(server, "third") is not None)
            # `second` waits for `first`'s hour, `third` for `second`'s ten minutes after it (on the
            # look-ahead's one-second grid, written to the second).
            second, third = _estimate(server, "second"), _estimate(server, "third")
            assert second is not None and abs(second - (started + 3600)) <= 2
            assert third is not None and abs(third - (started + 4200)) <= 2
            assert _estimate(server, "first") is None  # running: no estimate
            # Nothing moved: nothing is written again.
            assert await estimates.run_once() == 0
            # `first` ends (deleted): the cycle that places `second` removes its estimate at once...
            store.delete("pods", "first-0")
            await live.until(lambda: "default/second-0" in live.informers.bind_requests.cache)
            await eventually(lambda: _estimate(server, "second") is None)
            await live.until(
                lambda: (
                    ANNOTATION
                    not in live.informers.pod_groups.cache["default/second"]["metadata"]["annotations"]
                )
            )
            # ... and the next estimate moves `third` up.
            assert await estimates.run_once() == 1
            third = _estimate(server, "third")
            assert third is not None and abs(third - (time.time() + 600)) < 30

    run(body(), timeout=60)


def test_run_live_estimates_in_a_worker_process_from_completed_runs(server: FakeApiServer) -> None:
    """Through `run_live`, as `kai-scheduler run` starts it: the estimate of a job waiting behind a running
    one of unknown duration comes from a completed pod of the same shape (it ran 30 minutes)."""
    now = float(int(time.time()))
    store = server.store
    store.create(node_manifest("n1", gpus=8))
    store.create(queue_manifest("q"))
    for name in ("earlier", "current", "waiting"):
        store.create(pod_group_manifest(name))
    done = pod_manifest("earlier-0", group="earlier", gpus=8)
    done["status"] = {
        "phase": "Succeeded",
        "startTime": _stamp(now - 7200),
        "containerStatuses": [
            {"name": "main", "state": {"terminated": {"exitCode": 0, "finishedAt": _stamp(now - 5400)}}}
        ],
    }
    store.create(done)
    store.create(_running("current-0", "current", now - 600, gpus=8))
    store.create(pod_manifest("waiting-0", group="waiting", gpus=8))

    async def body() -> None:
        stop = asyncio.Event()
        client = client_as(server, "scheduler")
        task = asyncio.create_task(
            run_live(
                client,
                SchedulerConfig(),
                stop,
                period=0.05,
                binder=False,
                estimator=estimate_starts,
                estimate_interval=0.2,
            )
        )
        try:
            await eventually(lambda: _estimate(server, "waiting") is not None or task.done(), timeout=45)
        finally:
            stop.set()
            await task
            await client.aclose()

    run(body(), timeout=60)
    estimate = _estimate(server, "waiting")
    # `current` started 10 minutes ago and should run 30: it ends, and `waiting` starts, in 20 minutes.
    assert estimate is not None and abs(estimate - (now + 1200)) <= 2
