"""The admission webhooks: each rule through an AdmissionReview, the mutation patch, malformed reviews, and
the HTTPS server end to end (with a certificate made by the `openssl` command line)."""

from __future__ import annotations

import base64
import copy
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai_fakeapi.patch import json_patch
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.k8s.admission.review import (
    MUTATE_POD_PATH,
    VALIDATE_POD_PATH,
    VALIDATE_PODGROUP_PATH,
    VALIDATE_QUEUE_PATH,
    VALIDATE_TOPOLOGY_PATH,
    review_pod_mutation,
    review_pod_validation,
    review_podgroup_validation,
    review_queue_validation,
)
from kai_scheduler.k8s.admission.server import CertificateReloader, WebhookServer

POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
QUEUE_KIND = {"group": "scheduling.run.ai", "version": "v2", "kind": "Queue"}
PODGROUP_KIND = {"group": "scheduling.run.ai", "version": "v2alpha2", "kind": "PodGroup"}
TOPOLOGY_KIND = {"group": "kai.scheduler", "version": "v1alpha1", "kind": "Topology"}


def topology(*aliases: str) -> dict[str, Any]:
    """A Topology of two levels (rack, host) with these aliases."""
    labels = ("example.com/rack", "kubernetes.io/hostname")
    levels = [{"nodeLabel": label, "alias": alias} for label, alias in zip(labels, aliases, strict=False)]
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "dc"},
        "spec": {"levels": levels or [{"nodeLabel": label} for label in labels]},
    }


# --- builders -------------------------------------------------------------------------------------


def review(
    obj: Any, kind: dict[str, str] | None = POD_KIND, *, operation: str = "CREATE", uid: str = "uid-1"
) -> dict[str, Any]:
    request: dict[str, Any] = {"uid": uid, "operation": operation, "object": obj}
    if kind is not None:
        request["kind"] = kind
        request["resource"] = {"group": kind["group"], "version": kind["version"], "resource": "x"}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def pod(
    annotations: dict[str, str] | None = None,
    *,
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    init_limits: dict[str, Any] | None = None,
    scheduler: str | None = "kai-scheduler",
    name: str | None = "train-0",
    **spec: Any,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    metadata: dict[str, Any] = {"namespace": "ml", "annotations": annotations or {}}
    if name is not None:
        metadata["name"] = name
    body: dict[str, Any] = {"containers": [{"name": "main", "image": "trainer", "resources": resources}]}
    if init_limits is not None:
        body["initContainers"] = [{"name": "init", "image": "setup", "resources": {"limits": init_limits}}]
    if scheduler is not None:
        body["schedulerName"] = scheduler
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def queue(spec: dict[str, Any] | None = None, name: str = "team-a") -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}}
    if spec is not None:
        obj["spec"] = spec
    return obj


RESOURCES = {
    "gpu": {"quota": 4, "limit": -1, "overQuotaWeight": 1},
    "cpu": {"quota": 8000, "limit": -1, "overQuotaWeight": 1},
    "memory": {"quota": 32000, "limit": -1, "overQuotaWeight": 1},
}


def podgroup(sub_groups: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"minMember": 2, "queue": "team-a", **spec}
    if sub_groups is not None:
        body["subGroups"] = sub_groups
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "job-1", "namespace": "ml"},
        "spec": body,
    }


def assert_allowed(answer: dict[str, Any], uid: str = "uid-1") -> dict[str, Any]:
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response: dict[str, Any] = answer["response"]
    assert response["uid"] == uid
    assert response["allowed"] is True, response.get("status")
    assert "status" not in response
    return response


def denial(answer: dict[str, Any], uid: str = "uid-1") -> str:
    """The denial's message, after checking the response's shape."""
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == uid
    assert response["allowed"] is False
    assert "patch" not in response
    status = response["status"]
    assert status["code"] == 400
    message = status["message"]
    assert isinstance(message, str) and message
    assert "\n" not in message
    return message


def patch_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    operations: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return operations


# --- pod validation: KAI's GPU-sharing rules --------------------------------------------------------

ALLOWED_PODS = {
    "no GPU": pod(requests={"cpu": "1", "memory": "1Gi"}),
    "whole GPUs": pod(limits={"nvidia.com/gpu": "2"}),
    "a fraction": pod({"gpu-fraction": "0.5"}),
    "a small fraction": pod({"gpu-fraction": ".25"}),
    "GPU memory": pod({"gpu-memory": "2048"}),
    "a fraction on several devices": pod({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}),
    "GPU memory on several devices": pod({"gpu-memory": "1000", "gpu-fraction-num-devices": "3"}),
    "MPS with a fraction": pod({"gpu-fraction": "0.3", "mps": "true"}),
    "mps other than true is not MPS": pod({"mps": "false"}),
    "MIG instance": pod(limits={"nvidia.com/mig-1g.5gb": "1"}),
}


@pytest.mark.parametrize("obj", ALLOWED_PODS.values(), ids=list(ALLOWED_PODS))
def test_valid_gpu_pods_are_allowed(obj: dict[str, Any]) -> None:
    assert_allowed(review_pod_validation(review(obj)))


