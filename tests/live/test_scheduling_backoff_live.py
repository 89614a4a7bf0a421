"""`schedulingBackoff` and `markUnschedulable` against the fake API server, as KAI's scheduler does them
(model/scheduling_backoff.py): a PodGroup with `schedulingBackoff: 1` gets one UnschedulableOnNodePool
condition whose message names its node pool, and is no longer scheduled, even once it would fit; one with
`markUnschedulable: false` keeps its pods' PodScheduled condition untouched."""

from __future__ import annotations

from typing import Any

from live_support import Live, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer


def conditions(server: FakeApiServer, name: str) -> list[dict[str, Any]]:
    obj = server.store.get("podgroups", name)
    return list((obj.get("status") or {}).get("schedulingConditions") or [])


def pod_scheduled(server: FakeApiServer, name: str) -> dict[str, Any] | None:
    found = (server.store.get("pods", name).get("status") or {}).get("conditions") or []
    return next((cond for cond in found if cond.get("type") == "PodScheduled"), None)


def test_a_single_backoff_pod_group_is_marked_once_and_then_left_alone(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=1))
    store.create(queue_manifest("q"))
    once = pod_group_manifest("once", "q")
    once["spec"]["schedulingBackoff"] = 1
    store.create(once)
    store.create(pod_manifest("once-0", gpus=2, group="once"))
    always = pod_group_manifest("always", "q")
    always["spec"]["markUnschedulable"] = False
    store.create(always)
    store.create(pod_manifest("always-0", gpus=2, group="always"))

    async def body() -> None:
        async with Live(server, loop=False) as live:
            first = await live.loop.run_once()
            assert first.errors == [] and first.result is not None
            assert set(first.result.unschedulable) == {"default/once", "default/always"}
            [condition] = conditions(server, "once")
            assert condition["nodePool"] == "default" and condition["transitionID"] == "1"
            assert condition["message"].startswith("Node-Pool 'default': ")
            assert pod_scheduled(server, "once-0")["message"].startswith("Node-Pool 'default': ")  # type: ignore[index]
            # markUnschedulable false: the PodGroup says why, its pod is left alone.
            assert not conditions(server, "always")[0]["message"].startswith("Node-Pool")
            assert pod_scheduled(server, "always-0") is None

            await live.until(lambda: bool(live.informers.pod_groups.cache["default/once"].get("status")))
            second = await live.loop.run_once()
            assert second.result is not None and "default/once" not in second.result.unschedulable
            assert "default/always" in second.result.unschedulable

            store.apply(node_manifest("n1", gpus=4))
            await live.until(
                lambda: live.informers.nodes.cache["n1"]["status"]["allocatable"].get("nvidia.com/gpu") == "4"
            )
            third = await live.loop.run_once()
            # Room for both now, but only the PodGroup without a backoff is the scheduler's.
            assert third.bind_requests == ["default/always-0"]
            assert [c["transitionID"] for c in conditions(server, "once")] == ["1"]

    run(body(), timeout=10.0)
    assert not server.store.get("pods", "once-0")["spec"].get("nodeName")


def test_a_job_with_a_pod_running_gets_no_scheduling_condition(server: FakeApiServer) -> None:
    """KAI's markPodGroupUnschedulable writes nothing while the job has allocated pods (so a backoff
    never takes a running job out of scheduling)."""
    store = server.store
    store.create(node_manifest("n1", gpus=1))
    store.create(queue_manifest("q"))
    elastic = pod_group_manifest("elastic", "q")
    elastic["spec"]["schedulingBackoff"] = 1
    store.create(elastic)
    store.create(pod_manifest("elastic-0", gpus=1, group="elastic", node_name="n1", phase="Running"))
    store.create(pod_manifest("elastic-1", gpus=1, group="elastic"))

    async def body() -> None:
        async with Live(server, loop=False) as live:
            report = await live.loop.run_once()
            assert report.errors == [] and report.result is not None
            assert "default/elastic" in report.result.unschedulable
            assert conditions(server, "elastic") == []
            again = await live.loop.run_once()
            assert again.result is not None and "default/elastic" in again.result.unschedulable  # still tried

    run(body(), timeout=10.0)
