"""The CustomResourceDefinitions a new store has (`DEFAULT_CRDS`): KAI's, from the one definition the Helm
chart is generated from (`kai_scheduler.api.crds`), and the workload kinds the pod grouper knows."""

from __future__ import annotations

from typing import Any

from kai_scheduler.api.crds import CRDS as KAI_DEFINITIONS
from kai_scheduler.api.crds import crd_manifest as kai_crd_manifest


def _workload_crd(
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A namespaced kind with a status subresource and a schema that takes anything."""
    names: dict[str, Any] = {
        "plural": plural,
        "singular": kind.lower(),
        "kind": kind,
        "listKind": f"{kind}List",
    }
    if short_names:
        names["shortNames"] = list(short_names)
    if categories:
        names["categories"] = list(categories)
    version_entry = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        "subresources": {"status": {}},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": names, "scope": "Namespaced", "versions": [version_entry]},
    }


# The workload kinds the pod grouper knows. Their real CRDs belong to other projects; these serve the kinds
# with any content, which is all the pod grouper's tests need.
WORKLOAD_CRDS: tuple[dict[str, Any], ...] = (
    _workload_crd("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", categories=("kubeflow",)),
    _workload_crd("kubeflow.org", "v1", "TFJob", "tfjobs", categories=("kubeflow",)),
    _workload_crd("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs", categories=("kubeflow",)),
    _workload_crd("kubeflow.org", "v1", "JAXJob", "jaxjobs", categories=("kubeflow",)),
    _workload_crd("kubeflow.org", "v2beta1", "MPIJob", "mpijobs", categories=("kubeflow",)),
    _workload_crd("ray.io", "v1", "RayCluster", "rayclusters"),
    _workload_crd("ray.io", "v1", "RayJob", "rayjobs"),
    _workload_crd("ray.io", "v1", "RayService", "rayservices"),
    _workload_crd("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    _workload_crd(
        "leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", short_names=("lws",)
    ),
)

KAI_CRDS: tuple[dict[str, Any], ...] = tuple(kai_crd_manifest(definition) for definition in KAI_DEFINITIONS)
"""KAI's CRDs exactly as the Helm chart ships them (its crds/ are generated from the same definitions)."""

DEFAULT_CRDS: tuple[dict[str, Any], ...] = KAI_CRDS + WORKLOAD_CRDS