# (pod, the field the message must start with, words the message must contain)
DENIED_PODS = {
    "fraction 1.5": (pod({"gpu-fraction": "1.5"}), "metadata.annotations.gpu-fraction", "between 0 and 1"),
    "fraction 1": (pod({"gpu-fraction": "1"}), "metadata.annotations.gpu-fraction", "between 0 and 1"),
    "fraction 0": (pod({"gpu-fraction": "0"}), "metadata.annotations.gpu-fraction", "between 0 and 1"),
    "fraction negative": (pod({"gpu-fraction": "-0.5"}), "metadata.annotations.gpu-fraction", "between 0"),
    "fraction not a number": (pod({"gpu-fraction": "half"}), "metadata.annotations.gpu-fraction", "'half'"),
    "memory 0": (pod({"gpu-memory": "0"}), "metadata.annotations.gpu-memory", "positive whole number"),
    "memory negative": (pod({"gpu-memory": "-10"}), "metadata.annotations.gpu-memory", "positive"),
    "memory decimal": (pod({"gpu-memory": "1.5"}), "metadata.annotations.gpu-memory", "'1.5'"),
    "memory with a unit": (pod({"gpu-memory": "10Gi"}), "metadata.annotations.gpu-memory", "MiB"),
    "fraction with a whole-GPU limit": (
        pod({"gpu-fraction": "0.5"}, limits={"nvidia.com/gpu": "1"}),
        "spec.containers[0].resources.limits.nvidia.com/gpu",
        "gpu-fraction",
    ),
    "memory with a whole-GPU request": (
        pod({"gpu-memory": "1024"}, requests={"nvidia.com/gpu": "1"}),
        "spec.containers[0].resources.requests.nvidia.com/gpu",
        "gpu-memory",
    ),
    "fraction with a whole GPU in an init container": (
        pod({"gpu-fraction": "0.5"}, init_limits={"nvidia.com/gpu": "1"}),
        "spec.initContainers[0].resources.limits.nvidia.com/gpu",
        "cannot be combined",
    ),
    "fraction and memory": (
        pod({"gpu-fraction": "0.5", "gpu-memory": "1024"}),
        "metadata.annotations",
        "cannot both be set",
    ),
    "num-devices alone": (
        pod({"gpu-fraction-num-devices": "2"}),
        "metadata.annotations.gpu-fraction-num-devices",
        "requires a gpu-fraction or gpu-memory",
    ),
    "num-devices with whole GPUs": (
        pod({"gpu-fraction-num-devices": "2"}, limits={"nvidia.com/gpu": "2"}),
        "metadata.annotations.gpu-fraction-num-devices",
        "requires",
    ),
    "num-devices zero": (
        pod({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}),
        "metadata.annotations.gpu-fraction-num-devices",
        "positive whole number",
    ),
    "MPS without a fraction": (pod({"mps": "true"}), "metadata.annotations.mps", "requires a gpu-fraction"),
    "MPS with whole GPUs": (
        pod({"mps": "true"}, limits={"nvidia.com/gpu": "1"}),
        "metadata.annotations.mps",
        "requires",
    ),
    "a quantity that is not one": (
        pod(requests={"cpu": "lots"}),
        "spec.containers[0].resources.requests.cpu",
        "not a valid quantity",
    ),
    "annotations not strings": (
        pod({"gpu-fraction": 0.5}),  # type: ignore[dict-item]
        "metadata.annotations.gpu-fraction",
        "expected a string",
    ),
}


@pytest.mark.parametrize(("obj", "field", "words"), DENIED_PODS.values(), ids=list(DENIED_PODS))
def test_gpu_sharing_rules_deny_naming_the_field(obj: dict[str, Any], field: str, words: str) -> None:
    message = denial(review_pod_validation(review(obj)))
    assert message.startswith(f"{field}: "), message
    assert words in message


@pytest.mark.parametrize(
    ("obj", "field", "words"),
    [case for case in DENIED_PODS.values() if case[1] != "spec.containers[0].resources.requests.cpu"],
    ids=[key for key, case in DENIED_PODS.items() if case[1] != "spec.containers[0].resources.requests.cpu"],
)
def test_the_simulator_refuses_the_same_pods_with_the_same_words(
    obj: dict[str, Any], field: str, words: str
) -> None:
    """One set of rules: the simulator's loader reports exactly what the webhook answers."""
    with pytest.raises(ManifestError) as caught:
        parse_object(copy.deepcopy(obj), "pods.yaml", 1)
    assert caught.value.field == field
    message = denial(review_pod_validation(review(obj)))
    assert message == f"{caught.value.field}: {caught.value.message}"


def test_the_simulator_accepts_the_pods_the_webhook_allows() -> None:
    for obj in ALLOWED_PODS.values():
        parse_object(copy.deepcopy(obj), "pods.yaml", 1)


def test_pods_of_other_schedulers_are_not_checked() -> None:
    bad = {"gpu-fraction": "7"}
    assert_allowed(review_pod_validation(review(pod(bad, scheduler="default-scheduler"))))
    assert_allowed(review_pod_validation(review(pod(bad, scheduler=None))))  # the API server's default
    message = denial(review_pod_validation(review(pod(bad, scheduler="my-kai")), scheduler_name="my-kai"))
    assert message.startswith("metadata.annotations.gpu-fraction: ")


def test_pods_from_generate_name_are_checked_without_a_name() -> None:
    """Pods of Deployments and Jobs reach admission with `generateName` and no name yet."""
    nameless = pod({"gpu-fraction": "0.5"}, name=None)
    nameless["metadata"]["generateName"] = "train-"
    assert_allowed(review_pod_validation(review(nameless)))
    nameless["metadata"]["annotations"]["gpu-fraction"] = "2"
    assert denial(review_pod_validation(review(nameless))).startswith("metadata.annotations.gpu-fraction: ")
    del nameless["metadata"]["generateName"]
    assert denial(review_pod_validation(review(nameless))).startswith("metadata.annotations.gpu-fraction: ")


def test_fields_the_rules_do_not_read_are_left_to_the_api_server() -> None:
    """Only what the GPU-sharing rules read goes through the schema; the rest is the API server's job."""
    odd = pod(
        {"gpu-fraction": "0.5"},
        tolerations=[{"operator": "SomethingNew"}],
        priority="high",
        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0}]}},
        volumes=[{"name": "mps", "hostPath": {"path": "/tmp/nvidia-mps"}}],
    )
    odd["status"] = {"phase": "Whatever"}
    odd["metadata"]["labels"] = {"kai.scheduler/task-priority": "high"}
    assert_allowed(review_pod_validation(review(odd)))


