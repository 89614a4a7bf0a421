"""`simulate --compare A B` and `simulate --sweep FILE`: the same input under several scheduler
configurations (`sim.variants` runs them; `sim.compare` and `sim.sweep` show them)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kai_scheduler.cli.flags import UsageError, positive, scheduler_config, warn, write_out
from kai_scheduler.cli.sim_options import input_paths, simulation_options
from kai_scheduler.framework.config import ConfigError, SchedulerConfig
from kai_scheduler.sim.gc_policy import collector_paused
from kai_scheduler.sim.input_checks import warnings as input_warnings
from kai_scheduler.sim.loader import load_manifests
from kai_scheduler.sim.operator_input import OperatorObject, with_operator_objects

if TYPE_CHECKING:
    from kai_scheduler.sim.variants import Outcome, Variant


def add_arguments(simulate: argparse.ArgumentParser) -> None:
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


def command(args: argparse.Namespace) -> int:
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
    options = simulation_options(args)
    paths, _ = input_paths(args)
    with collector_paused():
        loaded = load_manifests(paths)
        warn(input_warnings(loaded, loaded.skipped))
        objects = [entry.obj for entry in loaded]
    if args.compare:
        from kai_scheduler.sim import compare

        variants = _with_operator_objects(
            [Variant(path, _checked(scheduler_config(path, "--compare"), path)) for path in args.compare],
            loaded.operator,
        )
        a, b = run_variants(
            objects, variants, options, keep_timelines=bool(args.report), done=runs_done(sys.stderr, 2)
        )
        document = compare.comparison(a, b, a_name=args.compare[0], b_name=args.compare[1])
        if args.report:
            _compare_report(args.report, document, a, b)
        _output(args, document, compare.render)
        return 0
    from kai_scheduler.sim import sweep
    from kai_scheduler.sim.sweep_file import load_sweep

    plan = load_sweep(args.sweep, objects)
    warn(plan.notices)
    plan = replace(plan, variants=_with_operator_objects(plan.variants, loaded.operator))
    workers = positive("--workers", args.workers) or default_workers()
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
    _output(args, sweep.sweep_document(plan, outcomes), sweep.render)
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
    warn(shown)
    return tuple(result)


def _checked(config: SchedulerConfig, path: str) -> SchedulerConfig:
    """The configuration, its plugins and actions known, its shards' too (before any run starts)."""
    from kai_scheduler.controlplane.driver import check_config

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


def _output(
    args: argparse.Namespace, document: dict[str, Any], render: Callable[[dict[str, Any], Any], None]
) -> None:
    if args.output == "json":
        write_out(args.out, json.dumps(document, indent=2) + "\n")
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
