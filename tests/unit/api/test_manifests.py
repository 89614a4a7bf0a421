"""One document to one validated object; every rejection names the file, document, object and field."""

from __future__ import annotations

import copy
import pickle
from fractions import Fraction
from typing import Any

import pytest

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import object_key, object_ref, parse_object
from kai_scheduler.api.objects import Node, Pod, PodGroup, PriorityClass, Queue, Topology

SOURCE = "examples/x.yaml"


def pod(
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": requests if requests is not None else {"cpu": "1"}}
    if limits is not None:
        resources["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "a-0", "annotations": annotations or {}, "labels": labels or {}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "resources": resources}]},
    }


def queue(name: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def pod_group(sub_groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "team"},
        "spec": {"minMember": 1, "queue": "q", "subGroups": sub_groups},
    }


def topology(*labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "net"},
        "spec": {"levels": [{"nodeLabel": label} for label in labels]},
    }


def rejection(doc: Any, index: int = 3) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        parse_object(doc, SOURCE, index)
    return caught.value


def assert_rejected(doc: Any, field: str, *phrases: str, ref: str = "Pod default/a-0") -> ManifestError:
    """The error is one line that starts with file, document, object and field, then says what is wrong."""
    error = rejection(doc)
    text = str(error)
    assert "\n" not in text
    assert text.startswith(f"{SOURCE}: document 3 ({ref}): {field}: "), text
    assert error.field == field
    for phrase in phrases:
        assert phrase in error.message, text
    return error


# --- valid objects ------------------------------------------------------------------------------


def test_parses_every_supported_kind() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "8"}},
    }
    priority = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "p"},
        "value": 7,
    }
    parsed = [
        parse_object(doc, SOURCE, 1) for doc in (node, pod(), queue(), pod_group([]), priority, topology("a"))
    ]
    assert [type(obj) for obj in parsed] == [Node, Pod, Queue, PodGroup, PriorityClass, Topology]


def test_real_world_pod_with_fields_the_scheduler_does_not_read_loads() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer-0",
            "namespace": "ml",
            "labels": {"app": "trainer", "kai.scheduler/queue": "research"},
            "annotations": {"gpu-fraction": "0.5", "prometheus.io/scrape": "true"},
            "generateName": "trainer-",
            "resourceVersion": "12345",
            "managedFields": [{"manager": "kubectl", "operation": "Update"}],
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "restartPolicy": "Never",
            "serviceAccountName": "trainer",
            "securityContext": {"runAsUser": 1000, "fsGroup": 2000},
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.01-py3",
                    "command": ["python", "train.py"],
                    "env": [{"name": "EPOCHS", "value": "10"}],
                    "ports": [{"containerPort": 8080}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                    "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                }
            ],
        },
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
    }
    obj = parse_object(doc, SOURCE, 1)
    assert isinstance(obj, Pod)
    assert obj.key == "ml/trainer-0"
    assert obj.resource_requests() == {"cpu": Fraction(1, 2), "memory": Fraction(2 * 2**30)}


@pytest.mark.parametrize(
    "annotations",
    [
        {"gpu-fraction": "0.5"},
        {"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"},
        {"gpu-memory": "4096", "mps": "true"},
        {"mps": "false"},
        {"simulation.kai.scheduler/arrival": "90s", "simulation.kai.scheduler/duration": "1.5"},
    ],
)
def test_valid_gpu_sharing_and_simulation_annotations_load(annotations: dict[str, str]) -> None:
    assert isinstance(parse_object(pod(annotations=annotations), SOURCE, 1), Pod)


def test_object_ref_and_key_default_the_namespace_of_namespaced_kinds_only() -> None:
    pod_obj = parse_object(pod(), SOURCE, 1)
    queue_obj = parse_object({**queue(), "metadata": {"name": "team-a", "namespace": "ignored"}}, SOURCE, 1)
    assert object_ref(pod_obj) == "Pod default/a-0"
    assert object_key(pod_obj) == ("Pod", "default", "a-0")
    assert object_ref(queue_obj) == "Queue team-a"
    assert object_key(queue_obj) == ("Queue", "", "team-a")


# --- documents that are not objects we know -----------------------------------------------------


@pytest.mark.parametrize("doc", [["a", "b"], "just text", 42])
def test_a_document_that_is_not_a_mapping_is_rejected(doc: Any) -> None:
    error = rejection(doc)
    assert str(error).startswith(f"{SOURCE}: document 3: expected a mapping with apiVersion and kind")


