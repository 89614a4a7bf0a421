"""The scheduler's evictions as KAI's evictor does them: the DisruptionTarget condition in a strategic merge
patch of the pod's status (unless it has it already), then the delete; a failed patch is a failed
eviction."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from kai_scheduler.framework.decisions import Decision
from kai_scheduler.k8s.runtime.client import ApiStatusError, JsonObject, ResourceKind
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.evictions import Evictions, disruption_condition
from kai_scheduler.k8s.scheduler.live_state import SessionClock

STAMP = "2026-01-02T03:04:05Z"
DECISION = Decision(
    action="reclaim",
    type="evict",
    pod="team-a/victim",
    node="node-1",
    gpu_groups=(),
    reason="reclaimed for team-b/job (queue team-b below fair share)",
    for_job="team-b/job",
)
MESSAGE = (
    "Preempted by reclaim for team-b/job on node-1: reclaimed for team-b/job (queue team-b below fair share)"
)


def pod(*conditions: JsonObject) -> JsonObject:
    return {
        "metadata": {"name": "victim", "namespace": "team-a", "uid": "u-1"},
        "status": {"conditions": list(conditions)},
    }


class Client:
    """Records patches and deletes; `fail` maps a verb to the error it answers."""

    def __init__(self, fail: dict[str, ApiStatusError] | None = None) -> None:
        self.fail = fail or {}
        self.calls: list[tuple[str, Any]] = []

    async def patch(
        self, kind: ResourceKind, name: str, patch: Any, namespace: str | None, **options: Any
    ) -> Any:
        self.calls.append(("patch", (kind.plural, name, namespace, patch, options)))
        if "patch" in self.fail:
            raise self.fail["patch"]
        return {}

    async def delete(self, kind: ResourceKind, name: str, namespace: str | None = None) -> None:
        self.calls.append(("delete", (kind.plural, name, namespace)))
        if "delete" in self.fail:
            raise self.fail["delete"]


def evict(client: Client, victim: JsonObject) -> tuple[Evictions, CycleReport]:
    clock = SessionClock(start=1767323045.0, wall=lambda: 1767323045.0)  # STAMP
    effects = Effects(cast(Any, client), clock, scheduler_name="kai-scheduler", record_events=False)
    evictions = Evictions(effects, cast(Any, None))
    report = CycleReport(cycle=1, now=0.0)
    live = SimpleNamespace(pods={"team-a/victim": victim})
    asyncio.run(evictions.evict(cast(Any, live), DECISION, report))
    return evictions, report


def test_the_condition_is_written_then_the_pod_deleted() -> None:
    client = Client()
    evictions, report = evict(client, pod({"type": "Ready", "status": "True"}))
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": MESSAGE,
        "lastProbeTime": None,
        "lastTransitionTime": STAMP,
    }
    patch = {"status": {"conditions": [condition]}}  # merged by type: the pod's other conditions stay
    assert client.calls == [
        ("patch", ("pods", "victim", "team-a", patch, {"patch_type": "strategic", "subresource": "status"})),
        ("delete", ("pods", "victim", "team-a")),
    ]
    assert evictions.evicting == {"team-a/victim": "u-1"} and report.evictions == ["team-a/victim"]


def test_a_pod_with_the_condition_already_is_only_deleted() -> None:
    """Kubernetes' UpdatePodCondition: nothing to write when status, reason and message are the same."""
    written = disruption_condition(pod(), MESSAGE, "2026-01-01T00:00:00Z")
    assert written is not None
    client = Client()
    evict(client, pod(written))
    assert [verb for verb, _ in client.calls] == ["delete"]


def test_another_message_is_written_keeping_the_transition_time() -> None:
    earlier = disruption_condition(
        pod(), "Preempted by preempt for x/y on node-0: ...", "2026-01-01T00:00:00Z"
    )
    assert earlier is not None
    again = disruption_condition(pod(earlier), MESSAGE, STAMP)
    assert again is not None and again["message"] == MESSAGE
    assert again["lastTransitionTime"] == "2026-01-01T00:00:00Z"  # still True since then
    was_false = disruption_condition(pod({**earlier, "status": "False"}), MESSAGE, STAMP)
    assert was_false is not None and was_false["lastTransitionTime"] == STAMP


def test_a_failed_patch_fails_the_eviction_and_nothing_is_deleted() -> None:
    client = Client(fail={"patch": ApiStatusError(500, "InternalError", "etcd is down")})
    with pytest.raises(ApiStatusError, match="etcd is down"):
        evict(client, pod())
    assert [verb for verb, _ in client.calls] == ["patch"]


@pytest.mark.parametrize("step", ["patch", "delete"])
def test_a_pod_gone_meanwhile_counts_as_evicted(step: str) -> None:
    client = Client(fail={step: ApiStatusError(404, "NotFound", 'pods "victim" not found')})
    evictions, report = evict(client, pod())
    assert report.evictions == ["team-a/victim"] and "team-a/victim" in evictions.evicting
