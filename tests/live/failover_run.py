"""A busy run through a failover: work arrives in waves, and while pods are being bound the leaders of the
scheduler and of the binder are killed (SIGKILL); the standbys must take over and bind everything that
fits, each pod once, no node over its GPUs. `busy_run_with_failover` runs it against `Replicas`;
`busy_run_with_a_paused_leader` stops the scheduler's leader instead, long enough to lose its Lease, and
lets it go on. `problems` checks the outcome from what the fake API server recorded. Used by the
high-availability test and by `benchmarks/failover.py`.

The cluster (`seed`): 6 nodes x 8 GPUs, two leaf queues. The work (`submit_wave`, 8 waves): per wave two
one-GPU pods and a half-GPU pod (a GPU reservation pod each shared GPU: `FakeGpuNodes` plays its device),
and every other wave a PyTorchJob gang of 3 pods x 2 GPUs. At most 42 of the 48 GPUs are asked for, so
everything fits, however it is packed.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from installed_chart import ChartPod
from live_support import FakeGpuNodes, eventually
from replicas import LEASE_NAMESPACE, Replicas

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.api.constants import GPU_GROUP_LABEL
from kai_scheduler.k8s.components import LEASES

NODES = 6
GPUS_PER_NODE = 8
QUEUES = ("team-a", "team-b")
WAVES = 8
KILLED = ("scheduler", "binder")  # the components whose leaders die
KILL_AFTER = 4  # pods bound before the leaders are killed


def seed(store: Store) -> None:
    for i in range(NODES):
        store.create(node_manifest(f"node-{i}", gpus=GPUS_PER_NODE, gpu_memory=81920))
    store.create(queue_manifest("department", gpu=NODES * GPUS_PER_NODE))
    for queue in QUEUES:
        store.create(queue_manifest(queue, gpu=NODES * GPUS_PER_NODE // 2, parent="department"))


def submit_wave(store: Store, wave: int) -> None:
    queue = QUEUES[wave % 2]
    for i in range(2):
        store.create(pod_manifest(f"single-{wave}-{i}", queue, gpus=1))
    store.create(pod_manifest(f"half-{wave}", queue, fraction=0.5))
    if wave % 2:
        _gang(store, f"gang-{wave}", queue, workers=2, gpus=2)


def _gang(store: Store, name: str, queue: str, *, workers: int, gpus: int) -> None:
    """A PyTorchJob (a master and `workers`) and its pods, as its operator would create them: the pod
    grouper makes them one PodGroup of minMember 1 + `workers`."""
    replica_spec = {"template": {"spec": {"containers": [{"name": "pytorch", "image": "trainer"}]}}}
    job = store.create(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "default", "labels": {"kai.scheduler/queue": queue}},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, **replica_spec},
                    "Worker": {"replicas": workers, **replica_spec},
                }
            },
        }
    )
    owner = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": name,
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    roles = [("master", 0)] + [("worker", i) for i in range(workers)]
    for role, index in roles:
        pod = pod_manifest(
            f"{name}-{role}-{index}",
            queue,
            gpus=gpus,
            labels={"training.kubeflow.org/replica-type": role},
        )
        pod["metadata"]["ownerReferences"] = [owner]
        store.create(pod)


@dataclass
class Failover:
    """What happened: who was killed, who took over, and when (seconds from the kill)."""

    killed: dict[str, str] = field(default_factory=dict)  # component -> identity
    successors: dict[str, str] = field(default_factory=dict)  # component -> identity holding the Lease
    lease_taken: dict[str, float] = field(default_factory=dict)  # component -> seconds
    next_bind: float = -1.0  # seconds to the first bind the new leaders made (-1: none)
    late_binds: int = 0  # binds the killed binder had sent before it died that arrived after the kill
    bound_before: int = 0  # binds before the kill
    pods: int = 0


async def busy_run_with_failover(
    server: FakeApiServer, replicas: Replicas, *, pause: float = 0.3, timeout: float = 300.0
) -> Failover:
    """Half the waves, then (once `KILL_AFTER` pods are bound) SIGKILL the leaders of `KILLED`, then the
    other waves; returns once every pod is bound (or fails after `timeout` seconds)."""
    store = server.store
    outcome = Failover()
    async with FakeGpuNodes(server):
        await _submit(store, range(WAVES // 2), pause)
        await eventually(lambda: len(store.binds) >= KILL_AFTER, timeout=timeout)
        victims = {component: replicas.leader(component) for component in KILLED}
        killed_at, started = time.time(), time.monotonic()
        for victim in victims.values():
            victim.kill()  # every signal sent before any death is waited for
        for component, victim in victims.items():
            assert victim.child is not None
            await asyncio.to_thread(victim.child.process.wait)
            outcome.killed[component] = victim.name
        outcome.bound_before = len(store.binds)
        watching = [
            asyncio.create_task(_lease_taken(replicas, c, victims[c].name, started, outcome, timeout))
            for c in KILLED
        ]
        await _submit(store, range(WAVES // 2, WAVES), pause)
        await asyncio.gather(*watching)
        outcome.pods = len(_pods(store))
        await _all_bound(store, timeout)
    # A bind that reached the API server after the kill but before the new binder led was sent by the
    # killed one (in flight when it died): not the takeover's.
    took_over = _acquired_at(replicas, "binder")
    accepted = [
        r.time for r in server.requests(subresource="binding") if r.code == 201 and r.time > killed_at
    ]
    outcome.late_binds = sum(1 for t in accepted if t < took_over)
    outcome.next_bind = min((t for t in accepted if t >= took_over), default=killed_at - 1) - killed_at
    return outcome


async def busy_run_with_a_paused_leader(
    server: FakeApiServer, replicas: Replicas, *, pause: float = 0.3, timeout: float = 300.0
) -> ChartPod:
    """Half the waves, then the fifth, and at once the scheduler's leader is stopped (SIGSTOP: a frozen
    machine, a long pause) until its standby leads and has bound pods of the other waves; then it goes on
    (SIGCONT) with its caches as they were. Returns the paused replica once every pod is bound."""
    store = server.store
    async with FakeGpuNodes(server):
        await _submit(store, range(WAVES // 2), pause)
        await eventually(lambda: len(store.binds) >= KILL_AFTER, timeout=timeout)
        paused = replicas.leader("scheduler")
        assert paused.child is not None
        submit_wave(store, WAVES // 2)  # pending in its caches when it stops, placed by the standby
        paused.child.process.send_signal(signal.SIGSTOP)
        try:
            await eventually(
                lambda: replicas.holder("scheduler") not in ("", paused.name),
                timeout=timeout,
                interval=0.05,
            )
            bound = len(store.binds)
            await _submit(store, range(WAVES // 2 + 1, WAVES), pause)
            await eventually(lambda: len(store.binds) > bound, timeout=timeout)
        finally:
            paused.child.process.send_signal(signal.SIGCONT)
        await _all_bound(store, timeout)
    return paused


async def _submit(store: Store, waves: range, pause: float) -> None:
    for wave in waves:
        submit_wave(store, wave)
        await asyncio.sleep(pause)


async def _all_bound(store: Store, timeout: float) -> None:
    await eventually(lambda: all(_bound(p) for p in _pods(store)), timeout=timeout, interval=0.2)


def _acquired_at(replicas: Replicas, component: str) -> float:
    """When the component's Lease was taken by its holder (wall clock; one machine, so comparable)."""
    lease = replicas.server.store.get("leases", LEASES[component], LEASE_NAMESPACE)
    return datetime.fromisoformat(lease["spec"]["acquireTime"]).timestamp()