def test_unknown_kind_names_it_and_lists_the_supported_ones() -> None:
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    text = str(rejection(doc))
    assert text.startswith(f"{SOURCE}: document 3 (Deployment web): unsupported kind apps/v1 Deployment; ")
    assert "expected one of: v1 Node, v1 Pod, scheduling.run.ai/v2 Queue" in text


def test_known_kind_with_a_wrong_api_version_names_the_right_one() -> None:
    doc = {**queue(), "apiVersion": "scheduling.run.ai/v1"}
    assert_rejected(
        doc, "apiVersion", "scheduling.run.ai/v1", "expected scheduling.run.ai/v2", ref="Queue team-a"
    )


@pytest.mark.parametrize(("missing", "field"), [("kind", "kind"), ("apiVersion", "apiVersion")])
def test_missing_api_version_or_kind_is_named(missing: str, field: str) -> None:
    doc = pod()
    del doc[missing]
    error = rejection(doc)
    assert error.field == field
    assert "missing" in error.message


# --- schema errors ------------------------------------------------------------------------------


def test_invalid_quantity_names_the_full_field_path() -> None:
    error = assert_rejected(pod(requests={"cpu": "abc"}), "spec.containers[0].resources.requests.cpu")
    assert str(error).endswith("'abc' is not a valid quantity (examples: 500m, 2, 1.5, 1Gi, 1G, 2e3)")


def test_resource_names_with_dots_stay_readable_in_the_path() -> None:
    assert_rejected(
        pod(requests={"nvidia.com/gpu": "lots"}),
        "spec.containers[0].resources.requests.nvidia.com/gpu",
        "'lots'",
    )


def test_missing_name_is_a_required_field() -> None:
    doc = pod()
    del doc["metadata"]["name"]
    assert_rejected(doc, "metadata.name", "required field is missing", ref="Pod")


def test_unquoted_numbers_in_annotations_get_a_hint_to_quote_them() -> None:
    doc = pod()
    doc["metadata"]["annotations"] = {"gpu-fraction": 0.5}
    assert_rejected(doc, "metadata.annotations.gpu-fraction", "expected a string", 'quote it: "0.5"')


def test_a_list_where_a_mapping_belongs_says_so_without_class_names() -> None:
    doc = pod()
    doc["spec"] = ["oops"]
    error = assert_rejected(doc, "spec", "expected a mapping, got a list")
    assert "PodSpec" not in str(error)


def test_enum_values_show_the_offending_input() -> None:
    doc = pod()
    doc["status"] = {"phase": "Sleeping"}
    assert_rejected(doc, "status.phase", "'Sleeping'")


# --- pods: GPU sharing annotations --------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.5", "half", "nan", "0_5"])
def test_gpu_fraction_must_be_strictly_between_zero_and_one(value: str) -> None:
    assert_rejected(
        pod(annotations={"gpu-fraction": value}), "metadata.annotations.gpu-fraction", repr(value)
    )


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "4Gi", "lots"])
def test_gpu_memory_must_be_a_positive_whole_number_of_mib(value: str) -> None:
    assert_rejected(
        pod(annotations={"gpu-memory": value}), "metadata.annotations.gpu-memory", "MiB", repr(value)
    )


def test_gpu_fraction_and_gpu_memory_are_mutually_exclusive() -> None:
    doc = pod(annotations={"gpu-fraction": "0.5", "gpu-memory": "1024"})
    assert_rejected(doc, "metadata.annotations", "gpu-fraction and gpu-memory cannot both be set")


@pytest.mark.parametrize("section", ["requests", "limits"])
@pytest.mark.parametrize("annotation", [{"gpu-fraction": "0.5"}, {"gpu-memory": "2048"}])
def test_shared_gpu_annotation_cannot_be_combined_with_whole_gpus(
    section: str, annotation: dict[str, str]
) -> None:
    resources = {"nvidia.com/gpu": "1"}
    doc = pod(annotations=annotation, requests=resources if section == "requests" else {}, limits=resources)
    field = "spec.containers[0].resources.requests.nvidia.com/gpu"
    assert_rejected(doc, field if section == "requests" else field.replace("requests", "limits"), *annotation)


