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

Each component watches only the kinds it reads and calls the API server through an `AccessGuard` holding
it to what it declares (`needs.py`), which is what the chart grants its ServiceAccount.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry

from kai_scheduler.api import constants as c
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.shard_config import DEFAULT_SHARD
from kai_scheduler.k8s.admission.queue_gate import QueueOptIns
from kai_scheduler.k8s.admission.self_signed import CertificateKeeper, SelfSignedTLS
from kai_scheduler.k8s.admission.server import WebhookServer
from kai_scheduler.k8s.binder.binder import Binder
from kai_scheduler.k8s.binder.metrics import BinderMetrics
from kai_scheduler.k8s.binder.reservations import GpuReservation
from kai_scheduler.k8s.needs import INFORMER_KINDS, binder_needs, needs, scheduler_needs
from kai_scheduler.k8s.podgrouper.controller import PodGrouperController
from kai_scheduler.k8s.runtime import reconcile_metrics
from kai_scheduler.k8s.runtime.access import AccessGuard, watching
from kai_scheduler.k8s.runtime.client import KubeClient, ResourceKind
from kai_scheduler.k8s.runtime.http_server import MetricsServer
from kai_scheduler.k8s.runtime.informers import InformerSet, union_of
from kai_scheduler.k8s.runtime.leader import LeaderElector, LeaseTiming, lead
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.runtime.wait import wait_or_stop
from kai_scheduler.k8s.scaleadjuster.controller import SCALE_ADJUSTER_KINDS, ScaleAdjuster
from kai_scheduler.k8s.scaleadjuster.plan import DEFAULT_IMAGE as DEFAULT_SCALING_POD_IMAGE
from kai_scheduler.k8s.scheduler.binds import DEFAULT_BACKOFF_LIMIT
from kai_scheduler.k8s.scheduler.loop import SchedulerLoop
from kai_scheduler.k8s.scheduler.metrics import SchedulerMetrics
from kai_scheduler.k8s.scheduler.plugin_server import PLUGIN_SERVER_PORT, PluginServer, endpoint_paths
from kai_scheduler.k8s.scheduler.shard_objects import ShardObjects, ShardSettings
from kai_scheduler.k8s.scheduler.start_times import DEFAULT_INTERVAL, StartTimeAnnotations, StartTimeEstimator
from kai_scheduler.k8s.status.metrics import QueueMetrics
from kai_scheduler.k8s.status.podgroups import PodGroupStatusController
from kai_scheduler.k8s.status.queues import QueueStatusController
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
    lease_timing: LeaseTiming = field(default_factory=LeaseTiming)
    metrics_port: int = 8080  # /metrics, /healthz, /readyz; 0: none
    webhook_port: int = 9443
    tls_cert_dir: str | None = None
    # The admission webhooks make and keep their own certificate in this Secret (`self_signed.py`); the
    # files go to `tls_cert_dir`, or to a directory of the process's own when that is None.
    self_signed: SelfSignedTLS | None = None
    gpu_pod_runtime_class: str = "nvidia"
    gpu_sharing: bool = True  # False: the admission webhook refuses gpu-fraction / gpu-memory pods
    queue_admission_gating: bool = False  # the webhook gates opted-in queues' pods (admission/queue_gate.py)
    cdi_enabled: bool = False  # the binder names shared GPUs as CDI devices
    reservation: GpuReservation | None = field(default_factory=GpuReservation)
    scaling_pod_image: str = DEFAULT_SCALING_POD_IMAGE
    plugin_server_port: int = PLUGIN_SERVER_PORT  # the scheduler's, on 127.0.0.1; 0: none
    # The node pool the scheduler serves (KAI's SchedulingShard; `shard_config`): its partition, with
    # `config` already the shard's. None: KAI's default shard (the objects without the node-pool label).
    partition: Partition | None = None
    # The scheduler's shard, whose SchedulingShard object (and kai-config) it watches and follows
    # (`scheduler/shard_objects.py`). `shard_configured`: whether --config defines the shard (lists it, or
    # it is KAI's default shard), so that `config` and `partition` hold until an object says otherwise;
    # False: only its object does, and the scheduler waits for it.
    shard: str = DEFAULT_SHARD
    shard_configured: bool = True
    # The start-time estimates (`scheduler/start_times.py`; the CLI passes the simulator's look-ahead),
    # every `estimate_interval` seconds. None: no estimates.
    estimator: StartTimeEstimator | None = None
    estimate_interval: float = DEFAULT_INTERVAL


