"""The CRDs under deploy/helm/kai-scheduler/crds/: generated from the models, structural, and accepting
every example manifest (and refusing what the API server would refuse)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai_fakeapi import crd_validation as check
from kai_scheduler.api import crd_models, crds
from kai_scheduler.api.objects import PodGroup, Queue, Topology

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "deploy" / "helm" / "kai-scheduler" / "crds"
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml")) + sorted(
    (ROOT / "src" / "kai_scheduler" / "sim" / "demo").glob("*.yaml")
)


def _schema(kind: str) -> dict[str, Any]:
    definition = next(d for d in crds.CRDS if d.kind == kind)
    schema = check.schema_for(definition.api_version, kind)
    assert schema is not None
    return schema


# --- the checked-in files are the generated ones ----------------------------------------------------


def test_checked_in_crds_equal_the_generated_ones() -> None:
    generated = crds.generated_files()
    on_disk = {path.name: path.read_text(encoding="utf-8") for path in CRD_DIR.glob("*.yaml")}
    assert set(on_disk) == set(generated), "run: python -m kai_scheduler.api.crds --write " + str(CRD_DIR)
    for name, content in generated.items():
        assert on_disk[name] == content, f"{name} is stale; run: python -m kai_scheduler.api.crds --write ..."


def test_write_produces_one_file_per_crd(tmp_path: Path) -> None:
    assert crds.main(["--write", str(tmp_path)]) == 0
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == sorted(
        [
            "scheduling.run.ai_queues.yaml",
            "scheduling.run.ai_accountedresources.yaml",
            "scheduling.run.ai_podgroups.yaml",
            "scheduling.run.ai_bindrequests.yaml",
            "kai.scheduler_topologies.yaml",
            "kai.scheduler_schedulingshards.yaml",
            "kai.scheduler_configs.yaml",
        ]
    )
    for path in tmp_path.iterdir():
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
        assert len(documents) == 1 and documents[0]["kind"] == "CustomResourceDefinition"


# --- what each CRD declares --------------------------------------------------------------------------


def _crd(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((CRD_DIR / name).read_text())
    return document


@pytest.mark.parametrize(
    ("filename", "group", "version", "kind", "scope", "short_names", "status"),
    [
        ("scheduling.run.ai_queues.yaml", "scheduling.run.ai", "v2", "Queue", "Cluster", None, True),
        (
            "scheduling.run.ai_podgroups.yaml",
            "scheduling.run.ai",
            "v2alpha2",
            "PodGroup",
            "Namespaced",
            ["pg"],
            True,
        ),
        (
            "scheduling.run.ai_bindrequests.yaml",
            "scheduling.run.ai",
            "v1alpha2",
            "BindRequest",
            "Namespaced",
            None,
            True,
        ),
        ("kai.scheduler_topologies.yaml", "kai.scheduler", "v1alpha1", "Topology", "Cluster", None, False),
    ],
)
def test_crd_identity(
    filename: str,
    group: str,
    version: str,
    kind: str,
    scope: str,
    short_names: list[str] | None,
    status: bool,
) -> None:
    crd = _crd(filename)
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{group}"
    assert spec["group"] == group and spec["scope"] == scope
    assert spec["names"]["kind"] == kind and spec["names"]["listKind"] == f"{kind}List"
    assert spec["names"].get("shortNames") == short_names
    (served,) = spec["versions"]
    assert served["name"] == version and served["served"] and served["storage"]
    assert ("status" in served.get("subresources", {})) is status


def test_queue_printer_columns() -> None:
    (version,) = _crd("scheduling.run.ai_queues.yaml")["spec"]["versions"]
    columns = {column["name"]: column["jsonPath"] for column in version["additionalPrinterColumns"]}
    assert columns["Priority"] == ".spec.priority"
    assert columns["Parent"] == ".spec.parentQueue"
    assert columns["Children"] == ".status.childQueues"
    assert columns["Allocated"] == ".status.allocated"


@pytest.mark.parametrize("definition", crds.CRDS, ids=lambda d: d.kind)
def test_every_crd_is_structural(definition: crds.CrdDefinition) -> None:
    manifest = yaml.safe_load((CRD_DIR / definition.filename).read_text())
    assert check.crd_errors(manifest) == []


def test_schemas_carry_every_model_field() -> None:
    """The schemas come from the models: every field the scheduler reads is in the CRD, by its JSON name."""

    def names(model: Any) -> set[str]:
        return {field.alias or name for name, field in model.model_fields.items()}

    from kai_scheduler.api.objects import PodGroupSpec, QueueResource, QueueSpec, SubGroup, TopologySpec

    queue = _schema("Queue")["properties"]["spec"]
    assert names(QueueSpec) == set(queue["properties"])
    assert names(QueueResource) == set(queue["properties"]["resources"]["properties"]["gpu"]["properties"])
    pod_group = _schema("PodGroup")["properties"]["spec"]
    assert names(PodGroupSpec) <= set(pod_group["properties"])
    assert names(SubGroup) == set(pod_group["properties"]["subGroups"]["items"]["properties"])
    assert names(TopologySpec) == set(_schema("Topology")["properties"]["spec"]["properties"])
    assert {"apiVersion", "kind", "metadata"} <= set(_schema("Queue")["properties"])
    assert Queue.model_fields and PodGroup.model_fields and Topology.model_fields


def test_fields_the_reference_lists_beyond_the_models() -> None:
    queue_status = _schema("Queue")["properties"]["status"]["properties"]
    assert {"conditions", "childQueues", "allocated", "allocatedNonPreemptible", "requested"} <= set(
        queue_status
    )
    pod_group = _schema("PodGroup")["properties"]
    assert {"parallelism", "completions", "backoffLimit"} <= set(pod_group["spec"]["properties"])
    status = pod_group["status"]["properties"]
    assert {"phase", "conditions", "running", "succeeded", "failed", "pending"} <= set(status)
    assert set(status["resourcesStatus"]["properties"]) == {
        "allocated",
        "allocatedNonPreemptible",
        "requested",
    }
    reason = status["schedulingConditions"]["items"]["properties"]["reasons"]["items"]["properties"]
    assert "queueDetails" in reason["details"]["properties"]
    bind = _schema("BindRequest")["properties"]
    assert set(bind["spec"]["properties"]) == {
        "podName",
        "selectedNode",
        "receivedResourceType",
        "receivedGPU",
        "selectedGPUGroups",
        "resourceClaimAllocations",
        "predictedNUMAZones",  # KAI v0.16 (the numa plugin)
        "extendedResourceClaimAllocation",  # KAI v0.17 (KEP-5004)
        "backoffLimit",
    }
    extended = bind["spec"]["properties"]["extendedResourceClaimAllocation"]["properties"]
    assert set(extended) == {"allocation", "deviceRequests", "containerMappings"}
    assert set(bind["spec"]["properties"]["receivedGPU"]["properties"]) == {"count", "portion"}
    assert set(bind["status"]["properties"]) == {"phase", "reason", "failedAttempts"}


def test_quantities_are_int_or_string() -> None:
    allocated = _schema("Queue")["properties"]["status"]["properties"]["allocated"]["additionalProperties"]
    assert allocated["x-kubernetes-int-or-string"] is True
    assert allocated["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert "type" not in allocated


def _paths_with(schema: dict[str, Any], keyword: str, path: str = "") -> list[str]:
    found = [path] if schema.get(keyword) else []
    for name, sub in schema.get("properties", {}).items():
        found += _paths_with(sub, keyword, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        found += _paths_with(schema["items"], keyword, path + "[]")
    if isinstance(schema.get("additionalProperties"), dict):
        found += _paths_with(schema["additionalProperties"], keyword, path + "{}")
    return found


def test_unknown_fields_are_preserved_only_in_kais_open_maps() -> None:
    everywhere = {
        definition.kind: _paths_with(_schema(definition.kind), "x-kubernetes-preserve-unknown-fields")
        for definition in crds.CRDS
    }
    assert everywhere == {
        "Queue": [],
        "AccountedResource": [],
        "PodGroup": [],
        # Kubernetes' resource.k8s.io types (AllocationResult, DeviceRequest) and the pod's
        # ContainerExtendedResourceRequest, passed through to the binder as the scheduler wrote them.
        "BindRequest": [
            "spec.extendedResourceClaimAllocation.allocation",
            "spec.extendedResourceClaimAllocation.containerMappings[]",
            "spec.extendedResourceClaimAllocation.deviceRequests[]",
            "spec.resourceClaimAllocations[].allocation",
        ],
        "Topology": [],
        "SchedulingShard": [],
        # Kubernetes' own types (affinity, tolerations, security context) and each component's deployment
        # settings, for KAI's operator: stored as written, not read by the scheduler.
        "Config": [
            "spec.admission",
            "spec.binder",
            "spec.global.affinity",
            "spec.global.daemonsetsTolerations[]",
            "spec.global.securityContext",
            "spec.global.tolerations[]",
            "spec.global.vpa",
            "spec.nodeScaleAdjuster",
            "spec.numaPlacementExporter",
            "spec.podGroupController",
            "spec.podGrouper",
            "spec.prometheus.externalPrometheusHealthProbe",
            "spec.prometheus.serviceMonitor",
            "spec.queueController",
            "spec.scheduler",
        ],
    }


def test_no_defaults_are_stored() -> None:
    """Pydantic's defaults are the scheduler's reading of an absent field; the API server must store what
    the user wrote, as KAI's CRDs do."""
    for definition in crds.CRDS:
        assert _paths_with(_schema(definition.kind), "default") == []