def test_whole_gpus_in_an_init_container_also_conflict_with_a_fraction() -> None:
    doc = pod(annotations={"gpu-fraction": "0.5"})
    doc["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]
    assert_rejected(doc, "spec.initContainers[0].resources.requests.nvidia.com/gpu", "gpu-fraction")


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_num_devices_must_be_a_positive_integer(value: str) -> None:
    doc = pod(annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": value})
    assert_rejected(
        doc, "metadata.annotations.gpu-fraction-num-devices", "positive whole number", repr(value)
    )


def test_num_devices_requires_a_fraction_or_memory() -> None:
    doc = pod(annotations={"gpu-fraction-num-devices": "2"})
    assert_rejected(
        doc, "metadata.annotations.gpu-fraction-num-devices", "requires a gpu-fraction or gpu-memory"
    )


def test_mps_requires_a_fraction_or_memory() -> None:
    assert_rejected(pod(annotations={"mps": "true"}), "metadata.annotations.mps", "requires a gpu-fraction")


# --- pods: labels and simulation annotations ----------------------------------------------------


@pytest.mark.parametrize("value", ["high", "1.5", ""])
def test_task_priority_label_must_be_an_integer(value: str) -> None:
    doc = pod(labels={"kai.scheduler/task-priority": value})
    assert_rejected(doc, "metadata.labels.kai.scheduler/task-priority", "must be an integer")


def test_task_priority_label_may_be_negative() -> None:
    assert isinstance(parse_object(pod(labels={"kai.scheduler/task-priority": "-3"}), SOURCE, 1), Pod)


@pytest.mark.parametrize("key", ["simulation.kai.scheduler/arrival", "simulation.kai.scheduler/duration"])
@pytest.mark.parametrize(
    ("value", "phrase"), [("soon", "not a valid duration"), ("-5s", "must not be negative")]
)
def test_simulation_annotations_must_be_non_negative_durations(key: str, value: str, phrase: str) -> None:
    assert_rejected(pod(annotations={key: value}), f"metadata.annotations.{key}", phrase, repr(value))


def test_simulation_arrival_is_checked_on_pod_groups_too() -> None:
    doc = pod_group([])
    doc["metadata"]["annotations"] = {"simulation.kai.scheduler/arrival": "later"}
    assert_rejected(
        doc, "metadata.annotations.simulation.kai.scheduler/arrival", "'later'", ref="PodGroup team/job"
    )


# --- pods: resource amounts ---------------------------------------------------------------------


@pytest.mark.parametrize("resource", ["cpu", "memory", "nvidia.com/gpu"])
def test_negative_requests_are_rejected(resource: str) -> None:
    field = f"spec.containers[0].resources.requests.{resource}"
    assert_rejected(pod(requests={resource: "-1"}), field, "must not be negative", "-1")


def test_fractional_gpu_request_is_rejected_with_a_pointer_to_gpu_fraction() -> None:
    field = "spec.containers[0].resources.requests.nvidia.com/gpu"
    assert_rejected(
        pod(requests={"nvidia.com/gpu": "0.5"}), field, "whole number", "0.5", "gpu-fraction annotation"
    )


def test_fractional_mig_request_is_rejected() -> None:
    field = "spec.containers[0].resources.requests.nvidia.com/mig-1g.5gb"
    assert_rejected(pod(requests={"nvidia.com/mig-1g.5gb": "500m"}), field, "whole number")


def test_fractional_cpu_and_memory_are_fine() -> None:
    assert isinstance(parse_object(pod(requests={"cpu": "250m", "memory": "1.5Gi"}), SOURCE, 1), Pod)


def test_request_above_limit_is_rejected() -> None:
    doc = pod(requests={"cpu": "2"}, limits={"cpu": "1"})
    assert_rejected(
        doc, "spec.containers[0].resources.requests.cpu", "must not exceed the limit", "2 vs limit 1"
    )


def test_extended_resource_request_must_equal_its_limit() -> None:
    doc = pod(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "2"})
    assert_rejected(doc, "spec.containers[0].resources.requests.nvidia.com/gpu", "must equal the limit")


def test_limits_stand_in_for_missing_requests() -> None:
    obj = parse_object(pod(requests={}, limits={"nvidia.com/gpu": "2"}), SOURCE, 1)
    assert isinstance(obj, Pod)
    assert obj.resource_requests() == {"nvidia.com/gpu": 2}


def test_negative_node_allocatable_is_rejected() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "-8"}},
    }
    assert_rejected(doc, "status.allocatable.cpu", "must not be negative", ref="Node n0")


# --- queues -------------------------------------------------------------------------------------


def test_a_queue_cannot_be_its_own_parent() -> None:
    assert_rejected(queue(parentQueue="team-a"), "spec.parentQueue", "its own parent", ref="Queue team-a")


