"""Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`), `/version` and a minimal
OpenAPI v3 (paths only) — what kubectl reads before it talks to a resource."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .resources import ALL_VERBS, STATUS_VERBS, Registry, ResourceType

Obj = dict[str, Any]

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kai-fakeapi",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _storage_hash(rt: ResourceType) -> str:
    return base64_hash(f"{rt.group}/{rt.version}/{rt.kind}")[:11]


def base64_hash(text: str) -> str:
    import base64

    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_entry(group: str, versions: list[str]) -> Obj:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> Obj:
    groups = [_group_entry(g, vs) for g, vs in registry.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> Obj | None:
    versions = registry.group_versions().get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def api_resource_list(registry: Registry, group: str, version: str) -> Obj | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[Obj] = []
    for rt in types:
        entry: Obj = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        if rt.verbs == ALL_VERBS:
            entry["storageVersionHash"] = _storage_hash(rt)
        resources.append(entry)
        for sub in rt.subresources:
            sub_entry: Obj = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced}
            if sub == "status":
                sub_entry.update(kind=rt.kind, verbs=list(STATUS_VERBS))
            elif sub == "binding":
                sub_entry.update(kind="Binding", verbs=["create"])
            elif sub == "eviction":
                sub_entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
            elif sub == "token":
                sub_entry.update(
                    group="authentication.k8s.io", version="v1", kind="TokenRequest", verbs=["create"]
                )
            resources.append(sub_entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


# --------------------------------------------------------------------------------------------- OpenAPI v3


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _query_param(name: str) -> Obj:
    return {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}


def _gvk(rt: ResourceType) -> Obj:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def openapi_v3_document(registry: Registry, group: str, version: str) -> Obj | None:
    """The OpenAPI v3 document of one group/version: paths with the operations and the query parameters
    kubectl checks (it sends `fieldValidation` only when PATCH declares it). No schemas: kubectl then
    computes client-side apply patches from its built-in types, or as JSON merge patches for CRs. Every
    kind gets a PATCH operation (even create-only `Binding`): kubectl's validation looks for one per kind
    and would otherwise fall back to the OpenAPI v2 document, which this server does not have."""
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths: Obj = {}
    for rt in types:
        base = f"/{_gv_path(group, version)}" + ("/namespaces/{namespace}" if rt.namespaced else "")
        write_params = [_query_param(n) for n in ("dryRun", "fieldManager", "fieldValidation")]
        item_ops: Obj = {
            "get": {
                "operationId": f"read{rt.kind}",
                "x-kubernetes-action": "get",
                "x-kubernetes-group-version-kind": _gvk(rt),
            },
            "put": {
                "operationId": f"replace{rt.kind}",
                "x-kubernetes-action": "put",
                "x-kubernetes-group-version-kind": _gvk(rt),
                "parameters": write_params,
            },
            "patch": {
                "operationId": f"patch{rt.kind}",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": _gvk(rt),
                "parameters": [*write_params, _query_param("force")],
            },
            "delete": {
                "operationId": f"delete{rt.kind}",
                "x-kubernetes-action": "delete",
                "x-kubernetes-group-version-kind": _gvk(rt),
                "parameters": [_query_param("dryRun")],
            },
        }
        paths[f"{base}/{rt.plural}/{{name}}"] = item_ops
        paths[f"{base}/{rt.plural}"] = {
            "get": {
                "operationId": f"list{rt.kind}",
                "x-kubernetes-action": "list",
                "x-kubernetes-group-version-kind": _gvk(rt),
            },
            "post": {
                "operationId": f"create{rt.kind}",
                "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": _gvk(rt),
                "parameters": write_params,
            },
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }


def openapi_v3_root(registry: Registry) -> Obj:
    paths: Obj = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            doc = openapi_v3_document(registry, group, version)
            if doc is None:
                continue
            digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()[:128]
            key = _gv_path(group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}
