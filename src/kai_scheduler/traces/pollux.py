"""The Pollux / AdaptDL workloads (Qiao et al., "Pollux", OSDI'21): elastic training jobs.

Each row (`name,time,application,num_replicas,batch_size`) is a PodGroup of `num_replicas` pods of one GPU
each with `minMember` 1, KAI's elastic job: it starts as soon as one pod fits, and each further pod is
placed when there is room (and is the first to go when another job reclaims its queue's share), as an
AdaptDL job that scales between 1 and `num_replicas` replicas.

* arrival: `time` (seconds from the workload's start);
* duration: the trace has none (Pollux's simulator derives it from throughput measurements that are not
  in it). Each application is given the GPU-hours of the size class the Pollux paper puts it in (its
  Table 1: ResNet18 on CIFAR-10 and NeuMF on MovieLens small, 0-1 GPU-hours; DeepSpeech2 and BERT
  medium, 1-10; YOLOv3 large, 10-100; ResNet-50 on ImageNet extra large, 100-1000), the middle of the
  class on a log scale (`GPU_HOURS`; `--gpu-hours APP=H` changes them), and each pod runs
  GPU-hours x 3600 / `num_replicas` seconds, the job's time at full size (a pod that starts later
  finishes later; the simulator does not stretch the run of a job that runs with fewer pods);
* `batch_size` is checked but not used (KAI does not adapt batch sizes);
* priority: `train` (50, preemptible), as training jobs are in KAI;
* the cluster: `--cluster NODESxGPUS` nodes (default 16x4, the paper's testbed of 16 nodes with 4 T4 GPUs,
  48 CPUs and 192 GiB each); each pod asks for one GPU, `POD_CPU_MILLI` CPU and `POD_MEMORY_MIB` memory
  (a quarter of a node's, beside each GPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kai_scheduler.traces.jobs import PodShape, Trace, TraceJob, check_names, in_arrival_order
from kai_scheduler.traces.manifests import node_manifest
from kai_scheduler.traces.rows import Row, read_rows

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
GPU_HOURS: Mapping[str, float] = {
    "cifar10": 0.5,
    "ncf": 0.5,
    "deepspeech2": 3.0,
    "bert": 3.0,
    "yolov3": 30.0,
    "imagenet": 300.0,
}
PRIORITY_CLASS = "train"
NODE_CPU_MILLI = 48_000
NODE_MEMORY_MIB = 192 * 1024
GPU_MODEL = "T4"
POD_CPU_MILLI = 12_000
POD_MEMORY_MIB = 48 * 1024


@dataclass(frozen=True, slots=True)
class Cluster:
    nodes: int = 16
    gpus_per_node: int = 4

    @classmethod
    def parse(cls, text: str) -> Cluster:
        """`16x4`: 16 nodes of 4 GPUs. Raises ValueError."""
        count, sep, gpus = text.lower().partition("x")
        if not sep or not count.isdigit() or not gpus.isdigit() or int(count) < 1 or int(gpus) < 1:
            raise ValueError(f"expected NODESxGPUS such as 16x4, got {text!r}")
        return cls(int(count), int(gpus))


def read_trace(path: str, cluster: Cluster = Cluster(), gpu_hours: Mapping[str, float] = GPU_HOURS) -> Trace:
    jobs = [elastic_job(row, gpu_hours) for row in read_rows(path, COLUMNS)]
    check_names(jobs)
    width = len(str(cluster.nodes - 1))
    nodes = [
        node_manifest(
            f"node-{i:0{width}d}",
            cpu_milli=NODE_CPU_MILLI,
            memory_mib=NODE_MEMORY_MIB,
            gpus=cluster.gpus_per_node,
            gpu_model=GPU_MODEL,
        )
        for i in range(cluster.nodes)
    ]
    return Trace("pollux", (path,), nodes, in_arrival_order(jobs), "application")


def elastic_job(row: Row, gpu_hours: Mapping[str, float] = GPU_HOURS) -> TraceJob:
    application = row.text("application")
    if application not in gpu_hours:
        known = ", ".join(sorted(gpu_hours))
        raise row.error(
            f"unknown application {application!r} (known: {known}; or --gpu-hours APP=H)", "application"
        )
    replicas = row.whole("num_replicas", minimum=1)
    row.whole("batch_size", minimum=1)
    name = row.text("name")
    if not name:
        raise row.error("is empty", "name")
    return TraceJob(
        name=name,
        row=row,
        arrival=float(row.whole("time")),
        duration=max(round(gpu_hours[application] * 3600 / replicas), 1),
        priority_class=PRIORITY_CLASS,
        pod=PodShape(cpu_milli=POD_CPU_MILLI, memory_mib=POD_MEMORY_MIB, gpus=1),
        replicas=replicas,
        min_member=1,
    )
