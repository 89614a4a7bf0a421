"""A reservation moves when a reserved node fails (issue #24, 1: reservations "are kept across cycles and
revised when the cluster changes (a node fails, ...)").

The simulator has no node-failure event, so the engine is driven cycle by cycle (its own `_cycle`, as
tests/sim/test_unchanged_cycles.py does) and the reserved node is made NotReady, cordoned or deleted between
two cycles, as a node update from the cluster would. Three 4-GPU nodes, each busy with a non-preemptible pod
until 100, 200 and 300 s; the 4-GPU job big holds n1 from 100 s. Once n1 fails, the earliest start is on
n2 at 200 s: the reservation moves there, and big starts there. A control run without the failure starts
big on n1 at 100 s, so each test can fail.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from helpers import config, node, pod, queue
from kai_scheduler.api.objects import ApiObject, Node, NodeCondition
from kai_scheduler.framework.config import DEFAULT_PLUGIN_ARGUMENTS, DEFAULT_PLUGINS
from kai_scheduler.model.reservations import Reservation
from kai_scheduler.sim.engine import Simulation, SimulationOptions

START = datetime(2026, 1, 1, tzinfo=UTC)
BIG = "default/pg-big"
# KAI's default plugins plus the reservation plugin (one job may hold capacity).
CONFIG = config(
    tiers=[
        {
            "plugins": [
                *(
                    {"name": name, "arguments": DEFAULT_PLUGIN_ARGUMENTS.get(name, {})}
                    for name in DEFAULT_PLUGINS
                ),
                {"name": "reservation", "arguments": {"maxReservations": "1"}},
            ]
        }
    ]
)


def objects() -> list[ApiObject]:
    nodes: list[ApiObject] = [node(f"n{i}", gpus=4, cpu="32", memory="256Gi") for i in (1, 2, 3)]
    busy: list[ApiObject] = [
        pod(
            f"busy-n{i}",
            gpus=4,
            node_name=f"n{i}",
            duration=f"{100 * i}s",
            labels={"kai.scheduler/preemptibility": "non-preemptible"},
        )
        for i in (1, 2, 3)
    ]
    return [*nodes, queue("q"), *busy, pod("big", gpus=4, duration="100s")]


# How n1 fails: the cluster's nodes by name, changed in place.
Failure = Callable[[dict[str, Node]], None]


def not_ready(nodes: dict[str, Node]) -> None:
    current = nodes["n1"]
    status = current.status.model_copy(update={"conditions": [NodeCondition(type="Ready", status="False")]})
    nodes["n1"] = current.model_copy(update={"status": status})


def cordoned(nodes: dict[str, Node]) -> None:
    current = nodes["n1"]
    nodes["n1"] = current.model_copy(update={"spec": current.spec.model_copy(update={"unschedulable": True})})


def deleted(nodes: dict[str, Node]) -> None:
    del nodes["n1"]


# Where and from when a job holds capacity (None: it holds none).
Held = tuple[tuple[str, ...], float] | None


def held(sim: Simulation) -> Held:
    """Where and from when big holds capacity, as the cluster keeps it between cycles."""
    times = sim.cluster.cache.job_times.get(BIG)
    reservation: Reservation | None = times.reservation if times is not None else None
    return None if reservation is None else (reservation.nodes, reservation.start)


def run(fail: Failure | None) -> tuple[list[tuple[float, str, str]], list[Held]]:
    """Cycles at 0, 50, 100, 150 and 200 s, `fail` applied to n1 after the first: the binds and what big
    holds after each cycle."""
    start = objects()
    nodes = {o.metadata.name: o for o in start if isinstance(o, Node)}
    sim = Simulation(start, CONFIG, SimulationOptions(start=START))
    binds: list[tuple[float, str, str]] = []
    holds: list[Held] = []
    for number, now in enumerate((0.0, 50.0, 100.0, 150.0, 200.0), start=1):
        if number == 2 and fail is not None:
            fail(nodes)
            sim.cluster.cache.set_nodes(nodes.values())
        _, result = sim._cycle(now, number)
        binds += [(now, d.pod, d.node) for d in result.decisions if d.type == "bind"]
        holds.append(held(sim))
    return binds, holds


def test_without_a_failure_big_starts_where_it_held_first() -> None:
    binds, holds = run(None)
    assert holds[:2] == [(("n1",), 100.0), (("n1",), 100.0)]
    assert binds == [(100.0, "default/big", "n1")]
    assert holds[2] is None  # it started: a running job holds nothing


@pytest.mark.parametrize("fail", [not_ready, cordoned, deleted], ids=["not-ready", "cordoned", "deleted"])
def test_a_reservation_moves_off_a_failed_node_to_a_later_start(fail: Failure) -> None:
    binds, holds = run(fail)
    # Held on n1 from 100 s; after n1 fails, on n2 from 200 s (n3 frees only at 300 s), kept so until big
    # starts there.
    assert holds == [
        (("n1",), 100.0),
        (("n2",), 200.0),
        (("n2",), 200.0),
        (("n2",), 200.0),
        None,
    ]
    assert binds == [(200.0, "default/big", "n2")]
