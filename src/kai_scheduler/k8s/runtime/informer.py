"""Informers: an in-memory cache of one kind of object, kept current by list + watch.

An `Informer` lists its kind, then watches from the list's resourceVersion with bookmarks, and keeps
tracking the version of every event it receives (bookmarks included), so that a watch that ends, cleanly
or not, resumes exactly where it stopped: nothing is lost and nothing is seen twice. When the server says
the version is too old (410 Gone: its event history moved on), the informer lists again and reconciles the
cache with the new list: objects that vanished meanwhile are removed and reported to `on_delete` (with
their last known state), new ones to `on_add`, changed ones to `on_update`. Connection failures (server
down, connection cut mid-stream) are retried with jittered exponential backoff (`Backoff`).

The cache maps `namespace/name` (or `name` for cluster-scoped kinds) to the object as the API server sent
it. Indexes map a derived value to the keys of the objects that have it (pods by node, by pod group, by
queue). `synced` is set once the first list is in the cache. Handlers run in the informer's task, in event
order; they must be quick and must not block (enqueue work elsewhere).

`assume` puts an object this process has just written into the cache before the watch brings it, as KAI's
scheduler adds each BindRequest it creates to its informer's store: the cache is then the one memory of the
write, and the watch's later events (the object's deletion among them) keep it current. The watch's event
of the version already cached (the write's echo) changes nothing and is not handed to the handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kai_scheduler.k8s.runtime.backoff import DEFAULT_BACKOFF, Backoff
from kai_scheduler.k8s.runtime.client import (
    ApiStatusError,
    JsonObject,
    KubeClient,
    ResourceKind,
    WatchEvent,
)
from kai_scheduler.k8s.runtime.objects import object_key, resource_version

log = logging.getLogger(__name__)

_SHORT_WATCH = 1.0  # seconds: a watch that ends sooner without any event is retried with backoff

AddHandler = Callable[[JsonObject], None]
UpdateHandler = Callable[[JsonObject, JsonObject], None]
DeleteHandler = Callable[[JsonObject], None]
IndexFunc = Callable[[JsonObject], Iterable[str]]


def _version_number(version: str) -> int | None:
    return int(version) if version.isdigit() else None


@dataclass(slots=True)
class InformerStats:
    """What happened to an informer, for tests and diagnostics."""

    lists: int = 0
    relists_after_gone: int = 0
    watches: int = 0
    reconnects: int = 0
    events: int = 0
    bookmarks: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Handlers:
    on_add: AddHandler | None
    on_update: UpdateHandler | None
    on_delete: DeleteHandler | None


class Informer:
    """A cache of one kind (in one namespace, or all), kept current by list + watch. See the module doc."""

    def __init__(
        self,
        client: KubeClient,
        kind: ResourceKind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        rng: random.Random | None = None,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> None:
        self.client = client
        self.kind = kind
        self.namespace = namespace if kind.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.backoff = backoff
        self.rng = rng or random.Random()
        self.cache: dict[str, JsonObject] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.stats = InformerStats()
        self.served = True  # False while the server does not know the kind (its CRD is not installed)
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indexes: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._indexed: dict[str, dict[str, tuple[str, ...]]] = {name: {} for name in self._indexers}
        self._handlers: list[_Handlers] = []
        if on_add or on_update or on_delete:
            self.add_handler(on_add, on_update, on_delete)
        self._task: asyncio.Task[None] | None = None
        self._progressed = False
        self._assumed: dict[str, int] = {}  # key -> version of an assumed object the watch has not reached

    def __repr__(self) -> str:
        return f"Informer({self.kind.plural}, rv={self.resource_version!r}, objects={len(self.cache)})"

    # --- reading -----------------------------------------------------------------------------------

    def get(self, name: str, namespace: str | None = None) -> JsonObject | None:
        return self.cache.get(f"{namespace}/{name}" if namespace and self.kind.namespaced else name)

    def objects(self) -> list[JsonObject]:
        return list(self.cache.values())

    def index_keys(self, index: str, value: str) -> set[str]:
        return set(self._indexes[index].get(value, ()))

    def by_index(self, index: str, value: str) -> list[JsonObject]:
        """The objects whose `index` function yields `value`, in key order."""
        return [self.cache[key] for key in sorted(self._indexes[index].get(value, ()))]

    def index_values(self, index: str) -> list[str]:
        return sorted(value for value, keys in self._indexes[index].items() if keys)

    # --- handlers ----------------------------------------------------------------------------------

    def add_handler(
        self,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> None:
        """Register callbacks. Registered after objects are cached, `on_add` is not replayed for them: read
        `objects()` first if needed (nothing runs in between on the event loop)."""
        self._handlers.append(_Handlers(on_add, on_update, on_delete))

    def _emit(self, what: str, *args: JsonObject) -> None:
        for handlers in self._handlers:
            callback: Callable[..., None] | None = getattr(handlers, what)
            if callback is None:
                continue
            try:
                callback(*args)
            except Exception:
                log.exception("informer %s: %s handler failed", self.kind.plural, what)

    # --- cache updates -----------------------------------------------------------------------------

    def _index(self, key: str, obj: JsonObject | None) -> None:
        for name, func in self._indexers.items():
            values = self._index_values(name, func, key, obj) if obj is not None else ()
            indexed = self._indexed[name]
            old = indexed.get(key, ())
            if values == old:
                continue  # most updates (a pod's status) move no index value
            index = self._indexes[name]
            for value in old:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            if values:
                indexed[key] = values
                for value in values:
                    index.setdefault(value, set()).add(key)
            else:
                del indexed[key]

    def _index_values(self, name: str, func: IndexFunc, key: str, obj: JsonObject) -> tuple[str, ...]:
        try:
            return tuple(dict.fromkeys(v for v in func(obj) if v))
        except Exception:
            log.exception("informer %s: index %s failed on %s", self.kind.plural, name, key)
            return ()

    def _store(self, obj: JsonObject) -> None:
        key = object_key(obj)
        old = self.cache.get(key)
        self.cache[key] = obj
        self._index(key, obj)
        if old is None:
            self._emit("on_add", obj)
        else:
            self._emit("on_update", old, obj)

    def _remove(self, key: str, last: JsonObject | None) -> None:
        old = self.cache.pop(key, None)
        if old is None:
            return  # already gone (a relist reported it): do not report it twice
        self._index(key, None)
        self._emit("on_delete", last if last is not None else old)

    def assume(self, obj: JsonObject) -> None:
        """Cache an object this process has just written (see the module doc), unless the informer has
        passed its version already: then the cache is current (it may hold the object's deletion). Until the
        watch reaches that version, older events of its key (the deletion of an earlier object of the same
        name) and a list older than it leave it in place. Versions compare as integers, as the API server's
        are (KEP-5504, comparable resource versions); one that is not is cached as KAI does, unguarded."""
        version = _version_number(resource_version(obj))
        seen = _version_number(self.resource_version)
        if version is not None and seen is not None and seen >= version:
            return
        key = object_key(obj)
        if version is not None:
            self._assumed[key] = version
        self._store(obj)

    def _behind_assumed(self, key: str, version: str) -> bool:
        """Whether an event of `key` is older than the object assumed there (the mark goes at its version)."""
        assumed = self._assumed.get(key)
        if assumed is None:
            return False
        number = _version_number(version)
        if number is not None and number < assumed:
            return True
        del self._assumed[key]
        return False

    def _holds(self, obj: JsonObject, version: str) -> bool:
        """Whether the cache holds `obj` at `version` already: the watch's echo of an object this process
        wrote and assumed. A resourceVersion names one state of an object, so the echo changes nothing, and
        handlers are not told again (each would look at the object anew: a BindRequest's pod, once a pod)."""
        if not version:
            return False
        cached = self.cache.get(object_key(obj))
        return cached is not None and resource_version(cached) == version

    def _replace(self, items: Sequence[JsonObject], version: str) -> None:
        """Reconcile the cache with a complete list: deletions for what vanished, then adds and updates."""
        fresh = {object_key(obj): obj for obj in items}
        listed = _version_number(version)
        self._assumed = {
            k: v for k, v in self._assumed.items() if listed is not None and v > listed and k in self.cache
        }
        for key in [k for k in self.cache if k not in fresh and k not in self._assumed]:
            self._remove(key, None)
        for key, obj in fresh.items():
            if key in self._assumed:
                continue  # newer than the list
            old = self.cache.get(key)
            if old is not None and resource_version(old) == resource_version(obj) and resource_version(obj):
                continue
            self._store(obj)
        self.resource_version = version
        self.synced.set()

    def apply_event(self, event: WatchEvent) -> None:
        """One watch event into the cache (public for tests that feed events by hand)."""
        obj = event.object
        version = resource_version(obj)
        if event.type == "BOOKMARK":
            self.stats.bookmarks += 1
        elif self._behind_assumed(object_key(obj), version):
            self.stats.events += 1
        elif event.type == "DELETED":
            self.stats.events += 1
            self._remove(object_key(obj), obj)
        else:
            self.stats.events += 1
            if not self._holds(obj, version):
                self._store(obj)
        if version:
            self.resource_version = version

    # --- running -----------------------------------------------------------------------------------

    async def _list(self) -> None:
        try:
            items, version = await self.client.list_objects(
                self.kind,
                self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
            )
        except ApiStatusError as error:
            if error.code != 404:
                raise  # a 403 among them: what a component reads, its role grants (k8s/needs.py)
            # The kind is not served (its CRD is not installed, or the cluster is older than its API
            # version): an empty cache, listed again later.
            if self.served:
                log.warning(
                    "informer %s: the server does not serve this kind; going on without it", self.kind.plural
                )
            self.served = False
            self._replace([], "")
            raise
        self.served = True
        self.stats.lists += 1
        self._replace(items, version)

    async def _watch(self) -> None:
        """Watch until the stream ends; `_progressed` tells whether any event (bookmarks included) came."""
        self.stats.watches += 1
        stream = self.client.watch(
            self.kind,
            self.resource_version,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            bookmarks=True,
        )
        try:
            async for event in stream:
                self.apply_event(event)
                self._progressed = True
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    async def run(self) -> None:
        """List, then watch forever (until cancelled), recovering from every failure.

        A watch that ends cleanly (the server's timeout) is resumed at once from the last version; after
        a 410 the informer lists again at once (with backoff if that keeps happening); any other failure
        is retried after `backoff.delay(attempt)`, where `attempt` counts failures since the last progress.
        """
        attempt = 0
        gone = 0
        need_list = True
        while True:
            self._progressed = False
            delay: float | None = None
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    attempt = 0
                opened = time.monotonic()
                await self._watch()
                if not self._progressed and time.monotonic() - opened < _SHORT_WATCH:
                    delay = self.backoff.delay(attempt, self.rng)  # do not spin on streams that end at once
            except asyncio.CancelledError:
                raise
            except ApiStatusError as error:
                self._note(error)
                if error.code == 410:
                    self.stats.relists_after_gone += 1
                    log.info("informer %s: %s; listing again", self.kind.plural, error)
                    need_list = True
                    delay = self.backoff.delay(gone - 1, self.rng) if gone else None
                    gone += 1
                elif error.code == 404 and not self.served:
                    need_list = True  # the kind may be installed later: look again, slowly
                    delay = self.backoff.maximum
                elif error.code == 404:
                    need_list = True  # the kind went away while watched (its CRD was deleted)
                    delay = self.backoff.delay(attempt, self.rng)
                else:
                    log.warning("informer %s: %s", self.kind.plural, error)
                    delay = self.backoff.delay(attempt, self.rng)
            except (ConnectionError, OSError, TimeoutError) as error:
                self._note(error)
                self.stats.reconnects += 1
                log.info("informer %s: connection failed (%s); retrying", self.kind.plural, error)
                delay = self.backoff.delay(0 if self._progressed else attempt, self.rng)
            except Exception as error:
                self._note(error)
                log.exception("informer %s: unexpected failure", self.kind.plural)
                delay = self.backoff.delay(attempt, self.rng)
            if self._progressed:
                attempt, gone = 0, 0
            if delay is not None:
                attempt += 1
                await asyncio.sleep(delay)

    def _note(self, error: BaseException) -> None:
        self.stats.errors.append(f"{type(error).__name__}: {error}")
        del self.stats.errors[:-50]

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.kind.plural}")
        return self._task

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_synced(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self.synced.wait(), timeout)
        except TimeoutError:
            return False
        return True


__all__ = ["AddHandler", "DeleteHandler", "IndexFunc", "Informer", "InformerStats", "UpdateHandler"]
