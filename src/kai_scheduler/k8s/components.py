"""`kai-scheduler run`: the live-mode components, one or all of them in one process.

Each component is a coroutine that runs until `stop` is set: the scheduler (informers, the scheduling
loop, and with it the binder when both run here), the binder on its own, the pod grouper, the status
controllers, the admission webhooks and the node scale adjuster (scaling pods for cluster autoscalers).
Every process also serves `/metrics`, `/healthz` and `/readyz`; the scheduler also serves, on
127.0.0.1 only, the plugin server (`/get-snapshot`, `/get-job-order`) when its configuration lists the
`snapshot` or `reflectjoborder` plugin (KAI's default configuration lists `snapshot`).

With `leader_elect`, each controller works only while it holds its own Lease (`LEASES`) in
`lease_namespace`, so that replicas of one component never act together; the admission webhooks are
stateless and answer from every replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry

from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.admission import WebhookServer
from kai_scheduler.k8s.binder import Binder, GpuReservation
from kai_scheduler.k8s.client import KubeClient
from kai_scheduler.k8s.http_server import MetricsServer
from kai_scheduler.k8s.informers import CONTROLLER_KINDS, SCHEDULER_KINDS, InformerSet
from kai_scheduler.k8s.leader import LeaderElector, run_leading
from kai_scheduler.k8s.lightkube_client import LightkubeClient
from kai_scheduler.k8s.metrics import QueueMetrics, SchedulerMetrics
from kai_scheduler.k8s.plugin_server import PLUGIN_SERVER_PORT
from kai_scheduler.k8s.podgrouper_controller import PodGrouperController
from kai_scheduler.k8s.scale_adjuster import DEFAULT_IMAGE as DEFAULT_SCALING_POD_IMAGE
from kai_scheduler.k8s.scale_adjuster import SCALE_ADJUSTER_KINDS, ScaleAdjuster
from kai_scheduler.k8s.scheduler_loop import run_live
from kai_scheduler.k8s.status_controllers import PodGroupStatusController, QueueStatusController
from kai_scheduler.model.partition import Partition

COMPONENTS: Final = ("scheduler", "binder", "podgrouper", "status-controllers", "admission", "scale-adjuster")
# What `--all` runs: the scale adjuster only helps with a cluster autoscaler, so (as KAI deploys it) it runs
# only when named.
ALL_COMPONENTS: Final = tuple(name for name in COMPONENTS if name != "scale-adjuster")
# The Lease each controller holds while it works (the scheduler's also covers a binder in its process).
LEASES: Final = {
    "scheduler": "kai-scheduler",
    "binder": "kai-binder",
    "podgrouper": "kai-podgrouper",
    "status-controllers": "kai-status-controllers",
    "scale-adjuster": "kai-scale-adjuster",
}


WEBHOOK_PORT_OFF: Final = (
    "--webhook-port: 0 would turn the admission webhooks off; leave the admission component out instead"
)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What `kai-scheduler run` starts. A port of 0 turns its server off, as the command's flags say (and
    as Kubernetes components' port flags do); the admission webhooks, being their component, need one."""

    components: frozenset[str]
    config: SchedulerConfig
    kubeconfig: str | None = None
    scheduler_name: str = "kai-scheduler"
    leader_elect: bool = False
    identity: str | None = None  # this process's name in the Leases (default: host, pid and a random part)
    lease_namespace: str = field(default_factory=lambda: os.environ.get("POD_NAMESPACE", "kai-scheduler"))
    metrics_port: int = 8080  # /metrics, /healthz, /readyz; 0: none
    webhook_port: int = 9443
    tls_cert_dir: str | None = None
    gpu_pod_runtime_class: str = "nvidia"
    gpu_sharing: bool = True  # False: the admission webhook refuses gpu-fraction / gpu-memory pods
    cdi_enabled: bool = False  # the binder names shared GPUs as CDI devices
    reservation: GpuReservation | None = field(default_factory=GpuReservation)
    scaling_pod_image: str = DEFAULT_SCALING_POD_IMAGE
    plugin_server_port: int = PLUGIN_SERVER_PORT  # the scheduler's, on 127.0.0.1; 0: none
    # The node pool the scheduler serves (KAI's SchedulingShard; `shard_config`): its partition, with
    # `config` already the shard's. None: KAI's default shard (the objects without the node-pool label).
    partition: Partition | None = None


async def run_components(options: RunOptions, stop: asyncio.Event, client: KubeClient | None = None) -> None:
    """Run the chosen components until `stop` is set, then shut down gracefully."""
    client = client if client is not None else LightkubeClient.from_kubeconfig(options.kubeconfig)
    registry = CollectorRegistry()
    ready: list[asyncio.Event] = []
    work: list[Callable[[], Awaitable[None]]] = []
    chosen = options.components
    shared = _shared_informers(client, chosen)
    if "scheduler" in chosen:
        synced = asyncio.Event()
        ready.append(synced)
        work.append(
            lambda: _scheduler(
                client, options, stop, registry, synced, binder="binder" in chosen, informers=shared
            )
        )
    elif "binder" in chosen:
        work.append(lambda: _binder(client, options, stop, shared))
    if "podgrouper" in chosen:
        work.append(lambda: _podgrouper(client, options, stop, shared))
    if "status-controllers" in chosen:
        work.append(lambda: _status_controllers(client, options, stop, registry, shared))
    if "scale-adjuster" in chosen:
        work.append(lambda: _scale_adjuster(client, options, stop))
    webhook = _webhook(options) if "admission" in chosen else None
    metrics = None
    if options.metrics_port:
        metrics = MetricsServer(
            registry, port=options.metrics_port, ready=lambda: all(e.is_set() for e in ready)
        )
        metrics.start()
    if webhook is not None:
        webhook.start()
    if shared is not None:
        shared.start()
    try:
        await asyncio.gather(*(job() for job in work), stop.wait())
    finally:
        if shared is not None:
            await shared.stop()
        if metrics is not None:
            await metrics.aclose()
        if webhook is not None:
            await webhook.aclose()


