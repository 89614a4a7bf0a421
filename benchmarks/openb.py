"""The FGD paper's "openb" trace as ordinary Kubernetes manifests, for `kai-scheduler simulate`.

The trace (Alibaba cluster-trace-gpu-v2023, from Weng et al., "Beware of Fragmentation", ATC'23) is read
from `../shared/traces/cluster-trace-gpu-v2023/csv/` next to the repository (never copied into it):

* `openb_node_list_gpu_node.csv` (1,213 nodes; `sn,cpu_milli,memory_mib,gpu,model`): a Node each, with
  `cpu_milli` CPUs, `memory_mib` memory, `gpu` x `nvidia.com/gpu`, 110 pods, and the GPU model as the
  label `nvidia.com/gpu.product`;
* `openb_pod_list_default.csv` (8,152 pods; `name,cpu_milli,memory_mib,num_gpu,gpu_milli,...`): a
  pending Pod each, in trace creation order. `num_gpu` GPUs of `gpu_milli`/1000 each: with `num_gpu` 1
  and `gpu_milli` < 1000 it is a shared-GPU pod (annotation `gpu-fraction: gpu_milli/1000`), otherwise
  `nvidia.com/gpu: num_gpu`; `num_gpu` 0 is a CPU-only pod. Times, phases and QoS are not used: every
  pod is submitted at once, as the paper's experiment does (without its random copies beyond 100%).

Pods go to QUEUES leaf queues (round robin in creation order) whose GPU quotas share the cluster evenly;
GPU pods have priority class `train`, CPU-only pods `build`.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import run  # the benchmarks' pod and queue helpers
from bench_io import TRACES

CSV = Path("cluster-trace-gpu-v2023") / "csv"
NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_default.csv"
QUEUES = ("openb-a", "openb-b", "openb-c", "openb-d")


def read(traces: Path, name: str) -> list[dict[str, str]]:
    path = traces / CSV / name
    if not path.exists():
        raise SystemExit(f"{path}: not found (the openb trace is read from ../shared/traces)")
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def node_doc(row: dict[str, str], name_column: str = "sn") -> dict[str, Any]:
    """A trace node row (`cpu_milli`, `memory_mib`, `gpu`, `model`, and its name in `name_column`) as a
    Node."""
    resources = {
        "cpu": f"{row['cpu_milli']}m",
        "memory": f"{row['memory_mib']}Mi",
        "pods": "110",
        "nvidia.com/gpu": row["gpu"],
    }
    name = row[name_column]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": row["model"]},
        },
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def gpus_of(row: dict[str, str]) -> float:
    """The GPUs a trace pod asks for: `num_gpu` x `gpu_milli` / 1000."""
    return int(row["num_gpu"]) * int(row["gpu_milli"]) / 1000


def pod_doc(row: dict[str, str], queue: str) -> dict[str, Any]:
    gpus, milli = int(row["num_gpu"]), int(row["gpu_milli"])
    shared = gpus == 1 and milli < 1000
    container = run._container(0 if shared else gpus, 0, 0)
    container["resources"]["requests"].update(cpu=f"{row['cpu_milli']}m", memory=f"{row['memory_mib']}Mi")
    annotations = {"gpu-fraction": f"{milli / 1000:g}"} if shared else None
    priority = "train" if gpus else "build"
    return run._pod(row["name"], queue, priority, container, annotations=annotations)


def manifests(traces: Path = TRACES) -> list[dict[str, Any]]:
    """Every object of the replay, in creation order: nodes, queues, then pods by trace creation time."""
    nodes = [node_doc(row) for row in read(traces, NODE_FILE)]
    gpus = sum(int(n["status"]["capacity"]["nvidia.com/gpu"]) for n in nodes)
    quota = gpus / len(QUEUES)
    queues = [run.queue_doc(name, quota) for name in QUEUES]
    rows = sorted(read(traces, POD_FILE), key=lambda r: (int(r["creation_time"]), r["name"]))
    pods = [pod_doc(row, QUEUES[i % len(QUEUES)]) for i, row in enumerate(rows)]
    return [*nodes, *queues, *pods]


def describe(docs: list[dict[str, Any]], traces: Path = TRACES) -> dict[str, Any]:
    rows = read(traces, POD_FILE)
    nodes = [d for d in docs if d["kind"] == "Node"]
    return {
        "nodes": len(nodes),
        "gpus": sum(int(n["status"]["capacity"]["nvidia.com/gpu"]) for n in nodes),
        "pods": len(rows),
        "sharedGpuPods": sum(1 for r in rows if r["num_gpu"] == "1" and int(r["gpu_milli"]) < 1000),
        "cpuOnlyPods": sum(1 for r in rows if r["num_gpu"] == "0"),
        "gpuDemand": round(sum(gpus_of(r) for r in rows), 2),
        "queues": len(QUEUES),
    }