def test_gpu_sharing_can_be_disabled() -> None:
    for key, value in (("gpu-fraction", "0.5"), ("gpu-memory", "1024")):
        message = denial(review_pod_validation(review(pod({key: value})), gpu_sharing_enabled=False))
        assert message.startswith(f"metadata.annotations.{key}: GPU sharing is disabled")
    assert_allowed(
        review_pod_validation(review(pod(limits={"nvidia.com/gpu": "1"})), gpu_sharing_enabled=False)
    )


def test_delete_and_connect_are_allowed_without_an_object() -> None:
    for operation in ("DELETE", "CONNECT"):
        answer = review_pod_validation(review(None, operation=operation))
        assert_allowed(answer)


def test_update_is_checked_like_create() -> None:
    message = denial(review_pod_validation(review(pod({"gpu-fraction": "3"}), operation="UPDATE")))
    assert message.startswith("metadata.annotations.gpu-fraction: ")


# --- pod mutation: the GPU runtime class ----------------------------------------------------------

GPU_PODS = {
    "whole-GPU limit": pod(limits={"nvidia.com/gpu": "1"}),
    "whole-GPU request": pod(requests={"nvidia.com/gpu": 2}),
    "a fraction": pod({"gpu-fraction": "0.5"}),
    "GPU memory": pod({"gpu-memory": "4096"}),
    "a MIG instance": pod(limits={"nvidia.com/mig-3g.20gb": "1"}),
    "an init container's GPU": pod(init_limits={"nvidia.com/gpu": "1"}),
    "a null runtime class": pod(limits={"nvidia.com/gpu": "1"}, runtimeClassName=None),
    "an empty runtime class": pod(limits={"nvidia.com/gpu": "1"}, runtimeClassName=""),
}


@pytest.mark.parametrize("obj", GPU_PODS.values(), ids=list(GPU_PODS))
def test_gpu_pods_get_the_runtime_class(obj: dict[str, Any]) -> None:
    response = assert_allowed(review_pod_mutation(review(obj)))
    operations = patch_of(response)
    assert operations[0] == {"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"}
    # A GPU-sharing pod's further operations are its shared-GPU environment (tested below).
    sharing = (
        "gpu-fraction" in obj["metadata"]["annotations"] or "gpu-memory" in obj["metadata"]["annotations"]
    )
    assert (len(operations) > 1) == sharing
    patched = json_patch(copy.deepcopy(obj), operations[:1])
    assert patched["spec"]["runtimeClassName"] == "nvidia"
    assert {k: v for k, v in patched["spec"].items() if k != "runtimeClassName"} == {
        k: v for k, v in obj["spec"].items() if k != "runtimeClassName"
    }


def test_the_runtime_class_name_is_configurable() -> None:
    response = assert_allowed(
        review_pod_mutation(review(pod({"gpu-fraction": "0.5"})), gpu_runtime_class="nvidia-cdi")
    )
    assert patch_of(response)[0]["value"] == "nvidia-cdi"


NOT_PATCHED = {
    "CPU only": pod(requests={"cpu": "2"}),
    "zero GPUs": pod(limits={"nvidia.com/gpu": "0"}),
    "a runtime class already": pod(limits={"nvidia.com/gpu": "1"}, runtimeClassName="custom"),
    "another scheduler": pod(limits={"nvidia.com/gpu": "1"}, scheduler="default-scheduler"),
    "no scheduler name": pod(limits={"nvidia.com/gpu": "1"}, scheduler=None),
    "an unparseable amount": pod(limits={"nvidia.com/gpu": "many"}),
    "no containers": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
    "no spec": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
}


@pytest.mark.parametrize("obj", NOT_PATCHED.values(), ids=list(NOT_PATCHED))
def test_other_pods_are_allowed_unchanged(obj: dict[str, Any]) -> None:
    response = assert_allowed(review_pod_mutation(review(obj)))
    assert "patch" not in response and "patchType" not in response


def test_only_new_pods_are_patched() -> None:
    """runtimeClassName is immutable: an UPDATE (should a webhook be registered for it) is left alone."""
    obj = pod(limits={"nvidia.com/gpu": "1"})
    assert "patch" not in assert_allowed(review_pod_mutation(review(obj, operation="UPDATE")))


def test_an_empty_runtime_class_setting_turns_the_runtime_class_off() -> None:
    response = assert_allowed(
        review_pod_mutation(review(pod(limits={"nvidia.com/gpu": "1"})), gpu_runtime_class="")
    )
    assert "patch" not in response
    # The shared-GPU environment does not depend on it.
    response = assert_allowed(review_pod_mutation(review(pod({"gpu-fraction": "0.5"})), gpu_runtime_class=""))
    assert all(op["path"] != "/spec/runtimeClassName" for op in patch_of(response))


def test_mutation_follows_the_scheduler_name() -> None:
    obj = pod(limits={"nvidia.com/gpu": "1"}, scheduler="kai-b")
    assert "patch" not in assert_allowed(review_pod_mutation(review(obj)))
    assert patch_of(assert_allowed(review_pod_mutation(review(obj), scheduler_name="kai-b")))


# --- pod mutation: the shared-GPU environment (KAI's admission gpusharing plugin) --------------------

PREFIX_ANNOTATION = "runai/shared-gpu-configmap"
RANDOM_PART = r"[a-z0-9]{7}"


