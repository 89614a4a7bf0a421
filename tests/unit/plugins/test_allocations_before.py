"""proportion keeps each queue's allocation as a victim search started by saving a queue's allocation as
it first moves since (not by copying every queue's for every search): on generated queue trees and moves,
what `reclaim_is_fair` reads as the allocations before the search is every queue's as copied then."""

from __future__ import annotations

import random

import pytest

from helpers import node, open_session, pod, queue
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.resources import Resources
from kai_scheduler.plugins.proportion.plugin import ProportionPlugin

LEAVES = ("a0", "a1", "b0", "b1", "c")


def _session(seed: int) -> Session:
    rng = random.Random(seed)
    queues = [queue("a"), queue("b")]
    queues += [queue(leaf, parent=leaf[0] if leaf[0] in "ab" else None) for leaf in LEAVES]
    nodes = [node(f"n{i}", gpus=8) for i in range(4)]
    pods = [
        pod(
            f"p{i}",
            rng.choice(LEAVES),
            gpus=rng.randint(0, 2),
            cpu=str(rng.randint(1, 4)),
            node_name=f"n{rng.randrange(4)}" if rng.random() < 0.6 else None,
        )
        for i in range(30)
    ]
    return open_session([*queues, *nodes, *pods])


def _plugin(session: Session) -> ProportionPlugin:
    owners = (getattr(hook, "__self__", None) for hook in session.points.on_solution_start)
    return next(owner for owner in owners if isinstance(owner, ProportionPlugin))


def _start_search(session: Session) -> dict[str, Resources]:
    for hook in session.points.on_solution_start:
        hook()
    return {q.name: q.allocated.copy() for q in session.snapshot.queues}


def _move(session: Session, rng: random.Random) -> None:
    task = rng.choice(list(session.snapshot.tasks.values()))
    for hook in session.points.on_allocate if rng.random() < 0.5 else session.points.on_deallocate:
        hook(task)


@pytest.mark.parametrize("seed", range(20))
def test_the_allocations_before_a_search_are_those_copied_as_it_started(seed: int) -> None:
    rng = random.Random(seed)
    session = _session(seed)
    plugin = _plugin(session)
    for _ in range(6):  # searches one after another, the allocations moving between and during them
        for _ in range(rng.randint(0, 5)):
            _move(session, rng)
        started = _start_search(session)
        for _ in range(rng.randint(0, 8)):
            _move(session, rng)
            before = plugin._allocations_before()
            for q in session.snapshot.queues:
                assert before.get(q.name, q.allocated) == started[q.name], q.name


def test_verify_mode_raises_when_a_moved_queue_was_not_saved() -> None:
    session = _session(0)
    session.verify_carried = True
    plugin = _plugin(session)
    _start_search(session)
    plugin._allocations_before()  # nothing moved: nothing to differ
    task = next(iter(session.snapshot.tasks.values()))  # every pod asks for CPU
    for hook in session.points.on_allocate:
        hook(task)
    plugin._allocations_before()  # saved as it moved
    assert plugin._before is not None
    plugin._before.clear()
    with pytest.raises(CarriedMismatch):
        plugin._allocations_before()
