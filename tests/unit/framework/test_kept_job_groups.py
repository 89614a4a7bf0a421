"""A kept group holds its jobs in creation order: jobs that share a rank, or come out of order, leave the
groups to be made in full (`_SharedRank`)."""

from __future__ import annotations

import pytest

from kai_scheduler.framework.kept_job_groups import _Group, _SharedRank
from kai_scheduler.model.jobs import JobInfo


def _job(name: str, rank: float) -> JobInfo:
    return JobInfo("ns", name, "q", 0, True, 1, rank)


def test_a_group_in_creation_order_keeps_each_jobs_rank_by_key() -> None:
    group = _Group((_job("a", 1), _job("b", 2.5), _job("c", 7)))
    assert group.ranks == [1, 2.5, 7]
    assert group.rank_of == {"ns/a": 1, "ns/b": 2.5, "ns/c": 7}
    assert _Group(()).jobs == []


@pytest.mark.parametrize(
    "jobs",
    [
        (_job("a", 1), _job("b", 1)),  # a shared rank
        (_job("a", 2), _job("b", 1)),  # out of order
        (_job("a", 1), _job("b", 3), _job("c", 2)),
        (_job("a", 1), _job("a", 2)),  # one key twice
    ],
)
def test_jobs_that_share_a_rank_or_come_out_of_order_are_refused(jobs: tuple[JobInfo, ...]) -> None:
    with pytest.raises(_SharedRank):
        _Group(jobs)
