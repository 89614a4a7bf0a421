"""Strict input: unknown fields refused as `kubectl apply --validate=strict` refuses them, valid fields the
scheduler ignores accepted, and the warnings about keys one edit away from KAI's and Queue fields left
out."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_scheduler.api import objects as o
from kai_scheduler.api.crd_models import BindRequest
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.strict import (
    IGNORED_FIELDS,
    near_miss_keys,
    notices,
    omitted_queue_fields,
    unknown_field,
)


def _with(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`doc` with `value` set at a dotted path (`[i]` steps into lists), creating mappings on the way."""
    doc = copy.deepcopy(doc)
    node: Any = doc
    steps = path.replace("[", ".[").split(".")
    for step in steps[:-1]:
        node = node[int(step[1:-1])] if step.startswith("[") else node.setdefault(step, {})
    node[steps[-1]] = value
    return doc


def _topology(label_field: str = "nodeLabel") -> dict[str, Any]:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "net"},
        "spec": {"levels": [{label_field: "zone"}]},
    }


def _priority_class() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "urgent"},
        "value": 200,
    }


# The typos of issue #14 and their like, in every kind: (document, where the typo is, the field meant).
TYPOS = [
    (_with(queue_manifest("q"), "spec.resources.gpu.qouta", 8), "spec.resources.gpu.qouta", "quota"),
    (_with(queue_manifest("q"), "spec.resources.gpu.limt", 2), "spec.resources.gpu.limt", "limit"),
    (_with(queue_manifest("q"), "spec.parentQeueu", "d"), "spec.parentQeueu", "parentQueue"),
    (_with(queue_manifest("q"), "spec.resources.gpus", {}), "spec.resources.gpus", "gpu"),
    (_with(pod_group_manifest("g"), "spec.minMembers", 3), "spec.minMembers", "minMember"),
    (_with(pod_group_manifest("g"), "spec.min_member", 3), "spec.min_member", "minMember"),
    (
        _with(pod_group_manifest("g"), "spec.subGroups", [{"name": "a", "minMemeber": 2}]),
        "spec.subGroups[0].minMemeber",
        "minMember",
    ),
    (_topology("nodeLable"), "spec.levels[0].nodeLable", "nodeLabel"),
    (_with(_priority_class(), "globalDefualt", True), "globalDefualt", "globalDefault"),
    (_with(node_manifest("n"), "status.allocateble", {}), "status.allocateble", "allocatable"),
    (_with(node_manifest("n"), "spec.taint", []), "spec.taint", "taints"),
    (_with(pod_manifest("p"), "metadata.lables", {}), "metadata.lables", "labels"),
    (_with(pod_manifest("p"), "spec.schedulername", "x"), "spec.schedulername", "schedulerName"),
    (_with(pod_manifest("p"), "spec.priorityClass", "x"), "spec.priorityClass", "priorityClassName"),
    (_with(pod_manifest("p"), "spec.nodeSelecter", {}), "spec.nodeSelecter", "nodeSelector"),
    (
        _with(pod_manifest("p"), "spec.containers[0].resources.request", {}),
        "spec.containers[0].resources.request",
        "requests",
    ),
    (
        _with(pod_manifest("p"), "spec.tolerations", [{"key": "k", "efect": "NoSchedule"}]),
        "spec.tolerations[0].efect",
        "effect",
    ),
    (
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "gpu"},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClasName": "gpu"}}]}},
        },
        "spec.devices.requests[0].exactly.deviceClasName",
        "deviceClassName",
    ),
]


@pytest.mark.parametrize(("doc", "path", "meant"), TYPOS, ids=[path for _, path, _ in TYPOS])
def test_an_unknown_field_is_refused_with_its_path_and_the_field_meant(
    doc: dict[str, Any], path: str, meant: str
) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_object(doc, "in.yaml", 4, strict=True)
    error = caught.value
    assert error.field == path
    assert f'did you mean "{meant}"?' in error.message
    assert str(error).startswith("in.yaml: document 4 (")


def test_a_field_nothing_is_close_to_is_refused_without_a_suggestion() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_object(_with(queue_manifest("q"), "spec.colour", "red"), "in.yaml", 1, strict=True)
    assert caught.value.field == "spec.colour"
    assert caught.value.message == 'unknown field "colour"'


def test_without_strict_unknown_fields_are_ignored_as_before() -> None:
    # Live mode reads objects the API server has already validated (its strict checks come later).
    parsed = parse_object(_with(pod_group_manifest("g"), "spec.minMembers", 3), "live", 1)
    assert isinstance(parsed, o.PodGroup)


