"""Replicas of the controllers, as the chart runs them: each `kai-scheduler run --component=<c> --leader-elect
--identity=<c>-<i>` a child process of its own against the strict fake API server holding the chart's
RBAC, with ports of its own and the token of the ServiceAccount the chart gives the component; who leads
is read from the Leases' holderIdentity. Used by the high-availability test and by
`benchmarks/failover.py`.

    with strict_server() as server, Replicas(server, tmp_path, timing=TIMING) as replicas:
        await replicas.until_ready()
        replicas.leader("binder").kill()
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from child_process import Child
from identities import kubeconfig_as
from ports import free_port, http_status

from chart_support import NAMESPACE
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.components import LEASES

COMPONENTS = ("scheduler", "binder", "podgrouper", "status-controllers")
LEASE_NAMESPACE = NAMESPACE  # the chart's namespace: the components' POD_NAMESPACE
KAI_TIMING = ("15s", "10s", "2s")  # lease duration, renew deadline, retry period: KAI's


def kubeconfig(server: FakeApiServer, folder: Path, component: str) -> Path:
    """The one place a component's kubeconfig is made: with the token of the ServiceAccount the chart
    gives it (`identities.py`), so that the strict server lets it do what the chart's RBAC grants."""
    return kubeconfig_as(server, folder / f"{component}.kubeconfig", component)


@dataclass
class Replica:
    component: str
    identity: str
    metrics_port: int
    child: Child

    def ready(self) -> bool:
        return http_status(f"http://127.0.0.1:{self.metrics_port}/readyz") == 200

    def kill(self) -> None:
        """SIGKILL (not waited for), as a node that dies: no graceful stop, the Lease is not released."""
        self.child.process.kill()


class Replicas:
    """`replicas` processes of each of `components` (see the module doc). `timing`: the three
    `--leader-elect-*` durations. `src`: the kai_scheduler sources the processes run (default: this
    clone's, as installed)."""

    def __init__(
        self,
        server: FakeApiServer,
        folder: Path,
        *,
        replicas: int = 2,
        timing: tuple[str, str, str] = KAI_TIMING,
        components: Sequence[str] = COMPONENTS,
        src: Path | None = None,
    ) -> None:
        self.server = server
        self.folder = folder
        self.count = replicas
        self.timing = timing
        self.components = tuple(components)
        self.env = {**os.environ, "POD_NAMESPACE": LEASE_NAMESPACE}
        if src is not None:
            self.env["PYTHONPATH"] = str(src)
        self.all: list[Replica] = []
        self._ports: set[int] = set()  # every port handed out: two children never get the same one

    def _port(self) -> int:
        port = free_port()
        while port in self._ports:
            port = free_port()
        self._ports.add(port)
        return port

    def _start(self, component: str, identity: str) -> Replica:
        port = self._port()
        return Replica(component, identity, port, Child(self._command(component, identity, port), self.env))

    def _command(self, component: str, identity: str, metrics_port: int) -> list[str]:
        lease, renew, retry = self.timing
        command = [sys.executable, "-m", "kai_scheduler", "run", f"--component={component}"]
        command += ["--leader-elect", f"--identity={identity}"]
        command += [f"--leader-elect-lease-duration={lease}", f"--leader-elect-renew-deadline={renew}"]
        command += [f"--leader-elect-retry-period={retry}"]
        command += ["--kubeconfig", str(kubeconfig(self.server, self.folder, component))]
        command += ["--metrics-port", str(metrics_port)]
        if component == "scheduler":
            command += ["--plugin-server-port", str(self._port())]
        return command

    def __enter__(self) -> Replicas:
        self.all = [self._start(c, f"{c}-{i}") for c in self.components for i in range(self.count)]
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for replica in self.all:
            if replica.child.returncode is None:
                replica.child.process.terminate()  # all at once: each then has the whole time to stop
        for replica in self.all:
            replica.child.stop()
        if error is not None:
            error.add_note(self.output())

    def output(self) -> str:
        """Every process's exit code and the tail of its output, for a failure's message."""
        return "\n".join(f"=== {r.identity}\n{r.child.output()}" for r in self.all)

    async def until_ready(self, timeout: float = 180.0) -> None:
        """Every process serves /readyz (its caches are synced) and every Lease has a holder."""
        deadline = time.monotonic() + timeout
        waiting = list(self.all)
        while waiting or not all(self.holder(c) for c in self.components):
            for index, replica in enumerate(self.all):
                if replica.child.returncode is not None:
                    self.all[index] = self._restarted(replica)
                    waiting = [self.all[index] if r is replica else r for r in waiting]
            if time.monotonic() > deadline:
                raise AssertionError(f"not ready after {timeout:.0f} s: {[r.identity for r in waiting]}")
            waiting = [r for r in waiting if not await asyncio.to_thread(r.ready)]
            await asyncio.sleep(0.2)

    def _restarted(self, replica: Replica) -> Replica:
        """A replica that exited because another process took a port it was given between the probe
        that found it free and its own bind (nothing reserves a port across processes), started again on
        other ports; any other exit fails."""
        replica.child.wait(10)
        if "address already in use" not in replica.child.stderr:
            raise AssertionError(f"{replica.identity} exited before the run")
        return self._start(replica.component, replica.identity)

    def holder(self, component: str) -> str:
        lease = self.server.store.try_get("leases", LEASES[component], LEASE_NAMESPACE)
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def leader(self, component: str) -> Replica:
        holder = self.holder(component)
        return next(r for r in self.all if r.component == component and r.identity == holder)

    def standbys(self, component: str) -> list[Replica]:
        holder = self.holder(component)
        return [r for r in self.all if r.component == component and r.identity != holder]
