"""A job's last start without the `kai.scheduler/last-start-timestamp` annotation (issue #23): the scheduler
no longer writes it, and a scheduler that starts afresh reads the start off the job's running pods
(`job_starts.py`), so a job protected by its minimum runtime stays protected across a restart, as under
KAI's rule (the stamp KAI writes when the job got its first pod)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from live_support import Live, run

from helpers import (
    config_with,
    node_manifest,
    pod_group_manifest,
    pod_manifest,
    priority_class_manifest,
    queue_manifest,
)
from kai_fakeapi import FakeApiServer
from kai_scheduler.api.timestamps import parse_rfc3339
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.k8s.scheduler.state import StateBuilder

MakeClient = Callable[..., LightkubeClient]
LAST_START = "kai.scheduler/last-start-timestamp"
PROTECTED = config_with({"minruntime": {"defaultPreemptMinRuntime": "1h"}})


def test_a_job_within_its_min_runtime_stays_protected_after_a_scheduler_restart(
    server: FakeApiServer,
) -> None:
    store = server.store
    store.create(node_manifest("node0", gpus=1))
    store.create(queue_manifest("q", gpu=1))
    for name, value in (("train", 50), ("build", 100)):
        store.create(priority_class_manifest(name, value))
    store.create(pod_group_manifest("victim", priority_class="train"))
    store.create(pod_manifest("victim-0", group="victim", gpus=1, priority_class="train"))

    def bound() -> bool:
        return bool(store.get("pods", "victim-0")["spec"].get("nodeName"))

    async def first_life() -> None:
        async with Live(server, loop=False, config=PROTECTED) as live:
            report = await live.loop.run_once()
            assert report.bind_requests == ["default/victim-0"]
            await live.until(bound)

    async def restarted(config: SchedulerConfig) -> list[str]:
        async with Live(server, loop=False, binder=False, config=config) as live:
            await live.until(lambda: "default/eager-0" in live.informers.pods.cache)
            return list((await live.loop.run_once()).evictions)

    run(first_life())
    store.create(pod_group_manifest("eager", priority_class="build"))
    store.create(pod_manifest("eager-0", group="eager", gpus=1, priority_class="build"))
    assert LAST_START not in store.get("podgroups", "victim")["metadata"]["annotations"]
    # A new scheduler process: nothing in memory, no annotation; the victim's pod says when it started.
    assert run(restarted(PROTECTED)) == []
    # The same restart without a minimum runtime preempts it: the protection above was the min runtime's.
    assert run(restarted(SchedulerConfig())) == ["default/victim-0"]


def scheduled_pod(name: str, group: str, at: str) -> dict[str, Any]:
    pod = pod_manifest(name, group=group, gpus=1, node_name="n1")
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at}],
    }
    return pod


def test_the_last_start_is_the_earliest_running_pods_placement_or_a_newer_annotation(
    make_client: MakeClient, server: FakeApiServer
) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=8))
    store.create(queue_manifest("q"))
    annotated = {
        "plain": None,  # no annotation: its pods say it
        "older": "2026-01-01T00:00:10Z",  # an earlier run's stamp: its pods' placement is newer
        "newer": "2026-01-01T00:05:00Z",  # KAI stamped a start its pods do not show: the stamp wins
    }
    for job, stamp in annotated.items():
        group = pod_group_manifest(job)
        if stamp is not None:
            group["metadata"]["annotations"][LAST_START] = stamp
        store.create(group)
        store.create(scheduled_pod(f"{job}-0", job, "2026-01-01T00:02:00Z"))
        store.create(scheduled_pod(f"{job}-1", job, "2026-01-01T00:01:40Z"))  # the earliest
    done = scheduled_pod("plain-2", "plain", "2026-01-01T00:00:01Z")
    done["status"]["phase"] = "Succeeded"  # ran before: not part of the run that goes on now
    store.create(done)
    clock = SessionClock(start=parse_rfc3339("2026-01-01T00:00:00Z").timestamp())

    async def body() -> dict[str, float | None]:
        async with make_client("scheduler") as client, InformerSet(client, backoff=FAST_BACKOFF) as informers:
            assert await informers.wait_synced(5)
            state = StateBuilder(informers, clock).build().state
            return {job: times.last_start for job, times in state.job_times.items()}

    starts = run(body())
    assert starts == {"default/plain": 100.0, "default/older": 100.0, "default/newer": 300.0}
