"""`LightkubeClient`: the project's `KubeClient` on lightkube's configuration and aiohttp's transport.

Configuration (kubeconfig files, contexts, in-cluster service accounts, bearer tokens, exec plugins, client
certificates, CA bundles) is lightkube's: `KubeConfig` and the connection parameters of its HTTP adapter
(`lightkube.config.client_adapter`: the cluster's base URL, its TLS context with the client certificate,
and the authentication flow). Requests go out as plain JSON, and objects come back as plain dicts (what
the API server sends): the components need nothing more, and decoding every pod into lightkube's typed
models only to turn it back into a dict would cost time at 10,000 pods. That is also what makes the custom
resources (Queue, PodGroup, BindRequest, Topology) no different from built-in kinds.

The HTTP transport: watches go over aiohttp (one pooled session per client, made on first use inside the
event loop), every other request over `http1.Http1Pool`'s kept-alive connections (aiohttp's too when a
proxy is configured). Measured with 16 requests in flight, a request costs this process about 1.0-1.2 ms
of CPU with the httpx2 client that lightkube's adapter builds, 0.1-0.25 ms with aiohttp and 0.03 ms with
the pool; at several API calls per scheduled pod that was a third of the `run` process (issue #8), and
aiohttp's share still a tenth of it on issue #23's 10,000-pod row. Authentication is lightkube's flow
(`httpx2.Auth`: its bearer token, token file, re-read on a 401, or exec plugin), by `kube_auth.py`.

Errors: an answer with an error `Status` raises `ApiStatusError(code, reason, message)` (a watch's ERROR
event included, e.g. 410 Gone); a failure to reach the server (refused, reset, cut mid-stream, timed out)
raises the built-in `ConnectionError`, so that callers can retry without knowing about HTTP libraries.

    async with LightkubeClient.from_kubeconfig("~/.kube/config") as client:
        pods, version = await client.list_objects(PODS)
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlencode, urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User

from kai_scheduler.k8s.runtime import json_wire
from kai_scheduler.k8s.runtime.client import (
    PODS,
    ApiStatusError,
    JsonObject,
    PatchType,
    ResourceKind,
    WatchEvent,
    status_error,
    status_from_object,
)
from kai_scheduler.k8s.runtime.http1 import Http1Pool
from kai_scheduler.k8s.runtime.kube_auth import Authorization
from kai_scheduler.k8s.runtime.objects import metadata_of

log = logging.getLogger(__name__)

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
_WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


class LightkubeClient:
    """A `KubeClient` (see `kai_scheduler.k8s.runtime.client`) over lightkube's configured HTTP connection.

    `field_manager` names this component in server-side field management (every write carries it).
    `timeout`: seconds for ordinary requests. Watches ask the server to end the stream after a random
    `watch_timeout` .. 2 x `watch_timeout` seconds (as client-go does, so that watches of many clients do
    not all restart at once) and give up on a silent connection after that plus `watch_read_slack` seconds.
    `page_size`: lists are read in pages of this many objects (0: one request).
    """

    def __init__(
        self,
        config: KubeConfig | SingleConfig,
        *,
        context: str | None = None,
        field_manager: str = "kai-scheduler",
        timeout: float = 10.0,
        watch_timeout: float = 300.0,
        watch_read_slack: float = 30.0,
        page_size: int = 500,
        max_connections: int = 100,
    ) -> None:
        single = config.get(context) if isinstance(config, KubeConfig) else config
        if single is None:  # pragma: no cover - KubeConfig.get raises instead
            raise ValueError("no usable context in the kubeconfig")
        if single.user is None:
            # lightkube's adapter insists on a user entry; anonymous access is a user without credentials.
            single = SingleConfig(
                context_name=single.context_name,
                context=single.context,
                cluster=single.cluster,
                user=User(),
                fname=single.fname,
            )
        self.config = single
        self.namespace = single.namespace or "default"
        self.field_manager = field_manager
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.watch_read_slack = watch_read_slack
        self.timeout = timeout
        params = ConnectionParams().httpx_params(single)
        self.base_url = str(params["base_url"]).rstrip("/")
        self._ssl: ssl.SSLContext | bool = params["verify"] if self.base_url.startswith("https:") else False
        self._authorization = Authorization(params["auth"])
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._proxy = _environment_proxy(self.base_url)
        self._pool: Http1Pool | None = None  # made on first use, inside the event loop

    # --- construction ----------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls, path: str | Path | None = None, *, context: str | None = None, **options: Any
    ) -> LightkubeClient:
        """From a kubeconfig file; without a path: in-cluster config, then `$KUBECONFIG`, then
        `~/.kube/config` (lightkube's `KubeConfig.from_env`)."""
        config = KubeConfig.from_env() if path is None else KubeConfig.from_file(path)
        return cls(config, context=context, **options)

    @classmethod
    def from_url(
        cls, url: str, *, token: str | None = None, insecure: bool = False, **options: Any
    ) -> LightkubeClient:
        """Straight to an API server URL (e.g. the fake API server's), optionally with a bearer token."""
        cluster = Cluster(server=url, insecure=insecure)
        config = KubeConfig.from_one(cluster=cluster, user=User(token=token))
        return cls(config, **options)

    async def aclose(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _http(self) -> aiohttp.ClientSession:
        """The session, made on first use (aiohttp binds it to the running event loop)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self._max_connections)
            # Not `trust_env`: with it aiohttp reads ~/.netrc in a worker thread for every request. The
            # proxy settings from the environment are read once instead (`_proxy`).
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def __aenter__(self) -> LightkubeClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- paths -----------------------------------------------------------------------------------

    def path(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
        if kind.namespaced and namespace is not None:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{kind.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base

    def _namespace_of(self, kind: ResourceKind, obj: Mapping[str, Any], namespace: str | None) -> str | None:
        if not kind.namespaced:
            return None
        meta = metadata_of(obj)
        return str(namespace or meta.get("namespace") or self.namespace)

    # --- requests --------------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        content: bytes | None,
        headers: dict[str, str],
        timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """Send one request over aiohttp; the caller reads and releases the answer."""
        url = self.base_url + path
        session = self._http()

        async def send() -> aiohttp.ClientResponse:
            return await session.request(
                method, url, params=params, data=content, headers=headers, timeout=timeout, proxy=self._proxy
            )

        return await self._authorization.send(
            method, url, headers, send, lambda response: response.status, aiohttp.ClientResponse.release
        )

    async def _exchange(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        content: bytes | None,
        headers: dict[str, str],
    ) -> tuple[int, bytes]:
        """One ordinary request, over the pool (aiohttp through a proxy): (status, body)."""
        if self._proxy is not None:
            timeout = aiohttp.ClientTimeout(total=self.timeout)
            response = await self._send(method, path, params, content, headers, timeout)
            async with response:
                return response.status, await response.read()
        if self._pool is None or self._pool.loop is not asyncio.get_running_loop():
            ssl_context = self._ssl if isinstance(self._ssl, ssl.SSLContext) else None
            self._pool = Http1Pool(self.base_url, ssl_context, limit=self._max_connections)
        pool = self._pool
        target = f"{path}?{urlencode(params)}" if params else path

        async def send() -> tuple[int, bytes]:
            return await pool.request(method, target, headers, content, self.timeout)

        url = self.base_url + path
        return await self._authorization.send(method, url, headers, send, lambda answer: answer[0], _nothing)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json"}
        content: bytes | None = None
        if body is not None:
            content = json_wire.encode(body)
            headers["Content-Type"] = content_type
        try:
            status, data = await self._exchange(method, path, params, content, headers)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ConnectionError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if status >= 400:
            raise status_error(status, data)
        if not data:
            return None
        try:
            return json_wire.decode(data)
        except ValueError:
            return None

    def _write_params(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        params = {"fieldManager": self.field_manager} if self.field_manager else {}
        params.update(extra or {})
        return params

    # --- KubeClient ------------------------------------------------------------------------------

    async def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> JsonObject:
        ns = (namespace or self.namespace) if kind.namespaced else None
        result: JsonObject = await self._request("GET", self.path(kind, ns, name))
        return result

    async def list_objects(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[JsonObject], str]:
        """All objects (of every namespace when `namespace` is None), read page by page; the version is the
        list's (the first page's: later pages are of the same snapshot)."""
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if self.page_size > 0:
            params["limit"] = str(self.page_size)
        items: list[JsonObject] = []
        version: str | None = None
        path = self.path(kind, namespace)
        while True:
            page = await self._request("GET", path, params=params)
            if not isinstance(page, dict):
                raise ApiStatusError(500, "InternalError", f"GET {path}: the answer is not a list")
            meta = metadata_of(page)
            if version is None:
                version = str(meta.get("resourceVersion") or "")
            for item in page.get("items") or []:
                # Items of a list carry no apiVersion/kind; put them back so each object stands alone.
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind.kind)
                items.append(item)
            token = meta.get("continue")
            if not token:
                break
            params["continue"] = str(token)
        return items, version or ""

    async def watch(
        self,
        kind: ResourceKind,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        """Events after `resource_version` until the server ends the stream (a clean end simply stops the
        iteration; resume from the last event's version). ERROR events raise `ApiStatusError` (410: the
        version is too old, list again); a cut connection raises `ConnectionError`."""
        server_timeout = int(self.watch_timeout * (1.0 + random.random()))
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(server_timeout),
        }
        if bookmarks:
            params["allowWatchBookmarks"] = "true"
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        path = self.path(kind, namespace)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.timeout, sock_read=server_timeout + self.watch_read_slack
        )
        try:
            response = await self._send("GET", path, params, None, {"Accept": "application/json"}, timeout)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ConnectionError(f"watch {path}: {type(exc).__name__}: {exc}") from exc
        try:
            if response.status >= 400:
                raise status_error(response.status, await response.read())
            pending = b""
            async for chunk in response.content.iter_any():
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if line.strip() and (event := self._watch_event(kind, path, line)) is not None:
                        yield event
            if pending.strip() and (event := self._watch_event(kind, path, pending)) is not None:
                yield event
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ConnectionError(f"watch {path}: {type(exc).__name__}: {exc}") from exc
        finally:
            # Closed, not back to the pool: a server that ends a watch may close the connection right
            # after the stream's last chunk, and a request must not be sent on it in between.
            response.close()

    @staticmethod
    def _watch_event(kind: ResourceKind, path: str, line: bytes) -> WatchEvent | None:
        try:
            event = json_wire.decode(line)
        except ValueError as exc:
            raise ConnectionError(f"watch {path}: undecodable event: {line[:200]!r}") from exc
        etype = event.get("type")
        obj = event.get("object") or {}
        if etype == "ERROR":
            raise status_from_object(obj)
        if etype not in _WATCH_EVENT_TYPES:
            log.warning("watch %s: ignoring an event of unknown type %r", path, etype)
            return None
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        return WatchEvent(etype, obj)

    async def create(self, kind: ResourceKind, obj: JsonObject) -> JsonObject:
        body = {"apiVersion": kind.api_version, "kind": kind.kind, **obj}
        ns = self._namespace_of(kind, obj, None)
        result: JsonObject = await self._request(
            "POST", self.path(kind, ns), params=self._write_params(), body=body
        )
        return result

    async def replace(
        self, kind: ResourceKind, obj: JsonObject, *, subresource: str | None = None
    ) -> JsonObject:
        body = {"apiVersion": kind.api_version, "kind": kind.kind, **obj}
        name = str(metadata_of(obj).get("name") or "")
        if not name:
            raise ValueError("replace: the object has no metadata.name")
        ns = self._namespace_of(kind, obj, None)
        result: JsonObject = await self._request(
            "PUT", self.path(kind, ns, name, subresource), params=self._write_params(), body=body
        )
        return result

    async def patch(
        self,
        kind: ResourceKind,
        name: str,
        patch: Mapping[str, Any] | list[Any],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        force: bool = False,
    ) -> JsonObject:
        """PATCH; `patch_type` "apply" is server-side apply (`force` takes over conflicting fields)."""
        ns = (namespace or self.namespace) if kind.namespaced else None
        extra = {"force": "true"} if force and patch_type == "apply" else None
        body: Any = dict(patch) if isinstance(patch, Mapping) else list(patch)
        if patch_type == "apply" and isinstance(body, dict):
            body = {"apiVersion": kind.api_version, "kind": kind.kind, **body}
        result: JsonObject = await self._request(
            "PATCH",
            self.path(kind, ns, name, subresource),
            params=self._write_params(extra),
            body=body,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
        )
        return result

    async def delete(self, kind: ResourceKind, name: str, namespace: str | None = None) -> None:
        ns = (namespace or self.namespace) if kind.namespaced else None
        await self._request("DELETE", self.path(kind, ns, name))

    async def bind(
        self, namespace: str, pod: str, node: str, *, annotations: Mapping[str, str] | None = None
    ) -> None:
        """POST pods/{pod}/binding. The server answers with a `Status` (not the Binding), which is ignored:
        success is the 201. A pod already bound answers 409 Conflict. `annotations` go onto the pod with
        the node (the API server merges a Binding's annotations into the pod's)."""
        metadata: JsonObject = {"name": pod, "namespace": namespace}
        if annotations:
            metadata["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self._request("POST", self.path(PODS, namespace, pod, "binding"), body=body)

    async def evict(self, namespace: str, pod: str) -> None:
        """POST pods/{pod}/eviction (policy/v1). 429 means a PodDisruptionBudget forbids it for now."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace},
        }
        await self._request("POST", self.path(PODS, namespace, pod, "eviction"), body=body)


def _nothing(_: object) -> None:
    pass


def _environment_proxy(url: str) -> str | None:
    """The proxy for `url` from HTTP_PROXY / HTTPS_PROXY / NO_PROXY (as lightkube's adapter honours
    them), or None."""
    parts = urlsplit(url)
    if parts.hostname and proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme)


__all__ = ["LightkubeClient"]
