"""A pod's owner chain as the pod grouper controller reads it through the API (controller.py's module doc):
each controller owner reference of a kind the grouper knows (`KNOWN_PLURALS`, which is what its role
may read: `ACCESS`) fetched at its apiVersion, a stub for an owner of another kind or one that cannot be
read, owners reused for a short while."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import ApiStatusError, JsonObject, KubeClient, ResourceKind
from kai_scheduler.k8s.runtime.objects import metadata_of

log = logging.getLogger(__name__)

MAX_OWNER_DEPTH = 16

# The plural of every kind the pod grouper knows (and a few common ones), by (API group, kind): the owners
# it reads. An owner of another kind is grouped by its reference, as an unknown kind.
KNOWN_PLURALS: Mapping[tuple[str, str], str] = {
    ("", "Pod"): "pods",
    ("", "ReplicationController"): "replicationcontrollers",
    ("apps", "Deployment"): "deployments",
    ("apps", "ReplicaSet"): "replicasets",
    ("apps", "StatefulSet"): "statefulsets",
    ("apps", "DaemonSet"): "daemonsets",
    ("batch", "Job"): "jobs",
    ("batch", "CronJob"): "cronjobs",
    ("kubeflow.org", "PyTorchJob"): "pytorchjobs",
    ("kubeflow.org", "TFJob"): "tfjobs",
    ("kubeflow.org", "XGBoostJob"): "xgboostjobs",
    ("kubeflow.org", "JAXJob"): "jaxjobs",
    ("kubeflow.org", "PaddleJob"): "paddlejobs",
    ("kubeflow.org", "MPIJob"): "mpijobs",
    ("kubeflow.org", "Notebook"): "notebooks",
    ("kubeflow.org", "ScheduledWorkflow"): "scheduledworkflows",
    ("trainer.kubeflow.org", "TrainJob"): "trainjobs",
    ("ray.io", "RayCluster"): "rayclusters",
    ("ray.io", "RayJob"): "rayjobs",
    ("ray.io", "RayService"): "rayservices",
    ("jobset.x-k8s.io", "JobSet"): "jobsets",
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): "leaderworkersets",
    ("serving.knative.dev", "Service"): "services",
    ("serving.knative.dev", "Configuration"): "configurations",
    ("serving.knative.dev", "Revision"): "revisions",
    ("argoproj.io", "Workflow"): "workflows",
    ("nvidia.com", "DynamoGraphDeployment"): "dynamographdeployments",
    ("machinelearning.seldon.io", "SeldonDeployment"): "seldondeployments",
    ("workspace.devfile.io", "DevWorkspace"): "devworkspaces",
    ("sparkoperator.k8s.io", "SparkApplication"): "sparkapplications",
    ("kubevirt.io", "VirtualMachineInstance"): "virtualmachineinstances",
    ("kubevirt.io", "VirtualMachine"): "virtualmachines",
    ("tekton.dev", "PipelineRun"): "pipelineruns",
    ("tekton.dev", "TaskRun"): "taskruns",
}

# Owners are read with GET only (any version: RBAC names groups and resources, not versions).
ACCESS = tuple(
    access(ResourceKind(group, "", kind, plural, True), "get")
    for (group, kind), plural in KNOWN_PLURALS.items()
)


def owner_resource_kind(api_version: str, kind: str) -> ResourceKind | None:
    """Where to GET an owner that an owner reference names (namespaced: owners share the pod's namespace);
    None for a kind the grouper does not read."""
    group, _, version = api_version.rpartition("/")
    plural = KNOWN_PLURALS.get((group, kind))
    return ResourceKind(group, version, kind, plural, True) if plural else None


def controller_reference(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first owner reference with `controller: true` (the grouper itself reports malformed ones)."""
    refs = metadata_of(obj).get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


class OwnerGone(Exception):
    pass


@dataclass(slots=True)
class Owners:
    objects: list[JsonObject]
    unreadable: list[str]  # why a stub stands in for an owner


class OwnerReader:
    """Reads owner chains with `client`; an owner read is reused for `ttl` seconds (`on_read`: called
    for each read from the API)."""

    def __init__(self, client: KubeClient, ttl: float, *, on_read: Callable[[], None] = lambda: None) -> None:
        self.client = client
        self.ttl = ttl
        self.on_read = on_read
        self._cache: dict[tuple[str, str, str, str], tuple[float, JsonObject | None]] = {}

    async def chain(self, pod: JsonObject, namespace: str, not_before: float) -> Owners:
        """The pod's controller chain, read through the API (stubs for owners that cannot be read)."""
        found = Owners([], [])
        seen: set[str] = set()
        current: Mapping[str, Any] = pod
        for _ in range(MAX_OWNER_DEPTH):
            ref = controller_reference(current)
            if ref is None:
                break
            api_version, kind = ref.get("apiVersion"), ref.get("kind")
            name, uid = ref.get("name"), ref.get("uid")
            if not all(isinstance(v, str) and v for v in (api_version, kind, name, uid)):
                break  # malformed: the grouper names the field
            assert isinstance(api_version, str) and isinstance(kind, str)
            assert isinstance(name, str) and isinstance(uid, str)
            if uid in seen:
                break  # a cycle: the grouper reports it
            seen.add(uid)
            owner = await self._read_owner(api_version, kind, name, uid, namespace, not_before, found)
            found.objects.append(owner)
            current = owner
        return found

    async def _read_owner(
        self,
        api_version: str,
        kind: str,
        name: str,
        uid: str,
        namespace: str,
        not_before: float,
        found: Owners,
    ) -> JsonObject:
        rkind = owner_resource_kind(api_version, kind)
        key = (api_version, kind, namespace, name)
        now = time.monotonic()
        cached = self._cache.get(key)
        obj: JsonObject | None
        if rkind is None:
            found.unreadable.append(f"{kind} {namespace}/{name}: not a kind the pod grouper reads")
            obj = None
        elif cached is not None and not_before <= cached[0] and now - cached[0] < self.ttl:
            obj = cached[1]
        else:
            self.on_read()
            try:
                obj = await self.client.get(rkind, name, namespace)
            except ApiStatusError as error:
                if error.code == 404:
                    raise OwnerGone(f"its owner {kind} {namespace}/{name} is gone") from None
                # A 403 is not among them: the grouper's role grants what it reads (ACCESS).
                if error.code not in (400, 405, 406):
                    raise
                log.info(
                    "owner %s %s/%s of a pod cannot be read (%s); grouping by its reference",
                    kind,
                    namespace,
                    name,
                    error,
                )
                found.unreadable.append(f"{kind} {namespace}/{name}: {error.code} {error.reason}")
                obj = None
            self._prune(now)
            self._cache[key] = (now, obj)
        if obj is not None and str(metadata_of(obj).get("uid") or "") == uid:
            return obj
        if obj is not None:
            # Same name, another object: the owner was replaced; the pod belongs to the old one.
            raise OwnerGone(f"its owner {kind} {namespace}/{name} (uid {uid}) was replaced")
        return {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
        }

    def _prune(self, now: float) -> None:
        if len(self._cache) < 1024:
            return
        for key, (at, _) in list(self._cache.items()):
            if now - at >= self.ttl:
                del self._cache[key]


__all__ = [
    "ACCESS",
    "KNOWN_PLURALS",
    "MAX_OWNER_DEPTH",
    "OwnerGone",
    "OwnerReader",
    "Owners",
    "controller_reference",
    "owner_resource_kind",
]
