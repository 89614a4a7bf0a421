"""The workloads of the scale benchmark (`scale.py`), as Kubernetes-style dicts, for any node count.

Every workload is fixed by its seed and its node count: same arguments, same objects, in the same order.
The shapes are those of `run.py` (whose helpers build the nodes, queues and pods), scaled:

* `cluster(nodes)`: `node-0000`.. with 8 GPUs each (`run.node_doc`), 20 nodes a rack, 10 racks a zone;
  5 departments x 10 leaf queues whose GPU quotas add up to the cluster, some GPU limits, over-quota
  weights 1..4, CPU and memory not rationed (-1);
* `first_cycle(nodes)`: the cluster and 4 pending pods per node (20,000 at 5,000 nodes) in `run.py`'s
  mix: 1/2/4/8-GPU pods, gangs with PodGroups, `gpu-fraction` 0.5 / 0.25 pods, CPU-only pods, ~8% of
  the single GPU pods with a rack or zone nodeSelector, priority classes train / build / inference;
* `first_cycle_deep(nodes)`: the cluster and 4 pending pods per node of the same shapes (CPU-only pods
  aside) weighted toward larger requests, so that they ask ~2.7 times the cluster's GPUs (`DEEP_*`):
  issue #23's first-cycle row ("a backlog asking 2.7 times the cluster's GPUs, 20,000 pending pods of
  mixed shapes"; `first_cycle`'s backlog asks about half the GPUs, and nearly all of it is placed);
* `steady(nodes)`: the cluster full: 14 running pods per node (70,000 at 5,000 nodes; every GPU taken by
  1/2/4/8-GPU pods, the rest CPU-only), all non-preemptible (priority class `inference`, or `train` with
  the label `kai.scheduler/preemptibility: non-preemptible`), bound with `spec.nodeName` and
  `status.phase: Running`; and 2 pending pods per node (10,000 at 5,000 nodes) that all need a GPU
  (the mix above without CPU-only pods), so none of them fits and nothing can be preempted for them.
  The pending count can be given instead: issue #23's 20,000-node row has 10,000 (`LARGE_STEADY_PENDING`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import run  # the benchmarks' shared workload helpers (nodes, queues, pods, gangs)

GPUS_PER_NODE = run.GPUS_PER_NODE
NODES_PER_RACK = 20
RACKS_PER_ZONE = 10
PENDING_PER_NODE_FIRST = 4
RUNNING_PER_NODE = 14
PENDING_PER_NODE_STEADY = 2
LEAVES_PER_DEPARTMENT = 10
LARGE_STEADY_PENDING = 10_000  # issue #23's 20,000-node rows: 280,000 running pods and 10,000 pending

# Department -> (share of the cluster's GPUs, GPU limit as a multiple of its quota or -1).
DEPARTMENTS = {
    "research": (0.30, -1),
    "product": (0.25, -1),
    "platform": (0.20, 1.5),
    "ops": (0.15, -1),
    "infra": (0.10, -1),
}

# The deep backlog's mix (`first_cycle_deep`): `run.py`'s shapes as shares of the pending pods (the gangs
# take the rest, as in `run.py`), and its gangs' GPUs per pod; 5.4 GPUs a pod on average, so that
# PENDING_PER_NODE_FIRST pods a node ask ~2.7 times its 8 GPUs.
DEEP_SINGLE_SHARES = {
    "gpu-1": 0.07,
    "gpu-2": 0.08,
    "gpu-4": 0.18,
    "gpu-8": 0.40,
    "fraction-0.5": 0.02,
    "fraction-0.25": 0.02,
}
DEEP_GANG_GPUS_PER_POD = {1: 0.05, 2: 0.15, 4: 0.30, 8: 0.50}

# How the GPUs of a full node are split between running pods (GPUs per pod); one is drawn per node.
NODE_FILLS = ((1,) * 8, (2, 2, 1, 1, 1, 1), (2, 2, 2, 2), (4, 2, 1, 1), (4, 4), (8,), (2, 1, 1, 1, 1, 1, 1))
NON_PREEMPTIBLE_LABEL = {"kai.scheduler/preemptibility": "non-preemptible"}


def rack_label(rack: int) -> str:
    return f"rack-{rack:03d}"


def zone_label(rack: int) -> str:
    return f"zone-{rack // RACKS_PER_ZONE:02d}"


def node_docs(nodes: int) -> list[dict[str, Any]]:
    return [
        run.node_doc(
            i,
            {
                run.ZONE_LABEL: zone_label(i // NODES_PER_RACK),
                run.RACK_LABEL: rack_label(i // NODES_PER_RACK),
            },
        )
        for i in range(nodes)
    ]


def queue_docs(rng: random.Random, gpus: int) -> list[dict[str, Any]]:
    """Departments first (parents before children), then their leaves; quotas add up to `gpus`."""
    parents, leaves = [], []
    shares = [round(gpus * share) for share, _ in DEPARTMENTS.values()]
    shares[0] += gpus - sum(shares)
    for (department, (_, limit)), quota in zip(DEPARTMENTS.items(), shares, strict=True):
        parents.append(run.queue_doc(department, quota, -1 if limit < 0 else round(quota * limit)))
        weights = [rng.uniform(0.5, 1.5) for _ in range(LEAVES_PER_DEPARTMENT)]
        leaf_quotas = [int(quota * w / sum(weights)) for w in weights]
        leaf_quotas[0] += quota - sum(leaf_quotas)
        for j, leaf_quota in enumerate(leaf_quotas):
            leaf_limit = -1 if rng.random() < 0.75 else round(leaf_quota * rng.choice((1.25, 1.5, 2.0)))
            weight = rng.choice((1, 2, 3, 4))
            leaves.append(
                run.queue_doc(f"{department}-{j + 1}", leaf_quota, leaf_limit, weight, parent=department)
            )
    return parents + leaves


def _leaves(queues: list[dict[str, Any]]) -> tuple[list[str], list[float]]:
    leaves = [q for q in queues if q["spec"].get("parentQueue")]
    return [q["metadata"]["name"] for q in leaves], [q["spec"]["resources"]["gpu"]["quota"] for q in leaves]


def _single(rng: random.Random, index: int, shape: str, queue: str, racks: int) -> dict[str, Any]:
    """One pending pod of `shape` (as in `run.py`), selecting one of this cluster's racks or zones."""
    name = f"{shape.replace('.', '')}-{index:05d}"
    annotations: dict[str, str] = {}
    if shape == "cpu":
        priority = run._priority(rng, "cpu")
        container = run._container(0, rng.choice((1, 2, 4, 8, 16)), rng.choice((4, 8, 16, 32, 64)))
    elif shape.startswith("fraction-"):
        priority = run._priority(rng, "single")
        annotations["gpu-fraction"] = shape.removeprefix("fraction-")
        container = run._container(0, rng.choice((1, 2, 4)), rng.choice((8, 16, 32)))
    else:
        priority = run._priority(rng, "single")
        gpus = int(shape.removeprefix("gpu-"))
        container = run._container(gpus, gpus * rng.choice((4, 8, 12)), gpus * rng.choice((32, 64, 96)))
    selector = None
    if shape != "cpu" and rng.random() < run.NODE_SELECTOR_SHARE:
        rack = rng.randrange(racks)
        selector = (
            {run.RACK_LABEL: rack_label(rack)} if rng.random() < 0.5 else {run.ZONE_LABEL: zone_label(rack)}
        )
    return run._pod(name, queue, priority, container, annotations=annotations, node_selector=selector)


