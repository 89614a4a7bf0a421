"""Proportion's queue order reads of a job its next request, as a number: equal requests one number, kept
per job version (`ProportionPlugin._order_reads`), and checked again in verify mode."""

from __future__ import annotations

import pytest

from helpers import gang, node, open_session, queue, snapshot_of
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.gang import next_request
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.queue_order_memo import CarriedQueueOrder
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.resources import Resources
from kai_scheduler.plugins.proportion.plugin import ProportionPlugin


def _session() -> tuple[Session, dict[str, JobInfo]]:
    objects: list[ApiObject] = [node("n0", gpus=8), queue("q", gpu=8)]
    objects += gang("one-a", size=1, gpus=1) + gang("one-b", size=1, gpus=1) + gang("two", size=1, gpus=2)
    objects += gang("pair", size=2, gpus=1)
    session = open_session(objects)
    return session, {job.name: job for job in session.snapshot.jobs.values()}


def test_jobs_asking_the_same_next_request_read_one_number() -> None:
    session, jobs = _session()
    reads = session.points.queue_order_reads
    assert reads is not None
    assert reads(jobs["one-a"]) == reads(jobs["one-b"])
    assert len({reads(jobs["one-a"]), reads(jobs["two"]), reads(jobs["pair"])}) == 3


def test_a_kept_number_is_read_again_once_the_job_moves_and_checked_in_verify_mode() -> None:
    session, jobs = _session()
    reads = session.points.queue_order_reads
    assert reads is not None
    plugin = getattr(reads, "__self__")  # noqa: B009 (the plugin of a bound method the type does not say)
    assert isinstance(plugin, ProportionPlugin)
    pair = jobs["pair"]
    assert reads(pair) != reads(jobs["one-a"])
    version, smallest, _ = plugin._reads_kept[pair]
    plugin._reads_kept[pair] = (version, smallest, _NO_REQUEST_NUMBER)
    assert reads(pair) == _NO_REQUEST_NUMBER  # kept: not read again while the job stays
    session.verify_carried = True
    with pytest.raises(CarriedMismatch):
        reads(pair)
    session.verify_carried = False
    # One of the gang's pods placed: its next attempt asks one GPU, read again at the job's new version.
    session.statement("allocate").allocate(pair.tasks[0], 0, (), "placed by the test")
    assert pair.version != version
    assert reads(pair) == reads(jobs["one-a"])


_NO_REQUEST_NUMBER = 10**6  # a number no request of these jobs is given


def test_a_leafs_kept_next_request_is_read_again_once_the_job_moves_and_checked_in_verify_mode() -> None:
    """The queue order keeps, per leaf, the next request of the job it ranked the leaf on last, for the
    leaf's ancestors ranked on the same job (`ProportionPlugin._head_requests`)."""
    session, jobs = _session()
    plugin = getattr(session.points.queue_order, "__self__")  # noqa: B009 (as above)
    assert isinstance(plugin, ProportionPlugin)
    q, pair = session.snapshot.queues["q"], jobs["pair"]
    assert plugin.queue_order_key(q, pair) == plugin._queue_order_key(q, Resources(gpu=2))
    wrong = Resources(gpu=5)
    plugin._head_requests["q"] = (pair, pair.version, wrong)
    assert plugin.queue_order_key(q, pair) == plugin._queue_order_key(q, wrong)  # kept while the job stays
    session.verify_carried = True
    with pytest.raises(CarriedMismatch):
        plugin.queue_order_key(q, pair)
    session.verify_carried = False
    # One of the gang's pods placed: its next attempt asks one GPU, read again at the job's new version.
    session.statement("allocate").allocate(pair.tasks[0], 0, (), "placed by the test")
    assert next_request(session, pair).gpu == 1
    assert plugin.queue_order_key(q, pair) == plugin._queue_order_key(q, next_request(session, pair))


def test_the_numbers_read_are_carried_to_the_next_session() -> None:
    """A session hands its reads on (`CarriedQueueOrder`): the next one reads a job it kept without asking
    its request again, and the same request as the same number."""
    objects: list[ApiObject] = [node("n0", gpus=8), queue("q", gpu=8)]
    objects += gang("one", size=1, gpus=1) + gang("two", size=1, gpus=2)
    snapshot = snapshot_of(objects)
    carried = CarriedQueueOrder()
    read: list[dict[str, int]] = []
    for cycle in (1, 2):
        session = Session(snapshot, SchedulerConfig(), cycle=cycle, now=0.0)
        session.queue_orders = carried
        ProportionPlugin({}).on_session_open(session)
        reads = session.points.queue_order_reads
        assert reads is not None
        read.append({job.name: reads(job) for job in snapshot.jobs.values()})
        if cycle == 1:
            job = next(iter(snapshot.jobs.values()))
            version, smallest, _ = carried.reads_kept[job]
            carried.reads_kept[job] = (version, smallest, _NO_REQUEST_NUMBER)
    assert read[1] == {**read[0], next(iter(snapshot.jobs.values())).name: _NO_REQUEST_NUMBER}