def test_queue_quotas_may_be_any_float_and_minus_one_means_unlimited() -> None:
    resources = {
        "gpu": {"quota": 2.5, "limit": -1, "overQuotaWeight": 0},
        "cpu": {"quota": -1, "limit": 1e9, "overQuotaWeight": -3},
        "memory": {"quota": 0, "limit": 0, "overQuotaWeight": 1},
    }
    obj = parse_object(queue(parentQueue="dept", resources=resources), SOURCE, 1)
    assert isinstance(obj, Queue)
    assert obj.spec.resources.gpu.quota == 2.5
    assert obj.spec.resources.cpu.quota == -1


def test_queue_min_runtimes_must_be_durations() -> None:
    assert_rejected(
        queue(preemptMinRuntime="a while"), "spec.preemptMinRuntime", "'a while'", ref="Queue team-a"
    )
    assert isinstance(parse_object(queue(reclaimMinRuntime="5m"), SOURCE, 1), Queue)


# --- pod groups ---------------------------------------------------------------------------------


def test_valid_sub_group_tree_loads() -> None:
    subs = [
        {"name": "root"},
        {"name": "a", "parent": "root", "minMember": 1},
        {"name": "b", "parent": "root", "minMember": 1},
    ]
    obj = parse_object(pod_group(subs), SOURCE, 1)
    assert isinstance(obj, PodGroup)
    assert [sub.parent for sub in obj.spec.sub_groups] == [None, "root", "root"]


def test_sub_group_names_must_be_unique() -> None:
    subs = [{"name": "a"}, {"name": "b"}, {"name": "a"}]
    assert_rejected(
        pod_group(subs), "spec.subGroups[2].name", "duplicate subGroup name 'a'", ref="PodGroup team/job"
    )


def test_sub_group_parent_must_exist() -> None:
    subs = [{"name": "a"}, {"name": "b", "parent": "ghost"}]
    assert_rejected(pod_group(subs), "spec.subGroups[1].parent", "'ghost'", ref="PodGroup team/job")


def test_sub_group_parents_must_not_form_a_cycle() -> None:
    subs = [
        {"name": "root"},
        {"name": "a", "parent": "b"},
        {"name": "b", "parent": "c"},
        {"name": "c", "parent": "a"},
    ]
    error = assert_rejected(pod_group(subs), "spec.subGroups[1].parent", "cycle", ref="PodGroup team/job")
    assert "a -> b -> c -> a" in error.message


def test_a_sub_group_cannot_be_its_own_parent() -> None:
    assert_rejected(
        pod_group([{"name": "a", "parent": "a"}]),
        "spec.subGroups[0].parent",
        "cycle",
        ref="PodGroup team/job",
    )


# --- topologies ---------------------------------------------------------------------------------


def test_topology_levels_must_be_unique() -> None:
    doc = topology("zone", "rack", "zone")
    assert_rejected(
        doc, "spec.levels[2].nodeLabel", "duplicate level 'zone'", "spec.levels[0]", ref="Topology net"
    )


def test_hostname_may_only_be_the_last_topology_level() -> None:
    doc = topology("kubernetes.io/hostname", "rack")
    assert_rejected(doc, "spec.levels[0].nodeLabel", "last", ref="Topology net")
    assert isinstance(parse_object(topology("zone", "kubernetes.io/hostname"), SOURCE, 1), Topology)


# --- the error itself ---------------------------------------------------------------------------


def test_error_carries_its_parts_and_renders_one_line() -> None:
    error = ManifestError(
        "x.yaml", "bad\nvalue", document=2, item=3, line=17, object_ref="Pod default/b", field="spec.priority"
    )
    assert str(error) == "x.yaml: document 2, item 3 at line 17 (Pod default/b): spec.priority: bad value"
    assert ManifestError("x.yaml", "no such file or folder").__str__() == "x.yaml: no such file or folder"
    assert str(ManifestError("x.yaml", "oops", line=4, column=7)) == "x.yaml: line 4, column 7: oops"


def test_error_survives_pickling_and_copying() -> None:
    error = ManifestError("x.yaml", "bad", document=2, field="spec")
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert str(clone) == str(error)
        assert clone.field == "spec"
        assert clone.document == 2


@pytest.mark.parametrize("port", [-1, 65536])
def test_a_host_port_out_of_range_is_a_one_line_error_naming_the_field(port: int) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": port}]}]
        },
    }
    with pytest.raises(ManifestError, match=r"spec\.containers\[0\]\.ports\[0\]\.hostPort"):
        parse_object(pod, "pods.yaml", 1)


def test_a_queue_quantity_written_as_kubernetes_writes_it_says_the_unit() -> None:
    queue = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"resources": {"memory": {"quota": "16Gi", "limit": -1, "overQuotaWeight": 1}}},
    }
    assert_rejected(queue, "spec.resources.memory.quota", "a plain number of MB", ref="Queue q")
