"""`kai-scheduler trace import FORMAT ...`: a trace's CSV files in, manifests for `simulate` out.

The arguments are added to the `trace` command's parser when it is first used (`cli/trace.py` only hooks
it in), and every input error is a `ManifestError` naming the file and line: one line on stderr, exit
status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from kai_scheduler.api.durations import parse_duration
from kai_scheduler.traces import openb, pollux
from kai_scheduler.traces.jobs import Slice, Trace
from kai_scheduler.traces.manifests import job_manifests, queue_manifest, seconds
from kai_scheduler.traces.output import Manifests, write
from kai_scheduler.traces.queues import QueueMapping, assign, plan_queues, read_mapping

OPENB_NODES = "openb_node_list_gpu_node.csv"


def add_arguments(trace: argparse.ArgumentParser) -> None:
    actions = trace.add_subparsers(dest="trace_command", required=True, metavar="import")
    importing = actions.add_parser(
        "import",
        help="turn a trace into manifests with arrivals and durations",
        description="Turn a public cluster trace into manifests for `kai-scheduler simulate`: nodes, "
        "queues and pods (or elastic PodGroups) with simulation.kai.scheduler/arrival and /duration. "
        "See docs/traces.md for every mapping.",
    )
    formats = importing.add_subparsers(dest="trace_format", required=True, metavar="FORMAT")
    tip = "then: kai-scheduler simulate OUT --max-cycles 1000000 --report DIR"
    openb_parser = formats.add_parser(
        "openb",
        help="Alibaba's openb pod and node lists (cluster-trace-gpu-v2023): a pod per row",
        description="The openb trace: a Pod per row of PODS, arriving at creation_time, running "
        "deletion_time - scheduled_time; the nodes of --nodes.",
        epilog=tip,
    )
    openb_parser.add_argument("pods", metavar="PODS.csv", help="an openb_pod_list_*.csv file")
    openb_parser.add_argument(
        "--nodes",
        metavar="NODES.csv",
        help=f"the node list (default: {OPENB_NODES} next to PODS.csv)",
    )
    openb_parser.add_argument(
        "--unscheduled",
        choices=openb.UNSCHEDULED_RULES,
        default="lifetime",
        help="pods the trace never scheduled: run as long as they existed (lifetime, default) or skip them",
    )
    pollux_parser = formats.add_parser(
        "pollux",
        help="a Pollux / AdaptDL workload (name,time,application,num_replicas,batch_size): elastic jobs",
        description="A Pollux / AdaptDL workload: a PodGroup per row with num_replicas one-GPU pods and "
        "minMember 1 (elastic), arriving at `time`.",
        epilog=tip,
    )
    pollux_parser.add_argument("workload", metavar="WORKLOAD.csv", help="a workload CSV file")
    pollux_parser.add_argument(
        "--cluster",
        type=_cluster,
        default=pollux.Cluster(),
        metavar="NODESxGPUS",
        help="the nodes to make (default: 16x4, the Pollux paper's testbed)",
    )
    pollux_parser.add_argument(
        "--gpu-hours",
        type=_gpu_hours,
        action="append",
        default=[],
        metavar="APP=HOURS",
        help="GPU-hours of an application's job at full size (repeatable; defaults in docs/traces.md)",
    )
    for parser in (openb_parser, pollux_parser):
        parser.add_argument(
            "-o",
            "--output",
            metavar="OUT",
            help="a .yaml file, else a folder (made if missing); default: stdout",
        )
        parser.add_argument(
            "--queues",
            metavar="MAPPING.yaml",
            help="queue rules and quotas (default: one queue per value of the trace's "
            "qos / application column; see docs/traces.md)",
        )
        parser.add_argument(
            "--window",
            type=_window,
            metavar="START:END",
            help="only jobs that arrive in [START, END) of trace time (durations such as 10d:12d or "
            "3600:; START becomes second 0)",
        )
        parser.add_argument(
            "--limit", type=_limit, metavar="N", help="only the first N jobs (after --window)"
        )


def run(args: argparse.Namespace) -> int:
    trace = _read(args)
    window: Slice = args.window or Slice()
    jobs = Slice(window.start, window.end, args.limit).take(trace.jobs)
    column = trace.default_queue_column
    mapping = read_mapping(args.queues, column) if args.queues else QueueMapping(column)
    queues = assign(jobs, mapping)
    planned = plan_queues(jobs, queues, mapping, trace.gpu_capacity)
    manifests = Manifests(
        header=_header(trace, jobs_count=len(jobs), queues=len(planned), args=args),
        nodes=trace.nodes,
        queues=[queue_manifest(q.name, q.quota, q.limit, q.over_quota_weight) for q in planned],
        jobs=[doc for job, queue in zip(jobs, queues, strict=True) for doc in job_manifests(job, queue)],
    )
    written = write(manifests, args.output)
    pods = sum(1 for doc in manifests.jobs if doc["kind"] == "Pod")
    last = max((job.arrival for job in jobs), default=0.0)
    where = args.output if written else "stdout"
    print(
        f"kai-scheduler: {trace.format}: {len(trace.nodes)} nodes ({trace.gpu_capacity} GPUs), "
        f"{len(planned)} queues, {len(jobs)} jobs ({pods} pods) arriving over {seconds(last)} -> {where}",
        file=sys.stderr,
    )
    for note in trace.notes:
        print(f"kai-scheduler: {note}", file=sys.stderr)
    return 0


def _read(args: argparse.Namespace) -> Trace:
    if args.trace_format == "openb":
        nodes = args.nodes or str(Path(args.pods).parent / OPENB_NODES)
        return openb.read_trace(nodes, args.pods, args.unscheduled)
    hours: Mapping[str, float] = {**pollux.GPU_HOURS, **dict(args.gpu_hours)}
    return pollux.read_trace(args.workload, args.cluster, hours)


def _header(trace: Trace, *, jobs_count: int, queues: int, args: argparse.Namespace) -> list[str]:
    options = [f"--queues {args.queues}"] if args.queues else []
    if args.window is not None:
        end = "" if args.window.end is None else seconds(args.window.end)
        options.append(f"--window {seconds(args.window.start)}:{end}")
    if args.limit is not None:
        options.append(f"--limit {args.limit}")
    sources = " ".join(Path(source).name for source in trace.sources)
    return [
        f"kai-scheduler trace import {trace.format}: {sources} {' '.join(options)}".rstrip(),
        f"{len(trace.nodes)} nodes ({trace.gpu_capacity} GPUs), {queues} queues, {jobs_count} jobs; "
        "arrivals and durations in simulation.kai.scheduler/ annotations (docs/traces.md)",
        "replay: kai-scheduler simulate THIS --max-cycles 1000000 --report DIR",
    ]


# --- argument types (their errors become argparse's one-line usage errors) ------------------------


def _window(text: str) -> Slice:
    start_text, sep, end_text = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected START:END (either may be empty), got {text!r}")
    try:
        start = parse_duration(start_text) if start_text.strip() else 0.0
        end = parse_duration(end_text) if end_text.strip() else None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if start < 0 or (end is not None and end <= start):
        raise argparse.ArgumentTypeError(f"expected 0 <= START < END, got {text!r}")
    return Slice(start, end)


def _limit(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def _cluster(text: str) -> pollux.Cluster:
    try:
        return pollux.Cluster.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gpu_hours(text: str) -> tuple[str, float]:
    application, sep, hours = text.partition("=")
    try:
        value = float(hours)
    except ValueError:
        value = -1.0
    if not sep or not application or not value > 0:
        raise argparse.ArgumentTypeError(f"expected APP=HOURS with HOURS > 0, got {text!r}")
    return application, value
