"""Allocate's walk written without walking (`actions.walk_replay`, issue #23 point 1): on a full cluster
whose waiting jobs all found no node, a cycle after a change that frees nothing writes every job's reason
as the walk would, without handing the jobs out; a change that may give a job room is walked.

Each scenario runs twice on the same clock: as the scheduler runs (carrying what it may) and evaluating
every cycle from scratch; the decisions and reasons must be the same both ways.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from helpers import node, pod, pod_group, queue
from kai_scheduler.actions import allocate, walk_replay
from kai_scheduler.actions.allocate import _Walk
from kai_scheduler.api.objects import ApiObject, Node
from kai_scheduler.controlplane.unchanged_cycles import VERIFY_ENV
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.sim.engine import Simulation, SimulationOptions

START = datetime(2026, 1, 1, tzinfo=UTC)


def full_cluster() -> list[ApiObject]:
    """Three full 4-GPU nodes (n2 in another zone) and waiting jobs in two queues: pods of one shape in
    both queues (the second queue's are worded as their own attempt), two of one shape in one queue
    (the second quotes the first), a pod only zone b may take, a gang, and a job over its queue's limit."""
    objects: list[ApiObject] = [
        node("n0", gpus=4, labels={"zone": "a"}),
        node("n1", gpus=4, labels={"zone": "a"}),
        node("n2", gpus=4, labels={"zone": "b"}),
        queue("a", gpu_limit=14),
        queue("b"),
    ]
    for i, name in enumerate(("n0", "n1", "n2")):
        objects.append(pod(f"run-{i}", "a", gpus=4, node_name=name, duration=30 if i == 0 else None))
    objects += [
        pod("one-a", "a", gpus=1),
        pod("one-b", "b", gpus=1),
        pod("two-b", "b", gpus=2),
        pod("two-b-again", "b", gpus=2),
        pod("zone-b", "b", gpus=1, node_selector={"zone": "b"}),
        pod("over-limit", "a", gpus=3),
        pod_group("gang", "b", min_member=2),
        *(pod(f"gang-{i}", "b", gpus=2, group="gang") for i in range(2)),
    ]
    return objects


def run_cycles(objects: list[ApiObject], changes: dict[int, Any], *, carry: bool) -> list[tuple[Any, ...]]:
    """Every cycle's decisions and reasons (cycles 10 s apart); `changes` by cycle number: the nodes to
    hand the cache before it."""
    sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=len(changes) + 1))
    sim.driver.reuse = carry
    sim.driver.scheduler.memos.carry = carry
    seen = []
    for number in range(1, len(changes) + 2):
        if number in changes:
            sim.cluster.cache.set_nodes(changes[number])
        _, result = sim._cycle(10.0 * (number - 1), number)
        decisions = [(d.type, d.pod, d.node) for d in result.decisions]
        seen.append((number, decisions, dict(result.unschedulable)))
    return seen