async def _lease_taken(
    replicas: Replicas, component: str, dead: str, started: float, outcome: Failover, timeout: float
) -> None:
    await eventually(lambda: replicas.holder(component) not in ("", dead), timeout=timeout, interval=0.05)
    outcome.lease_taken[component] = time.monotonic() - started
    outcome.successors[component] = replicas.holder(component)


def _pods(store: Store) -> list[dict[str, Any]]:
    return store.list("pods", "default")


def _bound(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


# --- what must hold afterwards --------------------------------------------------------------------


def problems(store: Store) -> list[str]:
    """Every way the run went wrong, one line each: a pod bound twice (or not at all), a node over its
    GPUs at some point (the binds replayed in order: no pod left, so the usage only grew), a shared GPU
    over its whole, a BindRequest given up, an eviction."""
    found: list[str] = []
    binds = Counter((b.namespace, b.name) for b in store.binds)
    found += [f"{ns}/{name} bound {n} times" for (ns, name), n in binds.items() if n > 1]
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in _pods(store)}
    found += [f"{ns}/{name} not bound" for (ns, name), p in pods.items() if not _bound(p)]
    found += [f"{ns}/{name} was bound but is gone" for ns, name in binds if (ns, name) not in pods]
    whole: Counter[str] = Counter()
    shared: defaultdict[str, set[str]] = defaultdict(set)
    portions: defaultdict[str, float] = defaultdict(float)
    for record in store.binds:
        pod = pods.get((record.namespace, record.name))
        if pod is None:
            continue
        whole[record.node] += _whole_gpus(pod)
        group = (pod["metadata"].get("labels") or {}).get(GPU_GROUP_LABEL)
        if group:
            shared[record.node].add(group)
            portions[group] += float(pod["metadata"]["annotations"]["gpu-fraction"])
        used = whole[record.node] + len(shared[record.node])
        if used > GPUS_PER_NODE:
            found.append(f"{record.node} over its GPUs ({used}) once {record.name} was bound")
        if group and portions[group] > 1:
            found.append(
                f"shared GPU {group} over its whole ({portions[group]}) once {record.name} was bound"
            )
    for request in store.list("bindrequests"):
        status = request.get("status") or {}
        if status.get("phase") == "Failed":
            found.append(f"BindRequest {request['metadata']['name']} failed: {status.get('reason')}")
    found += [f"{e.namespace}/{e.name} evicted" for e in store.evictions]
    return found


def _whole_gpus(pod: dict[str, Any]) -> int:
    return sum(
        int(((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu", 0))
        for c in pod["spec"]["containers"]
    )