# --- the structural checker itself ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"a": {"description": "no type"}}}, "needs a type"),
        ({"type": "object", "properties": {"a": {"$ref": "#/definitions/x"}}}, "'$ref'"),
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "'uniqueItems'"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "string"},
            },
            "mutually exclusive",
        ),
        ({"type": "object", "additionalProperties": True}, "must be a schema"),
        ({"type": "array"}, "single items schema"),
        ({"type": "object", "required": ["missing"], "properties": {}}, "not a declared property"),
        ({"type": "string", "enum": [1]}, "not of type string"),
        ({"type": "integer", "minimum": 0, "exclusiveMinimum": 0}, "must be a boolean"),
        (
            {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "only allowed in the x-kubernetes-int-or-string",
        ),
        ({"type": "string", "x-kubernetes-int-or-string": True}, "must not set type"),
        (
            {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
            "must be required",
        ),
        ({"type": "string", "x-kubernetes-preserve-unknown-fields": True}, "belongs on an object"),
        ({"type": "object", "x-kubernetes-validations": [{"message": "no rule"}]}, "needs a rule"),
    ],
)
def test_structural_checker_rejects(schema: dict[str, Any], message: str) -> None:
    errors = check.structural_errors(schema)
    assert any(message in error for error in errors), errors


def test_crd_checker_rejects_open_metadata_and_two_storage_versions() -> None:
    manifest = crds.crd_manifest(crds.CRDS[0])
    broken = copy.deepcopy(manifest)
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"]["properties"] = {
        "labels": {"type": "object"}
    }
    broken["spec"]["versions"].append(copy.deepcopy(broken["spec"]["versions"][0]))
    errors = check.crd_errors(broken)
    assert any("metadata may only be declared" in error for error in errors)
    assert any("exactly one version" in error for error in errors)


