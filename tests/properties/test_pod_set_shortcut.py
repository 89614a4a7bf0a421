"""Placing the pods of one plain pod set without descending the job's sub-group tree decides as the
descent does, and so does placing a job of one such pod without a statement (issue #23, row 4).

`actions.placement.place_job` places a job whose pods all belong to one pod set at the top of its tree,
with no topology constraint of its own and none on the job, by placing them in order (undoing them all
when one does not fit) rather than through the tree's layers. Generated clusters of zones and racks (a
`Topology` over them), some pods running, take lone pods, gangs of one pod set with and without a job
topology constraint, and gangs of sub-groups (with constraints of their own or not, some nested), in
queues over quota and not, at several priorities (so that the victim actions place preemptors and their
victims through `place_job` too), over a few cycles; every decision of every cycle and every waiting
reason must be the same with the shortcut and without. Some lone pods take a fraction of a GPU (the
shared GPUs they are handed are part of the decision), some running ones are terminating (pods are
pipelined onto what they release), and pods pipelined in one cycle are placed on their nominated nodes
in the next (a reservation to give back).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest, run
from kai_scheduler.actions import allocate, placement
from kai_scheduler.api import constants as c
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.sim.engine import SimulationResult

CONSTRAINTS: tuple[dict[str, str] | None, ...] = (
    None,
    None,
    {"requiredTopologyLevel": "rack"},
    {"requiredTopologyLevel": "zone", "preferredTopologyLevel": "rack"},
)
PRIORITIES = ("train", "build", "inference")


@contextmanager
def switched(module: Any, flag: str, enabled: bool) -> Iterator[None]:
    """The module's shortcut `flag` on or off inside."""
    before = getattr(module, flag)
    setattr(module, flag, enabled)
    try:
        yield
    finally:
        setattr(module, flag, before)


def constrained(constraint: dict[str, str] | None) -> dict[str, Any]:
    return {} if constraint is None else {"topologyConstraint": {"topology": "dc", **constraint}}


def sub_groups(rng: random.Random) -> list[dict[str, Any]]:
    """One to three sub-groups, with constraints of their own or not, the first one or two nested under a
    parent now and then (a parent with one child: the job's pods in one pod set below the top)."""
    groups = [
        {"name": f"s{index}", "minMember": 1, **constrained(rng.choice(CONSTRAINTS))}
        for index in range(rng.randint(1, 3))
    ]
    if rng.random() < 0.5:
        nested = groups[: min(len(groups), 2)]
        for group in nested:
            group["parent"] = "parent"
        groups.append({"name": "parent", "minSubGroup": len(nested), **constrained(rng.choice(CONSTRAINTS))})
    return groups


def cluster(rng: random.Random) -> list[ApiObject]:
    manifests: list[dict[str, Any]] = [
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "zone"}, {"nodeLabel": "rack"}]},
        },
        queue_manifest("q0", gpu=rng.choice([0, 4])),
        queue_manifest("q1", gpu=8),
    ]
    names = []
    for zone in range(2):
        for rack in range(2):
            for index in range(rng.randint(1, 3)):
                name = f"z{zone}-r{rack}-n{index}"
                names.append(name)
                labels = {"zone": f"z{zone}", "rack": f"r{rack}"}
                manifests.append(node_manifest(name, gpus=rng.choice([4, 8]), cpu=16, labels=labels))
    for job in range(rng.randint(4, 14)):
        name, queue = f"j{job}", rng.choice(["q0", "q1"])
        priority = rng.choice(PRIORITIES)
        gpus, cpu = rng.choice([(0, "2"), (1, "1"), (2, "1"), (4, "2")])
        running = rng.random() < 0.25
        kind = rng.choice(["lone", "gang", "gang", "sub-groups"])
        if kind == "lone":
            on = rng.choice(names) if running else None
            fraction = rng.choice([0.5, 0.25]) if gpus and rng.random() < 0.3 else None
            manifests.append(
                pod_manifest(
                    name,
                    queue,
                    gpus=0 if fraction else gpus,
                    cpu=cpu,
                    priority_class=priority,
                    node_name=on,
                    fraction=fraction,
                    terminating=on is not None and rng.random() < 0.3,
                )
            )
            continue
        size = rng.randint(1, 4)
        groups = sub_groups(rng) if kind == "sub-groups" else None
        group = pod_group_manifest(name, queue, min_member=size, priority_class=priority, sub_groups=groups)
        topology = rng.choice(CONSTRAINTS)
        if topology is not None:
            group["spec"]["topologyConstraint"] = {"topology": "dc", **topology}
        manifests.append(group)
        leaves = [] if groups is None else [g["name"] for g in groups if g["name"] != "parent"]
        on = rng.choice(names) if running else None
        first = rng.randrange(len(leaves)) if leaves else 0
        for index in range(size):
            labels = {c.SUBGROUP_LABEL: leaves[(first + index) % len(leaves)]} if leaves else None
            manifests.append(
                pod_manifest(
                    f"{name}-{index}",
                    queue,
                    gpus=gpus,
                    cpu=cpu,
                    group=name,
                    priority_class=priority,
                    labels=labels,
                    node_name=on,
                )
            )
    return [parse_object(manifest, "property", index) for index, manifest in enumerate(manifests)]


def decided(result: SimulationResult) -> tuple[object, ...]:
    return (
        [[str(decision) for decision in record.decisions] for record in result.cycles],
        sorted(result.reasons.items()),
    )


@pytest.mark.parametrize("seed", range(40))
def test_one_pod_set_placed_without_the_tree_as_through_it(seed: int) -> None:
    objects = cluster(random.Random(seed))
    with switched(placement, "ONE_POD_SET_SHORTCUT", True):
        fast = run(objects, cycles=4)
    with switched(placement, "ONE_POD_SET_SHORTCUT", False):
        full = run(objects, cycles=4)
    assert decided(fast) == decided(full)


@pytest.mark.parametrize("seed", range(40))
def test_lone_pod_placed_without_a_statement_as_through_one(seed: int) -> None:
    objects = cluster(random.Random(seed))
    with switched(allocate, "LONE_POD_SHORTCUT", True):
        fast = run(objects, cycles=4)
    with switched(allocate, "LONE_POD_SHORTCUT", False):
        full = run(objects, cycles=4)
    assert decided(fast) == decided(full)


@pytest.mark.parametrize("fraction", [None, 0.5])
def test_a_lone_pod_pipelined_onto_what_a_terminating_pod_releases_is_decided_alike(
    fraction: float | None,
) -> None:
    manifests = [
        queue_manifest("q0", gpu=8),
        node_manifest("n0", gpus=2, cpu=16),
        pod_manifest("old", "q0", gpus=2, node_name="n0", terminating=True),
        pod_manifest("new", "q0", gpus=0 if fraction else 1, fraction=fraction),
    ]
    objects = [parse_object(manifest, "property", index) for index, manifest in enumerate(manifests)]
    with switched(allocate, "LONE_POD_SHORTCUT", True):
        fast = run(objects, cycles=1)
    with switched(allocate, "LONE_POD_SHORTCUT", False):
        full = run(objects, cycles=1)
    assert [(d.action, d.type, d.pod) for d in fast.cycles[0].decisions] == [
        ("allocate", "pipeline", "default/new")
    ]
    assert decided(fast) == decided(full)
