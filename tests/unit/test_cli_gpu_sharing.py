"""`kai-scheduler run --no-gpu-sharing` (KAI's `global.gpuSharing: false`): the admission webhook refuses
pods that ask for a GPU fraction or GPU memory; by default they are allowed."""

from __future__ import annotations

from typing import Any

import pytest

from kai_scheduler.cli import main
from kai_scheduler.k8s.admission.review import VALIDATE_POD_PATH
from kai_scheduler.k8s.admission.server import webhook_routes
from kai_scheduler.k8s.components import RunOptions


def review(annotations: dict[str, str]) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "annotations": annotations},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "1", "operation": "CREATE", "object": pod, "namespace": "default"},
    }


@pytest.mark.parametrize(("flags", "sharing"), [([], True), (["--no-gpu-sharing"], False)])
def test_the_flag_reaches_the_webhook(
    tmp_path: Any, started: list[RunOptions], flags: list[str], sharing: bool
) -> None:
    assert main(["run", "--component", "admission", "--tls-cert-dir", str(tmp_path), *flags]) == 0
    [options] = started
    assert options.gpu_sharing is sharing
    validate = webhook_routes(gpu_sharing_enabled=options.gpu_sharing)[VALIDATE_POD_PATH]
    answer = validate(review({"gpu-fraction": "0.5"}))["response"]
    assert answer["allowed"] is sharing
    # Pods that do not share GPUs are never refused for it.
    assert validate(review({}))["response"]["allowed"] is True