def backlog(
    rng: random.Random,
    count: int,
    queues: list[dict[str, Any]],
    racks: int,
    *,
    cpu_only: bool = True,
    mix: Mapping[str, float] = run.SINGLE_SHARES,
    gang_gpus: Mapping[int, float] = run.GANG_GPUS_PER_POD,
) -> list[dict[str, Any]]:
    """`count` pending pods in `mix` (`run.py`'s by default: shares of single pods by shape, the gangs
    taking the rest; without CPU-only pods unless `cpu_only`), their PodGroups first, the gangs' pods of
    `gang_gpus` GPUs; each job goes to a leaf queue drawn by GPU quota, with noise."""
    shares = {s: f for s, f in mix.items() if cpu_only or s != "cpu"}
    scale = sum(mix.values()) / sum(shares.values())  # keep the gang share as in the mix
    single_counts = {shape: round(share * scale * count) for shape, share in shares.items()}
    gang_budget = count - sum(single_counts.values())
    jobs: list[tuple[str, Any]] = [(shape, None) for shape, n in single_counts.items() for _ in range(n)]
    jobs += [("gang", size) for size in run._gang_sizes(rng, gang_budget)]
    rng.shuffle(jobs)  # creation order interleaves every kind of job
    names, quotas = _leaves(queues)
    groups: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    for index, (shape, size) in enumerate(jobs):
        queue = rng.choices(names, weights=[w * rng.uniform(0.5, 1.5) for w in quotas])[0]
        if shape == "gang":
            group, *members = run._gang_job(rng, index, size[0], size[1], queue, gang_gpus)
            groups.append(group)
            pods.extend(members)
        else:
            pods.append(_single(rng, index, shape, queue, racks))
    return groups + pods


