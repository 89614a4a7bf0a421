"""Queue admission gating live (issue #25 section 2, KAI's design `queue-admission-gating`): pods go through
the mutating webhook's review function as the API server calls it (the gate added to the pods of a queue
that opts in, the queue looked up as the admission component's Queue informer has it), then a scheduler and
binder with the feature switched on run against the fake API server. A quota-blocked gang stays at the gate
with no `PodScheduled=False` condition (nothing for an autoscaler to buy nodes for) and is ungated, and
runs, once the first gang completes and frees the quota; the patch removed only our gate and stamped the
admission, an `Admitted` event was recorded, and the metrics count the gated and the ungated pods."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from identities import ADMIN
from live_support import Live, mutated, pod_review, run

from helpers import config, node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.api.admission_gate import QUEUE_ADMISSION_GATE, QUEUE_ADMITTED_ANNOTATION
from kai_scheduler.k8s.admission.review import MUTATE_POD_PATH
from kai_scheduler.k8s.admission.server import webhook_routes
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.scheduler.metrics import SchedulerMetrics
from kai_scheduler.kubectl_plugin import why
from kai_scheduler.kubectl_plugin.api_client import Cluster

ON = config(queueAdmissionGating={"enabled": True})


def through_webhook(store: Store, manifest: dict[str, Any]) -> dict[str, Any]:
    """The pod as the mutating webhook lets it in, with the queue's opt-in read from the store."""

    def opt_in(name: str) -> bool | None:
        queue = store.try_get("queues", name)
        return None if queue is None else (queue.get("spec") or {}).get("admissionGating") is True

    return mutated(pod_review(manifest), webhook_routes(queue_opt_in=opt_in)[MUTATE_POD_PATH])


def gates(store: Store, pod: str) -> list[str]:
    return [g["name"] for g in store.get("pods", pod, "default")["spec"].get("schedulingGates") or []]


def unschedulable_condition(store: Store, pod: str) -> bool:
    conditions = (store.get("pods", pod, "default").get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)


def bound(store: Store, *pods: str) -> bool:
    return all(store.get("pods", pod, "default")["spec"].get("nodeName") for pod in pods)


def test_a_quota_blocked_gang_stays_gated_until_quota_frees(
    server: FakeApiServer, make_client: Callable[..., LightkubeClient]
) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=8))
    team = queue_manifest("team-a", gpu=2, gpu_limit=2)
    team["spec"]["admissionGating"] = True
    store.create(team)
    store.create(queue_manifest("free"))  # does not opt in
    for group in ("first", "second"):
        store.create(pod_group_manifest(group, "team-a", min_member=2))
        for i in range(2):
            pod = pod_manifest(f"{group}-{i}", "team-a", gpus=1, group=group)
            pod.pop("status", None)
            store.create(through_webhook(store, pod))
    loose = pod_manifest("loose", "free", gpus=1)
    loose.pop("status", None)
    loose["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    store.create(through_webhook(store, loose))
    assert gates(store, "first-0") == [QUEUE_ADMISSION_GATE] and gates(store, "loose") == ["example.com/hold"]

    metrics = SchedulerMetrics()

    def sample(name: str) -> float | None:
        return metrics.registry.get_sample_value(f"kai_admission_gating_{name}", {"queue_name": "team-a"})

    async def body() -> None:
        async with Live(server, config=ON, metrics=metrics) as live:
            await live.until(partial(bound, store, "first-0", "first-1"), timeout=20)
            await live.settle(cycles=5)
            assert (sample("gated_pods"), sample("ungated_pods_total")) == (2, 2)
            for pod in ("second-0", "second-1"):
                assert gates(store, pod) == [QUEUE_ADMISSION_GATE]
                assert not unschedulable_condition(store, pod)
            assert gates(store, "loose") == ["example.com/hold"]  # a foreign gate: not ours to touch
            # `kubectl kai why` reads the PodGroup's condition: the quota reason, with the gated marker.
            client = make_client(ADMIN)
            try:
                explained = await why.explain(Cluster(client, "default"), "pod/second-0")
            finally:
                await client.aclose()
            assert explained.reason == "OverLimit"
            assert explained.message.startswith("QueueAdmissionGated: OverLimit: queue team-a")
            for pod in ("first-0", "first-1"):
                store.set_status("pods", pod, {"phase": "Succeeded"})
            await live.until(partial(bound, store, "second-0", "second-1"), timeout=20)
            await live.settle(cycles=1)
            assert (sample("gated_pods"), sample("ungated_pods_total")) == (None, 4)

    run(body(), timeout=60)
    # The gated PodGroup's condition is superseded when it is admitted (the same cycle's writes), not left
    # until its pods are placed: a write of its status comes between the gate's removal and its binds.
    records = server.requests()
    ungated_at = next(
        i
        for i, r in enumerate(records)
        if r.resource == "pods" and r.verb == "patch" and r.subresource is None and r.name == "second-0"
    )
    bound_at = next(
        i for i, r in enumerate(records) if i > ungated_at and (r.resource or "").startswith("bindrequests")
    )
    assert any(
        (r.resource or "").startswith("podgroups") and r.subresource == "status" and r.name == "second"
        for r in records[ungated_at:bound_at]
    )
    for pod in ("first-0", "second-0", "second-1"):
        obj = store.get("pods", pod, "default")
        assert not obj["spec"].get("schedulingGates")
        assert QUEUE_ADMITTED_ANNOTATION in obj["metadata"]["annotations"]
    events = [e for e in store.list("events", "default") if e.get("reason") == "Admitted"]
    assert {e["involvedObject"]["name"] for e in events} == {"first", "second"}
