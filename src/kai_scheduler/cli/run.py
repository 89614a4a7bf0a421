"""`kai-scheduler run`: live mode's components against the Kubernetes API until SIGTERM or SIGINT. Its
flags are read into `RunOptions` (`run_options`, which the chart's tests use too); any bad one is a
`UsageError` naming it before anything connects.

Live mode's modules (lightkube, prometheus_client, the components) are imported when the command is parsed
or starts, not when the program starts: `simulate` needs none of them, and they were a third of its start-up.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kai_scheduler.api.constants import SCHEDULER_NAME
from kai_scheduler.api.durations import parse_go_duration
from kai_scheduler.cli.flags import UsageError, duration, kube_client, non_negative_duration, scheduler_config
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import (
    PLACEMENT_STRATEGIES,
    ConfigError,
    SchedulerConfig,
    shard_config,
    shard_partition,
    with_placement_strategy,
)
from kai_scheduler.framework.shard_config import DEFAULT_SHARD, check_shard_name
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.releasing import DEFAULT_STUCK_IN_RELEASING_THRESHOLD as DEFAULT_STUCK
from kai_scheduler.sim.estimates import estimate_starts
from kai_scheduler.sim.gc_policy import fewer_collections

if TYPE_CHECKING:
    import asyncio

    from kai_scheduler.k8s.admission.self_signed import SelfSignedTLS
    from kai_scheduler.k8s.binder.reservations import GpuReservation
    from kai_scheduler.k8s.components import RunOptions
    from kai_scheduler.k8s.runtime.leader import LeaseTiming
    from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient


def add_command(commands: Any) -> None:
    """The `run` subcommand, its arguments added when it is parsed, on the program's subparsers."""
    commands.add_parser(
        "run",
        help="schedule a real Kubernetes cluster (live mode)",
        description="Run live-mode components against the Kubernetes API until SIGTERM or SIGINT.",
        arguments=_arguments,
    )


