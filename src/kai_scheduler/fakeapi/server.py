"""`FakeApiServer`: the store behind real HTTP on 127.0.0.1, with fault injection for tests.

with FakeApiServer() as server:
    server.write_kubeconfig(path)      # for kubectl / lightkube
    server.store.create(node)          # seed state without HTTP
    server.fail_next(1, 409, verb="create", resource="pods/binding")
    server.drop_watches()
    with server.down():                # the API server is unreachable, the store survives
        time.sleep(10)
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import queue
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from . import discovery, protobuf, tables
from .errors import ApiError, bad_request
from .resources import ResourceType
from .store import CLOSE, DROP, Obj, Store, Watcher

log = logging.getLogger(__name__)

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass
class FaultRule:
    """Fail the next `remaining` matching requests with `status` (0: cut the connection, no response).

    `after_commit`: perform the request first, then answer the error (the response was lost: the client
    sees a failure although the write happened)."""

    status: int
    remaining: int
    verb: str | None = None
    resource: str | None = None
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    message: str | None = None
    retry_after: int | None = None
    delay: float = 0.0
    after_commit: bool = False
    hits: int = 0

    def matches(self, route: Route) -> bool:
        if self.verb is not None and self.verb != route.verb:
            return False
        if self.resource is not None:
            resource, _, sub = self.resource.partition("/")
            if resource not in (route.rt.plural, route.rt.key):
                return False
            if sub != (route.subresource or "") and self.subresource is None:
                return False  # `pods` is the pods themselves, `pods/binding` their binding
        if self.subresource is not None and self.subresource != (route.subresource or ""):
            return False
        if self.namespace is not None and self.namespace != route.namespace:
            return False
        return self.name is None or self.name == route.name

    def error(self) -> ApiError:
        message = self.message or f"injected fault: {self.status}"
        retry = (
            self.retry_after if self.retry_after is not None else (1 if self.status in (429, 503) else None)
        )
        return ApiError(self.status, message, retry_after=retry)


@dataclass(frozen=True)
class Route:
    verb: str
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


@dataclass
class RequestRecord:
    """One request as the server saw it (see `FakeApiServer.requests`)."""

    method: str
    path: str
    query: dict[str, str]
    verb: str | None = None
    resource: str | None = None
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    code: int | None = None
    time: float = field(default_factory=time.time)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], owner: FakeApiServer) -> None:
        self.owner = owner
        self.conn_lock = threading.Lock()
        self.connections: set[socket.socket] = set()
        self.conn_threads: set[threading.Thread] = set()
        self._ids = itertools.count(1)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name=f"fakeapi-conn-{next(self._ids)}",
            daemon=True,
        )
        with self.conn_lock:
            self.connections.add(request)
            self.conn_threads.add(thread)
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            with self.conn_lock:
                self.connections.discard(request)
                self.conn_threads.discard(threading.current_thread())

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s ended with an error", client_address, exc_info=True)

    def cut_connections(self) -> list[threading.Thread]:
        with self.conn_lock:
            conns, threads = list(self.connections), list(self.conn_threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        return threads


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a watch event goes out at once
    # Buffered: a response's headers and body leave in one send (`handle_one_request` flushes after each
    # request; a watch flushes every event), instead of one system call (and TCP segment) for each.
    wbufsize = 64 * 1024
    server: _HttpServer
    server_version = "kai-fakeapi"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # ------------------------------------------------------------------------------------------ plumbing

    @property
    def owner(self) -> FakeApiServer:
        return self.server.owner

    @property
    def store(self) -> Store:
        return self.server.owner.store

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, code: int, body: Obj | str, headers: dict[str, str] | None = None) -> None:
        if isinstance(body, str):
            data = body.encode()
            ctype = "text/plain; charset=utf-8"
        else:
            data = json.dumps(body, separators=(",", ":")).encode()
            ctype = "application/json"
        # Record the outcome before answering: a client that reads the request log right after the
        # response must find it there.
        if self._record is not None:
            self._record.code = code
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, err: ApiError) -> None:
        headers = {"Retry-After": str(err.retry_after)} if err.retry_after is not None else None
        self._send(err.code, err.status(), headers)

    def _cut(self) -> None:
        """Drop the connection without (the rest of) a response."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # --------------------------------------------------------------------------------------------- routing

    _record: RequestRecord | None = None

    def _dispatch(self, method: str) -> None:
        self._record = None
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        record = RequestRecord(method, url.path, query)
        self._record = record
        self.owner._log_request(record)
        try:
            body = self._read_body()
            if self._discovery(method, url.path, query):
                return
            route = self._route(method, url.path, query)
            record.verb, record.resource = route.verb, route.rt.key
            record.subresource, record.namespace, record.name = route.subresource, route.namespace, route.name
            fault = self.owner._take_fault(route)
            if fault is not None and (not fault.after_commit or route.verb == "watch"):
                self._fail(fault, route)
                return
            if route.verb == "watch":
                self._watch(route, query)
                return
            code, result = self._execute(method, route, query, body)
            if fault is not None:
                self._fail(fault, route)
                return
            self._send(code, result)
        except ApiError as err:
            self._send_error(err)
        except (ConnectionError, BrokenPipeError, TimeoutError):
            self.close_connection = True
        except Exception as exc:  # a bug here must not look like a dead server
            log.exception("fakeapi: internal error on %s %s", method, self.path)
            self._send_error(ApiError(500, f"fakeapi internal error: {exc!r}"))

    def _fail(self, fault: FaultRule, route: Route) -> None:
        if fault.delay:
            time.sleep(fault.delay)
        if fault.status == 0:
            self._cut()
            return
        err = fault.error()
        if route.verb == "watch" and fault.status == 410:
            self._start_stream()
            self._chunk({"type": "ERROR", "object": err.status()})
            self._end_stream()
            return
        self._send_error(err)

    def _discovery(self, method: str, path: str, query: dict[str, str]) -> bool:
        del query
        reg = self.store.registry
        path = path.rstrip("/") or "/"
        if method != "GET":
            return False
        body: Obj | str | None = None
        if path == "/version":
            body = discovery.KUBERNETES_VERSION
        elif path in ("/healthz", "/readyz", "/livez"):
            body = "ok"
        elif path == "/api":
            body = discovery.api_versions(f"{self.owner.host}:{self.owner.port}")
        elif path == "/apis":
            body = discovery.api_group_list(reg)
        elif path == "/openapi/v3":
            body = discovery.openapi_v3_root(reg)
        elif path.startswith("/openapi/v3/"):
            rest = path[len("/openapi/v3/") :].split("/")
            if rest[0] == "api" and len(rest) == 2:
                body = discovery.openapi_v3_document(reg, "", rest[1])
            elif rest[0] == "apis" and len(rest) == 3:
                body = discovery.openapi_v3_document(reg, rest[1], rest[2])
            if body is None:
                raise _not_found_path()
        else:
            parts = [unquote(p) for p in path.strip("/").split("/")]
            if parts[0] == "api" and len(parts) == 2:
                body = discovery.api_resource_list(reg, "", parts[1])
            elif parts[0] == "apis" and len(parts) == 2:
                body = discovery.api_group(reg, parts[1])
            elif parts[0] == "apis" and len(parts) == 3:
                body = discovery.api_resource_list(reg, parts[1], parts[2])
            else:
                return False
            if body is None:
                raise _not_found_path()
        self._send(200, body)
        return True

    def _route(self, method: str, path: str, query: dict[str, str]) -> Route:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _not_found_path()
        reg = self.store.registry
        watch_path = False
        if rest and rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and reg.lookup(group, version, rest[2]) is not None:
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _not_found_path()
        rt = reg.lookup(group, version, rest[0])
        if rt is None:
            raise _not_found_path()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if namespace is not None and not rt.namespaced:
            raise _not_found_path()
        if sub is not None and sub not in rt.subresources:
            raise _not_found_path()
        watching = watch_path or query.get("watch") in ("true", "1")
        if method == "GET":
            verb = "get" if name else ("watch" if watching else "list")
        elif method == "POST":
            if name and sub not in ("binding", "eviction"):
                raise _method_not_allowed()
            if rt.namespaced and namespace is None:
                raise _method_not_allowed()
            verb = "create"
        elif method == "PUT" and name:
            verb = "update"
        elif method == "PATCH" and name:
            verb = "patch"
        elif method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            raise _method_not_allowed()
        if verb not in rt.verbs:
            raise _method_not_allowed()
        if sub in ("binding", "eviction") and verb != "create":
            raise _method_not_allowed()
        if sub == "status" and verb not in ("get", "update", "patch"):
            raise _method_not_allowed()
        if rt.namespaced and name and namespace is None:
            raise _not_found_path()
        return Route(verb, rt, namespace, name, sub)

    # ------------------------------------------------------------------------------------------ execution

    def _decode(self, body: bytes) -> Any:
        if not body:
            raise bad_request("the body of the request is empty")
        ctype = self.headers.get("Content-Type", "application/json").split(";")[0].strip()
        if ctype == "application/vnd.kubernetes.protobuf":
            return protobuf.decode(body)
        if ctype not in ("application/json", "application/yaml", "application/x-yaml", ""):
            raise ApiError(
                415,
                f"the body of the request was in an unknown format ({ctype}) - accepted media types include: "
                "application/json, application/yaml, application/vnd.kubernetes.protobuf",
            )
        try:
            if ctype in ("application/yaml", "application/x-yaml"):
                return yaml.safe_load(body)
            return json.loads(body)
        except (ValueError, yaml.YAMLError) as exc:
            raise bad_request(f"the body of the request could not be decoded: {exc}") from None

    def _execute(self, method: str, route: Route, query: dict[str, str], body: bytes) -> tuple[int, Obj]:
        store, rt, ns, name = self.store, route.rt, route.namespace, route.name
        dry_run = query.get("dryRun") == "All"
        if route.verb == "get":
            assert name is not None
            obj = store.get_object(rt, ns, name)
            return 200, self._shape_one(rt, obj, query)
        if route.verb == "list":
            return 200, self._list(route, query)
        if route.verb == "create":
            doc = self._decode(body)
            if route.subresource == "binding":
                assert ns is not None and name is not None
                return 201, store.bind_pod(ns, name, doc, dry_run=dry_run)
            if route.subresource == "eviction":
                assert ns is not None and name is not None
                return 201, store.evict_pod(ns, name, doc)
            if rt.plural == "bindings" and rt.group == "":
                assert ns is not None
                pod_name = str((doc.get("metadata") or {}).get("name", "")) if isinstance(doc, dict) else ""
                return 201, store.bind_pod(ns, pod_name, doc, dry_run=dry_run)
            return 201, store.create_object(rt, doc, ns, dry_run=dry_run)
        if route.verb == "deletecollection":
            return 200, self._deletecollection(route, query, body)
        assert name is not None
        if route.verb == "update":
            return 200, store.update_object(
                rt, ns, name, self._decode(body), subresource=route.subresource, dry_run=dry_run
            )
        if route.verb == "patch":
            obj, created = store.patch_object(
                rt,
                ns,
                name,
                body,
                self.headers.get("Content-Type", ""),
                subresource=route.subresource,
                field_manager=query.get("fieldManager"),
                force=query.get("force") == "true",
                dry_run=dry_run,
            )
            return (201 if created else 200), obj
        if route.verb == "delete":
            options = self._decode(body) if body else {}
            if not isinstance(options, dict):
                raise bad_request("DeleteOptions must be an object")
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            dry_run = dry_run or options.get("dryRun") == ["All"]
            return 200, store.delete_object(rt, ns, name, options, dry_run=dry_run)
        raise _method_not_allowed()

    def _deletecollection(self, route: Route, query: dict[str, str], body: bytes) -> Obj:
        options = self._decode(body) if body else {}
        items = self.store.delete_collection(
            route.rt,
            route.namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            options=options if isinstance(options, dict) else {},
            dry_run=query.get("dryRun") == "All",
        )
        return {
            "kind": f"{route.rt.kind}List",
            "apiVersion": route.rt.api_version,
            "metadata": {"resourceVersion": str(self.store.resource_version)},
            "items": items,
        }

    def _accept(self) -> tuple[str, str]:
        """("table" | "partial" | "json", meta.k8s.io version) from the Accept header."""
        for part in self.headers.get("Accept", "application/json").split(","):
            pieces = [p.strip() for p in part.split(";")]
            mtype = pieces[0]
            params = dict(p.split("=", 1) for p in pieces[1:] if "=" in p)
            if mtype not in ("application/json", "*/*", "application/*"):
                continue
            as_ = params.get("as")
            if as_ == "Table" and params.get("g") == "meta.k8s.io":
                return "table", params.get("v", "v1")
            if (
                as_ in ("PartialObjectMetadata", "PartialObjectMetadataList")
                and params.get("g") == "meta.k8s.io"
            ):
                return "partial", params.get("v", "v1")
            if not as_:
                return "json", ""
        return "json", ""

    def _shape_one(self, rt: ResourceType, obj: Obj, query: dict[str, str]) -> Obj:
        mode, version = self._accept()
        if mode == "table":
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            return tables.to_table(
                rt,
                [obj],
                api_version=f"meta.k8s.io/{version}",
                include_object=query.get("includeObject", "Metadata"),
                list_meta=meta,
            )
        if mode == "partial":
            return {**tables.partial(obj), "apiVersion": f"meta.k8s.io/{version}"}
        return obj

    def _list(self, route: Route, query: dict[str, str]) -> Obj:
        limit = int(query["limit"]) if query.get("limit", "").isdigit() else None
        items, rv, token, remaining = self.store.list_objects(
            route.rt,
            route.namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            limit=limit,
            continue_token=query.get("continue") or None,
            resource_version=query.get("resourceVersion"),
            resource_version_match=query.get("resourceVersionMatch"),
        )
        meta: Obj = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        mode, version = self._accept()
        if mode == "table":
            return tables.to_table(
                route.rt,
                items,
                api_version=f"meta.k8s.io/{version}",
                include_object=query.get("includeObject", "Metadata"),
                list_meta=meta,
            )
        if mode == "partial":
            return {**tables.to_partial_list(items, meta), "apiVersion": f"meta.k8s.io/{version}"}
        return {
            "kind": f"{route.rt.kind}List",
            "apiVersion": route.rt.api_version,
            "metadata": meta,
            "items": items,
        }

    # ---------------------------------------------------------------------------------------------- watch

    def _start_stream(self) -> None:
        if self._record is not None:
            self._record.code = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.flush()  # the client learns that the watch is open before the first event

    def _chunk(self, event: Obj) -> None:
        data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _watch(self, route: Route, query: dict[str, str]) -> None:
        rt = route.rt
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        initial = query.get("sendInitialEvents") in ("true", "1")
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds", "").isdigit() else None
        mode, version = self._accept()
        try:
            watcher, backlog = self.store.open_watch(
                rt,
                route.namespace,
                label_selector=query.get("labelSelector"),
                field_selector=query.get("fieldSelector"),
                resource_version=query.get("resourceVersion"),
                send_initial_events=initial,
            )
        except ApiError as err:
            if err.code not in (410, 504):
                raise
            self._start_stream()
            self._chunk({"type": "ERROR", "object": err.status()})
            self._end_stream()
            return
        self.owner._register_watch(watcher)

        def shaped(obj: Obj) -> Obj:
            if mode == "table":
                return tables.to_table(
                    rt,
                    [obj],
                    api_version=f"meta.k8s.io/{version}",
                    include_object=query.get("includeObject", "Metadata"),
                    list_meta={"resourceVersion": obj["metadata"].get("resourceVersion")},
                )
            if mode == "partial":
                return {**tables.partial(obj), "apiVersion": f"meta.k8s.io/{version}"}
            return obj

        def bookmark(rv: int, end_of_initial: bool = False) -> Obj:
            meta: Obj = {"resourceVersion": str(rv), "creationTimestamp": None}
            if end_of_initial:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            return {
                "type": "BOOKMARK",
                "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
            }

        deadline = time.monotonic() + timeout if timeout else None
        interval = self.owner.bookmark_interval
        try:
            self._start_stream()
            for kind, obj in backlog:
                assert obj is not None
                self._chunk({"type": kind, "object": shaped(obj)})
            if initial and bookmarks:
                rv = self.store.bookmark_version(watcher)
                self._chunk(bookmark(rv if rv is not None else self.store.resource_version, True))
            last_bookmark = time.monotonic()
            while True:
                wait = interval if bookmarks else 1.0
                if deadline is not None:
                    wait = max(0.0, min(wait, deadline - time.monotonic()))
                try:
                    kind, item = watcher.items.get(timeout=wait)
                except queue.Empty:
                    kind, item = "", None
                if kind == DROP:
                    self._cut()
                    return
                if kind == CLOSE:
                    self._end_stream()
                    return
                if item is not None:
                    self._chunk({"type": kind, "object": shaped(self._versioned(item, rt))})
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self._end_stream()
                    return
                if bookmarks and now - last_bookmark >= interval:
                    rv = self.store.bookmark_version(watcher)
                    if rv is not None:
                        self._chunk(bookmark(rv))
                        last_bookmark = now
        except OSError:
            self.close_connection = True
        finally:
            self.store.close_watch(watcher)
            self.owner._unregister_watch(watcher)

    @staticmethod
    def _versioned(obj: Obj, rt: ResourceType) -> Obj:
        if obj.get("apiVersion") == rt.api_version:
            return obj
        return {**obj, "apiVersion": rt.api_version}


