"""The versioned store and its watches: objects by type and (namespace, name), one global resourceVersion,
a bounded history of changes for watches and consistent lists, and the open watches.

This is what etcd and the watch cache are to the real API server; the Kubernetes semantics of writes
(defaulting, admission, concurrency checks, cascades) are in `writes.py`, on top of `commit`.
"""

from __future__ import annotations

import base64
import json
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .errors import ApiError, bad_request, gone, not_found
from .jsoncopy import clone
from .meta import Ident, Obj, as_served, meta
from .resources import ResourceType
from .selectors import Matcher, parse_field_selector, parse_label_selector


@dataclass
class Event:
    """A committed change. `prev` is the state before it (None for ADDED); for DELETED, `obj` is the last
    state with the deletion's resourceVersion."""

    type: str
    rv: int
    key: str
    obj: Obj
    prev: Obj | None


WatchItem = tuple[str, Obj | None]
DROP = "_DROP"
CLOSE = "_CLOSE"


class Watcher:
    """One open watch: the store pushes matching, converted events into `items`, and calls `notify`
    (when set) after each, from the thread that committed."""

    def __init__(self, rt: ResourceType, namespace: str | None, labels: Matcher, fields: Matcher) -> None:
        self.rt = rt
        self.namespace = namespace
        self._labels = labels
        self._fields = fields
        self.items: queue.SimpleQueue[WatchItem] = queue.SimpleQueue()
        self.notify: Callable[[], None] | None = None

    def matches(self, obj: Obj) -> bool:
        metadata = obj.get("metadata") or {}
        if self.namespace and metadata.get("namespace") != self.namespace:
            return False
        return self._labels(obj) and self._fields(obj)

    def convert(self, ev: Event) -> WatchItem | None:
        """The event as this watcher sees it: selector changes turn MODIFIED into ADDED or DELETED."""
        if ev.key != self.rt.key:
            return None
        now = self.matches(ev.obj)
        if ev.type == "MODIFIED" and ev.prev is not None:
            before = self.matches(ev.prev)
            if now and before:
                return ("MODIFIED", ev.obj)
            if now:
                return ("ADDED", ev.obj)
            if before:
                prev = clone(ev.prev)
                prev["metadata"]["resourceVersion"] = str(ev.rv)
                return ("DELETED", prev)
            return None
        return (ev.type, ev.obj) if now else None

    def offer(self, ev: Event) -> None:
        item = self.convert(ev)
        if item is not None:
            self._put(item)

    def drop(self) -> None:
        """End the watch abruptly (the connection is cut, as when a load balancer drops it)."""
        self._put((DROP, None))

    def close(self) -> None:
        """End the watch cleanly (as at a server-side timeout)."""
        self._put((CLOSE, None))

    def _put(self, item: WatchItem) -> None:
        self.items.put(item)
        notify = self.notify
        if notify is not None:
            notify()