def _shared_informers(client: KubeClient, chosen: frozenset[str]) -> InformerSet | None:
    """One set of informers for the components of this process that watch the same kinds (the scheduler,
    binder, pod grouper and status controllers), or None when at most one of them runs here: each watch
    of pods costs the API server an encoding and this process a decoding of every pod change, so two
    sets would do all of that twice for the same caches. The caches are only read by the components."""
    watching = chosen & {"scheduler", "binder", "podgrouper", "status-controllers"}
    if len(watching) < 2:
        return None
    return InformerSet(client, kinds=SCHEDULER_KINDS if "scheduler" in watching else CONTROLLER_KINDS)


@contextlib.asynccontextmanager
async def _informers(client: KubeClient, shared: InformerSet | None) -> AsyncIterator[InformerSet]:
    """The shared informers (started and stopped by `run_components`), else this component's own."""
    if shared is not None:
        yield shared
        return
    async with InformerSet(client, kinds=CONTROLLER_KINDS) as own:
        yield own


async def _scheduler(
    client: KubeClient,
    options: RunOptions,
    stop: asyncio.Event,
    registry: CollectorRegistry,
    synced: asyncio.Event,
    *,
    binder: bool,
    informers: InformerSet | None,
) -> None:
    partition = options.partition or Partition(options.config.node_pool_label_key)
    await run_live(
        client,
        options.config,
        stop,
        scheduler_name=options.scheduler_name,
        binder=binder,
        leader_election=options.leader_elect,
        lease_namespace=options.lease_namespace,
        metrics=SchedulerMetrics(registry, node_pool=partition.pool),
        ready=synced,
        # KAI's scheduler of a shard with a partition value elects its leader as `<scheduler>-<value>`.
        lease_name=LEASES["scheduler"] + (f"-{partition.value}" if partition.value else ""),
        partition=partition,
        # In a cluster the pod grouper (this process's or another's) names every pod's PodGroup.
        require_pod_groups=True,
        reservation=options.reservation,
        cdi=options.cdi_enabled,
        plugin_server_port=options.plugin_server_port,
        informers=informers,
    )


async def _leading(
    client: KubeClient,
    options: RunOptions,
    component: str,
    work: Callable[[asyncio.Event], Awaitable[None]],
    stop: asyncio.Event,
) -> None:
    """Run `work` until `stop`; with leader election, only during the terms this process holds the
    component's Lease (the informers keep their caches warm in between)."""
    if not options.leader_elect:
        await work(stop)
        return
    elector = LeaderElector(client, LEASES[component], options.lease_namespace, options.identity)
    await run_leading(elector, work, stop)


async def _binder(
    client: KubeClient, options: RunOptions, stop: asyncio.Event, shared: InformerSet | None
) -> None:
    async with _informers(client, shared) as informers:
        binder = Binder(client, informers, reservation=options.reservation, cdi=options.cdi_enabled)
        await _leading(client, options, "binder", binder.run, stop)


async def _podgrouper(
    client: KubeClient, options: RunOptions, stop: asyncio.Event, shared: InformerSet | None
) -> None:
    async with _informers(client, shared) as informers:
        grouper = PodGrouperController(client, informers, scheduler_name=options.scheduler_name)
        await _leading(client, options, "podgrouper", grouper.run, stop)


async def _status_controllers(
    client: KubeClient,
    options: RunOptions,
    stop: asyncio.Event,
    registry: CollectorRegistry,
    shared: InformerSet | None,
) -> None:
    async with _informers(client, shared) as informers:
        pod_groups = PodGroupStatusController(client, informers)
        queues = QueueStatusController(client, informers, metrics=QueueMetrics(registry))

        async def both(term: asyncio.Event) -> None:
            await asyncio.gather(pod_groups.run(term), queues.run(term))

        await _leading(client, options, "status-controllers", both, stop)


async def _scale_adjuster(client: KubeClient, options: RunOptions, stop: asyncio.Event) -> None:
    async with InformerSet(client, kinds=SCALE_ADJUSTER_KINDS) as informers:
        adjuster = ScaleAdjuster(
            client, informers, scheduler_name=options.scheduler_name, image=options.scaling_pod_image
        )
        await _leading(client, options, "scale-adjuster", adjuster.run, stop)


def _webhook(options: RunOptions) -> WebhookServer:
    if options.tls_cert_dir is None:
        raise ValueError("--tls-cert-dir: the admission webhooks need a directory with tls.crt and tls.key")
    if options.webhook_port == 0:
        raise ValueError(WEBHOOK_PORT_OFF)
    return WebhookServer(
        options.tls_cert_dir,
        port=options.webhook_port,
        scheduler_name=options.scheduler_name,
        gpu_runtime_class=options.gpu_pod_runtime_class,
        gpu_sharing_enabled=options.gpu_sharing,
    )
