"""A fake Kubernetes API server for tests and for trying live mode without a cluster.

Real HTTP on 127.0.0.1 that `kubectl` and `lightkube` talk to: discovery, get/list/watch (resourceVersion,
bookmarks, 410 Gone), create/update/patch/delete with optimistic concurrency, the pod `binding`,
`eviction` and `status` subresources, CRDs (KAI's, from the definition the Helm chart is generated from),
fault injection, and on demand (`strict=True`) authentication and RBAC as a real API server's. Not part
of kai-scheduler's wheel or image: a distribution of its own (fakeapi/).

    from kai_fakeapi import FakeApiServer

    with FakeApiServer() as server:
        server.write_kubeconfig(tmp_path / "kubeconfig")
        server.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})

Standalone: `kai-fakeapi --port 0 --kubeconfig PATH` (or `python -m kai_fakeapi ...`).
"""

from .auth import UserInfo
from .crds import DEFAULT_CRDS, KAI_CRDS, WORKLOAD_CRDS
from .errors import ApiError
from .exchange import RequestRecord
from .faults import FaultRule
from .resources import ResourceType
from .server import FakeApiServer
from .store import Store
from .subresources import BindRecord, EvictionRecord
from .versioned import Event

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
    "RequestRecord",
    "ResourceType",
    "Store",
    "UserInfo",
]