async def run_components(options: RunOptions, stop: asyncio.Event, client: KubeClient | None = None) -> None:
    """Run the chosen components until `stop` is set, then shut down gracefully."""
    client = client if client is not None else LightkubeClient.from_kubeconfig(options.kubeconfig)
    registry = CollectorRegistry()
    ready: list[asyncio.Event] = []
    work: list[Callable[[], Awaitable[None]]] = []
    chosen = options.components
    clients = _guarded(client, options)
    shared = _shared_informers(client, chosen)
    if "scheduler" in chosen:
        synced = asyncio.Event()
        ready.append(synced)
        work.append(
            lambda: _scheduler(
                clients["scheduler"],
                options,
                stop,
                registry,
                synced,
                binder="binder" in chosen,
                informers=shared,
            )
        )
    elif "binder" in chosen:
        work.append(lambda: _binder(clients["binder"], options, stop, registry, shared))
    if "podgrouper" in chosen:
        work.append(lambda: _podgrouper(clients["podgrouper"], options, stop, registry, shared))
    if "status-controllers" in chosen:
        work.append(
            lambda: _status_controllers(clients["status-controllers"], options, stop, registry, shared)
        )
    if "scale-adjuster" in chosen:
        work.append(lambda: _scale_adjuster(clients["scale-adjuster"], options, stop, registry))
    webhook = None
    own_cert_dir = None
    if "admission" in chosen:
        if options.self_signed is not None and options.tls_cert_dir is None:
            own_cert_dir = tempfile.TemporaryDirectory(prefix="kai-admission-tls-")
        opt_ins = QueueOptIns(clients["admission"]) if options.queue_admission_gating else None
        webhook = _webhook(options, own_cert_dir.name if own_cert_dir is not None else None, opt_ins)
        if opt_ins is not None:
            work.append(opt_ins.informer.run)
        if options.self_signed is not None:
            serving = asyncio.Event()
            ready.append(serving)
            keeper = CertificateKeeper(clients["admission"], options.self_signed, webhook.cert_dir)
            work.append(lambda: _self_signed_admission(keeper, webhook, stop, serving))
    metrics = None
    if options.metrics_port:
        metrics = MetricsServer(
            registry, port=options.metrics_port, ready=lambda: all(e.is_set() for e in ready)
        )
        metrics.start()
    if webhook is not None and options.self_signed is None:
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
        if own_cert_dir is not None:
            own_cert_dir.cleanup()


def _guarded(client: KubeClient, options: RunOptions) -> dict[str, KubeClient]:
    """Each chosen component's client, held to what it declares. A binder in the scheduler's process runs
    in the scheduler's loop, on its client."""
    clients: dict[str, KubeClient] = {}
    for component in options.components:
        accesses, who = needs(component, options), component
        if component == "scheduler" and "binder" in options.components:
            accesses, who = accesses | needs("binder", options), "scheduler+binder"
        clients[component] = AccessGuard(client, accesses, who)
    return clients


def _shared_informers(client: KubeClient, chosen: frozenset[str]) -> InformerSet | None:
    """One set of informers for the components of this process that watch the same kinds (the scheduler,
    binder, pod grouper and status controllers), or None when at most one of them runs here: each watch
    of pods costs the API server an encoding and this process a decoding of every pod change, so two
    sets would do all of that twice for the same caches. The set watches the union of their kinds; the
    caches are only read by the components."""
    watchers = [component for component in COMPONENTS if component in chosen and component in INFORMER_KINDS]
    if len(watchers) < 2:
        return None
    kinds = union_of(*(INFORMER_KINDS[component] for component in watchers))
    return InformerSet(AccessGuard(client, watching(kinds), "+".join(watchers)), kinds=kinds)


@contextlib.asynccontextmanager
async def _informers(
    client: KubeClient, shared: InformerSet | None, kinds: tuple[ResourceKind, ...]
) -> AsyncIterator[InformerSet]:
    """The shared informers (started and stopped by `run_components`), else this component's own."""
    if shared is not None:
        yield shared
        return
    async with InformerSet(client, kinds=kinds) as own:
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
    """The scheduler of its shard: on the settings its objects (or --config) give at start, then on each
    change of its objects, between cycles (`scheduler/shard_objects.py`)."""
    fallback = ShardSettings(
        options.config, options.partition or Partition(options.config.node_pool_label_key)
    )
    async with ShardObjects(client, options.shard, fallback, configured=options.shard_configured) as objects:
        settings = await objects.initial(stop)
        if settings is None:
            return
        partition = settings.partition
        await run_live(
            client,
            settings.config,
            stop,
            scheduler_name=options.scheduler_name,
            binder=binder,
            leader_election=options.leader_elect,
            lease_namespace=options.lease_namespace,
            identity=options.identity,
            lease_timing=options.lease_timing,
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
            estimator=options.estimator,
            estimate_interval=options.estimate_interval,
            reconfigure=objects.changed,
        )