def _arguments(run: argparse.ArgumentParser) -> None:
    from kai_scheduler.k8s.binder.reservations import (
        DEFAULT_RESERVATION_IMAGE,
        DEFAULT_RESERVATION_NAMESPACE,
        DEFAULT_RESERVATION_SERVICE_ACCOUNT,
    )
    from kai_scheduler.k8s.components import COMPONENTS
    from kai_scheduler.k8s.runtime.logs import FORMATS as LOG_FORMATS
    from kai_scheduler.k8s.runtime.logs import LEVELS as LOG_LEVELS
    from kai_scheduler.k8s.scaleadjuster.plan import DEFAULT_IMAGE as DEFAULT_SCALING_POD_IMAGE
    from kai_scheduler.k8s.scheduler.plugin_server import PLUGIN_SERVER_PORT

    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--component", action="append", choices=COMPONENTS, help="a component to run (repeatable)"
    )
    which.add_argument(
        "--all", action="store_true", help="every component but scale-adjuster (a cluster-autoscaler helper)"
    )
    run.add_argument(
        "--skip", action="append", choices=COMPONENTS, default=[], help="with --all: leave one out"
    )
    run.add_argument(
        "--kubeconfig", metavar="FILE", help="default: in-cluster, then $KUBECONFIG, ~/.kube/config"
    )
    run.add_argument("--config", metavar="FILE", help="scheduler configuration (KAI's format)")
    run.add_argument(
        "--placement-strategy", choices=PLACEMENT_STRATEGIES, help="binpack or spread (as KAI's operator)"
    )
    run.add_argument(
        "--default-staleness-grace-period",
        metavar="DURATION",
        help="how long a gang may run below its minMember before it is evicted, where its PodGroup does not "
        "say (negative: never; as KAI's scheduler flag; default: the configuration's "
        "defaultStalenessGracePeriod, 60s)",
    )
    run.add_argument(
        "--stuck-in-releasing-threshold",
        metavar="DURATION",
        help="how long after its deletionTimestamp a running pod is stuck in releasing: what it holds is no "
        "longer taken as being freed (as KAI's scheduler flag; default: the configuration's "
        "stuckInReleasingThreshold, 2m)",
    )
    run.add_argument(
        "--scheduler-name", default=SCHEDULER_NAME, help="pods with this schedulerName are scheduled"
    )
    election = run.add_argument_group("leader election (as Kubernetes components' flags)")
    election.add_argument("--leader-elect", action="store_true", help="work only while holding the Lease")
    election.add_argument(
        "--identity", metavar="NAME", help="this replica's name in the Leases (default: host_pid_random)"
    )
    election.add_argument(
        "--leader-elect-lease-duration",
        default="15s",
        metavar="DURATION",
        help="how long a lease not renewed keeps others waiting (a dead leader's successor waits this long)",
    )
    election.add_argument(
        "--leader-elect-renew-deadline",
        default="10s",
        metavar="DURATION",
        help="how long a leader goes on while its renewals fail; below the lease duration",
    )
    election.add_argument(
        "--leader-elect-retry-period",
        default="2s",
        metavar="DURATION",
        help="how often candidates try to take, and the leader to renew, the lease; below the renew deadline",
    )
    logs = run.add_argument_group("logs (stderr)")
    logs.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="info (default): a line per cycle that decided something, per server and per problem; "
        "debug: also every bind and eviction",
    )
    logs.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level debug")
    logs.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text (default), or one JSON object per line",
    )
    run.add_argument(
        "--shard",
        metavar="NAME",
        help="scheduler: serve this shard (KAI's SchedulingShard): its object's configuration while it "
        "exists, else the configuration's `shards` entry; default: the shard named default (the nodes, "
        "queues and PodGroups without the node-pool label)",
    )
    # A port of 0 turns its server off, as Kubernetes components' port flags do (`_port` checks them).
    run.add_argument(
        "--metrics-port", type=int, default=8080, metavar="PORT", help="/metrics, /healthz, /readyz; 0: off"
    )
    run.add_argument(
        "--webhook-port",
        type=int,
        default=9443,
        metavar="PORT",
        help="admission webhooks (TLS); to run without them, leave the admission component out",
    )
    run.add_argument(
        "--plugin-server-port",
        type=int,
        default=PLUGIN_SERVER_PORT,
        metavar="PORT",
        help="scheduler: 127.0.0.1 port of /get-snapshot and /get-job-order (when the configuration "
        "lists the snapshot or reflectjoborder plugin); 0: off",
    )
    run.add_argument(
        "--start-estimates",
        default="30s",
        metavar="DURATION",
        help="scheduler: how often waiting PodGroups get kai.scheduler/estimated-start (default 30s); 0: off",
    )
    run.add_argument("--tls-cert-dir", metavar="DIR", help="tls.crt and tls.key for the admission webhooks")
    tls = run.add_argument_group(
        "the admission webhooks' own certificate (instead of a --tls-cert-dir given)"
    )
    tls.add_argument(
        "--tls-secret",
        metavar="NAME",
        help="make a CA and certificate, keep and renew them in this Secret of $POD_NAMESPACE (shared by "
        "replicas); --tls-cert-dir, if given, is where the files go",
    )
    tls.add_argument("--webhook-service", default="kai-scheduler-admission", help="the names to certify")
    tls.add_argument("--mutating-webhook-configuration", metavar="NAME", help="gets the CA as caBundle")
    tls.add_argument("--validating-webhook-configuration", metavar="NAME", help="gets the CA as caBundle")
    tls.add_argument(
        "--webhook-failure-policy", choices=("Fail", "Ignore"), default="Fail", help="set with the CA"
    )
    run.add_argument("--gpu-pod-runtime-class", default="nvidia", help="runtimeClassName given to GPU pods")
    run.add_argument(
        "--no-gpu-sharing",
        action="store_true",
        help="admission refuses pods asking for gpu-fraction or gpu-memory (KAI's global.gpuSharing: false)",
    )
    run.add_argument(
        "--queue-admission-gating",
        action="store_true",
        help="admission gates the pods of queues with spec.admissionGating (on with the configuration's "
        "queueAdmissionGating.enabled too)",
    )
    reservation = run.add_argument_group("GPU reservation pods (binder; one per shared GPU)")
    reservation.add_argument(
        "--no-gpu-reservation",
        action="store_true",
        help="no reservation pods: shared GPUs are named by their group id (only for fake GPU nodes)",
    )
    reservation.add_argument(
        "--cdi-enabled",
        action="store_true",
        help="hand shared GPUs over as CDI devices (k8s.device-plugin.nvidia.com/gpu=<uuid>), as KAI's flag",
    )
    reservation.add_argument(
        "--reservation-namespace", default=DEFAULT_RESERVATION_NAMESPACE, help="where reservation pods run"
    )
    reservation.add_argument(
        "--reservation-service-account",
        default=DEFAULT_RESERVATION_SERVICE_ACCOUNT,
        help="the reservation pods' service account",
    )
    reservation.add_argument(
        "--reservation-image", default=DEFAULT_RESERVATION_IMAGE, help="an image of this project"
    )
    reservation.add_argument(
        "--reservation-timeout",
        default="40s",
        metavar="DURATION",
        help="how long a bind waits for the reservation pod to publish its GPU",
    )
    run.add_argument(
        "--scaling-pod-image", default=DEFAULT_SCALING_POD_IMAGE, help="the scale adjuster's pause image"
    )


