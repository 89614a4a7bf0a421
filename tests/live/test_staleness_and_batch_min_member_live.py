"""KAI v0.17's per-PodGroup staleness grace period and `kai.scheduler/batch-min-member`, live: the pod
grouper writes them into the PodGroup (the fake API server keeps only fields the chart's CRD declares), and
the scheduler evicts each stale gang on its own grace period."""

from __future__ import annotations

from typing import Any

from live_support import Live, evicted, run
from test_podgrouper_controller import MakeClient, grouper, groups, owned_pod, settled

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer

GRACE = "kai.scheduler/staleness-grace-period"
BATCH_MIN_MEMBER = "kai.scheduler/batch-min-member"


def batch_job(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"parallelism": 3, "completions": 3, "template": {"spec": {"containers": []}}},
    }


def test_a_batch_job_gets_one_pod_group_with_its_min_member_and_grace_period(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    job = server.store.create(batch_job("train", {BATCH_MIN_MEMBER: "2", GRACE: "-1s"}))
    plain = server.store.create(batch_job("plain", {}))
    for owner in (job, plain):
        for i in range(3):
            server.store.create(owned_pod(f"{owner['metadata']['name']}-{i}", owner))

    async def body() -> None:
        async with grouper(make_client) as controller:
            await settled(controller)
            assert controller.stats.errors == []

    run(body())
    made = groups(server)
    assert sorted(made) == sorted(f"pg-{j['metadata']['name']}-{j['metadata']['uid']}" for j in (job, plain))
    train = made[f"pg-train-{job['metadata']['uid']}"]["spec"]
    assert (train["minMember"], train["stalenessGracePeriod"]) == (2, "-1s")
    other = made[f"pg-plain-{plain['metadata']['uid']}"]["spec"]
    assert other["minMember"] == 1 and "stalenessGracePeriod" not in other
    for i in range(3):
        pod = server.store.get("pods", f"train-{i}", "default")
        assert pod["metadata"]["annotations"]["pod-group-name"] == f"pg-train-{job['metadata']['uid']}"


def stale_gang(server: FakeApiServer, name: str, grace: str) -> None:
    """Gang `name` (minMember 2) with its own grace period: `<name>-0` runs on n0, `<name>-1` cannot fit."""
    group = pod_group_manifest(name, "q", min_member=2)
    group["spec"]["stalenessGracePeriod"] = grace
    server.store.create(group)
    running = pod_manifest(f"{name}-0", "q", gpus=1, group=name, node_name="n0")
    running["status"] = {"phase": "Running"}
    server.store.create(running)
    server.store.create(pod_manifest(f"{name}-1", "q", gpus=1, group=name))


def test_each_stale_gang_is_evicted_on_its_own_grace_period(server: FakeApiServer) -> None:
    # Under the scheduler's default of 60s, neither gang would go during the test: `zero` (0s) goes in
    # the cycle that finds it stale, `never` (negative) stays, and its second pod takes the freed GPU.
    server.store.create(node_manifest("n0", gpus=2))
    server.store.create(queue_manifest("q", gpu=2))
    stale_gang(server, "zero", "0s")
    stale_gang(server, "never", "-1s")

    def never_whole() -> bool:
        return bool((server.store.try_get("pods", "never-1") or {}).get("spec", {}).get("nodeName"))

    async def body() -> None:
        async with Live(server) as live:
            await live.until(never_whole, timeout=20)
            cycle = live.loop.cycle
            await live.until(lambda: live.loop.cycle >= cycle + 3, timeout=20)

    run(body(), timeout=40)
    assert evicted(server) == ["zero-0"]
    assert server.store.get("pods", "never-0", "default")["spec"]["nodeName"] == "n0"
