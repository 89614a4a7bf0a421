"""Replicas of the controllers, exactly as the chart's Deployments run them (`InstalledChart`): the chart
installed with two replicas of the scheduler, binder, pod grouper and status controllers (the admission as
the chart has it), each pod a process with the chart's args, its ServiceAccount's token and ports of its
own. A test adds only what it must to a pod that runs `--leader-elect`: `--identity=<pod name>` (the
Leases' holderIdentity, so the leader is known) and the `--leader-elect-*` timing. Used by the
high-availability test and by `benchmarks/failover.py`.

    with strict_server(chart=False) as server, Replicas(server, tmp_path, timing=TIMING) as replicas:
        await replicas.until_ready()
        replicas.leader("binder").kill()
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from types import TracebackType

from installed_chart import ChartPod, InstalledChart
from live_support import eventually

from chart_support import NAMESPACE
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.components import LEASES

COMPONENTS = ("scheduler", "binder", "podgrouper", "status-controllers")
LEASE_NAMESPACE = NAMESPACE  # the chart's namespace: the components' POD_NAMESPACE
KAI_TIMING = ("15s", "10s", "2s")  # lease duration, renew deadline, retry period: KAI's
REPLICATED = ("scheduler", "binder", "podgrouper", "statusControllers")  # their values.yaml keys


class Replicas:
    """The chart installed on `server` with `replicas` of each of `COMPONENTS`, its pods running (see the
    module doc). `timing`: the three `--leader-elect-*` durations. `src`: the kai_scheduler sources the
    processes run (default: this clone's, as installed)."""

    def __init__(
        self,
        server: FakeApiServer,
        folder: Path,
        *,
        replicas: int = 2,
        timing: tuple[str, str, str] = KAI_TIMING,
        src: Path | None = None,
    ) -> None:
        self.server = server
        self.timing = timing
        values = {key: {"replicas": replicas} for key in REPLICATED}
        self.chart = InstalledChart(server, folder, values, extra_args=self._election, src=src)
        self._running = contextlib.ExitStack()

    def _election(self, pod: ChartPod) -> list[str]:
        if "--leader-elect" not in pod.command:
            return []
        lease, renew, retry = self.timing
        return [
            f"--identity={pod.name}",
            f"--leader-elect-lease-duration={lease}",
            f"--leader-elect-renew-deadline={renew}",
            f"--leader-elect-retry-period={retry}",
        ]

    @property
    def all(self) -> list[ChartPod]:
        """Every pod of the chart (the admission's too)."""
        return self.chart.pods

    def __enter__(self) -> Replicas:
        self.chart.install()
        self._running.enter_context(self.chart.running())
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._running.__exit__(kind, error, trace)  # stops every pod; a failure gets their output

    def output(self) -> str:
        return self.chart.output()

    async def until_ready(self, timeout: float = 180.0) -> None:
        """Every pod serves /readyz (its caches are synced) and every Lease has a holder."""
        started = time.monotonic()
        await self.chart.until_ready(timeout)
        remaining = max(timeout - (time.monotonic() - started), 1.0)
        await eventually(lambda: all(self.holder(c) for c in COMPONENTS), timeout=remaining, interval=0.2)

    def pods(self, component: str) -> list[ChartPod]:
        """The pods that run `component`."""
        return [pod for pod in self.all if f"--component={component}" in pod.command]

    def holder(self, component: str) -> str:
        lease = self.server.store.try_get("leases", LEASES[component], LEASE_NAMESPACE)
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def leader(self, component: str) -> ChartPod:
        holder = self.holder(component)
        return next(pod for pod in self.pods(component) if pod.name == holder)
