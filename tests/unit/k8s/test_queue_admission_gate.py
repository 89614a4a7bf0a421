"""Queue admission gating at the live edge: the mutating webhook's gate (design D2, D8, D9, D10: a pod of an
opted-in queue or of a queue that does not exist gets it at creation, after any foreign gate; no other pod,
no update, nothing with the feature off) and the scheduler's patch that removes it (only ours, at its
index, tested first, the admission stamped)."""

from __future__ import annotations

import json
from base64 import b64decode
from typing import Any

import pytest

from helpers import pod_manifest
from kai_fakeapi.patch import json_patch
from kai_scheduler.api.admission_gate import QUEUE_ADMISSION_GATE, QUEUE_ADMITTED_ANNOTATION
from kai_scheduler.k8s.admission.review import review_pod_mutation
from kai_scheduler.k8s.scheduler.ungates import ungate_patch

QUEUES = {"in": True, "out": False}
OURS = {"name": QUEUE_ADMISSION_GATE}
FOREIGN = {"name": "example.com/hold"}


def mutated(pod: dict[str, Any], operation: str = "CREATE", opt_in: Any = QUEUES.get) -> dict[str, Any]:
    request = {"uid": "u", "operation": operation, "object": pod, "namespace": "default"}
    request["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    response = review_pod_mutation(review, gpu_runtime_class="", queue_opt_in=opt_in)["response"]
    assert response["allowed"]
    patch = json.loads(b64decode(response["patch"])) if "patch" in response else []
    result: dict[str, Any] = json_patch(pod, patch)
    return result


def gates(pod: dict[str, Any]) -> list[dict[str, str]]:
    return list(pod["spec"].get("schedulingGates") or [])


@pytest.mark.parametrize(
    ("queue", "gated"), [("in", True), ("out", False), ("nowhere", True)], ids=["opted-in", "not", "missing"]
)
def test_the_gate_goes_on_pods_of_queues_that_opt_in_or_do_not_exist(queue: str, gated: bool) -> None:
    assert gates(mutated(pod_manifest("p", queue))) == ([OURS] if gated else [])


def test_a_foreign_gate_stays_first_and_ours_is_not_added_twice() -> None:
    pod = pod_manifest("p", "in")
    pod["spec"]["schedulingGates"] = [FOREIGN]
    assert gates(mutated(pod)) == [FOREIGN, OURS]
    pod["spec"]["schedulingGates"] = [OURS]
    assert gates(mutated(pod)) == [OURS]


def test_no_gate_for_other_schedulers_updates_or_with_the_feature_off() -> None:
    assert gates(mutated(pod_manifest("p", "in", scheduler="default-scheduler"))) == []
    assert gates(mutated(pod_manifest("p", "in"), operation="UPDATE")) == []
    assert gates(mutated(pod_manifest("p", "in"), opt_in=None)) == []


def test_the_scheduler_removes_only_its_gate_and_stamps_the_admission() -> None:
    pod = pod_manifest("p", "in")
    pod["spec"]["schedulingGates"] = [FOREIGN, OURS]
    patch = ungate_patch(pod, "2026-12-05T12:00:00Z")
    assert patch is not None and patch[0] == {
        "op": "test",
        "path": "/spec/schedulingGates/1/name",
        "value": QUEUE_ADMISSION_GATE,
    }
    after = json_patch(pod, patch)
    assert gates(after) == [FOREIGN]
    assert after["metadata"]["annotations"][QUEUE_ADMITTED_ANNOTATION] == "2026-12-05T12:00:00Z"
    del pod["metadata"]["annotations"]
    assert json_patch(pod, ungate_patch(pod, "t"))["metadata"]["annotations"] == {
        QUEUE_ADMITTED_ANNOTATION: "t"
    }
    assert ungate_patch(after, "t") is None