def command(args: argparse.Namespace) -> int:
    import asyncio
    import ssl

    from kai_scheduler.k8s.runtime.logs import configure

    configure("debug" if args.verbose else args.log_level, args.log_format)
    options = run_options(args)
    client = kube_client(args.kubeconfig)
    try:
        # Informer caches, parsed models and the cluster state are long-lived, and every API answer and
        # cycle makes many short-lived objects: with the collector's defaults those were promoted and walked
        # by full collections again and again (issue #8's live benchmark: about a third of the process's
        # CPU at 8,000 pods). The simulator's policy: the young generation collected less often.
        with fewer_collections():
            asyncio.run(until_signalled(options, client))
    except (OSError, ssl.SSLError, ValueError) as error:
        raise UsageError(f"run: {error}") from None
    return 0


def _go_duration_flag(args: argparse.Namespace, name: str = "default-staleness-grace-period") -> float:
    """A duration flag (`--default-staleness-grace-period`, `--stuck-in-releasing-threshold`), read as KAI's
    scheduler reads it (Go's `time.ParseDuration`)."""
    try:
        return parse_go_duration(getattr(args, name.replace("-", "_")))
    except ValueError as error:
        raise UsageError(f"--{name}: {error}") from None


def run_options(args: argparse.Namespace) -> RunOptions:
    """What `kai-scheduler run` starts with these arguments (a `UsageError` names a bad flag). The chart's
    tests build each Deployment's with it, to ask the components what they need of the API server."""
    from kai_scheduler.k8s.components import ALL_COMPONENTS, WEBHOOK_PORT_OFF, RunOptions

    config = scheduler_config(args.config)
    choice = shard(config, args.shard, args.config)
    config, partition = choice.config, choice.partition
    if args.placement_strategy:
        config = with_placement_strategy(config, args.placement_strategy)
    if args.default_staleness_grace_period is not None:
        config = replace(config, default_staleness_grace_period=_go_duration_flag(args))
    if args.stuck_in_releasing_threshold is not None:
        threshold = _go_duration_flag(args, "stuck-in-releasing-threshold")
        # KAI takes a threshold that is not positive as its default.
        config = replace(config, stuck_in_releasing_threshold=threshold if threshold > 0 else DEFAULT_STUCK)
    Scheduler(config)  # validates plugins and actions before anything connects
    chosen = set(ALL_COMPONENTS) if args.all else set(args.component)
    options = RunOptions(
        components=frozenset(chosen - set(args.skip)),
        config=config,
        kubeconfig=args.kubeconfig,
        scheduler_name=args.scheduler_name,
        leader_elect=args.leader_elect,
        identity=args.identity,
        lease_timing=_lease_timing(args),
        metrics_port=_port("--metrics-port", args.metrics_port),
        webhook_port=_port("--webhook-port", args.webhook_port),
        tls_cert_dir=args.tls_cert_dir,
        self_signed=self_signed(args),
        gpu_pod_runtime_class=args.gpu_pod_runtime_class,
        gpu_sharing=not args.no_gpu_sharing,
        queue_admission_gating=args.queue_admission_gating or config.admission_gating.enabled,
        cdi_enabled=args.cdi_enabled,
        reservation=None if args.no_gpu_reservation else reservation(args),
        scaling_pod_image=args.scaling_pod_image,
        plugin_server_port=_port("--plugin-server-port", args.plugin_server_port),
        partition=partition,
        shard=choice.name,
        shard_configured=choice.configured,
        **_estimate_options(args.start_estimates),
    )
    if "admission" in options.components and not (options.tls_cert_dir or options.self_signed):
        raise UsageError(
            "--tls-cert-dir: the admission webhooks need a directory with tls.crt and tls.key "
            "(or --tls-secret, to make their own)"
        )
    if "admission" in options.components and options.webhook_port == 0:
        raise UsageError(WEBHOOK_PORT_OFF)
    return options