def test_a_model_field_without_a_structural_form_fails_generation() -> None:
    from kai_scheduler.api.objects import K8sModel

    class Ambiguous(K8sModel):
        value: int | str = 0

    with pytest.raises(crds.SchemaError, match="value"):
        crds.openapi_schema(Ambiguous)


# --- objects against the schemas --------------------------------------------------------------------


def _example_objects() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in EXAMPLES:
        documents = list(yaml.safe_load_all(path.read_text()))
        for document in check.custom_objects(documents):
            found.append((f"{path.name}:{document['kind']}/{document['metadata']['name']}", document))
    return found


EXAMPLE_OBJECTS = _example_objects()


def test_the_examples_contain_custom_objects() -> None:
    kinds = {document["kind"] for _, document in EXAMPLE_OBJECTS}
    assert {"Queue", "PodGroup"} <= kinds
    assert len(EXAMPLE_OBJECTS) >= 20


@pytest.mark.parametrize(("label", "document"), EXAMPLE_OBJECTS, ids=[label for label, _ in EXAMPLE_OBJECTS])
def test_example_manifests_validate(label: str, document: dict[str, Any]) -> None:
    schema = check.schema_for(document["apiVersion"], document["kind"])
    assert schema is not None
    assert check.validate_object(schema, document) == []


def _queue(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"}, "spec": spec}


def test_queue_with_status_validates() -> None:
    queue = _queue(parentQueue="root", priority=100, resources={"gpu": {"quota": 0.5, "limit": -1}})
    queue["status"] = {
        "childQueues": ["a", "b"],
        "allocated": {"cpu": "1500m", "memory": "4Gi", "nvidia.com/gpu": 2},
        "conditions": [{"type": "OverQuota", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }
    assert check.validate_object(_schema("Queue"), queue) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"priority": "high"}, "spec.priority: expected integer"),
        ({"resources": {"gpu": {"quota": "2"}}}, "spec.resources.gpu.quota: expected number"),
        ({"resources": {"gpu": {"quota": 1, "deserved": 1}}}, "spec.resources.gpu.deserved: unknown field"),
        ({"parentQueue": 3}, "spec.parentQueue: expected string"),
    ],
)
def test_bad_queues_are_refused(change: dict[str, Any], message: str) -> None:
    errors = check.validate_object(_schema("Queue"), _queue(**change))
    assert any(message in error for error in errors), errors


