"""The ranked node index chooses as the full scoring does (issue #23, point 2).

`framework.ranked_nodes` finds a pod's best node from candidates grouped by free value instead of
scoring every node; it must choose exactly the node `Session.choose_node` chooses, ties and near-ties
included. Generated backlogs (whole-GPU, fractional and CPU-only pods, gangs, node selectors, taints and
tolerations, topology-constrained gangs, pods running and terminating, a cordoned node) run a few
cycles with the index and with it turned off (`ranked_nodes.ENABLED`); every decision of every cycle and
every waiting reason must be the same.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, pod, pod_group_manifest, queue, run, topology_constraint
from kai_scheduler.api.objects import ApiObject, PodGroup, Topology
from kai_scheduler.framework import ranked_nodes
from kai_scheduler.sim.engine import SimulationResult

RACKS = ("r0", "r1", "r2")
TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}


@contextmanager
def index_enabled(enabled: bool) -> Iterator[None]:
    before = ranked_nodes.ENABLED
    ranked_nodes.ENABLED = enabled
    try:
        yield
    finally:
        ranked_nodes.ENABLED = before


def topology() -> ApiObject:
    return Topology.model_validate(
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]},
        }
    )


def backlog(rng: random.Random, nodes: int, jobs: int) -> list[ApiObject]:
    """GPU nodes (some CPU-only, tainted or cordoned) and a backlog that more than fills them; runs of
    pods alike (gangs, jobs of one shape) are common, as they are what the index serves."""
    objects: list[ApiObject] = [queue("q", gpu=-1), queue("r", gpu=4), topology()]
    for i in range(nodes):
        objects.append(
            node(
                f"n{i}",
                gpus=rng.choice((0, 2, 4, 8, 8, 8)) if rng.random() < 0.3 else 8,
                cpu=rng.choice(("16", "32", "64")),
                labels={"rack": RACKS[i % len(RACKS)], "kubernetes.io/hostname": f"n{i}"},
                taints=[TAINT] if rng.random() < 0.15 else None,
                unschedulable=rng.random() < 0.05,
            )
        )
    # Pods being released in half the backlogs: then fitting now and fitting soon differ, and nodes score
    # by availability (the index steps aside).
    releasing = rng.random() < 0.5
    kinds = ("whole", "whole", "fraction", "cpu", "gang", "gang", "gang", "topology", "running")
    for j in range(jobs):
        kind = rng.choice(kinds)
        q = rng.choice(("q", "r"))
        gpus = rng.choice((1, 1, 2, 4, 8))
        cpu = rng.choice(("1", "2", "4", "12"))
        extra: dict[str, Any] = {}
        if rng.random() < 0.15:
            extra["node_selector"] = {"rack": rng.choice(RACKS)}
        if rng.random() < 0.25:
            extra["tolerations"] = [TOLERATION]
        if kind == "whole":
            objects.append(pod(f"p{j}", q, gpus=gpus, cpu=cpu, **extra))
        elif kind == "fraction":
            objects.append(pod(f"p{j}", q, fraction=rng.choice((0.25, 0.5)), cpu=cpu))
        elif kind == "cpu":
            objects.append(pod(f"p{j}", q, cpu=cpu, **extra))
        elif kind == "running":
            where = f"n{rng.randrange(nodes)}"
            terminating = releasing and rng.random() < 0.25
            objects.append(pod(f"p{j}", q, gpus=1, cpu="1", node_name=where, terminating=terminating))
        else:
            size = rng.randint(2, 6)
            group = pod_group_manifest(f"g{j}", q, min_member=size)
            if kind == "topology":
                level = rng.choice(("required", "preferred"))
                group["spec"]["topologyConstraint"] = topology_constraint("dc", **{level: "rack"})
            objects.append(PodGroup.model_validate(group))
            objects += [
                pod(f"g{j}-{k}", q, group=f"g{j}", gpus=min(gpus, 2), cpu=cpu, **extra) for k in range(size)
            ]
    return objects


def decided(result: SimulationResult) -> tuple[object, ...]:
    return (
        [[str(decision) for decision in record.decisions] for record in result.cycles],
        sorted(result.reasons.items()),
    )


def compare(objects: list[ApiObject]) -> None:
    with index_enabled(True):
        fast = run(objects, cycles=3)
    with index_enabled(False):
        full = run(objects, cycles=3)
    assert decided(fast) == decided(full)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(2, 10), st.integers(1, 30))
def test_the_index_chooses_as_the_full_scoring_does(rng: random.Random, nodes: int, jobs: int) -> None:
    compare(backlog(rng, nodes, jobs))


@pytest.mark.parametrize("seed", range(3))
def test_the_index_chooses_as_the_full_scoring_does_over_a_deep_backlog(seed: int) -> None:
    """Larger: many runs of pods alike, each next pod finding its candidates changed since."""
    compare(backlog(random.Random(seed), 40, 160))