# --- the scheduler: its loop, its plugin server and (in its process) the binder ----------------------


async def run_live(
    client: KubeClient,
    config: SchedulerConfig,
    stop: asyncio.Event,
    *,
    period: float | None = None,
    scheduler_name: str = c.SCHEDULER_NAME,
    binder: bool = True,
    leader_election: bool = False,
    lease_name: str = "kai-scheduler",
    lease_namespace: str = "kai-scheduler",
    identity: str | None = None,
    lease_timing: LeaseTiming = LeaseTiming(),  # noqa: B008 (frozen, so shared safely)
    namespace: str | None = None,
    metrics: SchedulerMetrics | None = None,
    node_pool: str = "default",
    partition: Partition | None = None,
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
    ready: asyncio.Event | None = None,
    require_pod_groups: bool = False,
    reservation: GpuReservation | None = GpuReservation(),  # noqa: B008 (frozen, so shared safely)
    cdi: bool = False,
    plugin_server_port: int = 0,
    informers: InformerSet | None = None,
    estimator: StartTimeEstimator | None = None,
    estimate_interval: float = DEFAULT_INTERVAL,
    reconfigure: Callable[[], SchedulerConfig | None] | None = None,
) -> None:
    """Informers, the scheduling loop (every `period`, default `config.period`) and, with `binder`, the
    binder, until `stop` is set; then a graceful shutdown (the cycle and binds in progress finish, the
    lease is released). With `leader_election`, the loop and the binder work only while this process
    holds the Lease `lease_namespace/lease_name`. `namespace` limits the namespaced informers. `ready` is
    set once the caches are synced (for a readiness probe). With `require_pod_groups`, pending pods wait
    until the pod grouper has named their PodGroup. `reservation` is the binder's (None: no GPU
    reservation pods). With a `plugin_server_port` (0: none, the default), the plugin server
    (`scheduler/plugin_server.py`, 127.0.0.1) serves the endpoints that the configuration's plugins turn
    on. `informers`: started and stopped by the caller, shared with other components of the process
    (default: this function's own). `reconfigure`, asked before each cycle, may give the loop a new
    configuration (the shard's objects changed). With an `estimator`, waiting PodGroups get start-time
    estimates every `estimate_interval` seconds, in a forked child (`scheduler/start_times.py`). Calls go
    through an `AccessGuard` of what the scheduler (and binder) declare, unless `client` is one already."""
    if not isinstance(client, AccessGuard):
        lease = lease_namespace if leader_election else None
        pool = partition is not None and partition.value is not None
        accesses = scheduler_needs(lease_namespace=lease, pool_labels=pool, estimates=estimator is not None)
        if binder:
            accesses |= binder_needs(reservation=reservation, lease_namespace=lease)
        client = AccessGuard(client, accesses, "scheduler+binder" if binder else "scheduler")
    own_informers = informers is None
    if informers is None:
        informers = InformerSet(client, namespace=namespace)
    elector = None
    if leader_election:
        elector = LeaderElector(client, lease_name, lease_namespace, identity, timing=lease_timing)
    serve_plugins = plugin_server_port != 0 and bool(endpoint_paths(config))
    loop = SchedulerLoop(
        client,
        informers,
        config,
        period=config.period if period is None else period,
        scheduler_name=scheduler_name,
        metrics=metrics,
        leading=elector.leading if elector is not None else None,
        backoff_limit=backoff_limit,
        node_pool=node_pool,
        partition=partition,
        require_pod_groups=require_pod_groups,
        publish_cycles=serve_plugins,
        reconfigure=reconfigure,
    )
    bind = Binder(client, informers, reservation=reservation, cdi=cdi) if binder else None
    if bind is not None and metrics is not None:
        BinderMetrics(metrics.registry, bind.stats)
        reconcile_metrics.export(metrics.registry, bind)
    estimates = None
    if estimator is not None:
        estimates = StartTimeAnnotations(
            client,
            informers,
            config,
            loop.clock,
            estimator,
            cycles=lambda: loop.last_cycle,
            request_state=loop.request_state,
            interval=estimate_interval,
            partition=partition,
            history=loop.history,
        )

    async def work(term: asyncio.Event) -> None:
        jobs = [loop.run(term)] + ([bind.run(term)] if bind is not None else [])
        jobs += [estimates.run(term)] if estimates is not None else []
        await asyncio.gather(*jobs)

    plugins = None
    if serve_plugins:
        plugins = PluginServer(lambda: loop.last_cycle, config, port=plugin_server_port)
        plugins.start()
    if own_informers:
        informers.start()
    tasks = [asyncio.create_task(lead(elector, work, stop), name="scheduler")]
    if ready is not None:
        tasks.append(asyncio.create_task(_signal_synced(informers, ready, stop), name="ready"))
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if own_informers:
            await informers.stop()
        if plugins is not None:
            await plugins.aclose()