def test_quantity_strings_must_be_quantities() -> None:
    queue = _queue()
    queue["status"] = {"allocated": {"cpu": "one"}}
    assert any("does not match" in error for error in check.validate_object(_schema("Queue"), queue))
    queue["status"] = {"allocated": {"cpu": 1.5}}
    assert any("integer or a string" in error for error in check.validate_object(_schema("Queue"), queue))


def _pod_group(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"queue": "q", **spec},
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"minMember": 0}, "below the minimum 1"),
        ({"preemptibility": "sometimes"}, "is not one of"),
        ({"subGroups": [{"name": "a"}, {"name": "a"}]}, "duplicate entry"),
        ({"subGroups": [{"minMember": 1}]}, "subGroups[0].name: required"),
    ],
)
def test_bad_pod_groups_are_refused(spec: dict[str, Any], message: str) -> None:
    errors = check.validate_object(_schema("PodGroup"), _pod_group(**spec))
    assert any(message in error for error in errors), errors


def test_pod_group_status_as_the_controllers_write_it() -> None:
    pod_group = _pod_group(minMember=2, parallelism=2, completions=2, backoffLimit=6)
    pod_group["status"] = {
        "phase": "Running",
        "running": 2,
        "resourcesStatus": {"allocated": {"nvidia.com/gpu": "2", "cpu": "4"}},
        "schedulingConditions": [
            {
                "type": "UnschedulableOnNodePool",
                "nodePool": "default",
                "transitionID": "3",
                "status": "True",
                "reasons": [
                    {
                        "reason": "OverLimit",
                        "message": "queue ml is over its limit",
                        "details": {"queueDetails": {"name": "ml", "used": {"nvidia.com/gpu": "8"}}},
                    }
                ],
            }
        ],
    }
    assert check.validate_object(_schema("PodGroup"), pod_group) == []


def test_bind_request() -> None:
    bind: dict[str, Any] = {
        "apiVersion": "scheduling.run.ai/v1alpha2",
        "kind": "BindRequest",
        "metadata": {"name": "pod-0", "namespace": "ml", "labels": {"selected-node": "node-1"}},
        "spec": {
            "podName": "pod-0",
            "selectedNode": "node-1",
            "receivedResourceType": "Fraction",
            "receivedGPU": {"count": 1, "portion": "0.50"},
            "selectedGPUGroups": ["3f2c"],
            "resourceClaimAllocations": [{"name": "gpu", "allocation": {"devices": {"results": []}}}],
            "backoffLimit": 3,
        },
        "status": {"phase": "Failed", "reason": "node gone", "failedAttempts": 3},
    }
    schema = _schema("BindRequest")
    assert check.validate_object(schema, bind) == []
    bind["spec"]["receivedResourceType"] = "Half"
    assert any("is not one of" in error for error in check.validate_object(schema, bind))
    # The model that writes BindRequests produces what the CRD accepts.
    model = crd_models.BindRequest.model_validate(
        {**bind, "spec": {**bind["spec"], "receivedResourceType": "Regular"}}
    )
    dumped = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert check.validate_object(schema, dumped) == []


def _topology(*labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "network"},
        "spec": {"levels": [{"nodeLabel": label} for label in labels]},
    }


def test_topology_levels() -> None:
    schema = _schema("Topology")
    assert (
        check.validate_object(schema, _topology("topology.kubernetes.io/zone", "kubernetes.io/hostname"))
        == []
    )
    assert check.validate_object(schema, _topology("topology.kubernetes.io/zone")) == []

    def errors(document: dict[str, Any]) -> str:
        return "\n".join(check.validate_object(schema, document))

    assert "can only be the last" in errors(
        _topology("kubernetes.io/hostname", "topology.kubernetes.io/zone")
    )
    assert "duplicate entry" in errors(_topology("rack", "rack"))
    assert "fewer than 1 items" in errors(_topology())
    assert "more than 16 items" in errors(_topology(*(f"level-{index}" for index in range(17))))
    assert "spec: required field is missing" in errors({**_topology("rack"), "spec": None})
    levels = _schema("Topology")["properties"]["spec"]["properties"]["levels"]
    # KAI v0.17: the node labels never change, the aliases may.
    assert {
        "rule": "self.map(l, l.nodeLabel) == oldSelf.map(l, l.nodeLabel)",
        "message": "nodeLabel structure is immutable; only aliases may be edited",
    } in levels["x-kubernetes-validations"]


def test_unknown_cel_rules_are_not_silently_accepted() -> None:
    schema = {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('a')"}]}
    assert any("does not know the CEL rule" in error for error in check.validate_object(schema, "abc"))
