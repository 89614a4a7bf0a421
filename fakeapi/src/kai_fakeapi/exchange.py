"""What the fake API server does with one request, whatever carries it: routed (`routing.py`), checked
against the injected faults, authenticated and authorized in strict mode, executed on the store and
answered as JSON (or a Table, or partial object metadata, as kubectl asks); a watch opens a
`WatchStream` that hands out its events as JSON lines, with bookmarks, as the client reads them.

The HTTP side (`http_loop.py`) parses a request into a `Request` and writes what `ApiRequests.handle`
answers: an `Answer`, or a `WatchStream` it keeps feeding to the client. Nothing here knows how bytes
reach a client, and nothing there knows what a request means.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import yaml

from . import protobuf, routing, wire
from .access import Refusal
from .admission_request import WriteRequest
from .auth import UserInfo
from .errors import ApiError, bad_request
from .faults import FaultRule
from .meta import Obj
from .request_head import HeaderFields
from .resources import ResourceType
from .routing import Route, method_not_allowed
from .store import Store
from .tables import Form
from .versioned import CLOSE, DROP, Watcher

if TYPE_CHECKING:
    from .server import FakeApiServer

log = logging.getLogger(__name__)

# Who a request acts as in the admission webhooks' reviews when the server does not authenticate.
DEFAULT_USER_INFO = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_JSON = "application/json"


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


@dataclass
class Request:
    """One request as read off the wire: `target` is the path with its query, as sent."""

    method: str
    target: str
    headers: HeaderFields
    body: bytes


@dataclass
class Answer:
    """A response: `status`, `headers` besides the framing ones (length, date), `body`. `delay`: seconds
    to wait before answering (an injected fault's); `cut`: drop the connection without an answer."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    delay: float = 0.0
    cut: bool = False


# How a watch stream ends (`WatchStream.take`): cleanly (the end of the chunked body), or cut mid-stream.
END = "end"
CUT = "cut"


class WatchStream:
    """An open watch as its client reads it: `first` (the events to send at once), then what `take`
    hands out whenever the watcher has events (`on_event` says when), a bookmark every
    `bookmark_interval` seconds when asked for (`bookmark`), the end after `timeout` seconds. `close`
    when the stream ends, however it ends. A stream without a watcher (an ERROR event) ends after
    `first`."""

    def __init__(
        self,
        owner: FakeApiServer,
        rt: ResourceType,
        form: Form,
        first: list[bytes],
        watcher: Watcher | None = None,
        *,
        bookmark_interval: float | None = None,
        timeout: float | None = None,
    ) -> None:
        self._owner = owner
        self._rt = rt
        self._form = form
        self.first = first
        self.watcher = watcher
        self.bookmark_interval = bookmark_interval
        self.timeout = timeout
        self.ended: str | None = None if watcher is not None else END
        self._closed = False

    def on_event(self, notify: Callable[[], None]) -> None:
        """Call `notify` (from whichever thread commits) whenever an event is queued for this stream; once
        at once if some are already."""
        if self.watcher is not None:
            self.watcher.notify = notify
            if not self.watcher.items.empty():
                notify()

    def take(self) -> list[bytes]:
        """The events queued since the last call, as JSON lines; `ended` says when the watch ended with
        them (`END`, `CUT`)."""
        watcher = self.watcher
        if watcher is None or self.ended is not None:
            return []
        lines = []
        rt, form = self._rt, self._form
        items = watcher.items
        while not items.empty():
            kind, obj = items.get_nowait()
            if kind == DROP:
                self.ended = CUT
                break
            if kind == CLOSE:
                self.ended = END
                break
            assert obj is not None
            lines.append(wire.dumps({"type": kind, "object": form.one(rt, _served(obj, rt))}) + b"\n")
        return lines

    def bookmark(self) -> bytes | None:
        """A BOOKMARK line at the current resourceVersion, if the client has every event up to it."""
        if self.watcher is None or self.ended is not None:
            return None
        rv = self._owner.store.objects.bookmark_version(self.watcher)
        return _bookmark(self._rt, rv) if rv is not None else None

    def close(self) -> None:
        if self._closed or self.watcher is None:
            return
        self._closed = True
        self.watcher.notify = None
        self._owner.store.objects.close_watch(self.watcher)
        self._owner._unregister_watch(self.watcher)


def _bookmark(rt: ResourceType, rv: int, end_of_initial: bool = False) -> bytes:
    meta: Obj = {"resourceVersion": str(rv), "creationTimestamp": None}
    if end_of_initial:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    event = {"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}}
    return wire.dumps(event) + b"\n"


def _error_stream(owner: FakeApiServer, rt: ResourceType, err: ApiError) -> WatchStream:
    """A watch that is one ERROR event (410 Gone, 504), then the end."""
    line = wire.dumps({"type": "ERROR", "object": err.status()}) + b"\n"
    return WatchStream(owner, rt, Form.accepted(_JSON, "Metadata"), [line])


class ApiRequests:
    """The fake API server's requests: `handle` answers one; `blocking` says whether it may wait (on an
    admission webhook, on a resourceVersion not yet written) and must be handled where waiting stops
    nothing else."""

    def __init__(self, owner: FakeApiServer) -> None:
        self.owner = owner

    def blocking(self, request: Request) -> bool:
        if self.owner.admission_webhooks and request.method != "GET":
            return True  # a write calls the webhooks, which may call this server back
        if request.method == "GET" and "resourceVersion=" in request.target:
            # A list or watch from a resourceVersion ahead of the store waits up to 3 s for it.
            query = _query(urlsplit(request.target).query)
            wanted = query.get("resourceVersion", "")
            return wanted.isdigit() and int(wanted) > self.owner.store.resource_version
        return False

    def handle(self, request: Request) -> Answer | WatchStream:
        return _Call(self.owner, request).run()


class _Call:
    """One request being handled (handlers run concurrently: each request has its own)."""

    def __init__(self, owner: FakeApiServer, request: Request) -> None:
        self.owner = owner
        self.store: Store = owner.store
        self.request = request
        self.headers = request.headers
        self._record: RequestRecord | None = None
        self._warnings: Sequence[str] = ()  # admission webhooks' warnings for the answer
        self._user: UserInfo | None = None  # who the request acts as (None without strict mode)

    def run(self) -> Answer | WatchStream:
        method = self.request.method
        if method not in METHODS:
            return _plain(501, f"Unsupported method ({method!r})")
        url = urlsplit(self.request.target)
        query = _query(url.query)
        record = RequestRecord(method, url.path, query)
        self._record = record
        self.owner._log_request(record)
        try:
            self._user = self._admit(method, url.path, query, record)
            document = routing.discovery_document(
                self.store.registry, f"{self.owner.host}:{self.owner.port}", method, url.path
            )
            if document is not None:
                return self._answer(200, document)
            route = routing.route(self.store.registry, method, url.path, query)
            record.verb, record.resource = route.verb, route.rt.key
            record.subresource, record.namespace, record.name = route.subresource, route.namespace, route.name
            fault = self.owner._take_fault(route)
            if fault is not None and (not fault.after_commit or route.verb == "watch"):
                return self._fail(fault, route)
            if route.verb == "watch":
                return self._watch(route, query)
            body = self.request.body
            if self.owner.reviews.serves(route):
                authorization = self.headers.get("Authorization")
                code, result = (
                    201,
                    self.owner.reviews.answer(route, self._decode(body), self._user, authorization),
                )
            else:
                code, result = self._execute(method, route, query, body)
            if fault is not None:
                return self._fail(fault, route)
            return self._answer(code, result)
        except ApiError as err:
            return self._error(err)
        except Exception as exc:  # a bug here must not look like a dead server
            log.exception("fakeapi: internal error on %s %s", method, self.request.target)
            return self._error(ApiError(500, f"fakeapi internal error: {exc!r}"))

    # ------------------------------------------------------------------------------------------- answers

    def _answer(self, code: int, body: Obj | str, headers: dict[str, str] | None = None) -> Answer:
        # Record the outcome before answering: a client that reads the request log right after the
        # response must find it there.
        if self._record is not None:
            self._record.code = code
            if code in (401, 403):
                self.owner._log_refusal(self._record)
        if isinstance(body, str):
            data, ctype = body.encode(), "text/plain; charset=utf-8"
        else:
            data, ctype = wire.dumps(body), _JSON
        fields = [("Content-Type", ctype), ("Cache-Control", "no-cache, private")]
        fields.extend((headers or {}).items())
        for text in self._warnings:  # what admission webhooks warned of, as the API server passes it on
            escaped = text.replace("\\", "\\\\").replace('"', '\\"')
            fields.append(("Warning", f'299 - "{escaped}"'))
        return Answer(code, fields, data)

    def _error(self, err: ApiError) -> Answer:
        headers = {"Retry-After": str(err.retry_after)} if err.retry_after is not None else None
        return self._answer(err.code, err.status(), headers)

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

    def _fail(self, fault: FaultRule, route: Route) -> Answer | WatchStream:
        if fault.status == 0:
            return Answer(0, [], delay=fault.delay, cut=True)
        err = fault.error()
        if route.verb == "watch" and fault.status == 410:
            if self._record is not None:
                self._record.code = 200
            return _error_stream(self.owner, route.rt, err)
        answer = self._error(err)
        answer.delay = fault.delay
        return answer

    # ------------------------------------------------------------------------------------------ execution

    def _decode(self, body: bytes) -> Any:
        if not body:
            raise bad_request("the body of the request is empty")
        ctype = self.headers.get("Content-Type", _JSON).split(";")[0].strip()
        if ctype == "application/vnd.kubernetes.protobuf":
            return protobuf.decode(body)
        if ctype not in (_JSON, "application/yaml", "application/x-yaml", ""):
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
        user = self._user
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
        return Form.accepted(self.headers.get("Accept", _JSON), query.get("includeObject", "Metadata"))

    # ---------------------------------------------------------------------------------------------- watch

    def _watch(self, route: Route, query: dict[str, str]) -> WatchStream:
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
            if self._record is not None:
                self._record.code = 200
            return _error_stream(self.owner, rt, err)
        self.owner._register_watch(watcher)
        if self._record is not None:
            self._record.code = 200
        first = []
        for kind, obj in backlog:
            assert obj is not None
            first.append(wire.dumps({"type": kind, "object": form.one(rt, obj)}) + b"\n")
        if initial and bookmarks:
            rv = self.store.objects.bookmark_version(watcher)
            first.append(_bookmark(rt, rv if rv is not None else self.store.resource_version, True))
        return WatchStream(
            self.owner,
            rt,
            form,
            first,
            watcher,
            bookmark_interval=self.owner.bookmark_interval if bookmarks else None,
            timeout=timeout,
        )


def _query(text: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}


def _plain(code: int, text: str) -> Answer:
    return Answer(code, [("Content-Type", "text/plain; charset=utf-8")], text.encode())


def _served(obj: Obj, rt: ResourceType) -> Obj:
    """A watch event's object in the watched version (a shallow copy: events are not mutated)."""
    if obj.get("apiVersion") == rt.api_version:
        return obj
    return {**obj, "apiVersion": rt.api_version}


__all__ = ["CUT", "END", "Answer", "ApiRequests", "Request", "RequestRecord", "WatchStream"]
