"""The small Kubernetes API interface that every live-mode component uses.

Components talk to the API server only through `KubeClient`, with objects as plain JSON dicts (what the
API server sends): the scheduling core never sees them, only the `ClusterState` built from them. The
implementation on lightkube lives in `lightkube_client.py`; tests may substitute a recording fake.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

JsonObject = dict[str, Any]
PatchType = Literal["merge", "json", "strategic", "apply"]
WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


def api_version(group: str, version: str) -> str:
    """An object's `apiVersion`: `group/version`, or the version alone in the core group ("")."""
    return f"{group}/{version}" if group else version


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """One API resource: where it lives and how it is named."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return api_version(self.group, self.version)


PODS = ResourceKind("", "v1", "Pod", "pods", True)
NODES = ResourceKind("", "v1", "Node", "nodes", False)
NAMESPACES = ResourceKind("", "v1", "Namespace", "namespaces", False)
CONFIG_MAPS = ResourceKind("", "v1", "ConfigMap", "configmaps", True)
EVENTS = ResourceKind("", "v1", "Event", "events", True)
PRIORITY_CLASSES = ResourceKind("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False)
LEASES = ResourceKind("coordination.k8s.io", "v1", "Lease", "leases", True)
QUEUES = ResourceKind("scheduling.run.ai", "v2", "Queue", "queues", False)
ACCOUNTED_RESOURCES = ResourceKind(
    "scheduling.run.ai", "v1alpha1", "AccountedResource", "accountedresources", False
)
POD_GROUPS = ResourceKind("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups", True)
BIND_REQUESTS = ResourceKind("scheduling.run.ai", "v1alpha2", "BindRequest", "bindrequests", True)
TOPOLOGIES = ResourceKind("kai.scheduler", "v1alpha1", "Topology", "topologies", False)
SCHEDULING_SHARDS = ResourceKind("kai.scheduler", "v1", "SchedulingShard", "schedulingshards", False)
KAI_CONFIGS = ResourceKind("kai.scheduler", "v1", "Config", "configs", False)
RESOURCE_CLAIMS = ResourceKind("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True)
RESOURCE_SLICES = ResourceKind("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False)
DEVICE_CLASSES = ResourceKind("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False)
PERSISTENT_VOLUME_CLAIMS = ResourceKind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True)
PERSISTENT_VOLUMES = ResourceKind("", "v1", "PersistentVolume", "persistentvolumes", False)
STORAGE_CLASSES = ResourceKind("storage.k8s.io", "v1", "StorageClass", "storageclasses", False)
PDBS = ResourceKind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True)
# Published per node by NFD's topology updater (or the resource topology exporter); read by the numa plugin.
NODE_RESOURCE_TOPOLOGIES = ResourceKind(
    "topology.node.k8s.io", "v1alpha2", "NodeResourceTopology", "noderesourcetopologies", False
)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: WatchEventType
    object: JsonObject


class ApiStatusError(Exception):
    """The API server answered with an error Status (409 Conflict, 404 NotFound, 410 Gone, ...)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class KubeClient(Protocol):
    async def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> JsonObject: ...

    async def list_objects(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[JsonObject], str]:
        """The objects and the list's resourceVersion (to watch from)."""
        ...

    def watch(
        self,
        kind: ResourceKind,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        """Events after `resource_version`; raises ApiStatusError(410) when that version is too old."""
        ...

    async def create(self, kind: ResourceKind, obj: JsonObject) -> JsonObject: ...

    async def replace(
        self, kind: ResourceKind, obj: JsonObject, *, subresource: str | None = None
    ) -> JsonObject:
        """PUT with the object's resourceVersion: a stale one raises ApiStatusError(409)."""
        ...

    async def patch(
        self,
        kind: ResourceKind,
        name: str,
        patch: Mapping[str, Any] | list[Any],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> JsonObject: ...

    async def delete(self, kind: ResourceKind, name: str, namespace: str | None = None) -> None: ...

    async def bind(
        self, namespace: str, pod: str, node: str, *, annotations: Mapping[str, str] | None = None
    ) -> None:
        """POST the pod's binding subresource (the server answers with a Status, not a Binding). The API
        server copies the Binding's `annotations` onto the pod together with `spec.nodeName`."""
        ...

    async def evict(self, namespace: str, pod: str) -> None:
        """POST the pod's eviction subresource (policy/v1 Eviction)."""
        ...


def status_from_object(obj: Mapping[str, Any]) -> ApiStatusError:
    """The error a `Status` object (an error answer's body, a watch's ERROR event) stands for."""
    code = obj.get("code")
    return ApiStatusError(
        int(code) if isinstance(code, int) else 500,
        str(obj.get("reason") or ""),
        str(obj.get("message") or ""),
    )


def status_error(code: int, content: bytes) -> ApiStatusError:
    """The error for an HTTP error answer: its `Status` body when there is one, else the bare code."""
    try:
        body = json.loads(content) if content else None
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        status = status_from_object(body)
        return ApiStatusError(code, status.reason, status.message)
    text = content.decode(errors="replace").strip()[:500] if content else ""
    return ApiStatusError(code, _REASONS.get(code, "Unknown"), text)


_REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
