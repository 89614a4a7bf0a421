"""Helpers for live-mode tests (importable because conftest.py puts this folder on the path)."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from base64 import b64decode
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from identities import ALL_IN_ONE, RESERVATION, account, client_as
from lightkube.config.kubeconfig import KubeConfig

from kai_fakeapi import FakeApiServer, Store
from kai_fakeapi.patch import json_patch
from kai_scheduler.api import constants as c
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.binder.binder import Binder
from kai_scheduler.k8s.binder.reservation_app import publish_gpu
from kai_scheduler.k8s.binder.reservations import DEFAULT_RESERVATION_NAMESPACE, GpuReservation
from kai_scheduler.k8s.needs import binder_needs, scheduler_needs
from kai_scheduler.k8s.runtime.access import AccessGuard
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.client import ApiStatusError
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.scheduler.loop import SchedulerLoop

T = TypeVar("T")


def pod_review(manifest: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview the API server sends the pod webhooks when `manifest` is created."""
    request = {"uid": "u", "operation": "CREATE", "object": manifest, "namespace": "default"}
    request["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def mutated(review: dict[str, Any], mutate: Callable[[Any], Any]) -> dict[str, Any]:
    """The pod of `review` with the patch of the mutating review function `mutate` applied (it must allow)."""
    response = mutate(copy.deepcopy(review))["response"]
    assert response["allowed"], response
    operations = json.loads(b64decode(response["patch"])) if "patch" in response else []
    patched: dict[str, Any] = json_patch(review["request"]["object"], operations)
    return patched


def run(coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
    """Run a test body on a fresh event loop; fail after `timeout` seconds (a hang fails the test, not
    the suite)."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> None:
    """Wait on the event loop until `predicate()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)


async def in_thread(func: Callable[..., T], *args: Any) -> T:
    """Run a blocking call (e.g. the fake server's stop/restart) without blocking the event loop."""
    return await asyncio.to_thread(func, *args)


def ensure_namespace(server: FakeApiServer, name: str) -> None:
    """Create the namespace `name` unless it exists (what the chart does for the components' own ones)."""
    if server.store.try_get("namespaces", name) is None:
        server.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


# --- fake GPU nodes: what the kubelet, the device plugin and the reservation app do -----------------


class FakeGpuNodes:
    """Plays the kubelet, the NVIDIA device plugin and the reservation app for the binder's GPU reservation
    pods (in their namespace, made here as the chart makes it): each one gets a free device of its node
    (UUID `GPU-<node>-<index>`, lowest index first), which it publishes over HTTP with the reservation
    app's own `publish_gpu` (so an outage is retried as in a real pod). A device is free again once its
    reservation pod is gone.

    async with FakeGpuNodes(server):
        ...
    """

    def __init__(
        self,
        server: FakeApiServer,
        namespace: str = DEFAULT_RESERVATION_NAMESPACE,
        *,
        service_account: tuple[str, str] | None = None,
    ) -> None:
        self.server = server
        self.namespace = namespace
        # Whose token the stand-in's client carries (namespace, name); None: the reservation pods'
        # ServiceAccount's, as the chart makes it (identities.RESERVATION).
        self.service_account = service_account
        self.devices: dict[str, str] = {}  # reservation pod uid -> the device's UUID
        self.stop = asyncio.Event()

    async def __aenter__(self) -> FakeGpuNodes:
        ensure_namespace(self.server, self.namespace)
        service_account = self.service_account or account(RESERVATION)
        config = KubeConfig.from_dict(self.server.kubeconfig(service_account=service_account))
        self.client = LightkubeClient(config, timeout=5.0)
        self.task = asyncio.create_task(self.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await self.task
        await self.client.aclose()

    async def run(self) -> None:
        publishing: dict[str, asyncio.Task[None]] = {}
        while not self.stop.is_set():
            pods = {p["metadata"]["uid"]: p for p in self.server.store.list("pods", self.namespace)}
            for uid in set(self.devices) - set(pods):
                del self.devices[uid]
            for uid, pod in pods.items():
                if uid not in self.devices and (pod.get("spec") or {}).get("nodeName"):
                    self.devices[uid] = self._free_device(str(pod["spec"]["nodeName"]))
                    publishing[uid] = asyncio.create_task(self._publish(pod, self.devices[uid]))
            await asyncio.sleep(0.02)
        await asyncio.gather(*publishing.values())

    def _free_device(self, node: str) -> str:
        taken = set(self.devices.values())
        index = next(i for i in range(1_000) if f"GPU-{node}-{i}" not in taken)
        return f"GPU-{node}-{index}"

    async def _publish(self, pod: dict[str, Any], uuid: str) -> None:
        annotations = pod["metadata"].get("annotations") or {}
        if annotations.get(c.RESERVED_GPU_ANNOTATION):
            return
        try:
            await publish_gpu(
                self.client, self.namespace, pod["metadata"]["name"], uuid, self.stop, backoff=FAST_BACKOFF
            )
        except ApiStatusError as error:
            if error.code != 404:  # deleted before it could publish: nothing to do
                raise


# --- a running scheduler and binder on the fake API server ------------------------------------------


def in_pool(pool: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` labelled into the node pool `pool` (KAI's default node-pool label)."""
    manifest["metadata"].setdefault("labels", {})[c.NODE_POOL_LABEL] = pool
    return manifest


def placed(store: Store, namespace: str = "default") -> dict[str, str]:
    """Pod name -> node, for the bound pods of `namespace`."""
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in store.list("pods", namespace)
        if p["spec"].get("nodeName")
    }


def evicted(server: FakeApiServer, namespace: str = "default") -> list[str]:
    """The pods of `namespace` deleted (as the scheduler evicts), in the order of the requests."""
    deletes = server.requests(verb="delete", resource="pods")
    return [str(r.name) for r in deletes if r.namespace == namespace and r.code is not None and r.code < 300]


class Live:
    """A client, informers, a scheduler loop and (optionally) a binder with GPU reservation pods, and fake
    GPU nodes that serve those (`gpus`), running against `server`, as one process of both components runs:
    with the all-in-one ServiceAccount's token (`client`), the loop, the binder and the informers calling
    through an `AccessGuard` of what the scheduler and the binder declare:

    async with Live(server) as live:
        await live.until(lambda: ...)
    """

    def __init__(
        self,
        server: FakeApiServer,
        *,
        period: float = 0.05,
        binder: bool = True,
        loop: bool = True,
        backoff_base: float = 0.02,
        config: SchedulerConfig | None = None,
        gpus: bool = True,
        reservation: GpuReservation | None = GpuReservation(timeout=5.0),  # noqa: B008 (frozen)
        **loop_options: Any,
    ) -> None:
        self.server = server
        self.period = period
        self.with_binder = binder
        self.with_loop = loop
        self.backoff_base = backoff_base
        self.config = config or SchedulerConfig()
        self.loop_options = loop_options
        self.gpus = FakeGpuNodes(server) if gpus else None
        self.reservation = reservation
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Live:
        if self.reservation is not None:
            ensure_namespace(self.server, self.reservation.namespace)  # the chart's
        self.client = client_as(self.server, ALL_IN_ONE)
        partition = self.loop_options.get("partition")
        accesses = scheduler_needs(pool_labels=partition is not None and partition.value is not None)
        guarded = AccessGuard(self.client, accesses | binder_needs(reservation=self.reservation), "live")
        self.informers = InformerSet(guarded, backoff=FAST_BACKOFF)
        self.informers.start()
        self.loop = SchedulerLoop(
            guarded, self.informers, self.config, period=self.period, **self.loop_options
        )
        self.binder = Binder(
            guarded,
            self.informers,
            backoff_base=self.backoff_base,
            resync_period=0.5,
            reservation=self.reservation,
        )
        if self.gpus is not None:
            await self.gpus.__aenter__()
        assert await self.informers.wait_synced(5)
        if self.with_loop:
            self.tasks.append(asyncio.create_task(self.loop.run(self.stop)))
        if self.with_binder:
            self.tasks.append(asyncio.create_task(self.binder.run(self.stop)))
        return self

    async def until(self, predicate: Callable[[], bool], timeout: float = 8.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            for task in self.tasks:
                if task.done():
                    task.result()  # surface a crash
                    raise AssertionError("a component stopped")
            if time.monotonic() > deadline:
                raise AssertionError("condition not reached in time")
            await asyncio.sleep(0.02)

    async def settle(self, cycles: int = 3, timeout: float = 8.0) -> None:
        """Wait until the loop has completed `cycles` more cycles and the binder holds no queued or
        in-progress request: then whatever those cycles would do is done, and a test may assert that
        nothing more happened. A loop that stalls or fails every cycle fails here instead of passing."""
        target = self.loop.cycle + cycles

        def settled() -> bool:
            report = self.loop.last_report
            cycled = report is not None and report.cycle >= target
            idle = not self.with_binder or (len(self.binder.queue) == 0 and not self.binder.queue.processing)
            return cycled and idle

        await self.until(settled, timeout)

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)
        if self.gpus is not None:
            await self.gpus.__aexit__()
        await self.informers.stop()
        await self.client.aclose()
