"""`FakeApiServer`: the store behind real HTTP on 127.0.0.1, with fault injection for tests.

with FakeApiServer() as server:
    server.write_kubeconfig(path)      # for kubectl / lightkube
    server.store.create(node)          # seed state without HTTP
    server.fail_next(1, 409, verb="create", resource="pods/binding")
    server.drop_watches()
    with server.down():                # the API server is unreachable, the store survives
        time.sleep(10)

    with FakeApiServer(strict=True) as server:   # authentication and RBAC, as a real API server
        server.store.create(service_account)     # the store's Python API is not checked, like etcd
        server.write_kubeconfig(path, service_account=("kai-scheduler", "binder"))
        assert not server.forbidden()            # no request was refused (401 or 403)
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from .access import AccessControl
from .auth import ADMIN_TOKEN, TokenAuthority
from .errors import ApiError
from .exchange import ApiRequests, RequestRecord
from .faults import VERBS, FaultRule
from .http_loop import LoopServer
from .meta import Obj
from .rbac import RbacAuthorizer
from .reviews import Reviews
from .routing import Route
from .store import Store
from .tls import ServingTls
from .versioned import Watcher
from .webhooks import AdmissionWebhooks, WebhookCall


class FakeApiServer:
    """A Kubernetes API server for tests: real HTTP on `host` (an ephemeral port unless `port` is given),
    backed by a `Store` that survives `stop()`/`start()` and `restart()`.

    `bookmark_interval`: seconds between BOOKMARK events on watches that allow them. `strict`: every
    HTTP request is authenticated (bearer token: the kubeconfig's admin token, or a ServiceAccount's,
    `service_account_token`) and authorized by RBAC from the store's Roles and bindings, with the real
    401 and 403 answers (`forbidden()` lists them). `tls`: serve HTTPS, with a CA of its own that the
    kubeconfig carries (kubectl sends a token only over HTTPS). `admission_webhooks`: every HTTP write goes
    through the store's Mutating- and ValidatingWebhookConfigurations (`webhooks.py`); by default on
    exactly when `strict` is, so that a strict server holds clients to all of a real one's rules. Other
    keyword arguments configure the store when none is given (see `Store`).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        store: Store | None = None,
        bookmark_interval: float = 1.0,
        strict: bool = False,
        tls: bool = False,
        admission_webhooks: bool | None = None,
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
        self._refusals: list[RequestRecord] = []
        self.strict = strict
        self.tokens = TokenAuthority(self.store)
        self.access = AccessControl(self.tokens, RbacAuthorizer(self.store)) if strict else None
        self.reviews = Reviews(self.tokens, self.access)
        self.tls = ServingTls(host) if tls else None
        self.admission_webhooks = strict if admission_webhooks is None else admission_webhooks
        self.webhooks = AdmissionWebhooks(self.store)
        self._http: LoopServer | None = None

    # -------------------------------------------------------------------------------------------- life

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._http is not None

    def start(self) -> FakeApiServer:
        """Listen (again, on the same port after a stop) and serve in a background thread."""
        if self._http is not None:
            return self
        tls = self.tls.context if self.tls is not None else None
        self._http = LoopServer(ApiRequests(self), self.host, self.port, tls)
        self.port = self._http.port
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening and cut every connection (open watches end abruptly). The store is kept."""
        http, self._http = self._http, None
        if http is None:
            return
        http.stop(timeout)
        for w in self._watch_list():  # opened, but its connection was cut before it was answered
            w.drop()
            self.store.objects.close_watch(w)
            self._unregister_watch(w)

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

    def kubeconfig(self, namespace: str | None = None, service_account: tuple[str, str] | None = None) -> Obj:
        """A kubeconfig for this server, as its admin or as `service_account` (namespace, name). Its
        namespace: `namespace`, else the ServiceAccount's (as in its pods), else `default`."""
        if namespace is None:
            namespace = service_account[0] if service_account is not None else "default"
        token = ADMIN_TOKEN if service_account is None else self.service_account_token(*service_account)
        cluster: Obj = {"server": self.url}
        if self.tls is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.tls.ca_pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fakeapi", "cluster": cluster}],
            "users": [{"name": "fakeapi", "user": {"token": token}}],
            "contexts": [
                {
                    "name": "fakeapi",
                    "context": {"cluster": "fakeapi", "user": "fakeapi", "namespace": namespace},
                }
            ],
            "current-context": "fakeapi",
            "preferences": {},
        }

    def write_kubeconfig(
        self, path: str | Path, namespace: str | None = None, service_account: tuple[str, str] | None = None
    ) -> Path:
        out = Path(path)
        config = self.kubeconfig(namespace, service_account)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(config, sort_keys=False))
        return out

    def service_account_token(
        self, namespace: str, name: str, *, expiration_seconds: int | None = None
    ) -> str:
        """A bearer token of an existing ServiceAccount (it stops working when the ServiceAccount is
        deleted; with `expiration_seconds`, also then). A ValueError names a missing one."""
        try:
            token, _ = self.tokens.issue(namespace, name, expiration_seconds=expiration_seconds)
        except ApiError as err:
            raise ValueError(
                f'no ServiceAccount "{name}" in namespace "{namespace}" to issue a token for: create it '
                "first (server.store.create(...))"
            ) from err
        return token

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

    # ---------------------------------------------------------------------------- admission webhooks

    def expose_service(self, namespace: str, name: str, port: int, address: tuple[str, int]) -> None:
        """Where admission webhooks find Service `namespace/name`'s `port`: served at `address` (host,
        port). There is no cluster network here; the certificate is still checked for the Service's name
        (`<name>.<namespace>.svc`)."""
        self.webhooks.expose_service(namespace, name, port, address)

    def webhook_calls(self, webhook: str | None = None) -> list[WebhookCall]:
        """Admission webhook calls so far (of the webhook named `webhook`), oldest first."""
        return self.webhooks.calls(webhook)

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
        """Forget the requests received so far (not the refusals: `forbidden()` keeps them all)."""
        with self._lock:
            self._requests.clear()

    def _log_refusal(self, record: RequestRecord) -> None:
        with self._lock:
            self._refusals.append(record)

    def forbidden(self) -> list[RequestRecord]:
        """Every request answered 401 or 403 so far, oldest first: `user`, `verb`, `resource`,
        `subresource`, `namespace` and `name` say who was refused what."""
        with self._lock:
            return list(self._refusals)
