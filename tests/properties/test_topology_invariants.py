"""Property: topology constraints hold whatever the workload, and constrained gangs do not make the
cluster churn.

Random clusters of zones and racks (a `Topology` over them), random queues, and random gangs with or
without a topology constraint (required rack, required zone, required zone with a preferred rack), some
running at second 0, some arriving later. The simulation must:
- reach the steady state, and evict no pod more than MAX_EVICTIONS times (no ping-pong);
- end with every gang's running pods inside one domain of its required level.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest, run
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import ApiObject

MAX_CYCLES = 60
MAX_EVICTIONS = 2
EXAMPLES = int(os.environ.get("KAI_TOPOLOGY_EXAMPLES", "150"))
LEVELS = {"zone": "zone", "rack": "rack"}
CONSTRAINTS: tuple[dict[str, str] | None, ...] = (
    None,
    {"requiredTopologyLevel": "rack"},
    {"requiredTopologyLevel": "zone"},
    {"requiredTopologyLevel": "zone", "preferredTopologyLevel": "rack"},
    {"preferredTopologyLevel": "rack"},
)


@dataclass(frozen=True)
class Gang:
    name: str
    queue: str
    size: int
    gpus: int
    constraint: dict[str, str] | None
    priority_class: str
    running: tuple[str, ...]  # nodes of the pods running at second 0 (the first pods)
    arrival: int


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[tuple[str, str, str, int], ...]  # name, zone, rack, GPUs
    gangs: tuple[Gang, ...]
    busy: tuple[tuple[str, int], ...] = ()  # GPUs held by another scheduler's pod on a node

    def objects(self) -> list[ApiObject]:
        manifests: list[dict[str, Any]] = [
            {
                "apiVersion": "kai.scheduler/v1alpha1",
                "kind": "Topology",
                "metadata": {"name": "dc"},
                "spec": {"levels": [{"nodeLabel": "zone"}, {"nodeLabel": "rack"}]},
            },
            queue_manifest("q0", gpu=0),
            queue_manifest("q1", gpu=4),
        ]
        for name, zone, rack, gpus in self.nodes:
            manifests.append(node_manifest(name, gpus=gpus, labels={"zone": zone, "rack": rack}))
        for i, (name, gpus) in enumerate(self.busy):
            manifests.append(
                pod_manifest(f"other-{i}", None, gpus=gpus, node_name=name, scheduler="default-scheduler")
            )
        for gang in self.gangs:
            group = pod_group_manifest(
                gang.name,
                gang.queue,
                min_member=gang.size,
                priority_class=gang.priority_class,
                arrival=gang.arrival or None,
            )
            if gang.constraint is not None:
                group["spec"]["topologyConstraint"] = {"topology": "dc", **gang.constraint}
            manifests.append(group)
            for i in range(gang.size):
                on = gang.running[i] if i < len(gang.running) else None
                manifests.append(
                    pod_manifest(
                        f"{gang.name}-{i}", gang.queue, group=gang.name, gpus=gang.gpus, node_name=on
                    )
                )
        return [parse_object(m, "property", i) for i, m in enumerate(manifests)]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    nodes: list[tuple[str, str, str, int]] = []
    for z in range(draw(st.integers(1, 2))):
        for r in range(draw(st.integers(1, 2))):
            for n in range(draw(st.integers(1, 3))):
                nodes.append((f"z{z}-r{r}-n{n}", f"z{z}", f"r{r}", draw(st.sampled_from([4, 8]))))
    free = {name: gpus for name, _, _, gpus in nodes}
    busy: list[tuple[str, int]] = []
    for name, _, _, gpus in nodes:
        taken = draw(st.sampled_from([0, 0, 0, gpus // 2]))
        if taken:
            busy.append((name, taken))
            free[name] -= taken
    gangs: list[Gang] = []
    for g in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 4))
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        constraint = draw(st.sampled_from(CONSTRAINTS))
        # Some gangs run at second 0, whole, inside one rack (so that they start out within any constraint).
        running: list[str] = []
        if draw(st.booleans()):
            rack = draw(st.sampled_from(sorted({(z, r) for _, z, r, _ in nodes})))
            for name, z, r, _ in nodes:
                while len(running) < size and (z, r) == rack and free[name] >= gpus:
                    free[name] -= gpus
                    running.append(name)
            if len(running) < size:
                for name in running:
                    free[name] += gpus
                running = []
        gangs.append(
            Gang(
                name=f"g{g}",
                queue=draw(st.sampled_from(["q0", "q1"])),
                size=size,
                gpus=gpus,
                constraint=constraint,
                priority_class=draw(st.sampled_from(["train", "build", "inference"])),
                running=tuple(running),
                arrival=0 if running else draw(st.sampled_from([0, 0, 3, 10])),
            )
        )
    if draw(st.integers(0, 3)) > 0:
        # The shape that once made gangs take turns: a gang wider than a rack spread over a zone, and a
        # rack-bound gang arriving later that only fits if the first one's pods move.
        width = draw(st.integers(2, 4))
        gangs.append(Gang("wide", "q0", width, 8, {"requiredTopologyLevel": "zone"}, "train", (), 0))
        gangs.append(Gang("late", "q1", 2, 8, {"requiredTopologyLevel": "rack"}, "train", (), 3))
    return Cluster(tuple(nodes), tuple(gangs), tuple(busy))


@settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(clusters())
def test_constraints_hold_and_constrained_gangs_settle(cluster: Cluster) -> None:
    result = run(cluster.objects(), max_cycles=MAX_CYCLES)
    decisions = [(r.cycle, d.action, d.type, d.pod, d.node) for r in result.cycles for d in r.decisions]
    assert result.steady, f"no steady state within {MAX_CYCLES} cycles; last decisions: {decisions[-12:]}"
    evictions = {p.key: p.evictions for p in result.cluster.pods if p.evictions > MAX_EVICTIONS}
    assert not evictions, f"pods evicted more than {MAX_EVICTIONS} times (ping-pong): {evictions}"

    where = {name: (zone, rack) for name, zone, rack, _ in cluster.nodes}
    nodes_of: dict[str, list[str]] = {}
    for p in result.cluster.pods:
        if p.phase == "Running" and p.node is not None:
            nodes_of.setdefault(p.job_key.split("/")[1], []).append(p.node)
    for gang in cluster.gangs:
        required = (gang.constraint or {}).get("requiredTopologyLevel")
        running = nodes_of.get(gang.name, [])
        if required is None or not running:
            continue
        domains = {where[n][0] if required == "zone" else where[n] for n in running}
        assert len(domains) == 1, f"{gang.name} requires one {required} but runs on {sorted(running)}"
