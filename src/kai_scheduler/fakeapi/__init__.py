"""A fake Kubernetes API server for tests and for trying live mode without a cluster.

Real HTTP on 127.0.0.1 that `kubectl` and `lightkube` talk to: discovery, get/list/watch (resourceVersion,
bookmarks, 410 Gone), create/update/patch/delete with optimistic concurrency, the pod `binding`,
`eviction` and `status` subresources, CRDs (KAI's are installed), and fault injection.

    from kai_scheduler.fakeapi import FakeApiServer

    with FakeApiServer() as server:
        server.write_kubeconfig(tmp_path / "kubeconfig")
        server.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})

Standalone: `python -m kai_scheduler.fakeapi --port 0 --kubeconfig PATH`.
"""

from .errors import ApiError
from .resources import DEFAULT_CRDS, KAI_CRDS, WORKLOAD_CRDS, PrinterColumn, ResourceType, crd_manifest
from .server import FakeApiServer, FaultRule, RequestRecord
from .store import BindRecord, Event, EvictionRecord, Store

__all__ = [
    "DEFAULT_CRDS",
    "KAI_CRDS",
    "WORKLOAD_CRDS",
    "ApiError",
    "BindRecord",
    "Event",
    "EvictionRecord",
    "FakeApiServer",
    "FaultRule",
    "PrinterColumn",
    "RequestRecord",
    "ResourceType",
    "Store",
    "crd_manifest",
]