def _not_found_path() -> ApiError:
    return ApiError(
        404,
        "the server could not find the requested resource",
        details={"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]},
    )


def _method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource")


class FakeApiServer:
    """A Kubernetes API server for tests: real HTTP on `host` (an ephemeral port unless `port` is given),
    backed by a `Store` that survives `stop()`/`start()` and `restart()`.

    `bookmark_interval`: seconds between BOOKMARK events on watches that allow them. Other keyword
    arguments configure the store when none is given (see `Store`).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        store: Store | None = None,
        bookmark_interval: float = 1.0,
        **store_options: Any,
    ) -> None:
        self.host = host
        self.port = port
        self.store = store if store is not None else Store(**store_options)
        self.bookmark_interval = bookmark_interval
        self._lock = threading.Lock()
        self._faults: list[FaultRule] = []
        self._watches: set[Watcher] = set()
        self._requests: deque[RequestRecord] = deque(maxlen=100_000)
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------------------------------------- life

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def start(self) -> FakeApiServer:
        """Listen (again, on the same port after a stop) and serve in a background thread."""
        if self._httpd is not None:
            return self
        httpd = _HttpServer((self.host, self.port), self)
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fakeapi-serve", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening and cut every connection (open watches end abruptly). The store is kept."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._httpd = self._thread = None
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout)
        for w in self._watch_list():
            w.drop()
        deadline = time.monotonic() + timeout
        for t in httpd.cut_connections():
            t.join(max(0.0, deadline - time.monotonic()))

    def restart(self, downtime: float = 0.0) -> None:
        """Stop, stay down for `downtime` seconds, start again on the same port."""
        self.stop()
        if downtime > 0:
            time.sleep(downtime)
        self.start()

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """`with server.down(): ...` — the API server is unreachable inside the block."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -------------------------------------------------------------------------------------- kubeconfig

    def kubeconfig(self, namespace: str = "default") -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fakeapi", "cluster": {"server": self.url}}],
            "users": [{"name": "fakeapi", "user": {"token": "fakeapi"}}],
            "contexts": [
                {
                    "name": "fakeapi",
                    "context": {"cluster": "fakeapi", "user": "fakeapi", "namespace": namespace},
                }
            ],
            "current-context": "fakeapi",
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(self.kubeconfig(namespace), sort_keys=False))
        return out

    # ---------------------------------------------------------------------------------------- faults

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        *,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        message: str | None = None,
        retry_after: int | None = None,
        delay: float = 0.0,
        after_commit: bool = False,
    ) -> FaultRule:
        """Make the next `n` requests that match fail with `status` (a `Status` body; 429/503 carry
        Retry-After). `verb`: get/list/watch/create/update/patch/delete/deletecollection (a binding or
        eviction is a `create` on `pods/binding` / `pods/eviction`); `resource`: plural or
        `plural.group`, with `/subresource` for a subresource (`pods` alone does not match
        `pods/status`); `subresource` alone matches that subresource of any resource. Status 410 on a
        watch comes as an ERROR event; status 0 cuts the connection without an answer."""
        if verb is not None and verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; one of {VERBS}")
        rule = FaultRule(
            status, n, verb, resource, subresource, namespace, name, message, retry_after, delay, after_commit
        )
        with self._lock:
            self._faults.append(rule)
        return rule

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def pending_faults(self) -> list[FaultRule]:
        with self._lock:
            return [r for r in self._faults if r.remaining > 0]

    def _take_fault(self, route: Route) -> FaultRule | None:
        with self._lock:
            for rule in self._faults:
                if rule.remaining > 0 and rule.matches(route):
                    rule.remaining -= 1
                    rule.hits += 1
                    if rule.remaining == 0:
                        self._faults.remove(rule)
                    return rule
        return None

    # --------------------------------------------------------------------------------------- watches

    def _register_watch(self, w: Watcher) -> None:
        with self._lock:
            self._watches.add(w)

    def _unregister_watch(self, w: Watcher) -> None:
        with self._lock:
            self._watches.discard(w)

    def _watch_list(self, resource: str | None = None) -> list[Watcher]:
        with self._lock:
            watches = list(self._watches)
        if resource is None:
            return watches
        return [w for w in watches if resource in (w.rt.plural, w.rt.key)]

    def open_watches(self, resource: str | None = None) -> int:
        """How many watch connections are open (of `resource`, plural or `plural.group`, if given)."""
        return len(self._watch_list(resource))

    def wait_for_watches(
        self, n: int = 1, resource: str | None = None, timeout: float = 30.0, *, exactly: bool = False
    ) -> bool:
        """Wait until at least `n` watches (of `resource`) are open (exactly `n` with `exactly`, e.g. 0
        after a drop)."""

        def reached() -> bool:
            count = self.open_watches(resource)
            return count == n if exactly else count >= n

        deadline = time.monotonic() + timeout
        while not reached():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def drop_watches(self, resource: str | None = None, *, graceful: bool = False) -> int:
        """End every open watch (of `resource`): cut mid-stream, or with a clean end of stream when
        `graceful` (as at a server-side timeout). Returns how many."""
        watches = self._watch_list(resource)
        for w in watches:
            if graceful:
                w.close()
            else:
                w.drop()
        return len(watches)

    def compact(self) -> int:
        """Forget the event history (see `Store.compact`): older resourceVersions now get 410 Gone."""
        return self.store.compact()

    # -------------------------------------------------------------------------------------- requests

    def _log_request(self, record: RequestRecord) -> None:
        with self._lock:
            self._requests.append(record)

    def requests(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        method: str | None = None,
    ) -> list[RequestRecord]:
        """Requests received so far, oldest first, filtered (`resource`: plural or `plural.group`)."""
        with self._lock:
            records = list(self._requests)
        out = []
        for r in records:
            key = r.resource or ""
            if verb is not None and r.verb != verb:
                continue
            if method is not None and r.method != method:
                continue
            if resource is not None and resource not in (key, key.partition(".")[0]):
                continue
            if subresource is not None and r.subresource != subresource:
                continue
            out.append(r)
        return out

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()
