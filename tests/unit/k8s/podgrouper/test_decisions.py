"""Queue, priority class, preemptibility, topology, inherited metadata and the PodGroup manifest."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pg_objects import obj, pod

from kai_scheduler.controlplane.podgrouper import (
    GrouperDefaults,
    GroupingError,
    KindDefaults,
    TopologyConstraintPlan,
    plan_pod_group,
    pod_group_manifest,
)


def sts(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return obj("apps/v1", "StatefulSet", "db", "uid-db", labels=labels, annotations=annotations)


def plan_for(
    owner_labels: dict[str, str] | None = None,
    pod_labels: dict[str, str] | None = None,
    *,
    annotations: dict[str, str] | None = None,
    priority_class: str | None = None,
    **kwargs: Any,
) -> Any:
    owner = sts(owner_labels, annotations)
    p = pod("db-0", "uid-db0", owner=owner, labels=pod_labels, priority_class=priority_class)
    return plan_pod_group(p, [owner], **kwargs)


# --- queue -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("owner", "pod_labels", "queue"),
    [
        ({"kai.scheduler/queue": "owner-q"}, {"kai.scheduler/queue": "pod-q"}, "owner-q"),
        ({}, {"kai.scheduler/queue": "pod-q"}, "pod-q"),
        ({"kai.scheduler/queue": ""}, {"kai.scheduler/queue": "pod-q"}, "pod-q"),
        ({"project": "legacy"}, {"kai.scheduler/queue": "pod-q"}, "pod-q"),
        ({"project": "legacy"}, {}, "legacy"),
        ({}, {"project": "legacy-pod"}, "legacy-pod"),
        ({"project": "legacy"}, {"kai.scheduler/node-pool": "a100"}, "legacy-a100"),
        ({}, {"kai.scheduler/node-pool": "a100"}, "default-queue"),
        ({}, {}, "default-queue"),
    ],
)
def test_queue_fallbacks(owner: dict[str, str], pod_labels: dict[str, str], queue: str) -> None:
    assert plan_for(owner, pod_labels).queue == queue


def test_queue_label_key_and_default_queue_are_settings() -> None:
    plan = plan_for(
        {"runai/queue": "custom", "kai.scheduler/queue": "ignored"}, queue_label_key="runai/queue"
    )
    assert plan.queue == "custom"
    plan = plan_for({}, {}, defaults=GrouperDefaults(default_queue="fallback", node_pool_label_key="pool"))
    assert plan.queue == "fallback"
    plan = plan_for({"project": "p"}, {"pool": "h100"}, defaults=GrouperDefaults(node_pool_label_key="pool"))
    assert plan.queue == "p-h100"


# --- priority class --------------------------------------------------------------------------------


def test_priority_fallbacks() -> None:
    assert plan_for({"priorityClassName": "build"}, priority_class="inference").priority_class_name == "build"
    assert plan_for({}, {"priorityClassName": "build"}, priority_class="inference").priority_class_name == (
        "inference"
    )
    assert plan_for({}, {"priorityClassName": "build"}).priority_class_name == "build"
    assert plan_for({}, {}).priority_class_name == "train"


def test_defaults_config_map_replaces_the_kind_default_but_not_labels() -> None:
    defaults = GrouperDefaults.from_types_json(
        json.dumps(
            [
                {
                    "typeName": "StatefulSet",
                    "group": "apps",
                    "priorityName": "inference",
                    "preemptibility": "preemptible",
                },
                {"typeName": "Pod", "priorityName": "build"},
            ]
        )
    )
    assert defaults.kinds[("", "Pod")] == KindDefaults("build", None)
    plan = plan_for({}, {}, defaults=defaults)
    assert (plan.priority_class_name, plan.preemptibility) == ("inference", "preemptible")
    plan = plan_for(
        {"priorityClassName": "train", "kai.scheduler/preemptibility": "non-preemptible"}, defaults=defaults
    )
    assert (plan.priority_class_name, plan.preemptibility) == ("train", "non-preemptible")
    assert plan_pod_group(pod("bare", "uid-b"), [], defaults=defaults).priority_class_name == "build"


def test_unknown_priority_classes_are_passed_over_when_the_known_ones_are_given() -> None:
    defaults = GrouperDefaults(known_priority_classes=frozenset({"train", "build", "inference"}))
    plan = plan_for({"priorityClassName": "typo"}, {"priorityClassName": "build"}, defaults=defaults)
    assert plan.priority_class_name == "build"
    assert plan_for({"priorityClassName": "typo"}, defaults=defaults).priority_class_name == "train"
    assert plan_for({"priorityClassName": "typo"}).priority_class_name == "typo"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "pod grouper defaults: not valid JSON"),
        ('{"typeName": "Pod"}', "pod grouper defaults: expected a list"),
        ('[{"group": "apps"}]', "pod grouper defaults: types[0].typeName: is missing"),
        (
            '[{"typeName": "Pod", "priorityName": 3}]',
            "pod grouper defaults: types[0].priorityName: expected a string",
        ),
        ('[{"typeName": "Pod", "preemptibility": "maybe"}]', "types[0].preemptibility: must be one of"),
        ("[7]", "types[0]: expected an object"),
    ],
)
def test_bad_defaults_config_map(text: str, message: str) -> None:
    with pytest.raises(GroupingError, match=re.escape(message)):
        GrouperDefaults.from_types_json(text)


# --- preemptibility --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("owner", "pod_labels", "expected"),
    [
        (
            {"kai.scheduler/preemptibility": "non-preemptible"},
            {"kai.scheduler/preemptibility": "preemptible"},
            "non-preemptible",
        ),
        ({}, {"kai.scheduler/preemptibility": "preemptible"}, "preemptible"),
        ({}, {}, None),
    ],
)
def test_preemptibility_fallbacks(
    owner: dict[str, str], pod_labels: dict[str, str], expected: str | None
) -> None:
    assert plan_for(owner, pod_labels).preemptibility == expected


def test_bad_preemptibility_is_an_error() -> None:
    with pytest.raises(GroupingError) as err:
        plan_for({"kai.scheduler/preemptibility": "sometimes"})
    assert str(err.value) == (
        'StatefulSet team-a/db: metadata.labels["kai.scheduler/preemptibility"]: '
        "must be one of preemptible, non-preemptible, got 'sometimes'"
    )


# --- topology --------------------------------------------------------------------------------------


def test_topology_from_owner_annotations() -> None:
    plan = plan_for(
        annotations={
            "kai.scheduler/topology": "dgx",
            "kai.scheduler/topology-required-placement": "topology.kubernetes.io/zone",
            "kai.scheduler/topology-preferred-placement": "nvidia.com/gpu.clique",
        }
    )
    assert plan.topology_constraint == TopologyConstraintPlan(
        "dgx", "topology.kubernetes.io/zone", "nvidia.com/gpu.clique"
    )
    assert pod_group_manifest(plan)["spec"]["topologyConstraint"] == {
        "topology": "dgx",
        "requiredTopologyLevel": "topology.kubernetes.io/zone",
        "preferredTopologyLevel": "nvidia.com/gpu.clique",
    }
    assert plan_for().topology_constraint is None


def test_placement_without_topology_is_an_error() -> None:
    with pytest.raises(
        GroupingError,
        match=r'StatefulSet team-a/db: metadata.annotations\["kai.scheduler/topology-'
        r'preferred-placement"\]: a placement level needs the topology name',
    ):
        plan_for(annotations={"kai.scheduler/topology-preferred-placement": "rack"})


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"kai.scheduler/segment-size": "0"}, r'segment-size"\]: must be at least 1, got 0'),
        ({"kai.scheduler/segment-size": "four"}, r"segment-size\"\]: expected an integer, got 'four'"),
        # A placement without a size or a topology name is no error: KAI passes over it
        # (test_segments_dropped.py).
    ],
)
def test_bad_segment_annotations(annotations: dict[str, str], message: str) -> None:
    # On the Worker template, where KAI's PyTorchJob grouper reads them.
    specs = {"Worker": {"replicas": 8, "template": {"metadata": {"annotations": annotations}}}}
    job = obj("kubeflow.org/v1", "PyTorchJob", "pt", "uid-pt", spec={"pytorchReplicaSpecs": specs})
    p = pod(
        "pt-worker-0",
        "uid-pw",
        owner=job,
        labels={"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0"},
    )
    with pytest.raises(GroupingError, match=message):
        plan_pod_group(p, [job])


# --- inherited metadata and the manifest -----------------------------------------------------------


def test_labels_and_annotations_are_inherited_from_the_top_owner() -> None:
    plan = plan_for(
        {"app": "db", "kai.scheduler/queue": "q"},
        {"pod-only": "x"},
        annotations={
            "owner": "dba-team",
            "kubectl.kubernetes.io/last-applied-configuration": '{"huge": "json"}',
        },
    )
    assert plan.labels == {"app": "db", "kai.scheduler/queue": "q"}
    assert plan.annotations["owner"] == "dba-team"
    assert "kubectl.kubernetes.io/last-applied-configuration" not in plan.annotations
    assert json.loads(plan.annotations["kai.scheduler/top-owner-metadata"]) == {
        "name": "db",
        "uid": "uid-db",
        "group": "apps",
        "version": "v1",
        "kind": "StatefulSet",
    }


def test_full_manifest() -> None:
    plan = plan_for(
        {
            "kai.scheduler/queue": "q",
            "priorityClassName": "build",
            "kai.scheduler/preemptibility": "preemptible",
        },
        annotations={"kai.scheduler/topology-required-placement": "rack", "kai.scheduler/topology": "t"},
    )
    manifest = pod_group_manifest(plan)
    assert manifest == {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": "pg-db-uid-db",
            "namespace": "team-a",
            "labels": plan.labels,
            "annotations": plan.annotations,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "db",
                    "uid": "uid-db",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "minMember": 1,
            "queue": "q",
            "priorityClassName": "build",
            "preemptibility": "preemptible",
            "topologyConstraint": {"topology": "t", "requiredTopologyLevel": "rack"},
        },
    }
    # The manifest is a fresh object: changing it does not change the plan.
    manifest["metadata"]["labels"]["x"] = "y"
    assert "x" not in plan.labels


def test_over_long_names_are_cut_to_fit() -> None:
    long_name = "a" * 250
    plan = plan_pod_group(pod(long_name, "0b5c1e9a-3f1d-4d6e-9a55-2b8f0c0e7d11"), [])
    assert len(plan.name) == 253
    assert plan.name.startswith("pg-aaa")
    assert plan.name.endswith("-0b5c1e9a-3f1d-4d6e-9a55-2b8f0c0e7d11")


def test_pod_without_namespace_is_in_default() -> None:
    p = pod("x", "uid-x")
    del p["metadata"]["namespace"]
    assert plan_pod_group(p, []).namespace == "default"