def running(rng: random.Random, nodes: int, queues: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """RUNNING_PER_NODE non-preemptible running pods on every node: its 8 GPUs split by one of NODE_FILLS,
    the rest of the pods CPU-only; each pod in a leaf queue drawn by GPU quota."""
    names, quotas = _leaves(queues)
    pods: list[dict[str, Any]] = []
    for i in range(nodes):
        fill = rng.choice(NODE_FILLS)
        gpus_per_pod = list(fill) + [0] * (RUNNING_PER_NODE - len(fill))
        for k, gpus in enumerate(gpus_per_pod):
            queue = rng.choices(names, weights=quotas)[0]
            container = (
                run._container(gpus, gpus * 4, gpus * 32)
                if gpus
                else run._container(0, rng.choice((1, 2, 4)), rng.choice((4, 8, 16)))
            )
            labelled = rng.random() < 0.25  # preemptible by class, non-preemptible by label
            pod = run._pod(f"run-{i:05d}-{k:02d}", queue, "train" if labelled else "inference", container)
            if labelled:
                pod["metadata"]["labels"].update(NON_PREEMPTIBLE_LABEL)
            pod["spec"]["nodeName"] = f"node-{i:04d}"
            pod["status"] = {"phase": "Running"}
            pods.append(pod)
    return pods


def first_cycle(nodes: int, seed: int) -> list[dict[str, Any]]:
    """The empty cluster and PENDING_PER_NODE_FIRST pending pods per node, in creation order."""
    rng = random.Random(seed)
    queues = queue_docs(rng, nodes * GPUS_PER_NODE)
    pending = backlog(rng, nodes * PENDING_PER_NODE_FIRST, queues, nodes // NODES_PER_RACK)
    return [*node_docs(nodes), *queues, *pending]


def first_cycle_deep(nodes: int, seed: int) -> list[dict[str, Any]]:
    """The empty cluster and PENDING_PER_NODE_FIRST pending pods per node in the deep mix (`DEEP_*`:
    ~2.7 times the cluster's GPUs asked), in creation order."""
    rng = random.Random(seed)
    queues = queue_docs(rng, nodes * GPUS_PER_NODE)
    pending = backlog(
        rng,
        nodes * PENDING_PER_NODE_FIRST,
        queues,
        nodes // NODES_PER_RACK,
        mix=DEEP_SINGLE_SHARES,
        gang_gpus=DEEP_GANG_GPUS_PER_POD,
    )
    return [*node_docs(nodes), *queues, *pending]


def steady(nodes: int, seed: int, pending_pods: int | None = None) -> list[dict[str, Any]]:
    """The full cluster (RUNNING_PER_NODE running pods per node) and pending GPU pods that cannot fit
    (`pending_pods`, or PENDING_PER_NODE_STEADY per node), in creation order (PodGroups before pods,
    running pods first)."""
    rng = random.Random(seed)
    queues = queue_docs(rng, nodes * GPUS_PER_NODE)
    bound = running(rng, nodes, queues)
    count = nodes * PENDING_PER_NODE_STEADY if pending_pods is None else pending_pods
    pending = backlog(rng, count, queues, nodes // NODES_PER_RACK, cpu_only=False)
    groups = [doc for doc in pending if doc["kind"] == "PodGroup"]
    pods = [doc for doc in pending if doc["kind"] == "Pod"]
    return [*node_docs(nodes), *queues, *groups, *bound, *pods]
