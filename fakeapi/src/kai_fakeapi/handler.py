"""The HTTP side of the fake API server: one thread per connection, each request routed (`routing.py`),
checked against the injected faults, executed on the store and answered as JSON (or a Table, or partial
object metadata, as kubectl asks), watches streamed as chunked JSON events with bookmarks."""

from __future__ import annotations

import contextlib
import email.utils
import functools
import itertools
import logging
import queue
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import yaml

from . import protobuf, request_head, routing, wire
from .access import Refusal
from .admission_request import WriteRequest
from .auth import UserInfo
from .errors import ApiError, bad_request
from .faults import FaultRule
from .meta import Obj
from .resources import ResourceType
from .routing import Route, method_not_allowed
from .store import Store
from .tables import Form
from .versioned import CLOSE, DROP, Watcher, WatchItem

if TYPE_CHECKING:
    from .server import FakeApiServer

log = logging.getLogger(__name__)

# Who a request acts as in the admission webhooks' reviews when the server does not authenticate.
DEFAULT_USER_INFO = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}


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
    user: str | None = None  # who the request acted as (strict mode only)


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], owner: FakeApiServer) -> None:
        self.owner = owner
        self.conn_lock = threading.Lock()
        self.connections: set[socket.socket] = set()
        self.conn_threads: set[threading.Thread] = set()
        self._ids = itertools.count(1)
        super().__init__(address, Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()
        tls = self.owner.tls
        if tls is not None:
            # The handshake happens in the connection's thread (`_serve_connection`), not in the one
            # accepting connections.
            conn = tls.context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, address

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
            if isinstance(request, ssl.SSLSocket):
                request.do_handshake()
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


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a watch event goes out at once
    # Buffered: a response's headers and body leave in one send (`handle_one_request` flushes after each
    # request; a watch flushes every event), instead of one system call (and TCP segment) for each.
    wbufsize = 64 * 1024
    server: HttpServer
    raw_requestline: bytes  # set by `handle_one_request` before `parse_request`
    headers: request_head.HeaderFields  # type: ignore[assignment]  # read by `parse_request`, not email's
    server_version = "kai-fakeapi"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - " + format, self.address_string(), *args)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if log.isEnabledFor(logging.DEBUG):  # else every answer formats a line nobody reads
            super().log_request(code, size)

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The `Date` header: the standard library's, made once a second rather than for each response."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        return _http_date(int(time.time()))

    def parse_request(self) -> bool:
        """The request line and header fields (`request_head.py`, in place of the standard library's mail
        parser); False when an error was answered or the line is empty. A 1.1 request keeps the
        connection unless it says `Connection: close`; `Expect: 100-continue` is answered first."""
        self.command = None  # type: ignore[assignment]  # what `send_error` reads before a method is known
        # No HTTP/0.9 (a bare `GET /path`): an error answer has a status line, as the real API server's.
        self.request_version = "HTTP/1.0"
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        try:
            line = request_head.request_line(self.raw_requestline)
            if line is None:
                return False
            self.command, self.path, version = line
            self.request_version = f"HTTP/{version[0]}.{version[1]}"
            self.headers = request_head.header_fields(self.rfile)  # type: ignore[arg-type]
        except request_head.HeadError as error:
            self.send_error(error.code, error.message)
            return False
        connection = self.headers.get("Connection", "").lower()
        self.close_connection = connection == "close" or (version < (1, 1) and connection != "keep-alive")
        if version >= (1, 1) and self.headers.get("Expect", "").lower() == "100-continue":
            return self.handle_expect_100()
        return True

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
            data = wire.dumps(body)
            ctype = "application/json"
        # Record the outcome before answering: a client that reads the request log right after the
        # response must find it there.
        if self._record is not None:
            self._record.code = code
            if code in (401, 403):
                self.owner._log_refusal(self._record)
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        warnings, self._warnings = self._warnings, ()
        for text in warnings:  # what admission webhooks warned of, as the API server passes it on
            escaped = text.replace("\\", "\\\\").replace('"', '\\"')
            self.send_header("Warning", f'299 - "{escaped}"')
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
    _warnings: Sequence[str] = ()  # admission webhooks' warnings for the next response
    _user: UserInfo | None = None  # who the request acts as: set before it runs (None without strict mode)

    def _dispatch(self, method: str) -> None:
        self._record = None
        self._user = None
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        record = RequestRecord(method, url.path, query)
        self._record = record
        self.owner._log_request(record)
        try:
            body = self._read_body()
            self._user = self._admit(method, url.path, query, record)
            document = routing.discovery_document(
                self.store.registry, f"{self.owner.host}:{self.owner.port}", method, url.path
            )
            if document is not None:
                self._send(200, document)
                return
            route = routing.route(self.store.registry, method, url.path, query)
            record.verb, record.resource = route.verb, route.rt.key
            record.subresource, record.namespace, record.name = route.subresource, route.namespace, route.name
            fault = self.owner._take_fault(route)
            if fault is not None and (not fault.after_commit or route.verb == "watch"):
                self._fail(fault, route)
                return
            if route.verb == "watch":
                self._watch(route, query)
                return
            if self.owner.reviews.serves(route):
                authorization = self.headers.get("Authorization")
                code, result = (
                    201,
                    self.owner.reviews.answer(route, self._decode(body), self._user, authorization),
                )
            else:
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

    def _admit(self, method: str, path: str, query: dict[str, str], record: RequestRecord) -> UserInfo | None:
        """Strict mode: the request's user, authenticated and allowed; a `Refusal` (401, 403) otherwise,
        recorded with whom and what it refused."""
        access = self.owner.access
        if access is None:
            return None
        try:
            user = access.admit(method, path, query, self.headers)
        except Refusal as refusal:
            record.user = refusal.user.username if refusal.user is not None else None
            a = refusal.attributes
            if a is not None:
                record.verb = a.verb
            if a is not None and a.resource_request:
                record.subresource = a.subresource or None
                record.resource = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
                record.namespace, record.name = a.namespace or None, a.name or None
            raise
        record.user = user.username
        return user

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
            return wire.loads(body)
        except (ValueError, yaml.YAMLError) as exc:
            raise bad_request(f"the body of the request could not be decoded: {exc}") from None

    def _write_request(self, query: dict[str, str]) -> WriteRequest | None:
        """The context a write passes to the admission webhooks, when the server calls them."""
        if not self.owner.admission_webhooks:
            return None
        user = getattr(self, "_user", None)
        user_info = user.admission_user_info() if user is not None else dict(DEFAULT_USER_INFO)
        request = WriteRequest(self.owner.webhooks, user_info, query.get("fieldManager"))
        self._warnings = request.warnings  # sent with the response, whatever it is
        return request

    def _execute(self, method: str, route: Route, query: dict[str, str], body: bytes) -> tuple[int, Obj]:
        store, rt, ns, name = self.store, route.rt, route.namespace, route.name
        dry_run = query.get("dryRun") == "All"
        request = self._write_request(query) if route.verb not in ("get", "list") else None
        if route.verb == "get":
            assert name is not None
            obj = store.get_object(rt, ns, name)
            return 200, self._form(query).one(rt, obj)
        if route.verb == "list":
            return 200, self._list(route, query)
        if route.verb == "create":
            doc = self._decode(body)
            if route.subresource == "binding":
                assert ns is not None and name is not None
                return 201, store.bind_pod(ns, name, doc, dry_run=dry_run, request=request)
            if route.subresource == "eviction":
                assert ns is not None and name is not None
                return 201, store.evict_pod(ns, name, doc, dry_run=dry_run, request=request)
            if rt.plural == "bindings" and rt.group == "":
                assert ns is not None
                pod_name = str((doc.get("metadata") or {}).get("name", "")) if isinstance(doc, dict) else ""
                return 201, store.bind_pod(
                    ns, pod_name, doc, dry_run=dry_run, request=request, collection=True
                )
            return 201, store.create_object(rt, doc, ns, dry_run=dry_run, request=request)
        if route.verb == "deletecollection":
            return 200, self._deletecollection(route, query, body, request)
        assert name is not None
        if route.verb == "update":
            return 200, store.update_object(
                rt,
                ns,
                name,
                self._decode(body),
                subresource=route.subresource,
                dry_run=dry_run,
                request=request,
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
                request=request,
            )
            return (201 if created else 200), obj
        if route.verb == "delete":
            options = self._decode(body) if body else {}
            if not isinstance(options, dict):
                raise bad_request("DeleteOptions must be an object")
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            dry_run = dry_run or options.get("dryRun") == ["All"]
            return 200, store.delete_object(rt, ns, name, options, dry_run=dry_run, request=request)
        raise method_not_allowed()

    def _deletecollection(
        self, route: Route, query: dict[str, str], body: bytes, request: WriteRequest | None
    ) -> Obj:
        options = self._decode(body) if body else {}
        items = self.store.delete_collection(
            route.rt,
            route.namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            options=options if isinstance(options, dict) else {},
            dry_run=query.get("dryRun") == "All",
            request=request,
        )
        return {
            "kind": f"{route.rt.kind}List",
            "apiVersion": route.rt.api_version,
            "metadata": {"resourceVersion": str(self.store.resource_version)},
            "items": items,
        }

    def _list(self, route: Route, query: dict[str, str]) -> Obj:
        limit = int(query["limit"]) if query.get("limit", "").isdigit() else None
        items, rv, token, remaining = self.store.objects.list_objects(
            route.rt,
            route.namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            limit=limit,
            continue_token=query.get("continue") or None,
            resource_version=query.get("resourceVersion"),
            resource_version_match=query.get("resourceVersionMatch"),
        )
        list_meta: Obj = {"resourceVersion": str(rv)}
        if token:
            list_meta["continue"] = token
        if remaining is not None:
            list_meta["remainingItemCount"] = remaining
        return self._form(query).many(route.rt, items, list_meta)

    def _form(self, query: dict[str, str]) -> Form:
        return Form.accepted(
            self.headers.get("Accept", "application/json"), query.get("includeObject", "Metadata")
        )

    # ---------------------------------------------------------------------------------------------- watch

    def _start_stream(self) -> None:
        if self._record is not None:
            self._record.code = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        # A stream ends with the connection (`_end_stream`, `_cut`). Said up front, so that a client does
        # not put the connection back in its pool after the last chunk and send its next request into a
        # socket being closed.
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()  # the client learns that the watch is open before the first event

    def _chunk(self, event: Obj, *, flush: bool = True) -> None:
        """Write one event; `flush=False` leaves it in the buffer for the next flush (several events in
        one send)."""
        data = wire.dumps(event) + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        if flush:
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
        form = self._form(query)
        try:
            watcher, backlog = self.store.objects.open_watch(
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
                self._chunk({"type": kind, "object": form.one(rt, obj)}, flush=False)
            self.wfile.flush()
            if initial and bookmarks:
                rv = self.store.objects.bookmark_version(watcher)
                self._chunk(bookmark(rv if rv is not None else self.store.resource_version, True))
            last_bookmark = time.monotonic()
            while True:
                wait = interval if bookmarks else 1.0
                if deadline is not None:
                    wait = max(0.0, min(wait, deadline - time.monotonic()))
                batch = _waiting(watcher, wait)
                for kind, item in batch:
                    if kind == DROP:
                        with contextlib.suppress(OSError):
                            self.wfile.flush()  # what came before the drop still goes out
                        self._cut()
                        return
                    if kind == CLOSE:
                        self._end_stream()
                        return
                    assert item is not None
                    self._chunk({"type": kind, "object": form.one(rt, _served(item, rt))}, flush=False)
                if batch:
                    self.wfile.flush()
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self._end_stream()
                    return
                if bookmarks and now - last_bookmark >= interval:
                    rv = self.store.objects.bookmark_version(watcher)
                    if rv is not None:
                        self._chunk(bookmark(rv))
                        last_bookmark = now
        except OSError:
            self.close_connection = True
        finally:
            self.store.objects.close_watch(watcher)
            self.owner._unregister_watch(watcher)


def _waiting(watcher: Watcher, timeout: float) -> list[WatchItem]:
    """The next item of a watch, waited for up to `timeout` seconds, with those already queued behind it
    (at most `_BATCH`): a burst of commits leaves in one send rather than one each (none: timed out)."""
    try:
        items = [watcher.items.get(timeout=timeout)]
    except queue.Empty:
        return []
    with contextlib.suppress(queue.Empty):
        while len(items) < _BATCH and items[-1][0] not in (DROP, CLOSE):
            items.append(watcher.items.get_nowait())
    return items


_BATCH = 64


@functools.lru_cache(maxsize=4)
def _http_date(second: int) -> str:
    return email.utils.formatdate(second, usegmt=True)


def _served(obj: Obj, rt: ResourceType) -> Obj:
    """A watch event's object in the watched version (a shallow copy: events are not mutated)."""
    if obj.get("apiVersion") == rt.api_version:
        return obj
    return {**obj, "apiVersion": rt.api_version}