def test_values_kai_accepts_stay_accepted() -> None:
    # KAI's Queue schema and webhook take negative numbers; its own tests use -1 weights.
    doc = queue_manifest("q", gpu=-1, gpu_limit=-1, gpu_weight=-1, cpu=-2.5, memory_weight=0)
    parsed = parse_object(doc, "in.yaml", 1, strict=True)
    assert isinstance(parsed, o.Queue)
    assert parsed.spec.resources.gpu.over_quota_weight == -1


def test_valid_kubernetes_fields_the_scheduler_ignores_are_accepted() -> None:
    pod = pod_manifest("p")
    pod["metadata"].update(
        generateName="p-",
        resourceVersion="12",
        finalizers=["x"],
        managedFields=[{"manager": "kubectl"}],
        ownerReferences=[
            {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u", "blockOwnerDeletion": True}
        ],
    )
    pod["spec"].update(
        restartPolicy="Never",
        serviceAccountName="sa",
        volumes=[{"name": "data", "emptyDir": {}}],
        topologySpreadConstraints=[],
        securityContext={"runAsUser": 1000},
        terminationGracePeriodSeconds=30,
        runtimeClassName="nvidia",
    )
    pod["spec"]["containers"][0].update(
        image="trainer",
        command=["python"],
        env=[{"name": "A", "value": "1", "valueFrom": None}],
        volumeMounts=[{"name": "data", "mountPath": "/data"}],
        livenessProbe={"exec": {"command": ["true"]}},
        imagePullPolicy="IfNotPresent",
    )
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    pod["status"] = {"phase": "Running", "podIP": "10.0.0.1", "conditions": [], "containerStatuses": []}
    node = node_manifest("n")
    node["spec"].update(podCIDR="10.0.0.0/24", providerID="aws://x")
    node["status"].update(
        nodeInfo={"kubeletVersion": "v1.34.0"},
        addresses=[{"type": "InternalIP", "address": "10.0.0.1"}],
        conditions=[{"type": "Ready", "status": "True", "lastHeartbeatTime": None, "reason": "KubeletReady"}],
    )
    priority = {**_priority_class(), "description": "urgent work", "preemptionPolicy": "Never"}
    for doc in (pod, node, priority):
        parse_object(doc, "in.yaml", 1, strict=True)


def test_kai_status_fields_are_accepted() -> None:
    queue = queue_manifest("q")
    queue["status"] = {
        "conditions": [{"type": "OverQuota", "status": "False", "lastProbeTime": None}],
        "childQueues": [],
        "allocated": {"nvidia.com/gpu": "1"},
    }
    group = pod_group_manifest("g")
    group["spec"].update(parallelism=2, completions=2, backoffLimit=6, markUnschedulable=True)
    group["status"] = {
        "phase": "Running",
        "schedulingConditions": [
            {
                "type": "UnschedulableOnNodePool",
                "nodePool": "default",
                "reasons": [
                    {"reason": "OverLimit", "details": {"queueDetails": {"queueResourceLimits": {}}}}
                ],
            }
        ],
    }
    for doc in (queue, group):
        parse_object(doc, "in.yaml", 1, strict=True)


def test_the_checks_cover_kai_kinds_the_simulator_does_not_load() -> None:
    # The live edge checks BindRequests with the same function.
    request = {
        "apiVersion": "scheduling.run.ai/v1alpha2",
        "kind": "BindRequest",
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {"podName": "p", "selectedNode": "n0", "receivedGPU": {"count": 1, "portoin": "0.50"}},
    }
    found = unknown_field(BindRequest, request)
    assert found is not None
    assert (found.path, found.suggestion) == ("spec.receivedGPU.portoin", "portion")


@pytest.mark.parametrize("model", list(IGNORED_FIELDS), ids=lambda model: model.__name__)
def test_ignored_fields_are_not_also_modelled(model: type[BaseModel]) -> None:
    modelled = {info.alias or name for name, info in model.model_fields.items()}
    assert not modelled & set(IGNORED_FIELDS[model])


# --- warnings ------------------------------------------------------------------------------------


def test_a_node_label_one_edit_from_the_gpu_memory_label_is_a_warning() -> None:
    node = parse_object(node_manifest("n", labels={"nvidia.com/gpu.memroy": "81920"}), "in.yaml", 1)
    assert [n.path for n in notices(node)] == ["metadata.labels.nvidia.com/gpu.memroy"]


@pytest.mark.parametrize(
    ("section", "key", "meant"),
    [
        ("annotations", "gpu-fractoin", "gpu-fraction"),
        ("annotations", "gpu-memroy", "gpu-memory"),
        ("annotations", "pod-group-nam", "pod-group-name"),
        ("labels", "kai.scheduler/queeu", "kai.scheduler/queue"),
        ("labels", "kai.scheduler/queues", "kai.scheduler/queue"),
        ("labels", "kai.scheduler/preemptibilty", "kai.scheduler/preemptibility"),
    ],
)
def test_a_key_one_edit_from_a_kai_key_is_a_warning_naming_both(section: str, key: str, meant: str) -> None:
    pod = parse_object(pod_manifest("p", **{section: {key: "0.5"}}), "in.yaml", 1)  # type: ignore[arg-type]
    found = near_miss_keys(pod.metadata)
    assert [(n.path, n.message) for n in found] == [
        (f"metadata.{section}.{key}", f'"{key}" is not a key KAI reads; did you mean "{meant}"?')
    ]


@pytest.mark.parametrize("key", ["gpu-fraction", "app", "team", "gpu-frxxtion", "kai.scheduler/queue"])
def test_kai_keys_and_unrelated_keys_are_no_warning(key: str) -> None:
    annotations = {key: "0.5"} if key.startswith("gpu") else {}
    labels = {} if key.startswith("gpu") else {key: "q"}
    pod = parse_object(pod_manifest("p", annotations=annotations, labels=labels), "in.yaml", 1)
    assert near_miss_keys(pod.metadata) == []


def _queue(resources: dict[str, Any]) -> o.Queue:
    doc = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"}}
    parsed = parse_object({**doc, "spec": {"resources": resources}}, "in.yaml", 1, strict=True)
    assert isinstance(parsed, o.Queue)
    return parsed


def test_queue_fields_left_out_read_as_zero_as_kai_reads_them() -> None:
    queue = _queue({"gpu": {"quota": 2}})
    assert (queue.spec.resources.gpu.limit, queue.spec.resources.gpu.over_quota_weight) == (0, 0)
    assert queue.spec.resources.cpu == o.QueueResource(quota=0, limit=0, over_quota_weight=0)


def test_a_queue_field_left_out_that_changes_the_answer_is_a_warning() -> None:
    queue = _queue({"gpu": {"quota": 2}, "cpu": {"quota": -1, "limit": -1}, "memory": {"quota": -1}})
    assert [(n.path, n.message) for n in omitted_queue_fields(queue)] == [
        (
            "spec.resources.gpu.limit",
            "not set: KAI reads 0, which blocks gpu for this queue (write -1 for no limit)",
        ),
        (
            "spec.resources.gpu.overQuotaWeight",
            "not set: KAI reads 0, so the queue gets no gpu above its quota (write 1 to share what others "
            "leave idle)",
        ),
        # cpu: a quota of -1 (everything) leaves nothing above it, so the weight does not matter.
        (
            "spec.resources.memory.limit",
            "not set: KAI reads 0, which blocks memory for this queue (write -1 for no limit)",
        ),
    ]


def test_a_queue_resource_left_out_is_a_warning() -> None:
    queue = _queue({"gpu": {"quota": 1, "limit": -1, "overQuotaWeight": 1}})
    assert [n.path for n in notices(queue)] == ["spec.resources.cpu", "spec.resources.memory"]
    assert "a limit of 0 blocks cpu" in notices(queue)[0].message


def test_a_queue_with_every_field_written_has_no_warning() -> None:
    assert notices(parse_object(queue_manifest("q"), "in.yaml", 1)) == []


def test_a_queue_without_resources_is_refused_as_kais_webhook_refuses_it() -> None:
    doc = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"}, "spec": {}}
    with pytest.raises(ManifestError) as caught:
        parse_object(doc, "in.yaml", 1, strict=True)
    assert caught.value.field == "spec.resources"


def test_config_maps_and_storage_objects_as_a_cluster_holds_them_are_accepted() -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "team"},
        "data": {"a": "1"},
        "binaryData": {},
        "immutable": True,
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "c"},
        "spec": {
            "storageClassName": "local",
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": "1Gi"}},
            "selector": {"matchLabels": {"a": "b"}},
        },
        "status": {"phase": "Pending"},
    }
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv"},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "storageClassName": "local",
            "local": {"path": "/mnt/disks/ssd1"},
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "c"},
        },
        "status": {"phase": "Bound"},
    }
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local"},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "parameters": {"type": "ssd"},
        "allowVolumeExpansion": True,
    }
    pod = pod_manifest("p")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}, "secret": None}]
    pod["spec"]["containers"][0]["env"] = [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]
    for doc in (config_map, claim, volume, storage_class, pod):
        parse_object(doc, "in.yaml", 1, strict=True)
    found = unknown_field(o.StorageClass, _with(storage_class, "volumeBindingMod", "Immediate"))
    assert found is not None and found.suggestion == "volumeBindingMode"
