"""What a step of the accumulated victim search (`victim_search._search`) asks again, and what it keeps
from the step before: the preemptor's capacity refusal while what the checks read stays
(`_PreemptorCapacity`), the whole-GPU slots counted again only at the nodes that changed
(`_WholeGpuSlots`), and the victim order ranking only the queues with a candidate below them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from helpers import config, node, open_session, pod, pod_group, queue, snapshot_of
from kai_scheduler.actions.solvers import victim_order, victim_scenarios, victim_search
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.resources import EPSILON, PodRequest


def at_its_limit() -> list[Any]:
    """Two 4-GPU nodes half taken by single-GPU pods of queue r; two 2-GPU pods of queue q (limited to one
    GPU), unlike in CPU: each is searched for in turn, and every scenario fails at q's limit."""
    objects: list[Any] = [node("a", gpus=4), node("b", gpus=4), queue("r"), queue("q", gpu_limit=1)]
    objects += [pod(f"p{i}", "r", gpus=1, node_name="ab"[i // 2]) for i in range(4)]
    return [*objects, pod("big1", gpus=2, cpu="1"), pod("big2", gpus=2, cpu="2")]


def first_cycle(objects: list[Any], actions: str, *, verify: bool = False) -> SessionResult:
    """One cycle of `actions` (with `verify`: as in the verify mode, `KAI_SCHEDULER_VERIFY_REUSE`)."""
    scheduler = Scheduler(config(actions=actions))
    scheduler.memos.verify = verify
    return scheduler.run(snapshot_of(objects), cycle=1, now=0.0)


def capacity_checks_by_search(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each search's count of `Session.check_job_capacity` calls made for its steps (not those of the
    scenarios it simulates, which place every job again), a count per search in the order they ran."""
    counts: list[int] = []
    counting = [False]
    check = Session.check_job_capacity
    search, simulate = victim_search._search, victim_search.simulate

    def counted(self: Session, job: JobInfo, request: Any) -> str | None:
        if counting[0]:
            counts[-1] += 1
        return check(self, job, request)

    def searched(*args: Any) -> Any:
        counts.append(0)
        counting[0] = True
        try:
            return search(*args)
        finally:
            counting[0] = False

    def simulated(*args: Any) -> Any:
        counting[0] = False
        try:
            return simulate(*args)
        finally:
            counting[0] = True

    monkeypatch.setattr(Session, "check_job_capacity", counted)
    monkeypatch.setattr(victim_search, "_search", searched)
    monkeypatch.setattr(victim_search, "simulate", simulated)
    return counts


@pytest.mark.parametrize("verify", [False, True])
def test_a_preemptor_its_queue_refuses_is_checked_once_a_search(
    monkeypatch: pytest.MonkeyPatch, verify: bool
) -> None:
    """Every step of a search of a preemptor whose queue is at its limit evicts a victim of another queue:
    what the capacity checks read stays, so the refusal is asked once a search (with
    `KAI_SCHEDULER_VERIFY_REUSE`, asked again at every step it is kept, to check it)."""
    counts = capacity_checks_by_search(monkeypatch)
    result = first_cycle(at_its_limit(), "allocate, consolidation", verify=verify)
    assert result.decisions == []
    # Two searches of four steps (a victim each), every step's scenario past the cheap filters.
    assert result.counts["consolidation"].scenarios_simulated == 8
    assert counts == ([4, 4] if verify else [1, 1])


def gang_over_its_limit() -> list[Any]:
    """Queue q (limited to 2 GPUs) runs two single-GPU train pods; a build gang of two single-GPU pods of q
    waits: the 4-GPU node has room, the queue's limit only once both train pods are gone."""
    return [
        node("a", gpus=4),
        queue("q", gpu_limit=2),
        pod("t0", gpus=1, node_name="a", priority_class="train"),
        pod("t1", gpus=1, node_name="a", priority_class="train"),
        pod_group("g", "q", min_member=2, priority_class="build"),
        *[pod(f"g-{i}", gpus=1, group="g", priority_class="build") for i in range(2)],
    ]


def test_a_refusal_is_asked_again_once_a_victim_of_the_preemptors_queue_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A victim of the preemptor's own queue moves what the capacity checks read: the refusal of the first
    step is not kept for the second, whose victims leave room within the limit."""
    counts = capacity_checks_by_search(monkeypatch)
    result = first_cycle(gang_over_its_limit(), "allocate, preempt")
    rows = [(d.type, d.pod.split("/")[1]) for d in result.decisions]
    assert sorted(rows) == [("evict", "t0"), ("evict", "t1"), ("pipeline", "g-0"), ("pipeline", "g-1")]
    assert result.counts["preempt"].scenarios_simulated == 2
    assert counts == [2]


def test_the_verify_mode_catches_a_kept_refusal_the_check_no_longer_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = open_session(at_its_limit())
    session.verify_carried = True
    preemptor = next(job for job in session.snapshot.jobs.values() if job.name == "pg-big1")
    capacity = victim_search._PreemptorCapacity(session, preemptor, list(preemptor.tasks))
    assert capacity.refuses()
    monkeypatch.setattr(Session, "check_job_capacity", lambda self, job, request: None)
    with pytest.raises(CarriedMismatch):
        capacity.refuses()


def slots_counted_afresh(session: Session, smallest: float) -> float:
    nodes = session.snapshot.nodes
    return float(np.floor((nodes.free_gpus + nodes.rel_gpus + EPSILON) / smallest).sum())


def test_whole_gpu_slots_are_counted_again_at_the_nodes_changed_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first count, each answer counts again only the nodes whose usage changed since, and gives
    what counting every node gives (here: a 2-GPU pod's slots as single-GPU pods are evicted)."""
    session = open_session(at_its_limit())
    jobs = {job.name: job for job in session.snapshot.jobs.values()}
    slots = victim_search._WholeGpuSlots(session, list(jobs["pg-big1"].tasks))
    every: list[int] = []
    counted = victim_search._WholeGpuSlots._counted

    def spied(self: Any, nodes: Any) -> Any:
        every.append(1)
        return counted(self, nodes)

    monkeypatch.setattr(victim_search._WholeGpuSlots, "_counted", spied)
    statement = session.statement("consolidation", "")
    answers = [slots.enough()]
    totals = [slots._total]
    for name in ("pg-p0", "pg-p2", "pg-p1"):
        statement.evict(jobs[name].tasks[0], "test")
        answers.append(slots.enough())
        totals.append(slots._total)
        assert slots._total == slots_counted_afresh(session, 2.0)
    assert len(every) == 1
    assert totals == [2.0, 2.0, 2.0, 3.0] and answers == [True] * 4
    statement.discard()
    assert slots.enough() and slots._total == 2.0 == slots_counted_afresh(session, 2.0)


def test_whole_gpu_slots_count_every_node_once_the_change_log_is_out_of_reach() -> None:
    session = open_session(at_its_limit())
    jobs = {job.name: job for job in session.snapshot.jobs.values()}
    slots = victim_search._WholeGpuSlots(session, list(jobs["pg-big1"].tasks))
    assert slots.enough()
    statement = session.statement("consolidation", "")
    statement.evict(jobs["pg-p0"].tasks[0], "test")
    statement.evict(jobs["pg-p1"].tasks[0], "test")
    slots._seen = -1  # as if the log had been started afresh since (`NodeTable.changed_since`: None)
    assert slots.enough() and slots._total == 3.0 == slots_counted_afresh(session, 2.0)


def test_the_verify_mode_catches_slots_counted_wrong_at_the_nodes_changed() -> None:
    session = open_session(at_its_limit())
    session.verify_carried = True
    jobs = {job.name: job for job in session.snapshot.jobs.values()}
    slots = victim_search._WholeGpuSlots(session, list(jobs["pg-big1"].tasks))
    assert slots.enough()
    assert slots._slots is not None
    slots._slots[0] += 1.0  # node a's count off by one (as a wrong update would leave it): so is the total
    session.statement("consolidation", "").evict(jobs["pg-p0"].tasks[0], "test")
    with pytest.raises(CarriedMismatch):
        slots.enough()


def test_the_victim_order_ranks_only_the_queues_with_a_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Of departments d and e with two leaves each, only d's leaf x runs anything: the order ranks x and d,
    keeps only their allocations, and hands out x's jobs in victim order all the same."""
    objects: list[Any] = [
        node("n", gpus=4),
        queue("d"),
        queue("e"),
        queue("x", parent="d"),
        queue("y", parent="d"),
        queue("z", parent="e"),
        queue("w", parent="e"),
        pod("x0", "x", gpus=1, node_name="n", priority_class="train"),
        pod("x1", "x", gpus=1, node_name="n", priority_class="build"),
        pod("big", "z", gpus=4),
    ]
    session = open_session(objects)
    jobs = {job.name: job for job in session.snapshot.jobs.values()}
    orders: list[Any] = []
    made = victim_order._VictimOrder.__init__

    def kept(self: Any, *args: Any) -> None:
        made(self, *args)
        orders.append(self)

    monkeypatch.setattr(victim_order._VictimOrder, "__init__", kept)
    preemptor = jobs["pg-big"]
    candidates = [jobs["pg-x0"], jobs["pg-x1"]]
    units: Iterator[Any] = victim_order.order_victims(
        session, "consolidation", preemptor, list(preemptor.tasks), candidates
    )
    assert [unit.job.name for unit in units] == ["pg-x0", "pg-x1"]
    (order,) = orders
    assert order.live == {"d", "x"} and order.live_roots == ["d"]
    assert set(order.allocated) == set(order.taken) == {"d", "x"}
    assert set(order.ranks) <= {"d", "x"}


def test_a_units_gpus_are_worked_out_once_for_every_search_that_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The two searches of `at_its_limit` take the same four units from one shared order: each unit's GPUs
    are worked out as the order hands it out, not again at each search's step."""
    asked: list[list[str]] = []
    request_of = victim_order.request_of

    def counted(session: Session, tasks: list[Any]) -> Any:
        asked.append([task.name for task in tasks])
        return request_of(session, tasks)

    monkeypatch.setattr(victim_order, "request_of", counted)
    result = first_cycle(at_its_limit(), "allocate, consolidation")
    assert result.counts["consolidation"].scenarios_simulated == 8
    assert sorted(asked) == [["p0"], ["p1"], ["p2"], ["p3"]]


def where_it_lands(
    session: Session, name: str, *, evicted: tuple[str, ...] = ()
) -> tuple[Any, Any, list[int]]:
    """The scenario of job `name`'s pods with the pods of `evicted` (jobs' names) evicted on a statement, the
    statement, and every placement the session makes from then on (by node: `Session.place` spied on)."""
    jobs = {job.name: job for job in session.snapshot.jobs.values()}
    statement = session.statement("reclaim", "")
    for victim in evicted:
        statement.evict(jobs[victim].tasks[0], "test")
    preemptor = jobs[name]
    scenario = victim_scenarios.Scenario(
        "reclaim", preemptor, list(preemptor.tasks), lambda job, taken: True, str
    )
    placed: list[int] = []
    place = session.state.place

    def spied(task: Any, node: int, groups: Any, status: Any) -> None:
        placed.append(node)
        place(task, node, groups, status)

    session.state.place = spied  # type: ignore[method-assign]
    return scenario, statement, placed


def test_a_one_pod_preemptor_is_not_placed_to_find_where_it_lands() -> None:
    """A one-pod preemptor takes the node `choose_node` picks: the step asks that alone, and nothing is
    placed (or left on the statement). With p0 and p1 gone, big1 fits node a (4 GPUs releasing or idle)
    better than b (2 idle)."""
    session = open_session(at_its_limit())
    scenario, statement, placed = where_it_lands(session, "pg-big1", evicted=("pg-p0", "pg-p1"))
    operations = statement.operations
    chosen = session.choose_node(scenario.tasks[0])
    assert chosen is not None
    assert victim_search._nodes_it_takes(session, statement, scenario) == {chosen.node}
    assert placed == [] and statement.operations == operations


def test_a_gangs_pods_are_placed_to_find_where_they_land_and_taken_back() -> None:
    """Two pods that fit nodes a and b only once p0 and p2 are gone: each is placed on the statement in
    turn (where the first goes, the second no longer fits), then both are taken back."""
    objects = [*at_its_limit()[:-2], pod_group("g", "q", min_member=2), pod("g-0", gpus=3, group="g")]
    objects.append(pod("g-1", gpus=3, group="g"))
    session = open_session(objects)
    names = session.snapshot.nodes.names
    scenario, statement, placed = where_it_lands(session, "g", evicted=("pg-p0", "pg-p2"))
    operations = statement.operations
    taken = victim_search._nodes_it_takes(session, statement, scenario)
    assert taken is not None and sorted(names[node] for node in taken) == ["a", "b"]
    assert sorted(placed) == sorted(taken) and statement.operations == operations


def test_a_preemptor_that_fits_nowhere_lands_nowhere() -> None:
    """A 3-GPU pod, alone or in a gang of two, on nodes with 2 GPUs idle each."""
    for name in ("pg-big1", "g"):
        objects = [*at_its_limit()[:-2], pod("big1", gpus=3), pod_group("g", "q", min_member=2)]
        objects += [pod("g-0", gpus=3, group="g"), pod("g-1", gpus=3, group="g")]
        session = open_session(objects)
        scenario, statement, placed = where_it_lands(session, name)
        assert victim_search._nodes_it_takes(session, statement, scenario) is None
        assert placed == [] and statement.operations == 0


def gang_beside_a_full_node() -> list[Any]:
    """`at_its_limit`'s nodes a and b (2 of 4 GPUs taken each), node c running four single-GPU pods of
    queue r, and a gang g of queue q: two 3-GPU pods."""
    objects: list[Any] = [*at_its_limit()[:-2], node("c", gpus=4)]
    objects += [pod(f"c{i}", "r", gpus=1, node_name="c") for i in range(4)]
    gang = [pod_group("g", "q", min_member=2), *[pod(f"g-{i}", gpus=3, group="g") for i in range(2)]]
    return [*objects, *gang]


def landing_of_g(monkeypatch: pytest.MonkeyPatch, session: Session) -> tuple[Any, Any, Any, list[int]]:
    """g's `_Landing` with p0 and p2 evicted, the statement, a function evicting a job's pod on it, and a
    list counting the pods placed to find where g lands (`_nodes_it_takes`)."""
    jobs = {job.name: job for job in session.snapshot.jobs.values()}
    scenario, statement, _ = where_it_lands(session, "g", evicted=("pg-p0", "pg-p2"))
    found: list[int] = []
    takes = victim_search._nodes_it_takes

    def counted(*args: Any) -> Any:
        found.append(1)
        return takes(*args)

    monkeypatch.setattr(victim_search, "_nodes_it_takes", counted)

    def evict(name: str) -> None:
        statement.evict(jobs[name].tasks[0], "test")

    return victim_search._Landing(session, scenario), statement, evict, found


def test_where_a_gang_lands_is_kept_while_only_nodes_none_of_its_pods_fits_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """g lands on a and b (3 GPUs free or releasing each). Evicting c0 then c1 leaves c short of 3 GPUs:
    where g lands is kept; with c2 gone too, a pod of g fits c, and it is found again (at a and b still:
    the nodes come first by name when they score alike)."""
    session = open_session(gang_beside_a_full_node())
    names = session.snapshot.nodes.names
    landing, statement, evict, found = landing_of_g(monkeypatch, session)
    answers = []
    for victim in (None, "pg-c0", "pg-c1", "pg-c2"):
        if victim is not None:
            evict(victim)
        taken = landing.nodes(statement)
        assert taken is not None
        answers.append(sorted(names[node] for node in taken))
        landing.settled()
    assert answers == [["a", "b"]] * 4
    assert len(found) == 2


def test_where_a_gang_lands_is_found_again_at_a_step_the_previous_did_not_find_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step that did not ask where g lands (its queue refused it) is not settled: the nodes evicted since
    the last step that asked count among the changes (here c's, where a pod of g now fits)."""
    session = open_session(gang_beside_a_full_node())
    landing, statement, evict, found = landing_of_g(monkeypatch, session)
    landing.nodes(statement)
    landing.settled()
    for victim in ("pg-c0", "pg-c1", "pg-c2"):
        evict(victim)
        landing.settled()  # (a step refused before it asked)
    landing.nodes(statement)
    assert len(found) == 2


def gang_beside_nodes(full: str, half: tuple[str, str], drained: str | None = None) -> list[Any]:
    """Node `full` running four single-GPU pods of queue r (`full`0 to 3), the two nodes `half` with two
    such pods each (`half`[0]0 and 1, ...), maybe a node `drained` with four too, all of 4 GPUs; and a
    gang g of queue q: two 3-GPU pods. (Nodes come in the order of their names.)"""
    objects: list[Any] = [queue("r"), queue("q", gpu_limit=1)]
    for name, pods in ((full, 4), (half[0], 2), (half[1], 2), (drained, 4)):
        if name is not None:
            objects += [
                node(name, gpus=4),
                *[pod(f"{name}{i}", "r", gpus=1, node_name=name) for i in range(pods)],
            ]
    return [
        *objects,
        pod_group("g", "q", min_member=2),
        *[pod(f"g-{i}", gpus=3, group="g") for i in range(2)],
    ]


def landings_evicting(
    monkeypatch: pytest.MonkeyPatch,
    objects: list[Any],
    evicted: tuple[str, ...],
    steps: list[tuple[str, ...]],
) -> tuple[list[list[str]], int]:
    """g's landings (node names) with the pods `evicted`, then at each step with its pods evicted too; and
    how often it was found by placing its pods (each landing kept is checked against them placed again).
    g's pods are placed once before, as by an earlier search: a session's first pod of a shape does not
    record how its node was chosen (`ranked_nodes.Choice`)."""
    session = open_session(objects)
    names = session.snapshot.nodes.names
    scenario, statement, _ = where_it_lands(session, "g", evicted=tuple(f"pg-{name}" for name in evicted))
    takes = victim_search._nodes_it_takes
    takes(session, statement, scenario)
    landing = victim_search._Landing(session, scenario)
    found: list[int] = []

    def counted(*args: Any) -> Any:
        found.append(1)
        return takes(*args)

    monkeypatch.setattr(victim_search, "_nodes_it_takes", counted)
    jobs = {job.name: job for job in session.snapshot.jobs.values()}
    answers = []
    for step in [(), *steps]:
        for victim in step:
            statement.evict(jobs[f"pg-{victim}"].tasks[0], "test")
        taken = landing.nodes(statement)
        assert taken is not None and taken == takes(session, statement, scenario)
        answers.append(sorted(names[node] for node in taken))
        landing.settled()
    return answers, len(found)


def test_where_a_gang_lands_is_kept_when_a_node_that_may_hold_a_pod_loses_to_the_nodes_it_took(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """g lands on a and b (3 GPUs not allocated each: 2 idle, 1 releasing). With three of c's pods
    evicted, c holds a pod of g, valued as a and b but after them by name: each pod's node stands, and
    where g lands is kept."""
    objects = gang_beside_nodes("c", ("a", "b"))
    answers, found = landings_evicting(monkeypatch, objects, ("a0", "b0"), [("c0",), ("c1",), ("c2",)])
    assert answers == [["a", "b"]] * 4
    assert found == 1


def test_where_a_gang_lands_is_found_again_when_a_node_that_may_hold_a_pod_comes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As above, the full node named a, before b and c: with three of its pods evicted, it ties with them
    and comes first, so g is placed again (and takes a)."""
    objects = gang_beside_nodes("a", ("b", "c"))
    answers, found = landings_evicting(monkeypatch, objects, ("b0", "c0"), [("a0",), ("a1",), ("a2",)])
    assert answers == [["b", "c"]] * 3 + [["a", "b"]]
    assert found == 2


def test_where_a_gang_lands_is_kept_when_a_node_first_by_name_sums_below_the_nodes_it_took(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With node d drained (4 GPUs releasing: the candidates' highest value), every pod of the full node a
    evicted at one step leaves it valued as d: binpack scores it below b and c (3 GPUs not allocated),
    though it comes first by name, and where g lands is kept. (Not an empty node in d's place: it would
    hold a pod now, and nodeavailability would score it.)"""
    objects = gang_beside_nodes("a", ("b", "c"), drained="d")
    drained = tuple(f"d{i}" for i in range(4))
    answers, found = landings_evicting(
        monkeypatch, objects, ("b0", "c0", *drained), [("a0", "a1", "a2", "a3")]
    )
    assert answers == [["b", "c"]] * 2
    assert found == 1


def test_the_verify_mode_catches_a_kept_landing_the_pods_no_longer_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = open_session(gang_beside_a_full_node())
    session.verify_carried = True
    landing, statement, evict, _ = landing_of_g(monkeypatch, session)
    landing.nodes(statement)
    landing.settled()
    landing._found = {0}  # (node a alone: as if kept wrong)
    evict("pg-c0")
    with pytest.raises(CarriedMismatch):
        landing.nodes(statement)


def test_what_a_victim_pod_holds_of_its_queue_is_worked_out_once_a_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two orders of `at_its_limit`'s four victims (as after a commit, which starts the orders afresh) hand
    out the same units; what each pod holds of its queue, as an order ranks the queues, is worked out by
    the first alone."""
    session = open_session(at_its_limit())
    jobs = {job.name: job for job in session.snapshot.jobs.values()}
    asked: list[int] = []
    holding = [False]
    queue_resources, held = PodRequest.queue_resources, victim_order._VictimOrder._held

    def counted(self: PodRequest, *args: Any) -> Any:
        if holding[0]:
            asked.append(1)
        return queue_resources(self, *args)

    def spied(self: Any, tasks: Any) -> Any:
        holding[0] = True
        try:
            return held(self, tasks)
        finally:
            holding[0] = False

    monkeypatch.setattr(PodRequest, "queue_resources", counted)
    monkeypatch.setattr(victim_order._VictimOrder, "_held", spied)
    preemptor = jobs["pg-big1"]
    candidates = [jobs[f"pg-p{i}"] for i in range(4)]
    orders, counts = [], []
    for _ in range(2):
        units = victim_order.order_victims(
            session, "consolidation", preemptor, list(preemptor.tasks), candidates
        )
        orders.append([unit.job.name for unit in units])
        counts.append(len(asked))
    assert orders[0] == orders[1] and sorted(orders[0]) == [f"pg-p{i}" for i in range(4)]
    assert counts == [4, 4]


def test_a_one_pod_search_asks_only_its_victims_nodes_whether_the_pod_could_go_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Queue r runs a pod on each GPU of nodes a and b, over its share; q's pod takes one back. The
    node-by-node search asks of each scenario only whether one of its victims' nodes is a candidate, and
    never whether the pod fits anywhere as the cluster is (every node's mask): no scenario's victims were
    placed again before (`replays`), where that answer counts."""
    objects: list[Any] = [node("a", gpus=2), node("b", gpus=2), queue("r", gpu=2), queue("q", gpu=2)]
    objects += [pod(f"r{i}", "r", gpus=1, node_name="ab"[i // 2]) for i in range(4)]
    objects.append(pod("p", "q", gpus=1))
    masks: list[int] = []
    asked: list[list[int]] = []
    searching = [False]
    candidate_nodes, any_candidate = Session.candidate_nodes, Session.any_candidate
    search = victim_search._search_by_node

    def counted_masks(self: Session, task: Any) -> Any:
        if searching[0]:
            masks.append(1)
        return candidate_nodes(self, task)

    def counted_rows(self: Session, task: Any, rows: Any) -> bool:
        if searching[0]:
            asked.append(list(rows))
        return any_candidate(self, task, rows)

    def searched(*args: Any) -> Any:
        searching[0] = True
        try:
            return search(*args)
        finally:
            searching[0] = False

    monkeypatch.setattr(Session, "candidate_nodes", counted_masks)
    monkeypatch.setattr(Session, "any_candidate", counted_rows)
    monkeypatch.setattr(victim_search, "_search_by_node", searched)
    result = first_cycle(objects, "reclaim")
    evicted = [d for d in result.decisions if d.type == "evict"]
    placed = [d for d in result.decisions if d.type == "pipeline"]
    assert len(evicted) == 1 and [d.pod for d in placed] == ["default/p"]
    assert placed[0].node == evicted[0].node
    assert masks == []
    assert asked and all(len(rows) == 1 for rows in asked)
