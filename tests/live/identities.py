"""Who every client of the live tests is, on the strict fake API server: the one place that decides.

The `server` fixture holds the chart's RBAC as `helm install` creates it (`install_chart_rbac`: default
values unless a test marks other ones, `@pytest.mark.chart_values({...})`), and each identity is the
ServiceAccount an installed chart runs it as:

- a component ("scheduler", "binder", "podgrouper", "status-controllers", "admission",
  "scale-adjuster"): the account of the chart's Deployment that runs `--component=<it>`;
- ALL_IN_ONE: a process that runs several components (`kai-scheduler run --all`, `Live`'s scheduler
  loop and binder): the account of the `allInOne: true` Deployment;
- RESERVATION: the binder's GPU reservation pods (`FakeGpuNodes`, `kai-scheduler reserve`);
- ADMIN: the test itself, its setup and checks, and kubectl as a cluster user (system:masters).

    async with client_as(server, "binder") as client: ...          # or the make_client fixture
    kubeconfig_as(server, tmp_path / "kubeconfig", run_as(options.components))
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from lightkube.config.kubeconfig import KubeConfig

from chart_support import NAMESPACE, render_chart
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

ADMIN = "admin"
ALL_IN_ONE = "all-in-one"
RESERVATION = "reservation"

_RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")
_BINDINGS = ("ClusterRoleBinding", "RoleBinding")

Document = dict[str, Any]


@contextlib.contextmanager
def strict_server(
    values: Mapping[str, Any] | None = None, *, chart: bool = True, **options: Any
) -> Iterator[FakeApiServer]:
    """A started fake API server that checks every request as a real one does (bearer tokens, RBAC), over
    HTTPS since kubectl sends tokens only there, holding the chart's RBAC for `values` (see
    `install_chart_rbac`; `chart=False`: none, for a test that installs the chart itself). `options` go
    to `FakeApiServer` (`store=`, `bookmark_interval=`, ...)."""
    server = FakeApiServer(strict=True, tls=True, **options)
    if chart:
        install_chart_rbac(server.store, values)
    with server:
        yield server


def refusals(server: FakeApiServer) -> list[str]:
    """Every request refused so far (401 or 403), one line each: who was refused what."""
    return [
        f"{r.code} {r.user} {r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''} "
        f"{r.namespace or ''}/{r.name or ''}"
        for r in server.forbidden()
    ]


def run_as(components: Iterable[str]) -> str:
    """The identity of a process that runs `components` (a `RunOptions.components`)."""
    chosen = sorted(set(components))
    return chosen[0] if len(chosen) == 1 else ALL_IN_ONE


def client_as(server: FakeApiServer, identity: str, **options: Any) -> LightkubeClient:
    """A client of `server` with `identity`'s token (and the server's CA, through a kubeconfig as a pod's
    client would have). Create it inside the test's event loop."""
    options.setdefault("timeout", 5.0)
    config = server.kubeconfig(service_account=account(identity))
    return LightkubeClient(KubeConfig.from_dict(config), **options)


def kubeconfig_as(
    server: FakeApiServer, path: str | Path, identity: str, namespace: str | None = None
) -> Path:
    """A kubeconfig file for `identity`, for a child process (`kai-scheduler run`, kubectl)."""
    return server.write_kubeconfig(path, namespace, account(identity))


def account(identity: str) -> tuple[str, str] | None:
    """(namespace, name) of `identity`'s ServiceAccount; None for ADMIN. Every chart rendering names the
    same accounts (only which of them exist differs), so the defaults' answer holds for all."""
    if identity == ADMIN:
        return None
    accounts = _accounts()
    if identity not in accounts:
        raise ValueError(f"no identity {identity!r} in tests/live/identities.py: one of {[ADMIN, *accounts]}")
    return accounts[identity]


@functools.cache
def _accounts() -> dict[str, tuple[str, str]]:
    """Each Deployment's account by what it runs: the defaults' and the scale adjuster's (which only
    clusterAutoscaling renders), and the allInOne one's; the reservation pods' from the binder's flags."""
    out: dict[str, tuple[str, str]] = {}
    for overrides in ({"clusterAutoscaling": True}, {"allInOne": True}):
        for deployment in _documents(json.dumps(overrides), "Deployment"):
            namespace = deployment["metadata"].get("namespace") or NAMESPACE
            spec = deployment["spec"]["template"]["spec"]
            flags = dict(_flag(arg) for arg in spec["containers"][0].get("args", []))
            component = ALL_IN_ONE if "--all" in flags else flags["--component"]
            out[component] = (namespace, spec["serviceAccountName"])
            if "--reservation-service-account" in flags:
                out[RESERVATION] = (flags["--reservation-namespace"], flags["--reservation-service-account"])
    return out


def _flag(argument: str) -> tuple[str, str]:
    name, _, value = argument.partition("=")
    return name, value


# --- the chart's RBAC, as `helm install` creates it ---------------------------------------------------


def install_chart_rbac(store: Store, values: Mapping[str, Any] | None = None) -> None:
    """Create what `helm install --create-namespace` with `values` creates for the components' identities:
    the release namespace, the chart's Namespaces, ServiceAccounts, ClusterRoles, Roles and bindings
    (straight into the store, as the installing administrator), and the all-in-one account besides.

    The all-in-one account exists only in an `allInOne: true` installation, which binds it to the very
    roles each component's account is bound to. So its ServiceAccount is added, and the subjects of that
    rendering's bindings are added to the same-named bindings here: it gets the roles of this
    installation, each bound once."""
    key = json.dumps(dict(values or {}), sort_keys=True)
    if store.try_get("namespaces", NAMESPACE) is None:
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for document in _installation(key):
        namespace = document["metadata"].get("namespace") or NAMESPACE  # ignored for cluster kinds
        if store.try_get(document["kind"], document["metadata"]["name"], namespace) is None:
            store.create(copy.deepcopy(document), namespace=namespace)  # the rendering is shared


@functools.cache
def _installation(key: str) -> tuple[Document, ...]:
    documents = {_id(d): copy.deepcopy(d) for d in _documents(key, *_RBAC_KINDS)}
    for document in _documents(_all_in_one(key), "ServiceAccount", *_BINDINGS):
        ours = documents.setdefault(_id(document), copy.deepcopy(document))
        if document["kind"] in _BINDINGS:
            assert ours["roleRef"] == document["roleRef"], f"allInOne binds {_id(document)} to another role"
            ours["subjects"] += [s for s in document["subjects"] if s not in ours["subjects"]]
    # Namespaces first, then the accounts, roles and bindings in them.
    return tuple(sorted(documents.values(), key=lambda d: _RBAC_KINDS.index(d["kind"])))


def _all_in_one(key: str) -> str:
    """The values of the same installation with allInOne: true (which runs no shards: the chart refuses
    them there, each shard being a Deployment of its own)."""
    values = json.loads(key)
    values["allInOne"] = True
    if "scheduler" in values:
        values["scheduler"] = {**values["scheduler"], "shards": []}
    return json.dumps(values, sort_keys=True)


def _documents(key: str, *kinds: str) -> Iterator[Document]:
    for _, document in render_chart(json.loads(key)):
        if document["kind"] in kinds:
            yield document


def _id(document: Document) -> tuple[str, str | None, str]:
    metadata = document["metadata"]
    return document["kind"], metadata.get("namespace"), metadata["name"]