async def _signal_synced(informers: InformerSet, ready: asyncio.Event, stop: asyncio.Event) -> None:
    if await wait_or_stop(informers.wait_synced(), stop):
        ready.set()


async def _leading(
    client: KubeClient,
    options: RunOptions,
    component: str,
    work: Callable[[asyncio.Event], Awaitable[None]],
    stop: asyncio.Event,
) -> None:
    """Run `work` until `stop`; with leader election, only during the terms this process holds the
    component's Lease (the informers keep their caches warm in between)."""
    elector = None
    if options.leader_elect:
        elector = LeaderElector(
            client, LEASES[component], options.lease_namespace, options.identity, timing=options.lease_timing
        )
    await lead(elector, work, stop)


async def _binder(
    client: KubeClient,
    options: RunOptions,
    stop: asyncio.Event,
    registry: CollectorRegistry,
    shared: InformerSet | None,
) -> None:
    async with _informers(client, shared, INFORMER_KINDS["binder"]) as informers:
        binder = Binder(client, informers, reservation=options.reservation, cdi=options.cdi_enabled)
        BinderMetrics(registry, binder.stats)
        reconcile_metrics.export(registry, binder)
        await _leading(client, options, "binder", binder.run, stop)


async def _podgrouper(
    client: KubeClient,
    options: RunOptions,
    stop: asyncio.Event,
    registry: CollectorRegistry,
    shared: InformerSet | None,
) -> None:
    async with _informers(client, shared, INFORMER_KINDS["podgrouper"]) as informers:
        grouper = PodGrouperController(client, informers, scheduler_name=options.scheduler_name)
        reconcile_metrics.export(registry, grouper)
        await _leading(client, options, "podgrouper", grouper.run, stop)


async def _status_controllers(
    client: KubeClient,
    options: RunOptions,
    stop: asyncio.Event,
    registry: CollectorRegistry,
    shared: InformerSet | None,
) -> None:
    async with _informers(client, shared, INFORMER_KINDS["status-controllers"]) as informers:
        pod_groups = PodGroupStatusController(client, informers)
        queues = QueueStatusController(client, informers, metrics=QueueMetrics(registry))
        for controller in (pod_groups, queues):
            reconcile_metrics.export(registry, controller)

        async def both(term: asyncio.Event) -> None:
            await asyncio.gather(pod_groups.run(term), queues.run(term))

        await _leading(client, options, "status-controllers", both, stop)


async def _scale_adjuster(
    client: KubeClient, options: RunOptions, stop: asyncio.Event, registry: CollectorRegistry
) -> None:
    async with InformerSet(client, kinds=SCALE_ADJUSTER_KINDS) as informers:
        adjuster = ScaleAdjuster(
            client, informers, scheduler_name=options.scheduler_name, image=options.scaling_pod_image
        )
        reconcile_metrics.export(registry, adjuster)
        await _leading(client, options, "scale-adjuster", adjuster.run, stop)


def _webhook(options: RunOptions, own_cert_dir: str | None, opt_ins: QueueOptIns | None) -> WebhookServer:
    cert_dir = options.tls_cert_dir or own_cert_dir
    if cert_dir is None:
        raise ValueError("--tls-cert-dir: the admission webhooks need a directory with tls.crt and tls.key")
    if options.webhook_port == 0:
        raise ValueError(WEBHOOK_PORT_OFF)
    return WebhookServer(
        cert_dir,
        port=options.webhook_port,
        scheduler_name=options.scheduler_name,
        gpu_runtime_class=options.gpu_pod_runtime_class,
        gpu_sharing_enabled=options.gpu_sharing,
        queue_opt_in=opt_ins,
    )


async def _self_signed_admission(
    keeper: CertificateKeeper, webhook: WebhookServer, stop: asyncio.Event, serving: asyncio.Event
) -> None:
    """The webhooks on a certificate of their own: serve once the Secret gives one (until then nothing is
    served and /readyz says so), then keep it renewed and published until `stop`. While no replica serves,
    the chart's webhooks ignore failures (see `self_signed.py`), so nothing else waits for this."""
    if not await keeper.start(stop):
        return
    webhook.start()
    serving.set()
    await keeper.run(stop)  # its first pass publishes the CA: this replica serves by then
