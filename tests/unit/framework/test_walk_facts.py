"""Allocate's per-job facts kept across cycles (`framework.walk_facts`, issue #23 point 1): a job's key and
its signatures' numbers, kept while its version and the signature reads' names stay, made again when
either moves, and with the debug variable set worked out again whenever they are read."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from helpers import node, open_session, pod, queue
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.controlplane.unchanged_cycles import VERIFY_ENV
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.gang import scheduling_signature, tasks_to_allocate
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.walk_facts import WalkFacts
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.sim.engine import Simulation, SimulationOptions

START = datetime(2026, 1, 1, tzinfo=UTC)


def _session() -> Session:
    objects: list[ApiObject] = [node("n0", gpus=8), queue("a"), queue("b")]
    objects += [pod("a-0", "a", gpus=1), pod("a-1", "a", gpus=1), pod("a-2", "a", gpus=2)]
    objects += [pod("b-0", "b", gpus=1)]
    return open_session(objects)


def _job(session: Session, name: str) -> JobInfo:
    (job,) = [job for job in session.snapshot.jobs.values() if job.tasks[0].name == name]
    return job


def test_jobs_alike_share_their_signatures_numbers() -> None:
    session = _session()
    facts = WalkFacts()
    names = facts.start(session)
    a0, a1, a2, b0 = (facts.of(session, _job(session, name), names) for name in ("a-0", "a-1", "a-2", "b-0"))
    assert a0.signature == a1.signature != a2.signature
    assert a0.signature != b0.signature  # another queue
    assert a0.shape == a1.shape == b0.shape != a2.shape  # the shape leaves the queue out
    assert a0.key == _job(session, "a-0").key


def test_a_jobs_facts_are_made_again_when_its_pods_change() -> None:
    session = _session()
    facts = WalkFacts()
    names = facts.start(session)
    job, alike = _job(session, "a-0"), _job(session, "a-1")
    kept = facts.of(session, job, names)
    assert facts.of(session, job, names) is kept
    job.tasks[0].nominated_node = 0  # nominated to n0: its pods are not alike any more
    job.version += 1
    again = facts.of(session, job, names)
    assert again.signature != kept.signature
    assert again.signature != facts.of(session, alike, names).signature


def test_facts_made_replace_the_kept_ones_alike() -> None:
    session = _session()
    facts = WalkFacts()
    names = facts.start(session)
    job = _job(session, "a-0")
    kept = facts.of(session, job, names)
    made = facts.made(session, job, names)
    assert made is not kept and facts.of(session, job, names) is made
    assert (made.version, made.key, made.signature, made.shape) == (
        kept.version,
        kept.key,
        kept.signature,
        kept.shape,
    )


def test_facts_kept_for_other_signature_reads_are_made_again() -> None:
    session = _session()
    facts = WalkFacts()
    names = facts.start(session)
    job, alike = _job(session, "a-0"), _job(session, "a-1")
    assert facts.of(session, job, names).signature == facts.of(session, alike, names).signature

    def which(task: TaskInfo) -> str:
        return task.name  # a node filter that reads each pod's name: no two pods alike

    session.points.signature_reads = [("which", which)]
    names = facts.start(session)
    made = facts.of(session, job, names)
    assert made.signature != facts.of(session, alike, names).signature
    tasks, reads = tasks_to_allocate(session, job), session.points.signature_reads
    shape = facts._ids[scheduling_signature(job, tasks, by_queue=False, reads=reads)]
    signature = facts._ids[(job.queue, job.preemptible, job.priority, shape)]
    assert (made.signature, made.shape) == (signature, shape)


def test_verify_mode_checks_the_kept_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the debug variable set a kept fact that differs from the one worked out again raises."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    objects: list[ApiObject] = [node("n0", gpus=1), queue("a")]
    objects += [pod("a-0", "a", gpus=1, node_name="n0"), pod("a-1", "a", gpus=1)]
    simulation = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=2))
    simulation._cycle(0.0, 1)
    kept = simulation.driver.scheduler.memos.walk_facts.by_job
    (facts,) = [facts for job, facts in kept.items() if job.tasks[0].name == "a-1"]
    facts.shape += 1  # another shape's number, it says
    simulation.cluster.cache.set_nodes([node("n0", gpus=1, labels={"zone": "z1"})])
    with pytest.raises(CarriedMismatch, match="allocate's facts of it kept at version"):
        simulation._cycle(10.0, 2)


def test_a_leafs_order_is_kept_for_the_same_keys_only() -> None:
    facts = WalkFacts()
    keys = [(2, "b"), (1, "a"), (3, "c")]
    assert facts.sorting("q", keys, keep=True, verify=False) == [1, 0, 2]
    assert facts.sorting("q", list(keys), keep=True, verify=False) == [1, 0, 2]
    # One job's key moved (its pods changed): the leaf is sorted again.
    moved = [(2, "b"), (1, "a"), (0, "c")]
    assert facts.sorting("q", moved, keep=True, verify=False) == [2, 1, 0]
    # Another leaf, or an order not kept, is sorted on its own.
    assert facts.sorting("r", keys, keep=False, verify=False) == [1, 0, 2]
    assert facts.sorting("r", moved, keep=False, verify=False) == [2, 1, 0]


def test_verify_mode_checks_a_kept_order() -> None:
    facts = WalkFacts()
    keys = [(2, "b"), (1, "a"), (3, "c")]
    facts.sorting("q", keys, keep=True, verify=False).reverse()  # the kept positions, out of order
    with pytest.raises(CarriedMismatch, match="queue q: its jobs' order kept from the last cycle"):
        facts.sorting("q", keys, keep=True, verify=True)
