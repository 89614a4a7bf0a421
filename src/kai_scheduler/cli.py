"""Command line: `kai-scheduler simulate ...` (see docs and the simulate contract), `run` (live mode) and
`reserve` (inside a GPU reservation pod).

Every user error (bad flags, bad manifests, bad configuration) ends as one line on stderr and exit 2.

Live mode's modules (lightkube, prometheus_client, the components) are imported by the `run` and `reserve`
commands when they start, not here: `simulate` needs none of them, and they were a third of its start-up.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import yaml

from kai_scheduler import __version__
from kai_scheduler.api.constants import SCHEDULER_NAME
from kai_scheduler.api.durations import parse_duration, parse_go_duration
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.framework.config import (
    PLACEMENT_STRATEGIES,
    ConfigError,
    SchedulerConfig,
    parse_config,
    shard_config,
    shard_partition,
    with_placement_strategy,
)
from kai_scheduler.framework.shard_config import DEFAULT_SHARD, check_shard_name
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.releasing import DEFAULT_STUCK_IN_RELEASING_THRESHOLD as DEFAULT_STUCK
from kai_scheduler.scheduler import Scheduler
from kai_scheduler.sim.engine import Simulation, SimulationOptions, SimulationResult
from kai_scheduler.sim.estimates import estimate_starts, start_estimates
from kai_scheduler.sim.gc_policy import collector_paused, fewer_collections
from kai_scheduler.sim.input_checks import warnings as input_warnings
from kai_scheduler.sim.json_output import document_json
from kai_scheduler.sim.loader import load_manifests
from kai_scheduler.sim.operator_input import OperatorObject, with_operator_objects
from kai_scheduler.sim.results import result_document

if TYPE_CHECKING:
    import asyncio

    from kai_scheduler.k8s.admission.self_signed import SelfSignedTLS
    from kai_scheduler.k8s.binder.reservations import GpuReservation
    from kai_scheduler.k8s.components import RunOptions
    from kai_scheduler.k8s.runtime.leader import LeaseTiming
    from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
    from kai_scheduler.sim.variants import Outcome, Variant

DEFAULT_START = "2026-01-01T00:00:00Z"


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default where it has one and its help does not say it already; the
    description and epilog as written (they list kinds and annotations line by line)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default in (None, False, [], argparse.SUPPRESS) or "default" in text or action.nargs == 0:
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class _Parser(argparse.ArgumentParser):
    """Errors raise UsageError instead of exiting. A command's arguments can be added by `arguments` when
    the command is first parsed (or its help shown), so that building the parser imports nothing of the
    other commands (`run`'s defaults and choices come from live mode's modules)."""

    def __init__(
        self, *args: Any, arguments: Callable[[argparse.ArgumentParser], None] | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        self._arguments = arguments

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if self._arguments is not None:
            add, self._arguments = self._arguments, None
            add(self)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _simulate_epilog() -> str:
    """What `simulate --help` lists: the kinds it reads and the simulation-only annotations."""
    from kai_scheduler.api import constants as c
    from kai_scheduler.api.manifests import SUPPORTED_KINDS
    from kai_scheduler.workloads.registry import CONTROLLERS

    kinds = sorted({kind for _, kind in SUPPORTED_KINDS})
    workloads = sorted({kind for _, kind in CONTROLLERS})
    return "\n".join(
        [
            "kinds read:",
            *textwrap.wrap(", ".join(kinds), width=96, initial_indent="  ", subsequent_indent="  "),
            "workloads (expanded into pods by their controllers, grouped by the pod grouper):",
            *textwrap.wrap(", ".join(workloads), width=96, initial_indent="  ", subsequent_indent="  "),
            "simulation annotations (on a pod, a pod template or a PodGroup):",
            f"  {c.SIM_ARRIVAL_ANNOTATION}: DURATION   submitted at this simulated time (default 0)",
            f"  {c.SIM_DURATION_ANNOTATION}: DURATION  runs this long once bound, then succeeds",
            "examples: kai-scheduler simulate examples/two-teams.yaml --output json",
            "          kai-scheduler simulate examples/overnight-batch.yaml --report /tmp/night",
        ]
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kai-scheduler", description="A KAI-compatible scheduler for shared GPU clusters.")
    parser.add_argument("--version", action="version", version=f"kai-scheduler {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    simulate = commands.add_parser(
        "simulate",
        help="run the scheduler against an in-memory cluster built from Kubernetes manifests",
        description=textwrap.fill(
            "Run the scheduler against an in-memory cluster built from Kubernetes manifests. With no PATH, "
            "runs the built-in demo. Without --cycles or --until, it runs until nothing can change any more "
            "(the steady state).",
            width=96,
        ),
        epilog=_simulate_epilog(),
    )
    simulate.add_argument("paths", nargs="*", metavar="PATH", help="YAML files or folders of them")
    simulate.add_argument(
        "--config", metavar="FILE", help="scheduler configuration (KAI's format; default: KAI's default)"
    )
    when = simulate.add_mutually_exclusive_group()
    when.add_argument("--cycles", type=int, metavar="N", help="run exactly N cycles")
    when.add_argument(
        "--until", metavar="DURATION", help="run until this simulated time (90s, 10m, 2h), steady or not"
    )
    simulate.add_argument(
        "--max-cycles",
        type=int,
        default=1000,
        metavar="N",
        help="cap for the run to the steady state (default: 1000)",
    )
    simulate.add_argument(
        "--start",
        default=DEFAULT_START,
        metavar="RFC3339",
        help=f"wall-clock time of second 0 (default: {DEFAULT_START})",
    )
    simulate.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text tables (default) or the JSON document",
    )
    simulate.add_argument("--out", metavar="FILE", help="write the output to FILE instead of stdout")
    simulate.add_argument(
        "--report", metavar="DIR", help="also write DIR/index.html (plots) and DIR/summary.json"
    )
    _what_if_arguments(simulate)
    commands.add_parser(
        "trace",
        help="turn public cluster traces into manifests for simulate (trace import FORMAT ...)",
        description="Turn public cluster traces into manifests for `kai-scheduler simulate`.",
        arguments=_trace_arguments,
    )
    commands.add_parser(
        "run",
        help="schedule a real Kubernetes cluster (live mode)",
        description="Run live-mode components against the Kubernetes API until SIGTERM or SIGINT.",
        arguments=_run_arguments,
    )
    commands.add_parser(
        "reserve",
        help="inside a GPU reservation pod: publish the pod's GPU, then hold it",
        description="Run inside a GPU reservation pod (the binder creates them): find the UUID of the "
        "pod's GPU through NVML, publish it in the pod's annotation run.ai/reserve_for_gpu_index, and "
        "hold the GPU until SIGTERM.",
        arguments=_reserve_arguments,
    )
    return parser


def _run_arguments(run: argparse.ArgumentParser) -> None:
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


def _trace_arguments(trace: argparse.ArgumentParser) -> None:
    from kai_scheduler.traces.command import add_arguments

    add_arguments(trace)


def _trace(args: argparse.Namespace) -> int:
    from kai_scheduler.traces.command import run

    return run(args)


def _reserve_arguments(reserve: argparse.ArgumentParser) -> None:
    reserve.add_argument(
        "--kubeconfig", metavar="FILE", help="default: in-cluster, then $KUBECONFIG, ~/.kube/config"
    )
    reserve.add_argument("--pod-name", default=os.environ.get("POD_NAME"), help="default: $POD_NAME")
    reserve.add_argument(
        "--namespace", default=os.environ.get("POD_NAMESPACE"), help="default: $POD_NAMESPACE"
    )


def program() -> int:
    """The `kai-scheduler` program (console script and `python -m kai_scheduler`): `main`, then every object
    left is frozen (gc.freeze), so that the interpreter's garbage collection at exit does not walk them (at
    25,000 simulated objects that last collection took 0.4 s; the process ends right after it)."""
    status = main()
    gc.freeze()
    return status


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        commands = {"run": _run, "reserve": _reserve, "simulate": _simulate, "trace": _trace}
        return commands[args.command](args)
    except (UsageError, ManifestError, ConfigError) as error:
        print(f"kai-scheduler: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


def _simulate(args: argparse.Namespace) -> int:
    if args.compare or args.sweep or args.workers is not None or args.ray is not None:
        return _what_if(args)
    options = _options(args)
    config = _config(args.config)
    demo = not args.paths
    paths = [str(_demo_folder())] if demo else list(args.paths)
    with collector_paused():
        loaded = load_manifests(paths)
        _warn(input_warnings(loaded, loaded.skipped))
        config, notices = with_operator_objects(config, loaded.operator, args.config)
        _warn(notices)
        objects = [entry.obj for entry in loaded]
        try:
            simulation = Simulation(objects, config, options)
        except ConfigError as error:
            raise ConfigError(f"{args.config or 'default configuration'}: {error}") from None
        gc.freeze()  # later collections skip the input's objects (reference counting still frees them)
    report = _Report(args.report, simulation) if args.report else None
    progress = None
    if sys.stderr.isatty():  # rich's progress module is imported only for a terminal
        from kai_scheduler.sim.progress import progress_bar

        progress = progress_bar(sys.stderr, options)
        if progress is not None:
            simulation.observers.append(progress)
    with fewer_collections():
        try:
            result = simulation.run()
        finally:
            if progress is not None:
                progress.close()
        with collector_paused():  # the document: hundreds of thousands of dicts and lists, no cycles
            document = result_document(result, start_estimates(simulation, result))
            if report is not None:
                report.write(result, document, title=_title(demo))
            _output(
                args, document, demo=demo, ran=_what_ran(result, document) if args.output == "text" else None
            )
    return 0


def _options(args: argparse.Namespace) -> SimulationOptions:
    return SimulationOptions(
        start=_start(args.start),
        cycles=_positive("--cycles", args.cycles),
        until=_until(args.until),
        max_cycles=_positive("--max-cycles", args.max_cycles) or 1000,
    )


def _what_ran(result: SimulationResult, document: dict[str, Any]) -> dict[str, Any] | None:
    """For a run that completed (nothing left running or waiting), what it ran (`summary.what_ran`)."""
    pods = document["summary"]["pods"]
    if pods["Running"] or pods["Pending"] or not document["pods"]:
        return None
    from kai_scheduler.sim.summary import what_ran
    from kai_scheduler.sim.timeline import replay
    from kai_scheduler.sim.timeseries import run_facts

    return what_ran(replay(document, run_facts(result)))


_MAX_WARNINGS = 20


def _warn(lines: Sequence[str]) -> None:
    """Warnings about the input on stderr, one a line; a flood (a typo repeated in 10,000 pods) is cut
    short with a count of the rest."""
    shown = lines if len(lines) <= _MAX_WARNINGS else lines[: _MAX_WARNINGS - 1]
    for line in shown:
        print(f"kai-scheduler: warning: {line}", file=sys.stderr)
    if len(shown) < len(lines):
        print(f"kai-scheduler: warning: ... and {len(lines) - len(shown)} more warnings", file=sys.stderr)


class _Report:
    """`--report DIR`: the fair shares recorded while the run goes, the files written after it."""

    def __init__(self, directory: str, simulation: Simulation) -> None:
        from kai_scheduler.sim.timeseries import FairShareRecorder

        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise UsageError(f"--report {directory}: not a directory")
        self.fair_shares = FairShareRecorder()
        simulation.observers.append(self.fair_shares)

    def write(self, result: SimulationResult, document: dict[str, Any], *, title: str) -> None:
        from kai_scheduler.sim.report_html import write_report
        from kai_scheduler.sim.timeseries import run_facts

        try:
            write_report(self.directory, document, run_facts(result, self.fair_shares), title=title)
        except OSError as error:
            raise UsageError(f"--report {self.directory}: {error.strerror or error}") from None


def _title(demo: bool) -> str:
    return (
        "kai-scheduler demo: three teams share four racks of 8-GPU nodes"
        if demo
        else "kai-scheduler simulate"
    )


def _output(
    args: argparse.Namespace, document: dict[str, Any], *, demo: bool, ran: dict[str, Any] | None = None
) -> None:
    if args.output == "json":
        _write(args.out, document_json(document))
        return
    from rich.console import Console

    from kai_scheduler.sim.report import render

    title = _title(demo)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            render(document, Console(file=handle, width=140), title=title, ran=ran)
    else:
        render(document, Console(width=140), title=title, ran=ran)


def _run(args: argparse.Namespace) -> int:
    import asyncio
    import ssl

    from kai_scheduler.k8s.runtime.logs import configure

    configure("debug" if args.verbose else args.log_level, args.log_format)
    options = run_options(args)
    client = _client(args.kubeconfig)
    try:
        # Informer caches, parsed models and the cluster state are long-lived, and every API answer and
        # cycle makes many short-lived objects: with the collector's defaults those were promoted and walked
        # by full collections again and again (issue #8's live benchmark: about a third of the process's
        # CPU at 8,000 pods). The simulator's policy: the young generation collected less often.
        with fewer_collections():
            asyncio.run(_until_signalled(options, client))
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

    config = _config(args.config)
    shard = _shard(config, args.shard, args.config)
    config, partition = shard.config, shard.partition
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
        self_signed=_self_signed(args),
        gpu_pod_runtime_class=args.gpu_pod_runtime_class,
        gpu_sharing=not args.no_gpu_sharing,
        cdi_enabled=args.cdi_enabled,
        reservation=None if args.no_gpu_reservation else _reservation(args),
        scaling_pod_image=args.scaling_pod_image,
        plugin_server_port=_port("--plugin-server-port", args.plugin_server_port),
        partition=partition,
        shard=shard.name,
        shard_configured=shard.configured,
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


def _self_signed(args: argparse.Namespace) -> SelfSignedTLS | None:
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
    try:
        interval = parse_duration(every)
    except ValueError as error:
        raise UsageError(f"--start-estimates: {error}") from None
    if interval < 0:
        raise UsageError(f"--start-estimates: {every!r} is negative (0 turns the estimates off)")
    return {"estimator": estimate_starts, "estimate_interval": interval} if interval > 0 else {}


def _shard(config: SchedulerConfig, name: str | None, path: str | None) -> _ShardChoice:
    """The shard `name` (KAI's SchedulingShard) and what `--config` says of it: its configuration and node
    pool when the configuration lists it; none named, the configuration's default shard (no
    partitionLabelValue) if it lists one, else KAI's default shard (the objects without the node-pool
    label) on the document's configuration. A configuration without `shards` leaves any other shard to its
    SchedulingShard object, which the scheduler waits for (`k8s/scheduler/shard_objects.py`)."""
    if name is None:
        name = next((s.name for s in config.shards if s.partition_label_value is None), None)
        if name is None:
            return _ShardChoice(DEFAULT_SHARD, config, Partition(config.node_pool_label_key), True)
    if not config.shards:
        try:
            check_shard_name(name, "--shard")
        except ConfigError as error:
            raise UsageError(str(error)) from None
        return _ShardChoice(name, config, Partition(config.node_pool_label_key), name == DEFAULT_SHARD)
    try:
        return _ShardChoice(name, shard_config(config, name), shard_partition(config, name), True)
    except ConfigError as error:
        raise UsageError(f"--shard: {error} in {path or 'the default configuration'}") from None


@dataclass(frozen=True, slots=True)
class _ShardChoice:
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
        try:
            seconds[name] = parse_duration(value)
        except ValueError as error:
            raise UsageError(f"{flag}: {error}") from None
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


def _reservation(args: argparse.Namespace) -> GpuReservation:
    from kai_scheduler.k8s.binder.reservations import GpuReservation

    try:
        timeout = parse_duration(args.reservation_timeout)
    except ValueError as error:
        raise UsageError(f"--reservation-timeout: {error}") from None
    if timeout < 0:
        raise UsageError(f"--reservation-timeout: must not be negative, got {args.reservation_timeout!r}")
    return GpuReservation(
        namespace=args.reservation_namespace,
        service_account=args.reservation_service_account,
        image=args.reservation_image,
        timeout=timeout,
    )


def _reserve(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from kai_scheduler.k8s.binder.reservation_app import (
        GpuDiscoveryError,
        discover_gpu_uuid,
        reservation_app_access,
        run_reservation,
    )
    from kai_scheduler.k8s.runtime.access import AccessGuard
    from kai_scheduler.k8s.runtime.client import ApiStatusError

    if not args.pod_name or not args.namespace:
        raise UsageError(
            "reserve: the pod is unknown: set --pod-name and --namespace (or POD_NAME, POD_NAMESPACE)"
        )
    try:
        uuid = discover_gpu_uuid(os.environ)
    except GpuDiscoveryError as error:
        raise UsageError(f"reserve: {error}") from None
    client = _client(args.kubeconfig)

    async def hold() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        guarded = AccessGuard(client, reservation_app_access(args.namespace), "reserve")
        try:
            await run_reservation(guarded, args.namespace, args.pod_name, uuid, stop)
        finally:
            await client.aclose()

    try:
        asyncio.run(hold())
    except ApiStatusError as error:
        raise UsageError(f"reserve: pod {args.namespace}/{args.pod_name}: {error}") from None
    return 0


def _client(kubeconfig: str | None) -> LightkubeClient:
    """The API client from a kubeconfig (or in-cluster); a broken kubeconfig is one line, not a traceback."""
    from lightkube.core.exceptions import ConfigError as KubeConfigError

    from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

    where = kubeconfig or "the in-cluster or default kubeconfig"
    try:
        return LightkubeClient.from_kubeconfig(kubeconfig)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        raise UsageError(f"--kubeconfig {where}:{line} invalid YAML") from None
    except KeyError as error:
        raise UsageError(f"--kubeconfig {where}: missing {error}") from None
    except (KubeConfigError, OSError, TypeError, ValueError, AttributeError) as error:
        raise UsageError(f"--kubeconfig {where}: {error}") from None


async def _until_signalled(options: RunOptions, client: LightkubeClient) -> None:
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


def _demo_folder() -> Path:
    return Path(str(resources.files("kai_scheduler.sim").joinpath("demo")))


def _write(path: str | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--out {path}: {error.strerror}") from None


def _start(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--start: {text!r} is not an RFC 3339 time such as {DEFAULT_START}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _until(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = parse_duration(text)
    except ValueError as error:
        raise UsageError(f"--until: {error}") from None
    if value < 0:
        raise UsageError(f"--until: must not be negative, got {text!r}")
    return value


def _positive(flag: str, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise UsageError(f"{flag}: must be at least 1, got {value}")
    return value


def _config(path: str | None, flag: str = "--config") -> SchedulerConfig:
    if path is None:
        return SchedulerConfig()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"{flag} {path}: {error.strerror}") from None
    try:
        document: Any = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UsageError(f"{path}:{where} invalid YAML") from None
    try:
        config = parse_config(document)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    for notice in config.notices:
        print(f"kai-scheduler: warning: {path}: {notice}", file=sys.stderr)
    return config


# --- what-if: --compare and --sweep (sim.variants runs them; sim.compare, sim.sweep show them) ----------


def _what_if_arguments(simulate: argparse.ArgumentParser) -> None:
    what_if = simulate.add_argument_group("what-if: the same input under several configurations")
    what_if.add_argument(
        "--compare",
        nargs=2,
        metavar=("A.yaml", "B.yaml"),
        help="run under two scheduler configurations and show both runs' summary numbers with B - A, and "
        "the pod groups whose start or fate changed (--report: one page for both)",
    )
    what_if.add_argument(
        "--sweep",
        metavar="FILE",
        help="run every combination of the values FILE varies (a base configuration's keys, plugin "
        "arguments, queue fields; see README) and print each run's summary numbers",
    )
    what_if.add_argument(
        "--workers", type=int, metavar="N", help="--sweep: processes to run in (default: one per core)"
    )
    what_if.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="--sweep: run on this Ray cluster (ray://host:10001, or auto); pip install 'kai-scheduler[ray]'",
    )


def _what_if(args: argparse.Namespace) -> int:
    from kai_scheduler.sim.progress import runs_done
    from kai_scheduler.sim.variants import RayError, Variant, default_workers, run_variants

    if args.compare and args.sweep:
        raise UsageError("--compare and --sweep: give one of them")
    flag = "--compare" if args.compare else "--sweep" if args.sweep else None
    if flag != "--sweep" and (args.workers is not None or args.ray is not None):
        raise UsageError(f"{'--workers' if args.workers is not None else '--ray'}: only with --sweep")
    if args.config:
        raise UsageError(f"--config: not with {flag} (it names its own configurations)")
    if args.sweep and args.report:
        raise UsageError("--report: not with --sweep (every run's summary is in --output json)")
    if args.report and Path(args.report).exists() and not Path(args.report).is_dir():
        raise UsageError(f"--report {args.report}: not a directory")
    options = _options(args)
    demo = not args.paths
    with collector_paused():
        loaded = load_manifests([str(_demo_folder())] if demo else list(args.paths))
        _warn(input_warnings(loaded, loaded.skipped))
        objects = [entry.obj for entry in loaded]
    if args.compare:
        from kai_scheduler.sim import compare

        variants = _with_operator_objects(
            [Variant(path, _checked(_config(path, "--compare"), path)) for path in args.compare],
            loaded.operator,
        )
        a, b = run_variants(
            objects, variants, options, keep_timelines=bool(args.report), done=runs_done(sys.stderr, 2)
        )
        document = compare.comparison(a, b, a_name=args.compare[0], b_name=args.compare[1])
        if args.report:
            _compare_report(args.report, document, a, b)
        _what_if_output(args, document, compare.render)
        return 0
    from kai_scheduler.sim import sweep
    from kai_scheduler.sim.sweep_file import load_sweep

    plan = load_sweep(args.sweep, objects)
    _warn(plan.notices)
    plan = replace(plan, variants=_with_operator_objects(plan.variants, loaded.operator))
    workers = _positive("--workers", args.workers) or default_workers()
    try:
        outcomes = run_variants(
            objects,
            plan.variants,
            options,
            workers=workers,
            ray_address=args.ray,
            done=runs_done(sys.stderr, len(plan.variants)),
        )
    except RayError as error:
        raise UsageError(str(error)) from None
    _what_if_output(args, sweep.sweep_document(plan, outcomes), sweep.render)
    return 0


def _with_operator_objects(
    variants: Sequence[Variant], operator: list[OperatorObject]
) -> tuple[Variant, ...]:
    """Each variant's configuration with the input's SchedulingShards and Config applied (they win over
    it, as in a single run); the warnings once."""
    shown: list[str] = []
    result = []
    for variant in variants:
        config, notices = with_operator_objects(variant.config, operator, variant.label)
        shown.extend(n for n in notices if n not in shown)
        result.append(replace(variant, config=config))
    _warn(shown)
    return tuple(result)


def _checked(config: SchedulerConfig, path: str) -> SchedulerConfig:
    """The configuration, its plugins and actions known, its shards' too (before any run starts)."""
    from kai_scheduler.cluster.driver import check_config

    try:
        check_config(config)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    return config


def _compare_report(directory: str, document: dict[str, Any], a: Outcome, b: Outcome) -> None:
    from kai_scheduler.sim.compare_html import write_comparison_report

    assert a.timeline is not None and b.timeline is not None, "kept for the report"
    title = f"kai-scheduler simulate --compare {document['a']['config']} {document['b']['config']}"
    try:
        write_comparison_report(Path(directory), document, a.timeline, b.timeline, title=title)
    except OSError as error:
        raise UsageError(f"--report {directory}: {error.strerror or error}") from None


def _what_if_output(
    args: argparse.Namespace, document: dict[str, Any], render: Callable[[dict[str, Any], Any], None]
) -> None:
    if args.output == "json":
        _write(args.out, json.dumps(document, indent=2) + "\n")
        return
    from rich.console import Console

    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as handle:
                render(document, Console(file=handle, width=140))
        except OSError as error:
            raise UsageError(f"--out {args.out}: {error.strerror}") from None
    else:
        render(document, Console(width=140))
