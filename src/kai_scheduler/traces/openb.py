"""The openb trace (Alibaba cluster-trace-gpu-v2023, from the FGD paper, Weng et al., ATC'23).

Nodes (`openb_node_list_*.csv`: `sn,cpu_milli,memory_mib,gpu,model`): a Node each with `cpu_milli` CPUs,
`memory_mib` memory, `gpu` x `nvidia.com/gpu`, 110 pods, and its GPU model as `nvidia.com/gpu.product`.

Pods (`openb_pod_list_*.csv`): a bare Pod each, as the trace has no jobs of several pods.

* arrival: `creation_time` (seconds);
* duration: `deletion_time - scheduled_time`, the time it held its resources in the trace; a pod the trace
  never scheduled (no `scheduled_time`, `pod_phase` Pending) by `--unscheduled`: `lifetime` (default)
  runs `deletion_time - creation_time`, as long as it existed, `skip` leaves it out; no
  `deletion_time`: it runs until the simulation ends. At least 1 second. Pods still Running when the
  trace was taken were deleted at its end in the file: they run until then;
* requests: `cpu_milli` m CPU, `memory_mib` Mi; `num_gpu` GPUs; with `0 < gpu_milli < 1000` the pod
  shares its GPU(s): KAI's `gpu-fraction: gpu_milli/1000` (and `gpu-fraction-num-devices: num_gpu`
  for more than one), otherwise `nvidia.com/gpu: num_gpu`; `gpu_spec` (models separated by `|`) as
  required node affinity on `nvidia.com/gpu.product`;
* priority: `qos` through `PRIORITY_OF_QOS` (none: `train`).

The multigpu pod lists have no `gpu_spec`, `qos` or times: their pods arrive at second 0 and run until the
simulation ends, with priority `train`.
"""

from __future__ import annotations

from typing import Any, NoReturn

from kai_scheduler.traces.jobs import PodShape, Trace, TraceJob, check_names, in_arrival_order
from kai_scheduler.traces.manifests import node_manifest
from kai_scheduler.traces.rows import Row, read_rows

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
# The multigpu pod lists have only these; the others add gpu_spec, qos, pod_phase and the times.
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
# The trace's QoS classes onto KAI's priority classes: latency-sensitive services are KAI's inference
# (125, never preempted), Guaranteed pods build (100, never preempted), Burstable build-preemptible (75),
# best effort train (50, preemptible, and over quota only on what others leave idle).
PRIORITY_OF_QOS = {"LS": "inference", "Guaranteed": "build", "Burstable": "build-preemptible", "BE": "train"}
NO_QOS = "train"  # a pod list without QoS (the multigpu lists): best effort
UNSCHEDULED_RULES = ("lifetime", "skip")
MIN_DURATION = 1.0
_NO_VALUE = ("", "nan")


def read_nodes(path: str) -> list[dict[str, Any]]:
    """Every node of an openb node list, as Node manifests, in file order."""
    nodes = []
    for row in read_rows(path, NODE_COLUMNS):
        model = row.text("model")
        nodes.append(
            node_manifest(
                row.text("sn") or _missing(row, "sn"),
                cpu_milli=row.whole("cpu_milli"),
                memory_mib=row.whole("memory_mib"),
                gpus=row.whole("gpu"),
                gpu_model=None if model in _NO_VALUE else model,
            )
        )
    return nodes


def read_trace(nodes_path: str, pods_path: str, unscheduled: str = "lifetime") -> Trace:
    nodes = read_nodes(nodes_path)
    jobs: list[TraceJob] = []
    skipped = 0
    for row in read_rows(pods_path, POD_COLUMNS):
        job = pod_job(row, unscheduled)
        if job is None:
            skipped += 1
        else:
            jobs.append(job)
    check_names(jobs)
    notes = (
        [f"{skipped} pods the trace never scheduled were left out (--unscheduled skip)"] if skipped else []
    )
    return Trace("openb", (nodes_path, pods_path), nodes, in_arrival_order(jobs), "qos", notes)


def pod_job(row: Row, unscheduled: str = "lifetime") -> TraceJob | None:
    """The pod of one trace row (None: left out by the `--unscheduled skip` rule)."""
    created = row.optional_whole("creation_time") or 0
    scheduled = row.optional_whole("scheduled_time")
    deleted = row.optional_whole("deletion_time")
    if scheduled is None and unscheduled == "skip":
        return None
    began = created if scheduled is None else scheduled
    if scheduled is not None and scheduled < created:
        raise row.error(f"{scheduled} is before creation_time {created}", "scheduled_time")
    if deleted is not None and deleted < began:
        which = "creation_time" if scheduled is None else "scheduled_time"
        raise row.error(f"{deleted} is before {which} {began}", "deletion_time")
    qos = row.text("qos")
    if qos and qos not in PRIORITY_OF_QOS:
        raise row.error(f"unknown QoS {qos!r} (known: {', '.join(PRIORITY_OF_QOS)})", "qos")
    return TraceJob(
        name=row.text("name") or _missing(row, "name"),
        row=row,
        arrival=float(created),
        duration=None if deleted is None else max(float(deleted - began), MIN_DURATION),
        priority_class=PRIORITY_OF_QOS[qos] if qos else NO_QOS,
        pod=_shape(row),
    )


def _shape(row: Row) -> PodShape:
    gpus = row.whole("num_gpu")
    milli = row.whole("gpu_milli")
    if milli > 1000:
        raise row.error(f"expected at most 1000 (one whole GPU), got {milli}", "gpu_milli")
    spec = row.text("gpu_spec")
    models = () if spec in _NO_VALUE else tuple(model for model in spec.split("|") if model)
    shared = gpus > 0 and 0 < milli < 1000
    return PodShape(
        cpu_milli=row.whole("cpu_milli"),
        memory_mib=row.whole("memory_mib"),
        gpus=gpus,
        gpu_fraction=milli / 1000 if shared else None,
        gpu_models=models if gpus else (),
    )


def _missing(row: Row, column: str) -> NoReturn:
    raise row.error("is empty", column)
