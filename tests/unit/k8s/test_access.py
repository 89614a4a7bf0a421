"""What a component may ask of the API server (`runtime/access.py`): declarations, their permissions, and
the guard that holds a component to them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import pytest

from kai_scheduler.k8s.admission.self_signed import MUTATING_WEBHOOKS, SECRETS
from kai_scheduler.k8s.runtime.access import (
    AccessGuard,
    Permission,
    UndeclaredAccess,
    access,
    minimal,
    permissions,
    watching,
)
from kai_scheduler.k8s.runtime.client import (
    CONFIG_MAPS,
    NODES,
    PODS,
    ApiStatusError,
    JsonObject,
    ResourceKind,
    WatchEvent,
)

T = TypeVar("T")


class Recorder:
    """A client that records every call that reaches it (as `verb resource namespace name`)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _record(self, verb: str, kind: ResourceKind, namespace: str | None, name: str | None = None) -> None:
        self.calls.append(" ".join(str(part) for part in (verb, kind.plural, namespace, name)))

    async def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> JsonObject:
        self._record("get", kind, namespace, name)
        return {}

    async def list_objects(self, kind: ResourceKind, namespace: str | None = None, **_: Any) -> Any:
        self._record("list", kind, namespace)
        return [], "1"

    def watch(self, kind: ResourceKind, version: str, namespace: str | None = None, **_: Any) -> Any:
        self._record("watch", kind, namespace)

        async def nothing() -> AsyncIterator[WatchEvent]:
            return
            yield

        return nothing()

    async def create(self, kind: ResourceKind, obj: JsonObject) -> JsonObject:
        self._record("create", kind, obj["metadata"].get("namespace"))
        return obj

    async def replace(self, kind: ResourceKind, obj: JsonObject, *, subresource: str | None = None) -> Any:
        self._record("update", kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        return obj

    async def patch(
        self, kind: ResourceKind, name: str, patch: Any, namespace: str | None = None, **_: Any
    ) -> Any:
        self._record("patch", kind, namespace, name)
        return {}

    async def delete(self, kind: ResourceKind, name: str, namespace: str | None = None) -> None:
        self._record("delete", kind, namespace, name)

    async def bind(self, namespace: str, pod: str, node: str, **_: Any) -> None:
        self._record("bind", PODS, namespace, pod)

    async def evict(self, namespace: str, pod: str) -> None:
        self._record("evict", PODS, namespace, pod)


def _run(call: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(call)


def _guard(recorder: Recorder) -> AccessGuard:
    return AccessGuard(
        recorder,  # type: ignore[arg-type]  # the calls the guard passes on
        [
            *watching([PODS, NODES]),
            access(PODS, "patch", subresource="status"),
            access(CONFIG_MAPS, "create", "get", namespace="team-a"),
            access(SECRETS, "get", "update", namespace="kai", names=["tls"]),
            access(PODS, "create", subresource="binding"),
        ],
        "binder",
    )


def test_declared_calls_pass_on_to_the_client() -> None:
    recorder = Recorder()
    guard = _guard(recorder)

    async def calls() -> None:
        await guard.list_objects(PODS)
        await guard.list_objects(PODS, "team-b")  # every namespace covers each one
        async for _ in guard.watch(NODES, "1"):
            pass
        await guard.patch(PODS, "p", {}, "team-b", subresource="status")
        await guard.create(CONFIG_MAPS, {"metadata": {"name": "c", "namespace": "team-a"}})
        await guard.get(CONFIG_MAPS, "c", "team-a")
        await guard.get(SECRETS, "tls", "kai")
        await guard.replace(SECRETS, {"metadata": {"name": "tls", "namespace": "kai"}})
        await guard.bind("team-a", "p", "node-1")

    _run(calls())
    assert recorder.calls == [
        "list pods None None",
        "list pods team-b None",
        "watch nodes None None",
        "patch pods team-b p",
        "create configmaps team-a None",
        "get configmaps team-a c",
        "get secrets kai tls",
        "update secrets kai tls",
        "bind pods team-a p",
    ]


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda g: g.get(PODS, "p", "team-a"), "binder: get pods p in namespace team-a"),
        (lambda g: g.patch(PODS, "p", {}, "team-a"), "binder: patch pods p in namespace team-a"),
        (lambda g: g.delete(PODS, "p", "team-a"), "binder: delete pods p in namespace team-a"),
        (
            lambda g: g.create(CONFIG_MAPS, {"metadata": {"name": "c", "namespace": "team-b"}}),
            "binder: create configmaps in namespace team-b",
        ),
        (lambda g: g.get(CONFIG_MAPS, "c"), "binder: get configmaps c is not"),  # namespace unknown
        (lambda g: g.get(SECRETS, "other", "kai"), "binder: get secrets other in namespace kai"),
        (lambda g: g.get(SECRETS, "tls", "default"), "binder: get secrets tls in namespace default"),
        (lambda g: g.delete(SECRETS, "tls", "kai"), "binder: delete secrets tls in namespace kai"),
        (
            lambda g: g.get(MUTATING_WEBHOOKS, "w"),
            "binder: get mutatingwebhookconfigurations.admissionregistration.k8s.io w is not",
        ),
        (lambda g: g.evict("team-a", "p"), "binder: create pods/eviction in namespace team-a"),
        (lambda g: g.list_objects(CONFIG_MAPS, "team-a"), "binder: list configmaps in namespace team-a"),
    ],
)
def test_an_undeclared_call_is_refused_before_it_goes_out(
    call: Any, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    with pytest.raises(UndeclaredAccess, match="is not among its declared accesses") as refused:
        _run(call(_guard(recorder)))
    assert str(refused.value).startswith(said)
    assert not isinstance(refused.value, ApiStatusError)  # nothing that handles API errors takes it
    assert recorder.calls == []
    assert [record.levelname for record in caplog.records] == ["ERROR"]  # loops that go on still say it


def test_a_watch_is_refused_when_asked_for_not_when_read() -> None:
    with pytest.raises(UndeclaredAccess):
        _guard(Recorder()).watch(CONFIG_MAPS, "1")


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: access(PODS, "create", names=["p"]), r"\['create'\] cannot be limited by name"),
        (lambda: access(PODS, "list", "get", names=["p"]), r"\['list'\] cannot be limited by name"),
        (lambda: access(NODES, "get", namespace="a"), "nodes is cluster-scoped"),
        (lambda: access(PODS, "evict"), r"unknown verbs \['evict'\]"),
        (lambda: access(PODS), "unknown verbs"),
    ],
)
def test_a_declaration_rbac_cannot_grant_is_refused(make: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        make()


def test_permissions_leave_out_what_a_broader_one_allows() -> None:
    """Declarations (and the chart's roles) that allow the same calls compare equal."""
    everywhere = access(PODS, "get", "list")
    in_a = access(PODS, "get", "create", namespace="a")
    named = access(SECRETS, "get", namespace="a", names=["s"])
    any_secret = access(SECRETS, "get", namespace="a")
    assert permissions([everywhere, in_a, named, any_secret]) == {
        Permission("", "pods", "get"),
        Permission("", "pods", "list"),
        Permission("", "pods", "create", "a"),
        Permission("", "secrets", "get", "a"),
    }
    assert permissions([everywhere, in_a]) == permissions([everywhere, access(PODS, "create", namespace="a")])
    status = access(PODS, "patch", subresource="status")
    assert permissions([status]) == {Permission("", "pods/status", "patch")}  # not the pod itself
    assert minimal([Permission("", "pods", "get", "a", "p"), Permission("", "pods", "get", None, "p")]) == {
        Permission("", "pods", "get", None, "p")
    }