def walks_written(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each allocate written without walking (with the debug variable set, walked as well): its cycle
    and how many reasons it wrote."""
    written: list[tuple[int, int]] = []
    original = _Walk.replayed

    def replayed(self: _Walk, jobs: list[JobInfo]) -> list[dict[str, str]] | None:
        reasons = original(self, jobs)
        if reasons is not None:
            written.append((self.session.cycle, sum(len(leaf) for leaf in reasons)))
        return reasons

    monkeypatch.setattr(_Walk, "replayed", replayed)
    return written


def nodes_of(objects: list[ApiObject]) -> list[Node]:
    return [o for o in objects if isinstance(o, Node)]


def cordoned(nodes: list[Node], name: str) -> list[Node]:
    return [
        n.model_copy(update={"spec": n.spec.model_copy(update={"unschedulable": True})})
        if n.metadata.name == name
        else n
        for n in nodes
    ]


def test_a_cordon_is_written_without_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a node is cordoned nothing may fit: the cycle writes every reason without walking, each as a
    full evaluation words it; the cordon shows in each explanation."""
    objects = full_cluster()
    written = walks_written(monkeypatch)
    changes = {2: cordoned(nodes_of(objects), "n1")}
    ours = run_cycles(objects, changes, carry=True)
    assert written == [(1, 7), (2, 7)]  # (no job may fit from the first: it is not walked either)
    assert ours == run_cycles(objects, changes, carry=False)
    reasons = ours[1][2]
    assert "1 node(s) were unschedulable" in reasons["default/pg-one-a"]
    # The job of queue b shaped like queue a's is worded as its own attempt would be, not after a's.
    assert reasons["default/pg-one-b"].startswith("pod one-b does not fit: 0/3 nodes are available")
    assert reasons["default/pg-two-b-again"].startswith("a job of the same shape, default/pg-two-b,")
    assert reasons["default/gang"].startswith("gang of 2 pods: 0 placed, then pod gang-0 does not fit")
    assert reasons["default/pg-over-limit"].startswith("OverLimit")


def test_a_freed_node_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """n2 is cordoned, then uncordoned (full, it takes no pod): those cycles are written without walking.
    The pod on n0 ends at 30 s: that cycle is walked, and places the jobs that fit, as a full evaluation
    does."""
    objects = full_cluster()
    written = walks_written(monkeypatch)
    nodes = nodes_of(objects)
    changes = {2: cordoned(nodes, "n2"), 3: nodes, 4: nodes}
    ours = run_cycles(objects, changes, carry=True)
    assert ours == run_cycles(objects, changes, carry=False)
    assert [number for number, decisions, _ in ours if decisions] == [4]
    assert [cycle for cycle, _ in written] == [1, 2, 3]


def test_a_new_job_is_written_with_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that arrives, of a shape no node may take, is written with the others, in its own words."""
    objects = [*full_cluster(), pod("late", "b", gpus=1, cpu="2", arrival=15)]
    written = walks_written(monkeypatch)
    nodes = nodes_of(objects)
    changes = {2: nodes, 3: nodes}
    ours = run_cycles(objects, changes, carry=True)
    assert ours == run_cycles(objects, changes, carry=False)
    # (Cycle 2 changes nothing: its result is the first's, or with the debug variable set, written again.)
    assert written[0] == (1, 7) and written[-1] == (3, 8)
    assert ours[2][2]["default/pg-late"].startswith("pod late does not fit: 0/3 nodes are available")


def test_verify_mode_walks_as_well(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the debug variable set the walk is made as well and must write the same: a reason worked out
    without walking that differs (here: made up) raises CarriedMismatch."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    objects = full_cluster()
    changes = {2: cordoned(nodes_of(objects), "n1")}
    assert run_cycles(objects, changes, carry=True) == run_cycles(objects, changes, carry=False)
    original = walk_replay.reasons

    def reasons(*args: Any) -> list[dict[str, str]] | None:
        written = original(*args)
        return None if written is None else [dict.fromkeys(leaf, "made up") for leaf in written]

    monkeypatch.setattr(walk_replay, "reasons", reasons)
    with pytest.raises(CarriedMismatch, match="without walking"):
        run_cycles(objects, changes, carry=True)


def test_pod_answers_are_kept_while_what_they_read_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pre-predicates are asked of each waiting pod once while what they read of the session stays
    (`Session.pod_answers_key`): the second cordon's writing asks none; the reasons are a full
    evaluation's all the same."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)  # (which makes the walk as well, asking each pod again)
    asked: list[int] = []
    original = Session.pre_predicate_failure

    def pre_predicate_failure(self: Session, task: TaskInfo) -> str | None:
        asked.append(self.cycle)
        return original(self, task)

    monkeypatch.setattr(Session, "pre_predicate_failure", pre_predicate_failure)
    objects = full_cluster()
    nodes = nodes_of(objects)
    changes = {2: cordoned(nodes, "n1"), 3: cordoned(cordoned(nodes, "n1"), "n2")}
    ours = run_cycles(objects, changes, carry=True)
    assert asked.count(1) > 0 and asked.count(2) == asked.count(3) == 0
    assert ours == run_cycles(objects, changes, carry=False)


def one_gpu_freed() -> list[ApiObject]:
    """Three full 4-GPU nodes, a 1-GPU pod on n0 ending at 30 s, and waiting jobs in queues a and b
    (each queue's in the order written): 2-GPU and 1-GPU jobs in both, 3-GPU ones, and a gang."""
    objects: list[ApiObject] = [
        *(node(f"n{i}", gpus=4) for i in range(3)),
        queue("a"),
        queue("b"),
        queue("c"),
        pod("ends", "c", gpus=1, node_name="n0", duration=30),
        pod("stays-0", "c", gpus=3, node_name="n0"),
        *(pod(f"stays-{i}", "c", gpus=4, node_name=f"n{i}") for i in (1, 2)),
    ]
    shapes = [("two", 2), ("one", 1), ("two", 2), ("three", 3), ("one", 1), ("two", 2), ("three", 3)]
    for name in ("a", "b"):
        for i, (shape, gpus) in enumerate(shapes):
            objects.append(pod(f"{name}-{shape}-{i}", name, gpus=gpus, created=f"2026-01-01T00:00:{i:02d}Z"))
    objects += [
        pod_group("gang", "b", min_member=2),
        *(pod(f"gang-{i}", "b", gpus=2, group="gang", created="2026-01-01T00:00:30Z") for i in range(2)),
    ]
    return objects


def tails_written(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each rest of a walk written without walking it: its cycle and how many reasons it wrote."""
    written: list[tuple[int, int]] = []
    original = walk_replay.tail_reasons

    def tail_reasons(session: Session, *args: Any) -> list[dict[str, str]] | None:
        reasons = original(session, *args)
        if reasons is not None:
            written.append((session.cycle, sum(len(leaf) for leaf in reasons)))
        return reasons

    monkeypatch.setattr(walk_replay, "tail_reasons", tail_reasons)
    return written


def test_the_rest_of_a_walk_after_a_pod_is_placed_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU freed at 30 s: the walk places a 1-GPU job there, and once a few jobs in a row placed
    nothing, the rest of it is written without walking, as a full evaluation writes it: a job alike one
    handed out before of its queue quotes it, one shaped like an attempt of another queue made before the
    job placed quotes that one."""
    monkeypatch.setattr(allocate, "_CALM_POPS", 2)
    objects = one_gpu_freed()
    written = tails_written(monkeypatch)
    nodes = nodes_of(objects)
    changes = {2: nodes, 3: nodes, 4: nodes}
    ours = run_cycles(objects, changes, carry=True)
    assert ours == run_cycles(objects, changes, carry=False)
    # (15 waiting jobs: 2-GPU a-two-0 tried first, then a-one-1 placed, then 2 that place nothing.)
    assert written == [(4, 11)]
    assert ours[3][1] == [("bind", "default/a-one-1", "n0")]
    reasons = ours[3][2]
    assert reasons["default/pg-b-two-0"].startswith("a job of the same shape, default/pg-a-two-0,")
    assert reasons["default/pg-a-two-5"].startswith("a job of the same shape, default/pg-a-two-0,")


def test_verify_mode_walks_the_rest_as_well(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the debug variable set the rest of the walk is made as well and must write the same: a
    reason worked out without walking that differs (here: made up) raises CarriedMismatch."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    monkeypatch.setattr(allocate, "_CALM_POPS", 2)
    objects = one_gpu_freed()
    nodes = nodes_of(objects)
    changes = {2: nodes, 3: nodes, 4: nodes}
    assert run_cycles(objects, changes, carry=True) == run_cycles(objects, changes, carry=False)
    original = walk_replay.tail_reasons

    def tail_reasons(*args: Any) -> list[dict[str, str]] | None:
        written = original(*args)
        return None if written is None else [dict.fromkeys(leaf, "made up") for leaf in written]

    monkeypatch.setattr(walk_replay, "tail_reasons", tail_reasons)
    with pytest.raises(CarriedMismatch, match="without walking"):
        run_cycles(objects, changes, carry=True)
