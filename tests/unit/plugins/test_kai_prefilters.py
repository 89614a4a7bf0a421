"""KAI's MaxNodePoolResources and ConfigMap pre-filters (plugins/max_node_resources.py,
plugins/storage_predicates.py, model/storage.py), with cases ported from KAI's
pkg/scheduler/k8s_internal/predicates/maxNodeResources_test.go (Test_podToMaxNodeResourcesFiltering: 5 of
its 6 cases; "not enough ephemeral storage" is left out: ephemeral storage is not modelled) and
config_maps_test.go (TestIsPreFilterRequired: all 11; TestPreFilter, TestPreFilterOptional*: the cases
below, each named as there)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import cluster_state, node_manifest, objects_of, pod_manifest, queue_manifest
from kai_scheduler.api.objects import ConfigMap, ObjectMeta, Pod
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import parse_config
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.storage import Storage, required_config_maps
from kai_scheduler.plugins.max_node_resources import ftoa


def _node(name: str, cpu: str, memory: str, gpus: str, **extra: str) -> dict[str, Any]:
    manifest = node_manifest(name, gpus=0)
    manifest["status"]["allocatable"] = {
        "cpu": cpu,
        "memory": memory,
        "nvidia.com/gpu": gpus,
        "pods": "110",
        **extra,
    }
    return manifest


SMALL = _node("n1", "100m", "200Mi", "1", **{"kai.scheduler/r1": "2"})
MAX_NODE_CASES = [
    pytest.param([SMALL], {"cpu": "20m"}, {}, None, id="small pod"),
    pytest.param(
        [SMALL, _node("n2", "500m", "200Mi", "1", **{"kai.scheduler/r1": "2"})],
        {"cpu": "1"},
        {},
        "The pod n1/name1 requires GPU: 0, CPU: 1 (cores), memory: 0 (GB), pods: 1. Max CPU resources "
        "available in a single node in the default node-pool is topped at 0.5 cores",
        id="not enough cpu",
    ),
    pytest.param(
        [_node("n1", "100m", "400Mi", "1"), _node("n2", "500m", "200Mi", "1")],
        {"memory": "1G"},
        {},
        "The pod n1/name1 requires GPU: 0, CPU: 0 (cores), memory: 1 (GB), pods: 1. Max memory resources "
        "available in a single node in the default node-pool is topped at 0.419 GB",
        id="not enough memory",
    ),
    pytest.param(
        [SMALL, _node("n2", "500m", "200Mi", "1")],
        {"nvidia.com/gpu": "2"},
        {},
        "The pod n1/name1 requires GPU: 2, CPU: 0 (cores), memory: 0 (GB), pods: 1. Max GPU resources "
        "available in a single node in the default node-pool is topped at 1",
        id="not enough whole gpus",
    ),
    pytest.param(
        [_node("n1", "100m", "200Mi", "0"), _node("n2", "500m", "200Mi", "0")],
        {},
        {"gpu-fraction": "0.5"},
        "The pod n1/name1 requires GPU: 0.5, CPU: 0 (cores), memory: 0 (GB), pods: 1. No node in the "
        "default node-pool has GPU resources",
        id="not enough fraction gpu",
    ),
]


def _session_failure(
    nodes: list[dict[str, Any]], requests: dict[str, str], annotations: dict[str, str]
) -> Any:
    pod = pod_manifest("name1", "q", namespace="n1", cpu=None, memory=None, annotations=annotations)
    pod["spec"]["containers"][0]["resources"] = {"requests": requests}
    state = cluster_state(objects_of(*nodes, queue_manifest("q"), pod))
    snapshot = ClusterCache.of(state).snapshot()
    result = Scheduler(parse_config({})).run(snapshot, cycle=1, now=0.0)
    return result.unschedulable.get("n1/pg-name1")


@pytest.mark.parametrize(("nodes", "requests", "annotations", "message"), MAX_NODE_CASES)
def test_pod_to_max_node_resources_filtering(
    nodes: list[dict[str, Any]], requests: dict[str, str], annotations: dict[str, str], message: str | None
) -> None:
    reason = _session_failure(nodes, requests, annotations)
    if message is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(f"pod name1 does not fit: {message}"), reason


def test_the_message_names_the_shards_pool_and_humanizes_as_go_does() -> None:
    state = cluster_state(objects_of(_node("n1", "4", "8Gi", "2"), queue_manifest("q")))
    assert ClusterCache.of(state, Partition(value="a100")).snapshot().node_pool == "a100"
    assert ClusterCache.of(state).snapshot().node_pool == "default"
    assert [ftoa(v) for v in (1.0, 0.5, 0.4194304, 274.877906944, 0.0, 12.3456)] == [
        "1",
        "0.5",
        "0.419",
        "274.878",
        "0",
        "12.346",
    ]


# --- ConfigMaps -------------------------------------------------------------------------------------------


def pod(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> Pod:
    meta: dict[str, Any] = {"name": "p", "namespace": "test", "annotations": annotations or {}}
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def cm_volume(volume: str, name: str, optional: bool | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": name}
    if optional is not None:
        ref["optional"] = optional
    return {"name": volume, "configMap": ref}


def mounting(*volumes: str, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "c",
        "volumeMounts": [{"name": v, "mountPath": f"/{v}"} for v in volumes],
    }
    if env:
        container["env"] = env
    return container


def env_ref(name: str, optional: bool | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": name, "key": "k"}
    if optional is not None:
        ref["optional"] = optional
    return {"name": "E", "valueFrom": {"configMapKeyRef": ref}}


# TestIsPreFilterRequired: (name, spec, whether any ConfigMap is required).
PREFILTER_REQUIRED = [
    ("Empty spec", {}, False),
    ("ConfigMap volume", {"containers": [mounting("bla")], "volumes": [cm_volume("bla", "bla")]}, True),
    (
        "Unreferenced configMap volume",
        {"containers": [mounting()], "volumes": [cm_volume("bla", "bla")]},
        False,
    ),
    (
        "Unreferenced configMap and referenced configmap",
        {
            "containers": [mounting("bla-referenced")],
            "volumes": [cm_volume("bla", "bla"), cm_volume("bla-referenced", "x")],
        },
        True,
    ),
    (
        "non-ConfigMap volume",
        {"containers": [mounting("bla")], "volumes": [{"name": "bla", "emptyDir": {}}]},
        False,
    ),
    (
        "Referenced ConfigMap and non-configmap volume",
        {
            "containers": [mounting("bla-configmap")],
            "volumes": [{"name": "bla", "emptyDir": {}}, cm_volume("bla-configmap", "x")],
        },
        True,
    ),
    (
        "non-referenced ConfigMap and non-configmap volume",
        {
            "containers": [mounting("bla")],
            "volumes": [{"name": "bla", "emptyDir": {}}, cm_volume("bla-configmap", "x")],
        },
        False,
    ),
    (
        "non-referenced ConfigMap and non-configmap volume (no mounts)",
        {
            "containers": [mounting()],
            "volumes": [{"name": "bla", "emptyDir": {}}, cm_volume("bla-configmap", "x")],
        },
        False,
    ),
    ("env var", {"containers": [mounting(env=[env_ref("bla")])]}, True),
    ("env from", {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "bla"}}]}]}, True),
    (
        "non-referenced configmap volume, env var",
        {"containers": [mounting(env=[env_ref("bla")])], "volumes": [cm_volume("bla", "bla")]},
        True,
    ),
]


@pytest.mark.parametrize(("spec", "required"), [pytest.param(s, r, id=n) for n, s, r in PREFILTER_REQUIRED])
def test_is_pre_filter_required(spec: dict[str, Any], required: bool) -> None:
    assert bool(required_config_maps(pod(spec))) is required


def existing(*names: str) -> Storage:
    return Storage.of(config_maps=[ConfigMap(metadata=ObjectMeta(name=n, namespace="test")) for n in names])


# TestPreFilter and TestPreFilterOptional*: (name, existing ConfigMaps, spec, annotations, refused).
PREFILTER = [
    ("no configmaps, no required configmaps", (), {}, None, False),
    (
        "no configmaps, required configmaps",
        (),
        {"containers": [mounting("bla")], "volumes": [cm_volume("bla", "bla")]},
        None,
        True,
    ),
    (
        "no configmaps, non-referenced configmaps",
        (),
        {"containers": [mounting()], "volumes": [cm_volume("bla", "bla")]},
        None,
        False,
    ),
    (
        "yes configmaps, required configmaps",
        ("bla",),
        {"containers": [mounting("bla")], "volumes": [cm_volume("bla", "bla")]},
        None,
        False,
    ),
    (
        "yes configmaps, required configmaps, different name",
        ("configmap-name",),
        {"containers": [mounting("volume-name")], "volumes": [cm_volume("volume-name", "configmap-name")]},
        None,
        False,
    ),
    (
        "some configmaps, required configmaps",
        ("bla",),
        {
            "containers": [mounting("bla", "blu")],
            "volumes": [cm_volume("bla", "bla"), cm_volume("blu", "blu")],
        },
        None,
        True,
    ),
    (
        "shared gpu configmaps",
        (),
        {
            "containers": [mounting("shared", env=[env_ref("my-shared-0-evar")])],
            "volumes": [cm_volume("shared", "my-shared-0")],
        },
        {"runai/shared-gpu-configmap": "my-shared"},
        False,
    ),
    (
        "env var referenced configmaps",
        (),
        {"containers": [mounting(env=[env_ref("other")])]},
        {"runai/shared-gpu-configmap": "my-shared"},
        True,
    ),
    (
        "optional configmap volume, missing",
        (),
        {"containers": [mounting("v")], "volumes": [cm_volume("v", "cm", True)]},
        None,
        False,
    ),
    (
        "required configmap volume (Optional=false), missing",
        (),
        {"containers": [mounting("v")], "volumes": [cm_volume("v", "cm", False)]},
        None,
        True,
    ),
    (
        "mixed optional and required volumes, required missing",
        (),
        {
            "containers": [mounting("a", "b")],
            "volumes": [cm_volume("a", "optional-cm", True), cm_volume("b", "required-cm", False)],
        },
        None,
        True,
    ),
    (
        "projected configmap volume not mounted",
        (),
        {
            "containers": [mounting()],
            "volumes": [{"name": "p", "projected": {"sources": [{"configMap": {"name": "cm"}}]}}],
        },
        None,
        False,
    ),
    (
        "required projected configmap volume, missing",
        (),
        {
            "containers": [mounting("p")],
            "volumes": [
                {"name": "p", "projected": {"sources": [{"configMap": {"name": "cm", "optional": False}}]}}
            ],
        },
        None,
        True,
    ),
    (
        "optional configmap env var, missing",
        (),
        {"containers": [mounting(env=[env_ref("cm", True)])]},
        None,
        False,
    ),
    (
        "optional configmap envFrom, missing",
        (),
        {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "cm", "optional": True}}]}]},
        None,
        False,
    ),
    (
        "required configmap env var in ephemeral container, missing",
        (),
        {"containers": [mounting()], "ephemeralContainers": [{"name": "debug", "env": [env_ref("cm")]}]},
        None,
        True,
    ),
]


@pytest.mark.parametrize(
    ("names", "spec", "annotations", "refused"), [pytest.param(*case[1:], id=case[0]) for case in PREFILTER]
)
def test_pre_filter(
    names: tuple[str, ...], spec: dict[str, Any], annotations: dict[str, str] | None, refused: bool
) -> None:
    failure = existing(*names).missing_config_maps(required_config_maps(pod(spec, annotations)))
    assert (failure is not None) is refused
    if failure is not None:
        assert failure.startswith("Missing required configmaps: [")