def self_signed(args: argparse.Namespace) -> SelfSignedTLS | None:
    if not args.tls_secret:
        return None
    from kai_scheduler.k8s.admission.self_signed import SelfSignedTLS

    return SelfSignedTLS(
        secret=args.tls_secret,
        service=args.webhook_service,
        mutating_webhook_configuration=args.mutating_webhook_configuration,
        validating_webhook_configuration=args.validating_webhook_configuration,
        failure_policy=args.webhook_failure_policy,
    )


def _estimate_options(every: str) -> dict[str, Any]:
    """RunOptions' start-time estimates (`--start-estimates`): the simulator's look-ahead, every `every`."""
    interval = duration("--start-estimates", every)
    if interval < 0:
        raise UsageError(f"--start-estimates: {every!r} is negative (0 turns the estimates off)")
    return {"estimator": estimate_starts, "estimate_interval": interval} if interval > 0 else {}


def shard(config: SchedulerConfig, name: str | None, path: str | None) -> ShardChoice:
    """The shard `name` (KAI's SchedulingShard) and what `--config` says of it: its configuration and node
    pool when the configuration lists it; none named, the configuration's default shard (no
    partitionLabelValue) if it lists one, else KAI's default shard (the objects without the node-pool
    label) on the document's configuration. A configuration without `shards` leaves any other shard to its
    SchedulingShard object, which the scheduler waits for (`k8s/scheduler/shard_objects.py`)."""
    if name is None:
        name = next((s.name for s in config.shards if s.partition_label_value is None), None)
        if name is None:
            return ShardChoice(DEFAULT_SHARD, config, Partition(config.node_pool_label_key), True)
    if not config.shards:
        try:
            check_shard_name(name, "--shard")
        except ConfigError as error:
            raise UsageError(str(error)) from None
        return ShardChoice(name, config, Partition(config.node_pool_label_key), name == DEFAULT_SHARD)
    try:
        return ShardChoice(name, shard_config(config, name), shard_partition(config, name), True)
    except ConfigError as error:
        raise UsageError(f"--shard: {error} in {path or 'the default configuration'}") from None


@dataclass(frozen=True, slots=True)
class ShardChoice:
    name: str
    config: SchedulerConfig
    partition: Partition
    configured: bool  # False: only the shard's SchedulingShard object defines it


def _lease_timing(args: argparse.Namespace) -> LeaseTiming:
    """The three `--leader-elect-*` durations; each must be positive, and retry < renew < lease."""
    from kai_scheduler.k8s.runtime.leader import LeaseTiming

    seconds: dict[str, float] = {}
    for name in ("lease_duration", "renew_deadline", "retry_period"):
        flag = "--leader-elect-" + name.replace("_", "-")
        value = getattr(args, f"leader_elect_{name}")
        seconds[name] = duration(flag, value)
        if seconds[name] <= 0:
            raise UsageError(f"{flag}: {value!r} is not a positive duration")
    try:
        return LeaseTiming(**seconds)
    except ValueError:
        raise UsageError(
            "--leader-elect-retry-period, --leader-elect-renew-deadline, --leader-elect-lease-duration: "
            f"each must be shorter than the next, got {args.leader_elect_retry_period}, "
            f"{args.leader_elect_renew_deadline}, {args.leader_elect_lease_duration}"
        ) from None


def _port(flag: str, port: int) -> int:
    """A port flag's value: 1 to 65535, or 0 for no server (never "any free port": nobody could reach it)."""
    if not 0 <= port <= 65535:
        raise UsageError(f"{flag}: expected a port from 1 to 65535 (0: off), got {port}")
    return port


def reservation(args: argparse.Namespace) -> GpuReservation:
    from kai_scheduler.k8s.binder.reservations import GpuReservation

    timeout = non_negative_duration("--reservation-timeout", args.reservation_timeout)
    return GpuReservation(
        namespace=args.reservation_namespace,
        service_account=args.reservation_service_account,
        image=args.reservation_image,
        timeout=timeout,
    )


async def until_signalled(options: RunOptions, client: LightkubeClient) -> None:
    import asyncio
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with client:  # its connections closed on the way out, not left to the garbage collector
        await run_components(options, stop, client)


async def run_components(options: RunOptions, stop: asyncio.Event, client: LightkubeClient) -> None:
    """Live mode's components until `stop` (`kai_scheduler.k8s.components`, imported here on first use)."""
    from kai_scheduler.k8s.components import run_components as run

    await run(options, stop, client)