class VersionedStore:
    """Thread-safe: hold `lock` around a read-modify-`commit` sequence (it is re-entrant).

    `history_limit`: how many events are kept for watch resumption; older resourceVersions get 410 Gone.
    """

    def __init__(self, history_limit: int = 4096) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._objects: dict[str, dict[Ident, Obj]] = {}
        # Data kept with an object but not served (server-side apply's last applied configuration per
        # field manager), dropped with it.
        self._side: dict[tuple[str, Ident], dict[str, Obj]] = {}
        self._history: deque[Event] = deque()
        self._history_limit = max(1, history_limit)
        self._compacted_rv = 0
        self._rv = 0
        # Open watches by the type they watch: a commit is offered to its own type's watches only.
        self._watchers: dict[str, set[Watcher]] = {}
        self._observers: list[Callable[[Event], None]] = []

    def add_observer(self, observer: Callable[[Event], None]) -> None:
        """Call `observer` after every commit, lock held (a controller that keeps other objects in step)."""
        self._observers.append(observer)

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    @property
    def compacted_resource_version(self) -> int:
        with self.lock:
            return self._compacted_rv

    def compact(self) -> int:
        """Forget the event history: watches (and list continuations) from any earlier resourceVersion now
        get 410 Gone. Returns the new compaction point."""
        with self.lock:
            self._history.clear()
            self._compacted_rv = self._rv
            return self._rv

    def history(self) -> list[Event]:
        with self.lock:
            return list(self._history)

    # ------------------------------------------------------------------------------------------ objects

    def commit(self, rt: ResourceType, kind: str, obj: Obj, prev: Obj | None) -> Obj:
        """Write one change (lock held): bump the resourceVersion, store, record and fan out the event."""
        self._rv += 1
        metadata = meta(obj)
        metadata["resourceVersion"] = str(self._rv)
        bucket = self._objects.setdefault(rt.key, {})
        ident = (str(metadata.get("namespace") or ""), str(metadata["name"]))
        if kind == "DELETED":
            bucket.pop(ident, None)
            self._side.pop((rt.key, ident), None)
        else:
            bucket[ident] = obj
        ev = Event(kind, self._rv, rt.key, obj, prev)
        self._history.append(ev)
        while len(self._history) > self._history_limit:
            dropped = self._history.popleft()
            self._compacted_rv = dropped.rv
        for w in list(self._watchers.get(rt.key, ())):
            w.offer(ev)
        self.changed.notify_all()
        for observer in self._observers:
            observer(ev)
        return obj

    def find(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        return self._objects.get(rt.key, {}).get((namespace or "" if rt.namespaced else "", name))

    def require(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.find(rt, namespace, name)
        if obj is None:
            raise not_found(rt.key, name)
        return obj

    def of_type(self, key: str) -> dict[Ident, Obj]:
        """The stored objects of one type by (namespace, name), as stored (lock held; do not mutate)."""
        return self._objects.get(key, {})

    def side_data(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Obj]:
        """The unserved data kept with an object (lock held), created empty on first use."""
        ident = (namespace or "" if rt.namespaced else "", name)
        return self._side.setdefault((rt.key, ident), {})

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Re-check `predicate` after every write until it holds (True) or `timeout` passes (False)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                if predicate():
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.5))

    def _wait_for_rv(self, rv: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._rv < rv:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.wait(left)
        return True

    # -------------------------------------------------------------------------------------------- list

    def _state_at(self, rt: ResourceType, rv: int) -> dict[Ident, Obj]:
        """The objects of a type as they were at resourceVersion `rv` (which must not be compacted)."""
        state = dict(self._objects.get(rt.key, {}))
        for ev in reversed(self._history):
            if ev.rv <= rv:
                break
            if ev.key != rt.key:
                continue
            metadata = ev.obj["metadata"]
            ident = (str(metadata.get("namespace") or ""), str(metadata["name"]))
            if ev.type == "ADDED":
                state.pop(ident, None)
            elif ev.prev is not None:
                state[ident] = ev.prev
        return state

    def list_objects(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> tuple[list[Obj], int, str | None, int | None]:
        """List: (items, list resourceVersion, continue token, remaining item count)."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.selectable_fields)
        with self.lock:
            at = self._rv
            start: Ident | None = None
            if continue_token:
                at, start = _decode_continue(continue_token)
                if at < self._compacted_rv:
                    raise gone(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter, or use the continue token "
                        "in this response to retrieve the remainder of the results. Continuing with the "
                        "provided token results in an inconsistent list - objects that were created, "
                        "modified, or deleted between the time the first chunk was returned and now may show "
                        "up in the list."
                    )
            elif resource_version not in (None, "", "0"):
                wanted = _parse_rv(resource_version)
                if resource_version_match == "Exact":
                    if wanted < self._compacted_rv:
                        raise gone(f"too old resource version: {wanted} ({self._compacted_rv + 1})")
                    if wanted > self._rv:
                        raise _too_large(wanted, self._rv)
                    at = wanted
                elif wanted > self._rv:
                    if not self._wait_for_rv(wanted, 3.0):
                        raise _too_large(wanted, self._rv)
                    at = self._rv  # at least as new as asked
            state = self._state_at(rt, at) if at != self._rv else self._objects.get(rt.key, {})
            selected: list[tuple[Ident, Obj]] = []
            for ident in sorted(state):
                if start is not None and ident <= start:
                    continue
                obj = state[ident]
                if rt.namespaced and namespace and ident[0] != namespace:
                    continue
                if labels(obj) and fields(obj):
                    selected.append((ident, obj))
            token: str | None = None
            remaining: int | None = None
            if limit and limit > 0 and len(selected) > limit:
                token = _encode_continue(at, selected[limit - 1][0])
                if not label_selector and not field_selector:
                    remaining = len(selected) - limit
                selected = selected[:limit]
            return [as_served(o, rt) for _, o in selected], at, token, remaining

    # ------------------------------------------------------------------------------------------- watch

    def open_watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        send_initial_events: bool = False,
    ) -> tuple[Watcher, list[WatchItem]]:
        """Register a watcher; returns it with the events to send first (synthetic ADDED for the current
        state when no resourceVersion is given, else the history after it). Raises 410 Gone for a compacted
        resourceVersion and 504 for one in the future."""
        w = Watcher(
            rt,
            namespace,
            parse_label_selector(label_selector),
            parse_field_selector(field_selector, rt.selectable_fields),
        )
        with self.lock:
            backlog: list[WatchItem] = []
            if send_initial_events or resource_version in (None, "", "0"):
                current = self._objects.get(rt.key, {})
                backlog.extend(
                    ("ADDED", current[ident]) for ident in sorted(current) if w.matches(current[ident])
                )
            else:
                since = _parse_rv(resource_version)
                if since < self._compacted_rv:
                    raise gone(
                        f"too old resource version: {since} ({self._compacted_rv + 1})", reason="Expired"
                    )
                if since > self._rv and not self._wait_for_rv(since, 3.0):
                    raise _too_large(since, self._rv)
                for ev in self._history:
                    if ev.rv > since:
                        item = w.convert(ev)
                        if item is not None:
                            backlog.append(item)
            self._watchers.setdefault(rt.key, set()).add(w)
            return w, [(t, as_served(o, rt) if o is not None else None) for t, o in backlog]

    def close_watch(self, w: Watcher) -> None:
        with self.lock:
            self._watchers.get(w.rt.key, set()).discard(w)

    def watchers(self) -> list[Watcher]:
        with self.lock:
            return [w for watchers in self._watchers.values() for w in watchers]

    def bookmark_version(self, w: Watcher) -> int | None:
        """The resourceVersion a BOOKMARK may carry now: the current one, if the watcher has consumed every
        event up to it (None otherwise)."""
        with self.lock:
            return self._rv if w.items.empty() else None


def _encode_continue(rv: int, start: Ident) -> str:
    raw = json.dumps({"rv": rv, "start": list(start)}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, Ident]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError):
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion") from None


def _parse_rv(value: str | None) -> int:
    try:
        rv = int(str(value))
    except ValueError:
        raise bad_request(f"invalid resource version: {value!r}") from None
    if rv < 0:
        raise bad_request(f"invalid resource version: {value!r}")
    return rv


def _too_large(wanted: int, current: int) -> ApiError:
    return ApiError(
        504,
        f"Too large resource version: {wanted}, current: {current}",
        reason="Timeout",
        details={
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
    )
