"""consolidation, and consolidating reclaim: pods that move rather than stop.

Reference: kai-reference §4.3 consolidation ("bin-packing by moving running pods. Only for pending
*preemptible* jobs that failed allocate; only *preemptible* victims; victims must be re-placed (pipelined)
on other nodes in the same simulation — any victim that would end up Releasing (i.e. actually stopped)
invalidates the scenario. Requires total idle + releasing GPUs in cluster >= job's GPU request. Max
preemptees per attempt: --max-consolidation-preemptees 16"), §4.3 reclaim ("then try to re-allocate
victims — victims that still fit are kept/pipelined"), §9 (`allow-consolidating-reclaim` true), and the
simulate contract ("A pod that an action moves (consolidation, or a victim that the same scenario
re-places) gets an evict decision followed by a pipeline decision naming its new node";
`maxConsolidationPreemptees`: -1 unlimited, 0 no consolidation; `allowConsolidatingReclaim`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from helpers import (
    config,
    decision_rows,
    evicted,
    node,
    open_session,
    pod,
    pod_group,
    pods_by_name,
    queue,
    run,
    running_job,
    simulate,
)
from kai_scheduler.actions import consolidation, preempt, reclaim
from kai_scheduler.actions.solvers import victim_search
from kai_scheduler.actions.solvers.victim_order import VictimUnit, active_tasks, active_tasks_each
from kai_scheduler.controlplane.unchanged_cycles import VERIFY_ENV
from kai_scheduler.framework.decisions import Decision
from kai_scheduler.framework.gang import next_request
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo

ONLY_CONSOLIDATION = "allocate, consolidation"


def moves(decisions: list[Decision]) -> dict[str, tuple[str, str]]:
    """pod name -> (old node, new node) for pods evicted and pipelined again in the same cycle."""
    out: dict[str, tuple[str, str]] = {}
    evictions = {d.pod: d.node for d in decisions if d.type == "evict"}
    for d in decisions:
        if d.type == "pipeline" and d.pod in evictions:
            out[d.pod.split("/", 1)[1]] = (evictions[d.pod], d.node)
    return out


def two_moves() -> list[Any]:
    """Two 4-GPU nodes, each running two single-GPU pods; a 4-GPU pod fits only if two pods move."""
    return [
        node("a", gpus=4),
        node("b", gpus=4),
        queue("q"),
        pod("p0", gpus=1, node_name="a"),
        pod("p1", gpus=1, node_name="a"),
        pod("p2", gpus=1, node_name="b"),
        pod("p3", gpus=1, node_name="b"),
        pod("big", gpus=4),
    ]


def test_consolidation_moves_pods_and_never_stops_one() -> None:
    result = run(two_moves(), config(actions=ONLY_CONSOLIDATION))
    first = result.cycles[0].decisions
    assert {d.action for d in first} == {"consolidation"}
    assert moves(first) == {"p3": ("b", "a"), "p2": ("b", "a")}
    # Every evicted pod is re-placed in the same cycle, and the pending job is pipelined onto the room.
    assert {d.pod for d in first if d.type == "evict"} <= {d.pod for d in first if d.type == "pipeline"}
    assert [d.node for d in first if d.pod == "default/big"] == ["b"]
    document = simulate(two_moves(), config(actions=ONLY_CONSOLIDATION))
    assert document["summary"]["pods"] == {"Running": 5, "Pending": 0, "Succeeded": 0, "Failed": 0}
    pods = pods_by_name(document)
    assert {name: pods[name]["node"] for name in ("p0", "p1", "p2", "p3", "big")} == {
        "p0": "a",
        "p1": "a",
        "p2": "a",
        "p3": "a",
        "big": "b",
    }


def test_consolidation_decisions_say_who_they_were_for() -> None:
    first = run(two_moves(), config(actions=ONLY_CONSOLIDATION), cycles=1).cycles[0].decisions
    for d in first:
        assert "default/pg-big" in d.reason, d
    assert all("moved to a" in d.reason for d in first if d.type == "pipeline" and d.pod != "default/big")


def test_no_consolidation_when_a_pod_would_have_to_stop() -> None:
    # 3 GPUs are free (1 on a, 2 on b) and big needs 3, but p0 (3 GPUs) does not fit on b and p1
    # (2 GPUs) does not fit on a: making room would stop a pod.
    objects = [
        node("a", gpus=4),
        node("b", gpus=4),
        queue("q"),
        pod("p0", gpus=3, node_name="a"),
        pod("p1", gpus=2, node_name="b"),
        pod("big", gpus=3),
    ]
    result = run(objects, config(actions=ONLY_CONSOLIDATION))
    assert decision_rows(result) == []
    assert result.steady


@pytest.mark.parametrize(
    ("limit", "consolidated"),
    [(0, False), (1, False), (2, True), (-1, True), (None, True)],  # None: the default, 16
)
def test_max_consolidation_preemptees_bounds_the_pods_moved(limit: int | None, consolidated: bool) -> None:
    document = {"actions": ONLY_CONSOLIDATION}
    if limit is not None:
        document["maxConsolidationPreemptees"] = limit
    result = run(two_moves(), config(**document), cycles=1)
    # Both pods of one node move to the other (which node's depends on the jobs considered: at most
    # maxConsolidationPreemptees + 1 of them, as KAI).
    assert sorted(evicted(result)) in ([["p0", "p1"], ["p2", "p3"]] if consolidated else [[]])


def test_zero_max_consolidation_preemptees_turns_consolidation_off() -> None:
    # One move would be enough here.
    objects = [
        node("a", gpus=2),
        node("b", gpus=2),
        queue("q"),
        pod("p0", gpus=1, node_name="a"),
        pod("p1", gpus=1, node_name="b"),
        pod("big", gpus=2),
    ]
    assert decision_rows(run(objects, config(actions=ONLY_CONSOLIDATION, maxConsolidationPreemptees=0))) == []
    assert evicted(run(objects, config(actions=ONLY_CONSOLIDATION, maxConsolidationPreemptees=1))) == ["p1"]


@pytest.mark.parametrize(
    ("pending", "running"), [("build", "train"), ("train", "build"), ("train", "inference")]
)
def test_consolidation_is_only_for_preemptible_jobs_and_only_moves_preemptible_pods(
    pending: str, running: str
) -> None:
    objects = [
        node("a", gpus=2),
        node("b", gpus=2),
        queue("q", gpu=4),
        pod("p0", gpus=1, node_name="a", priority_class=running),
        pod("p1", gpus=1, node_name="b", priority_class=running),
        pod("big", gpus=2, priority_class=pending),
    ]
    assert decision_rows(run(objects, config(actions=ONLY_CONSOLIDATION))) == []


# --- consolidating reclaim ---------------------------------------------------------------------------


def consolidating_reclaim_objects(quota: int = 2) -> list[Any]:
    """Two 4-GPU nodes; a (quota 2) runs a-0..a-2 on n0 and a-3..a-5 on n1 (one GPU free on each);
    b (quota 4) asks for one 4-GPU pod. Fair shares 4 / 4. Consolidation cannot help (2 free < 4). Reclaim
    takes a's newest pods a-5, a-4, a-3 (all on n1) and pipelines b-0 there; of the three, one still fits
    elsewhere (the free GPU on n0)."""
    return [
        node("n0", gpus=4),
        node("n1", gpus=4),
        queue("a", gpu=quota),
        queue("b", gpu=4),
        *[pod(f"a-{i}", "a", gpus=1, node_name="n0") for i in range(3)],
        *[pod(f"a-{i}", "a", gpus=1, node_name="n1") for i in range(3, 6)],
        pod("b-0", "b", gpus=4),
    ]


def test_consolidating_reclaim_moves_a_victim_that_fits_elsewhere() -> None:
    # The victims are placed again in job order (KAI's TryToVirtuallyAllocatePreemptorAndGetVictims):
    # the oldest, a-3, takes n0's free GPU; a-4 and a-5 find no room and stop.
    first = run(consolidating_reclaim_objects(), cycles=1).cycles[0].decisions
    assert [d.pod.split("/")[1] for d in first if d.type == "evict"] == ["a-5", "a-4", "a-3"]
    assert moves(first) == {"a-3": ("n1", "n0")}
    assert [d.node for d in first if d.pod == "default/b-0"] == ["n1"]
    assert {d.action for d in first} == {"reclaim"}
    moved = next(d for d in first if d.type == "pipeline" and d.pod == "default/a-3")
    assert "default/pg-b-0" in moved.reason


def test_without_consolidating_reclaim_moved_victims_count_as_reclaimed() -> None:
    # KAI's allow-consolidating-reclaim: "Do not count pipelined pods towards 'reclaimed' resources".
    # Off, victims are still placed again, but a moved one counts as taken. With a's quota 4 (fair
    # share 4), taking a-3 leaves a at its quota: fair only while the moved a-3 is not counted.
    allowed = run(consolidating_reclaim_objects(quota=4), cycles=1).cycles[0].decisions
    assert moves(allowed) == {"a-3": ("n1", "n0")}
    scheduler_config = config(allowConsolidatingReclaim=False)
    assert run(consolidating_reclaim_objects(quota=4), scheduler_config, cycles=1).cycles[0].decisions == []
    # With a's quota 2 the same scenario is fair either way: the victim moves all the same.
    first = run(consolidating_reclaim_objects(), scheduler_config, cycles=1).cycles[0].decisions
    assert moves(first) == {"a-3": ("n1", "n0")}


def test_consolidating_reclaim_moves_a_gang_whole_or_not_at_all() -> None:
    # n0 runs the gang e (2 pods, minMember 2, the newest job: the first victim); n1 runs x and has one
    # free GPU. b-0 needs 2 GPUs on one node: e's two GPUs on n0. Only one of e's pods fits on n1.
    objects = [
        node("n0", gpus=2),
        node("n1", gpus=2),
        queue("a", gpu=0, gpu_weight=0),
        queue("b", gpu=4),
        pod("x", "a", gpus=1, node_name="n1"),
        *running_job("e", "a", size=2, min_member=2, node_name="n0", gpus=1),
        pod("b-0", "b", gpus=2),
    ]
    first = run(objects, cycles=1).cycles[0].decisions
    assert sorted(d.pod for d in first if d.type == "evict") == ["default/e-0", "default/e-1"]
    assert moves(first) == {}


def test_active_tasks_each_gives_each_jobs_active_pods() -> None:
    """What consolidation indexes its candidates by: each job with its `active_tasks`, in the order given."""
    objects: list[Any] = [node("n0", gpus=8), node("n1", gpus=8), queue("q")]
    objects += running_job("spread", size=2, min_member=1, node_name="n0", gpus=1)
    objects += [pod("alone", "q", gpus=1, node_name="n1"), pod("waiting", "q", gpus=1)]
    session = open_session(objects)
    jobs = list(session.snapshot.jobs.values())[::-1]
    each = list(active_tasks_each(session, jobs))
    assert [job for job, _ in each] == jobs
    assert [active for _, active in each] == [active_tasks(session, job) for job in jobs]
    assert sorted(len(active) for _, active in each) == [0, 1, 2]


def test_a_bare_pods_job_has_its_active_pods_read_from_its_pod() -> None:
    """A bare pod's plain job (`JobInfo.lone_task`) is its one pod: active or not by its status, read as it
    stands rather than kept by the job's version (consolidation indexes thousands of them in a first
    cycle); a job of more pods has them kept."""
    objects: list[Any] = [node("n0", gpus=8), queue("q")]
    objects += running_job("spread", size=2, min_member=1, node_name="n0", gpus=1)
    objects += [pod("alone", "q", gpus=1, node_name="n0"), pod("waiting", "q", gpus=1)]
    session = open_session(objects)
    jobs = {job.tasks[0].name.split("-")[0]: job for job in session.snapshot.jobs.values()}
    alone, waiting, spread = jobs["alone"], jobs["waiting"], jobs["spread"]
    assert alone.lone_task is not None and waiting.lone_task is not None
    assert active_tasks(session, alone) == alone.tasks and active_tasks(session, waiting) == []
    assert len(active_tasks(session, spread)) == 2
    assert list(session.scratch["victims.active"]) == [spread]


def limited_queue_waits() -> list[Any]:
    """Two 4-GPU nodes half taken by single-GPU pods of queue r; two 2-GPU pods of queue q (limited to one
    GPU), unlike in CPU: each is searched for in turn, and every scenario fails at q's limit."""
    objects: list[Any] = [node("a", gpus=4), node("b", gpus=4), queue("r"), queue("q", gpu_limit=1)]
    objects += [pod(f"p{i}", "r", gpus=1, node_name="ab"[i // 2]) for i in range(4)]
    return [*objects, pod("big1", gpus=2, cpu="1"), pod("big2", gpus=2, cpu="2")]


@pytest.mark.parametrize("verify", [False, True])
def test_attempts_alike_in_reach_share_one_victim_order(
    monkeypatch: pytest.MonkeyPatch, verify: bool
) -> None:
    """Preemptors that may use the same nodes take the victims the same order hands out, ordered once until
    a commit (`Consolidation._shared_order`): each search takes every victim, the second from the first's
    order. With `KAI_SCHEDULER_VERIFY_REUSE` each attempt's order is worked out again too, to check it."""
    if verify:
        monkeypatch.setenv(VERIFY_ENV, "1")
    else:
        monkeypatch.delenv(VERIFY_ENV, raising=False)
    ordered: list[str] = []
    taken: list[list[str]] = []
    order = consolidation.order_victims
    search = victim_search._search

    def counted(session: Session, action: str, preemptor: JobInfo, *rest: Any) -> Iterator[VictimUnit]:
        ordered.append(preemptor.name)
        return order(session, action, preemptor, *rest)

    def recorded(session: Session, scenario: Any, victims: Iterable[VictimUnit], *rest: Any) -> Any:
        units = list(victims)
        taken.append([task.name for unit in units for task in unit.tasks])
        return search(session, scenario, units, *rest)

    monkeypatch.setattr(consolidation, "order_victims", counted)
    monkeypatch.setattr(victim_search, "_search", recorded)
    result = run(limited_queue_waits(), config(actions=ONLY_CONSOLIDATION), cycles=1)
    assert decision_rows(result) == []
    assert ordered == (["pg-big1", "pg-big1", "pg-big2"] if verify else ["pg-big1"])
    assert len(taken) == 2 and taken[0] == taken[1] and sorted(taken[0]) == ["p0", "p1", "p2", "p3"]


def test_a_shared_order_is_checked_against_the_order_worked_out_again() -> None:
    """With `KAI_SCHEDULER_VERIFY_REUSE` each unit of a shared order is compared with the order worked out
    for the preemptor: a different unit, or one order ending before the other, is a CarriedMismatch."""
    session = open_session(limited_queue_waits())
    jobs = {job.name: job for job in session.snapshot.jobs.values()}
    units = [VictimUnit(jobs[f"pg-p{i}"], list(jobs[f"pg-p{i}"].tasks), 1.0) for i in range(3)]
    assert list(consolidation._checked(units, iter(list(units)))) == units
    for fresh in (units[:2], [units[0], units[2], units[1]], [*units, units[0]]):
        with pytest.raises(CarriedMismatch):
            list(consolidation._checked(units, iter(fresh)))


def test_a_preemptible_job_is_blocked_only_when_the_free_gpus_fall_short_and_it_asks_no_mig_instance() -> (
    None
):
    """Consolidation passes over a job (`blocked`) that is not preemptible, or that asks more GPUs than the
    cluster has free and no MIG instance (moving pods cannot make GPUs that do not exist; MIG instances
    are not counted among the free GPUs). An extended resource that is not a MIG instance changes
    nothing. Node a has one GPU free."""
    objects = [
        node("a", gpus=4),
        node("m", gpus=0, extra={"nvidia.com/mig-3g.40gb": 2}),
        queue("q"),
        pod("busy", gpus=3, node_name="a"),
        pod("one", gpus=1),
        pod("two", gpus=2),
        pod("two-nics", gpus=2, extra_requests={"example.com/nic": 1}),
        pod("mig", extra_requests={"nvidia.com/mig-3g.40gb": 2}),
        pod("build", gpus=1, priority_class="build"),
    ]
    session = open_session(objects)
    action = consolidation.Consolidation()
    blocked = {
        job.name.removeprefix("pg-"): action.blocked(session, job)
        for job in session.snapshot.jobs.values()
        if job.name != "pg-busy"
    }
    assert next_request(session, job_named(session, "pg-mig")).gpu > 1  # (more than the free GPU)
    assert blocked == {"one": False, "two": True, "two-nics": True, "mig": False, "build": True}


def test_a_bare_pods_ask_is_kept_by_its_request_and_checked_when_verifying() -> None:
    """What a bare pod's plain job asks (its GPUs, and whether a MIG instance) is worked out once per
    request for the session: two pods asking alike share it, and `blocked` answers from it (a tampered
    one changes the answer); with `verify_carried` a kept ask unlike the job's raises `CarriedMismatch`.
    Node a has one GPU free."""
    objects = [
        node("a", gpus=4),
        queue("q"),
        pod("busy", gpus=3, node_name="a"),
        pod("two-a", gpus=2),
        pod("two-b", gpus=2),
        pod("one", gpus=1),
        pod("mig", extra_requests={"nvidia.com/mig-3g.40gb": 2}),
    ]
    session = open_session(objects)
    action = consolidation.Consolidation()
    names = ["two-a", "two-b", "one", "mig"]
    jobs = {name: job_named(session, f"pg-{name}") for name in names}
    assert [action.blocked(session, jobs[name]) for name in names] == [True, True, False, False]
    assert len(action._asks) == 3
    two = jobs["two-a"].lone_task
    assert two is not None
    assert action._asks[two.request] == (2.0, False)
    action._asks[two.request] = (1.0, False)
    assert not action.blocked(session, jobs["two-b"])  # (the kept ask answers)
    session.verify_carried = True
    with pytest.raises(CarriedMismatch):
        action.blocked(session, jobs["two-b"])


def test_blocked_reads_what_a_jobs_next_pods_ask_only_where_it_decides() -> None:
    """Preempt's `blocked` (a quota check of the job's kept pods) never reads what the job's next pods ask
    (`next_request`), nor consolidation's for a job that is not preemptible: such a job's request is not
    worked out (not kept in `Session.next_requests`); reclaim's and consolidation's for a preemptible job
    are."""
    objects = [
        node("a", gpus=4),
        queue("q"),
        pod("busy", gpus=3, node_name="a"),
        pod_group("two", min_member=2),
        *(pod(f"two-{i}", group="two", gpus=1) for i in range(2)),
        pod_group("build", min_member=2, priority_class="build"),
        *(pod(f"build-{i}", group="build", gpus=1, priority_class="build") for i in range(2)),
    ]
    session = open_session(objects)
    two, build = job_named(session, "two"), job_named(session, "build")
    assert two.lone_task is None and build.lone_task is None  # (a job of one pod's request is never kept)
    assert two.preemptible and not build.preemptible
    assert not preempt.Preempt().blocked(session, two)
    assert consolidation.Consolidation().blocked(session, build)
    assert session.next_requests == {}
    assert consolidation.Consolidation().blocked(session, two)
    assert list(session.next_requests) == [two]
    reclaim.Reclaim().blocked(session, build)  # (its eligibility checks read the request, whatever they say)
    assert list(session.next_requests) == [two, build]


def job_named(session: Session, name: str) -> JobInfo:
    return next(job for job in session.snapshot.jobs.values() if job.name == name)
