"""`kai-scheduler simulate`: the scheduler against an in-memory cluster built from manifests (the built-in
demo without any), its result as text tables or the JSON document, and with `--report` a page of plots.
Its what-if runs (`--compare`, `--sweep`) are `what_if`'s.

The input's objects are made with the garbage collector paused, then frozen (`gc.freeze`), and the run
collects the young generation less often (`sim.gc_policy`; docs/architecture.md says why).
"""

from __future__ import annotations

import argparse
import gc
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

from kai_scheduler.api.objects import Queue
from kai_scheduler.cli import what_if
from kai_scheduler.cli.flags import UsageError, scheduler_config, warn, write_out_chunks
from kai_scheduler.cli.process_end import leave_behind
from kai_scheduler.cli.sim_options import DEFAULT_START, input_paths, simulation_options
from kai_scheduler.framework.config import EVICTED_UNOWNED_PODS, ConfigError
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.fair_share_record import FairShareRecord
from kai_scheduler.model.fair_share_record import as_json as fair_share_json
from kai_scheduler.model.fair_share_text import explanation_text
from kai_scheduler.sim.engine import Simulation, SimulationResult
from kai_scheduler.sim.estimates import start_estimates
from kai_scheduler.sim.gc_policy import collector_paused, fewer_collections
from kai_scheduler.sim.input_checks import warnings as input_warnings
from kai_scheduler.sim.json_output import document_chunks
from kai_scheduler.sim.loader import load_manifests
from kai_scheduler.sim.operator_input import with_operator_objects
from kai_scheduler.sim.results import result_document


def add_command(commands: Any) -> None:
    """The `simulate` subcommand and its arguments, on the program's subparsers."""
    simulate = commands.add_parser(
        "simulate",
        help="run the scheduler against an in-memory cluster built from Kubernetes manifests",
        description=textwrap.fill(
            "Run the scheduler against an in-memory cluster built from Kubernetes manifests. With no PATH, "
            "runs the built-in demo. Without --cycles or --until, it runs until nothing can change any more "
            "(the steady state).",
            width=96,
        ),
        epilog=_epilog(),
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
    simulate.add_argument(
        "--evicted-unowned-pods",
        choices=EVICTED_UNOWNED_PODS,
        help="what an eviction does to a pod no workload of the input owns: recreate it pending under its "
        "name (default), or delete it, as a cluster does (the configuration's evictedUnownedPods)",
    )
    simulate.add_argument("--out", metavar="FILE", help="write the output to FILE instead of stdout")
    simulate.add_argument(
        "--report", metavar="DIR", help="also write DIR/index.html (plots) and DIR/summary.json"
    )
    simulate.add_argument(
        "--explain-fairshare",
        metavar="QUEUE",
        help="also show how the last cycle divided the cluster down to QUEUE's fair share, step by step "
        "(text: after the tables; json: the document's fairShareExplanation)",
    )
    what_if.add_arguments(simulate)


def _epilog() -> str:
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


def command(args: argparse.Namespace) -> int:
    if args.compare or args.sweep or args.workers is not None or args.ray is not None:
        if args.explain_fairshare is not None:
            raise UsageError("--explain-fairshare: not with --compare or --sweep (explain one run)")
        if args.evicted_unowned_pods is not None:
            raise UsageError(
                "--evicted-unowned-pods: not with --compare or --sweep (set evictedUnownedPods in the "
                "configurations they run)"
            )
        return what_if.command(args)
    options = simulation_options(args)
    config = scheduler_config(args.config)
    if args.evicted_unowned_pods is not None:
        config = replace(config, evicted_unowned_pods=args.evicted_unowned_pods)
    paths, demo = input_paths(args)
    with collector_paused():
        loaded = load_manifests(paths)
        warn(input_warnings(loaded, loaded.skipped))
        config, notices = with_operator_objects(config, loaded.operator, args.config)
        warn(notices)
        objects = [entry.obj for entry in loaded]
        try:
            simulation = Simulation(objects, config, options)
        except ConfigError as error:
            raise ConfigError(f"{args.config or 'default configuration'}: {error}") from None
        gc.freeze()  # later collections skip the input's objects (reference counting still frees them)
    explained = _Explained(args.explain_fairshare, simulation, objects) if args.explain_fairshare else None
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
            if explained is not None and args.output == "json":
                document["fairShareExplanation"] = explained.as_json()
            _output(
                args, document, demo=demo, ran=_what_ran(result, document) if args.output == "text" else None
            )
            if explained is not None and args.output == "text":
                _append(args.out, "\n" + explained.text())
    leave_behind(loaded, objects, simulation, result, document)
    return 0


class _Explained:
    """`--explain-fairshare QUEUE`: the cycles record their fair-share division; the last one's is shown."""

    def __init__(self, queue: str, simulation: Simulation, objects: list[Any]) -> None:
        names = {o.metadata.name for o in objects if isinstance(o, Queue)}
        if queue not in names:
            known = ", ".join(sorted(names)) or "none"
            raise UsageError(f"--explain-fairshare {queue}: no such queue in the input (queues: {known})")
        if simulation.sharded is not None:
            raise UsageError(f"--explain-fairshare {queue}: not with node-pool shards (each divides its own)")
        self.queue = queue
        self.record: FairShareRecord | None = None
        simulation.driver.record_fair_share = True
        simulation.observers.append(self._keep)

    def _keep(self, _: object, result: SessionResult) -> None:
        self.record = result.fair_share_record

    def _recorded(self) -> FairShareRecord:
        if self.record is None or self.queue not in self.record.queues():
            raise UsageError(
                f"--explain-fairshare {self.queue}: the queue was left out of the division (its parent "
                "queue is not in the input)"
            )
        return self.record

    def as_json(self) -> dict[str, Any]:
        return fair_share_json(self._recorded(), self.queue)

    def text(self) -> str:
        return explanation_text(self._recorded().for_queue(self.queue), self.queue)


def _append(path: str | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        raise UsageError(f"--out {path}: {error.strerror}") from None


def _what_ran(result: SimulationResult, document: dict[str, Any]) -> dict[str, Any] | None:
    """For a run that completed (nothing left running or waiting), what it ran (`summary.what_ran`)."""
    pods = document["summary"]["pods"]
    if pods["Running"] or pods["Pending"] or not document["pods"]:
        return None
    from kai_scheduler.sim.summary import what_ran
    from kai_scheduler.sim.timeline import replay
    from kai_scheduler.sim.timeseries import run_facts

    return what_ran(replay(document, run_facts(result)))


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
        write_out_chunks(args.out, document_chunks(document))
        return
    from rich.console import Console

    from kai_scheduler.sim.report import render

    title = _title(demo)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            render(document, Console(file=handle, width=140), title=title, ran=ran)
    else:
        render(document, Console(width=140), title=title, ran=ran)