def mutated(obj: dict[str, Any], **options: Any) -> dict[str, Any]:
    """The pod as the API server stores it after the mutating webhook: the patch applied."""
    response = assert_allowed(review_pod_mutation(review(obj), **options))
    operations = patch_of(response) if "patch" in response else []
    patched: dict[str, Any] = json_patch(copy.deepcopy(obj), operations)
    return patched


def two_containers(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    obj = pod(annotations, **spec)
    obj["spec"]["containers"] = [
        {"name": "main", "image": "trainer", "env": [{"name": "EPOCHS", "value": "3"}]},
        {"name": "logger", "image": "fluentbit"},
    ]
    return obj


def gpu_env(container: dict[str, Any]) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """(env var -> (ConfigMap, key) for the ConfigMap-keyed entries, the envFrom ConfigMaps)."""
    keyed = {
        entry["name"]: (
            entry["valueFrom"]["configMapKeyRef"]["name"],
            entry["valueFrom"]["configMapKeyRef"]["key"],
        )
        for entry in container.get("env") or []
        if "configMapKeyRef" in (entry.get("valueFrom") or {})
    }
    return keyed, [source["configMapRef"]["name"] for source in container.get("envFrom") or []]


def expected_env(prefix: str, index: int) -> tuple[dict[str, tuple[str, str]], list[str]]:
    config_map = f"{prefix}-{index}"
    return (
        {
            "NVIDIA_VISIBLE_DEVICES": (config_map, "NVIDIA_VISIBLE_DEVICES"),
            "RUNAI_NUM_OF_GPUS": (config_map, "RUNAI_NUM_OF_GPUS"),
        },
        [f"{config_map}-evar"],
    )


@pytest.mark.parametrize(
    "annotation", [{"gpu-fraction": "0.5"}, {"gpu-memory": "4096"}], ids=["fraction", "memory"]
)
def test_the_first_container_gets_the_shared_gpu_env(annotation: dict[str, str]) -> None:
    obj = two_containers(annotation)
    patched = mutated(obj)
    prefix = patched["metadata"]["annotations"][PREFIX_ANNOTATION]
    assert re.fullmatch(rf"train-0-{RANDOM_PART}", prefix), prefix
    main, logger = patched["spec"]["containers"]
    assert gpu_env(main) == expected_env(prefix, 0)
    assert main["env"][0] == {"name": "EPOCHS", "value": "3"}  # the pod's own entries stay, first
    assert logger == obj["spec"]["containers"][1]
    # Nothing else changes: the annotations are the pod's plus the prefix, the spec gets the runtime class.
    assert patched["metadata"]["annotations"] == {**annotation, PREFIX_ANNOTATION: prefix}
    assert {k: v for k, v in patched["spec"].items() if k not in ("containers", "runtimeClassName")} == {
        k: v for k, v in obj["spec"].items() if k != "containers"
    }


def test_the_named_container_gets_the_shared_gpu_env() -> None:
    obj = two_containers({"gpu-fraction": "0.25", "gpu-fraction-container-name": "logger"})
    patched = mutated(obj)
    prefix = patched["metadata"]["annotations"][PREFIX_ANNOTATION]
    main, logger = patched["spec"]["containers"]
    assert main == obj["spec"]["containers"][0]
    assert gpu_env(logger) == expected_env(prefix, 1)


def test_an_empty_container_name_means_the_first() -> None:
    patched = mutated(two_containers({"gpu-fraction": "0.5", "gpu-fraction-container-name": ""}))
    prefix = patched["metadata"]["annotations"][PREFIX_ANNOTATION]
    assert gpu_env(patched["spec"]["containers"][0]) == expected_env(prefix, 0)


def test_a_missing_container_is_refused_by_name() -> None:
    obj = two_containers({"gpu-fraction": "0.5", "gpu-fraction-container-name": "trainer"})
    message = denial(review_pod_mutation(review(obj)))
    assert message == (
        "metadata.annotations.gpu-fraction-container-name: no container named 'trainer' in spec.containers "
        "(the pod's containers: 'main', 'logger')"
    )


def test_an_init_container_is_not_a_target() -> None:
    obj = two_containers({"gpu-fraction": "0.5", "gpu-fraction-container-name": "init"})
    obj["spec"]["initContainers"] = [{"name": "init", "image": "setup"}]
    message = denial(review_pod_mutation(review(obj)))
    assert message.startswith("metadata.annotations.gpu-fraction-container-name: 'init' is an init container")
    assert "'main', 'logger'" in message


def test_a_generate_name_pod_gets_a_prefix_from_it() -> None:
    """Created from generateName, the pod has no name at admission: the prefix comes from generateName,
    and each pod gets its own."""
    obj = pod({"gpu-fraction": "0.5"}, name=None)
    obj["metadata"]["generateName"] = "sweep-trial-"
    prefixes = {mutated(obj)["metadata"]["annotations"][PREFIX_ANNOTATION] for _ in range(5)}
    assert len(prefixes) == 5
    for prefix in prefixes:
        assert re.fullmatch(rf"sweep-trial-{RANDOM_PART}", prefix), prefix


def test_a_long_or_dotted_name_makes_a_short_dns_label_prefix() -> None:
    patched = mutated(pod({"gpu-fraction": "0.5"}, name="a." + "b" * 200))
    prefix = patched["metadata"]["annotations"][PREFIX_ANNOTATION]
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", prefix)
    assert len(f"{prefix}-99") <= 63  # KAI's bound: `<prefix>-<container index>` stays a DNS label
    assert prefix.startswith("a-bbb")


def test_re_admission_changes_nothing() -> None:
    """A pod that went through the webhook (a reinvocation, or its manifest created again) keeps its
    prefix and gets no second copy of an entry."""
    once = mutated(two_containers({"gpu-fraction": "0.5", "gpu-fraction-container-name": "logger"}))
    response = assert_allowed(review_pod_mutation(review(copy.deepcopy(once))))
    assert "patch" not in response
    assert mutated(once) == once


def test_re_admission_completes_a_partial_mutation() -> None:
    once = mutated(pod({"gpu-fraction": "0.5"}))
    prefix = once["metadata"]["annotations"][PREFIX_ANNOTATION]
    container = once["spec"]["containers"][0]
    del container["envFrom"]
    container["env"].append(dict(container["env"][0]))  # a duplicate entry
    again = mutated(once)
    assert gpu_env(again["spec"]["containers"][0]) == expected_env(prefix, 0)
    assert [e["name"] for e in again["spec"]["containers"][0]["env"]] == [
        "NVIDIA_VISIBLE_DEVICES",
        "RUNAI_NUM_OF_GPUS",
    ]


def test_the_pods_own_gpu_variables_are_replaced_in_place() -> None:
    """The binder decides the device: a NVIDIA_VISIBLE_DEVICES of the pod's own would mask it."""
    obj = pod({"gpu-fraction": "0.5"})
    obj["spec"]["containers"][0]["env"] = [
        {"name": "A", "value": "1"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "B", "value": "2"},
    ]
    obj["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "creds"}}]
    container = mutated(obj)["spec"]["containers"][0]
    assert [e["name"] for e in container["env"]] == ["A", "NVIDIA_VISIBLE_DEVICES", "B", "RUNAI_NUM_OF_GPUS"]
    assert "value" not in container["env"][1]
    assert container["envFrom"][0] == {"secretRef": {"name": "creds"}}
    assert len(container["envFrom"]) == 2


def test_a_given_prefix_is_kept() -> None:
    patched = mutated(pod({"gpu-fraction": "0.5", PREFIX_ANNOTATION: "my-job.gpu"}))
    assert patched["metadata"]["annotations"][PREFIX_ANNOTATION] == "my-job.gpu"
    assert gpu_env(patched["spec"]["containers"][0]) == expected_env("my-job.gpu", 0)


@pytest.mark.parametrize(
    "prefix", ["My_Job", "-x", "x" * 250], ids=["upper case", "leading dash", "too long"]
)
def test_a_prefix_that_cannot_name_a_config_map_is_refused(prefix: str) -> None:
    message = denial(review_pod_mutation(review(pod({"gpu-fraction": "0.5", PREFIX_ANNOTATION: prefix}))))
    assert message.startswith(f"metadata.annotations.{PREFIX_ANNOTATION}: ")
    assert "cannot prefix a ConfigMap name" in message


NO_SHARED_GPU_ENV = {
    "CPU only": pod(requests={"cpu": "2"}),
    "whole GPUs": pod(limits={"nvidia.com/gpu": "1"}),
    "a MIG instance": pod(limits={"nvidia.com/mig-1g.5gb": "1"}),
    "a container name without a fraction": pod({"gpu-fraction-container-name": "nope"}),
}


@pytest.mark.parametrize("obj", NO_SHARED_GPU_ENV.values(), ids=list(NO_SHARED_GPU_ENV))
def test_pods_without_gpu_sharing_get_no_shared_gpu_env(obj: dict[str, Any]) -> None:
    patched = mutated(obj)
    assert patched["metadata"] == obj["metadata"]
    assert patched["spec"]["containers"] == obj["spec"]["containers"]


def test_other_schedulers_and_updates_are_left_alone() -> None:
    obj = pod({"gpu-fraction": "0.5", "gpu-fraction-container-name": "nope"}, scheduler="default-scheduler")
    assert "patch" not in assert_allowed(review_pod_mutation(review(obj)))
    obj = pod({"gpu-fraction": "0.5"})
    assert "patch" not in assert_allowed(review_pod_mutation(review(obj, operation="UPDATE")))


# --- Queue validation -----------------------------------------------------------------------------


def test_a_queue_with_resources_is_allowed() -> None:
    assert_allowed(review_queue_validation(review(queue({"resources": RESOURCES}), QUEUE_KIND)))
    child = queue({"parentQueue": "org", "resources": {}, "preemptMinRuntime": "10m"})
    assert_allowed(review_queue_validation(review(child, QUEUE_KIND, operation="UPDATE")))


@pytest.mark.parametrize(
    ("obj", "field", "words"),
    [
        (queue({"parentQueue": "org"}), "spec.resources", "required"),
        (queue({"resources": None}), "spec.resources", "required"),
        (queue(), "spec.resources", "required"),
        (queue({"parentQueue": "team-a", "resources": RESOURCES}), "spec.parentQueue", "its own parent"),
        (queue({"resources": RESOURCES, "preemptMinRuntime": "-5s"}), "spec.preemptMinRuntime", "negative"),
        (queue({"resources": RESOURCES, "reclaimMinRuntime": "soon"}), "spec.reclaimMinRuntime", "'soon'"),
        (queue({"resources": {"gpu": {"quota": "lots"}}}), "spec.resources.gpu.quota", "valid number"),
        (queue({"resources": RESOURCES, "priority": "high"}), "spec.priority", "integer"),
        (queue("not a spec"), "spec", "expected a mapping"),  # type: ignore[arg-type]
    ],
    ids=[
        "no resources",
        "null resources",
        "no spec",
        "own parent",
        "negative min runtime",
        "bad duration",
        "bad quota",
        "bad priority",
        "spec not a mapping",
    ],
)
def test_queue_rules_deny_naming_the_field(obj: dict[str, Any], field: str, words: str) -> None:
    message = denial(review_queue_validation(review(obj, QUEUE_KIND)))
    assert message.startswith(f"{field}: "), message
    assert words in message


def test_queue_rules_match_the_simulator() -> None:
    obj = queue({"parentQueue": "team-a", "resources": RESOURCES})
    with pytest.raises(ManifestError) as caught:
        parse_object(copy.deepcopy(obj), "queues.yaml", 1)
    message = denial(review_queue_validation(review(obj, QUEUE_KIND)))
    assert message == f"{caught.value.field}: {caught.value.message}"


def test_deleting_a_queue_is_allowed() -> None:
    assert_allowed(review_queue_validation(review(None, QUEUE_KIND, operation="DELETE")))


# --- PodGroup validation --------------------------------------------------------------------------


def test_podgroups_with_a_sub_group_forest_are_allowed() -> None:
    assert_allowed(review_podgroup_validation(review(podgroup(), PODGROUP_KIND)))
    tree = [
        {"name": "workers", "minSubGroup": 2},
        {"name": "rack-0", "minMember": 2, "parent": "workers"},
        {"name": "rack-1", "minMember": 2, "parent": "workers"},
        {"name": "leader", "minMember": 1},
    ]
    assert_allowed(review_podgroup_validation(review(podgroup(tree), PODGROUP_KIND)))


@pytest.mark.parametrize(
    ("sub_groups", "field", "words"),
    [
        ([{"name": "a"}, {"name": "a"}], "spec.subGroups[1].name", "duplicate subGroup name 'a'"),
        ([{"name": "a", "parent": "ghost"}], "spec.subGroups[0].parent", "no subGroup named 'ghost'"),
        (
            [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}],
            "spec.subGroups[0].parent",
            "cycle: a -> b -> a",
        ),
        ([{"name": "a", "parent": "a"}], "spec.subGroups[0].parent", "cycle: a -> a"),
        (
            [
                {"name": "root"},
                {"name": "x", "parent": "y"},
                {"name": "y", "parent": "z"},
                {"name": "z", "parent": "x"},
            ],
            "spec.subGroups[1].parent",
            "cycle",
        ),
        ([{"name": ""}], "spec.subGroups[0].name", "at least 1 character"),
        ([{"name": "a", "minMember": -1}], "spec.subGroups[0].minMember", "greater than or equal to 0"),
    ],
    ids=["duplicate", "missing parent", "two-cycle", "self parent", "three-cycle", "empty name", "minMember"],
)
def test_sub_group_rules_deny_naming_the_field(
    sub_groups: list[dict[str, Any]], field: str, words: str
) -> None:
    obj = podgroup(sub_groups)
    message = denial(review_podgroup_validation(review(obj, PODGROUP_KIND)))
    assert message.startswith(f"{field}: "), message
    assert words in message
    with pytest.raises(ManifestError) as caught:  # the simulator's loader says the same
        parse_object(copy.deepcopy(obj), "groups.yaml", 1)
    assert message == f"{caught.value.field}: {caught.value.message}"


def test_podgroup_schema_errors_name_the_field() -> None:
    message = denial(review_podgroup_validation(review(podgroup(minMember=0), PODGROUP_KIND)))
    assert message.startswith("spec.minMember: ")


# --- malformed reviews ----------------------------------------------------------------------------

REVIEWERS: list[Callable[..., dict[str, Any]]] = [
    review_pod_validation,
    review_pod_mutation,
    review_queue_validation,
    review_podgroup_validation,
]


def _envelope(request: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


MALFORMED: dict[str, tuple[Any, str, str]] = {
    # name: (review, uid the answer must carry, words the message must contain)
    "a list": ([1, 2], "", "expected a JSON object, got a list"),
    "null": (None, "", "expected a JSON object, got nothing"),
    "a string": ("review", "", "expected a JSON object"),
    "wrong kind": ({**_envelope({"uid": "u"}), "kind": "Pod"}, "u", "kind: expected 'AdmissionReview'"),
    "v1beta1": (
        {**_envelope({"uid": "u"}), "apiVersion": "admission.k8s.io/v1beta1"},
        "u",
        "apiVersion: expected 'admission.k8s.io/v1'",
    ),
    "no request": ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "", "request: expected"),
    "request not a mapping": (_envelope("x"), "", "request: expected a mapping"),
    "no uid": (_envelope({"operation": "CREATE", "object": {}}), "", "request.uid"),
    "empty uid": (_envelope({"uid": "", "operation": "CREATE", "object": {}}), "", "request.uid"),
    "uid not a string": (_envelope({"uid": 7, "operation": "CREATE", "object": {}}), "", "request.uid"),
    "no operation": (_envelope({"uid": "u", "object": {}}), "u", "request.operation"),
    "unknown operation": (
        _envelope({"uid": "u", "operation": "PATCH", "object": {}}),
        "u",
        "request.operation",
    ),
    "no object": (_envelope({"uid": "u", "operation": "CREATE"}), "u", "request.object: expected"),
    "object a list": (_envelope({"uid": "u", "operation": "CREATE", "object": []}), "u", "request.object"),
    "request.kind a string": (
        _envelope({"uid": "u", "operation": "CREATE", "kind": "Pod", "object": {}}),
        "u",
        "request.kind: expected a mapping",
    ),
}


@pytest.mark.parametrize("reviewer", REVIEWERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(("bad", "uid", "words"), MALFORMED.values(), ids=list(MALFORMED))
def test_malformed_reviews_are_denied_clearly(reviewer: Any, bad: Any, uid: str, words: str) -> None:
    message = denial(reviewer(copy.deepcopy(bad)), uid)
    assert message.startswith("malformed AdmissionReview: "), message
    assert words in message


@pytest.mark.parametrize(
    ("reviewer", "obj", "kind"),
    [
        (review_pod_validation, queue({"resources": RESOURCES}), QUEUE_KIND),
        (review_pod_mutation, podgroup(), PODGROUP_KIND),
        (review_queue_validation, pod(), POD_KIND),
        (review_podgroup_validation, queue({"resources": RESOURCES}), QUEUE_KIND),
    ],
    ids=["queue to pods", "podgroup to mutation", "pod to queues", "queue to podgroups"],
)
def test_objects_of_the_wrong_kind_are_denied(
    reviewer: Any, obj: dict[str, Any], kind: dict[str, str]
) -> None:
    assert "this webhook reviews" in denial(reviewer(review(obj, kind)))
    assert "this webhook reviews" in denial(reviewer(review(obj, None)))  # from the object itself


def test_a_broken_metadata_is_named() -> None:
    obj = pod({"gpu-fraction": "0.5"})
    obj["metadata"] = ["not", "a", "mapping"]
    assert denial(review_pod_validation(review(obj))).startswith("metadata: expected a mapping")
    obj["metadata"] = {"name": "p", "annotations": "gpu-fraction=0.5"}
    assert denial(review_pod_validation(review(obj))).startswith("metadata.annotations: ")
    bad_containers = pod()
    bad_containers["spec"]["containers"] = [{"name": "c", "resources": {"limits": ["nvidia.com/gpu"]}}]
    message = denial(review_pod_validation(review(bad_containers)))
    assert message.startswith("spec.containers[0].resources.limits: ")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25,
)
_keys = st.sampled_from(
    ["metadata", "spec", "annotations", "containers", "initContainers", "resources", "limits", "requests",
     "nvidia.com/gpu", "gpu-fraction", "gpu-memory", "mps", "subGroups", "name", "parent", "parentQueue",
     "schedulerName", "runtimeClassName", "kai-scheduler", "0.5"]
)  # fmt: skip
_shaped = st.recursive(
    st.none() | st.integers(-2, 3) | st.sampled_from(["0.5", "1", "kai-scheduler", "x", "true", "-1s"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anything=_json, obj=_shaped)
def test_no_input_raises_or_hits_an_internal_error(anything: Any, obj: Any) -> None:
    for reviewer in REVIEWERS:
        for candidate in (anything, _envelope(anything), review(obj, None)):
            answer = reviewer(candidate)
            response = answer["response"]
            assert isinstance(response["allowed"], bool)
            if not response["allowed"]:
                assert "internal error" not in response["status"]["message"], response["status"]["message"]
            json.dumps(answer)


# --- the HTTPS server -----------------------------------------------------------------------------


def _make_certificate(directory: Path, common_name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "2", "-subj", f"/CN={common_name}",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout", str(directory / "tls.key"), "-out", str(directory / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two self-signed certificate pairs (`first/`, `second/`) for 127.0.0.1, made with `openssl`."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command line is not installed, so no test certificate can be made")
    root = tmp_path_factory.mktemp("certs")
    _make_certificate(root / "first", "kai-admission-1")
    _make_certificate(root / "second", "kai-admission-2")
    return root


def _mounted_secret(root: Path, source: Path) -> Path:
    """A directory laid out like a mounted Secret: tls.crt -> ..data/tls.crt, ..data -> a versioned dir."""
    mount = root / "mount"
    mount.mkdir()
    _swap_secret(mount, source, "v1")
    for name in ("tls.crt", "tls.key"):
        (mount / name).symlink_to(Path("..data") / name)
    return mount


def _swap_secret(mount: Path, source: Path, version: str) -> None:
    """What the kubelet does when the Secret changes: write a new version, swap `..data` atomically."""
    versioned = mount / f"..{version}"
    versioned.mkdir()
    for name in ("tls.crt", "tls.key"):
        shutil.copy(source / name, versioned / name)
    link = mount / "..data_tmp"
    link.symlink_to(versioned.name)
    os.replace(link, mount / "..data")


@pytest.fixture
def server(certificates: Path, tmp_path: Path) -> Iterator[WebhookServer]:
    webhook = WebhookServer(
        _mounted_secret(tmp_path, certificates / "first"), host="127.0.0.1", port=0, reload_interval=0.05
    )
    webhook.start()
    try:
        yield webhook
    finally:
        webhook.stop()


def _client_context(certificates: Path, pair: str = "first") -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certificates / pair / "tls.crt"))


def _post(
    server: WebhookServer, context: ssl.SSLContext, path: str, body: bytes
) -> tuple[int, dict[str, Any] | str, bytes]:
    """POST over HTTPS; (status, decoded body, the server certificate in DER)."""
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        data = answer.read()
        peer = connection.sock.getpeercert(binary_form=True)
        content_type = answer.getheader("Content-Type", "")
        decoded: dict[str, Any] | str = json.loads(data) if "json" in content_type else data.decode()
        return answer.status, decoded, peer or b""
    finally:
        connection.close()


def _der(certificates: Path, pair: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert((certificates / pair / "tls.crt").read_text())


def test_the_five_webhooks_over_https(server: WebhookServer, certificates: Path) -> None:
    context = _client_context(certificates)
    cases = [
        (VALIDATE_POD_PATH, review(pod({"gpu-fraction": "1.5"})), False, "metadata.annotations.gpu-fraction"),
        (VALIDATE_POD_PATH, review(pod({"gpu-fraction": "0.5"})), True, None),
        (MUTATE_POD_PATH, review(pod({"gpu-memory": "1024"})), True, None),
        (VALIDATE_QUEUE_PATH, review(queue({}), QUEUE_KIND), False, "spec.resources"),
        (VALIDATE_QUEUE_PATH, review(queue({"resources": RESOURCES}), QUEUE_KIND), True, None),
        (
            VALIDATE_PODGROUP_PATH,
            review(podgroup([{"name": "a", "parent": "b"}]), PODGROUP_KIND),
            False,
            "spec.subGroups[0].parent",
        ),
        (
            VALIDATE_PODGROUP_PATH,
            review(podgroup([{"name": "a", "minMember": 1}]), PODGROUP_KIND),
            True,
            None,
        ),
        (VALIDATE_TOPOLOGY_PATH, review(topology("rack", "rack"), TOPOLOGY_KIND), False, "spec.levels"),
        (VALIDATE_TOPOLOGY_PATH, review(topology("rack", "node"), TOPOLOGY_KIND), True, None),
    ]
    for path, body, allowed, field in cases:
        status, answer, _ = _post(server, context, path, json.dumps(body).encode())
        assert status == 200
        assert isinstance(answer, dict)
        if allowed:
            assert_allowed(answer)
        else:
            assert denial(answer).startswith(f"{field}: ")
    _, mutated, _ = _post(
        server, context, MUTATE_POD_PATH, json.dumps(review(pod({"gpu-memory": "1"}))).encode()
    )
    assert isinstance(mutated, dict)
    operations = patch_of(mutated["response"])
    assert operations[0] == {"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"}
    assert {op["path"] for op in operations[1:]} == {
        "/metadata/annotations/runai~1shared-gpu-configmap",
        "/spec/containers/0/env",
        "/spec/containers/0/envFrom",
    }


def test_the_server_answers_bad_requests_without_failing(server: WebhookServer, certificates: Path) -> None:
    context = _client_context(certificates)
    status, answer, _ = _post(server, context, VALIDATE_POD_PATH, b"{not json")
    assert status == 400
    assert isinstance(answer, dict)
    assert denial(answer, "").startswith("malformed AdmissionReview: not JSON")
    status, answer, _ = _post(server, context, VALIDATE_POD_PATH, b'["a list"]')
    assert status == 200
    assert isinstance(answer, dict)
    assert "expected a JSON object" in denial(answer, "")
    status, text, _ = _post(server, context, "/validate-something-else", b"{}")
    assert status == 404
    assert isinstance(text, str) and VALIDATE_POD_PATH in text
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    connection.request("GET", VALIDATE_POD_PATH)
    assert connection.getresponse().status == 405
    connection.close()
    # A client that does not speak TLS gets nowhere, and the server keeps serving.
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as plain:
        plain.sendall(b"POST /validate--v1-pod HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
        plain.recv(1024)
    status, answer, _ = _post(server, context, VALIDATE_POD_PATH, json.dumps(review(pod())).encode())
    assert status == 200 and isinstance(answer, dict)
    assert_allowed(answer)


def test_keep_alive_connections_serve_several_reviews(server: WebhookServer, certificates: Path) -> None:
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=_client_context(certificates))
    try:
        for uid in ("a", "b", "c"):
            connection.request("POST", VALIDATE_POD_PATH, body=json.dumps(review(pod(), uid=uid)).encode())
            answer = json.loads(connection.getresponse().read())
            assert_allowed(answer, uid)
    finally:
        connection.close()


def test_a_renewed_certificate_is_picked_up(
    server: WebhookServer, certificates: Path, tmp_path: Path
) -> None:
    body = json.dumps(review(pod())).encode()
    trust_both = ssl.create_default_context(cafile=str(certificates / "first" / "tls.crt"))
    trust_both.load_verify_locations(cafile=str(certificates / "second" / "tls.crt"))
    _, _, peer = _post(server, trust_both, VALIDATE_POD_PATH, body)
    assert peer == _der(certificates, "first")

    # A half-written update (a key that does not match the certificate) keeps the current pair.
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(certificates / "second" / "tls.crt", broken / "tls.crt")
    shutil.copy(certificates / "first" / "tls.key", broken / "tls.key")
    _swap_secret(tmp_path / "mount", broken, "v2")
    time.sleep(0.1)
    status, _, peer = _post(server, trust_both, VALIDATE_POD_PATH, body)
    assert (status, peer) == (200, _der(certificates, "first"))

    _swap_secret(tmp_path / "mount", certificates / "second", "v3")
    deadline = time.monotonic() + 5
    while peer != _der(certificates, "second") and time.monotonic() < deadline:
        time.sleep(0.06)
        status, _, peer = _post(server, trust_both, VALIDATE_POD_PATH, body)
        assert status == 200
    assert peer == _der(certificates, "second")
    assert server.reloader is not None and server.reloader.reloads == 1


def test_start_fails_without_a_certificate(tmp_path: Path) -> None:
    webhook = WebhookServer(tmp_path, host="127.0.0.1", port=0)
    with pytest.raises(FileNotFoundError):
        webhook.start()
    assert not webhook.running


def test_the_reloader_refuses_a_broken_first_pair(certificates: Path, tmp_path: Path) -> None:
    shutil.copy(certificates / "first" / "tls.crt", tmp_path / "tls.crt")
    (tmp_path / "tls.key").write_text("not a key\n")
    with pytest.raises(ssl.SSLError):
        CertificateReloader(tmp_path)


def test_bodies_are_read_whatever_the_framing(server: WebhookServer, certificates: Path) -> None:
    """Chunked bodies are read; an unknown path does not leave its body to be taken for the next request."""
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=_client_context(certificates))
    body = json.dumps(review(pod({"gpu-fraction": "2"}), uid="chunked")).encode()
    try:
        connection.request("POST", "/nowhere", body=b'{"a": 1}')
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 404
        connection.request("POST", VALIDATE_POD_PATH, body=iter([body[:10], body[10:]]), encode_chunked=True)
        answer = connection.getresponse()
        assert answer.status == 200
        assert denial(json.loads(answer.read()), "chunked").startswith("metadata.annotations.gpu-fraction")
    finally:
        connection.close()
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=_client_context(certificates))
    try:
        connection.putrequest("POST", VALIDATE_POD_PATH)
        connection.endheaders()
        assert connection.getresponse().status == 411
    finally:
        connection.close()
