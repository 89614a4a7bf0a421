"""A cycle on an unchanged cluster reuses the last one's result (`controlplane.unchanged_cycles`), a cycle
after a change reuses what the scheduler worked out per unchanged job (`framework.job_memos`), and both
decide exactly as a full evaluation (issue #23, point 1).

Generated workloads are replayed twice, cycle by cycle on the same clock: once as the scheduler runs
(reusing what it may), once evaluating every cycle from scratch. Between cycles pods arrive, complete and
are evicted, nodes are cordoned and uncordoned, queues' quotas and limits change and a queue comes and
goes, and the clock runs on by one or several periods; many cycles see no change at all. Every cycle's
decisions, waiting reasons and fair shares must be the same both ways.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers import node, pod, pod_group, queue
from kai_scheduler.actions import allocate
from kai_scheduler.actions.allocate import _Walk
from kai_scheduler.actions.job_queue import KeyedJobs, QueueOrderedJobs
from kai_scheduler.actions.quiet_order import QuietOrder
from kai_scheduler.api.objects import ApiObject, Node, Queue
from kai_scheduler.controlplane.unchanged_cycles import VERIFY_ENV, ReuseMismatch
from kai_scheduler.framework.config import PluginOption, SchedulerConfig
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.no_fit_counts import NoFitCounts
from kai_scheduler.framework.placement_failures import SessionFailures
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.resources import Resources
from kai_scheduler.sim.engine import Simulation, SimulationOptions
from kai_scheduler.sim.loader import load_manifests

START = datetime(2026, 1, 1, tzinfo=UTC)
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
CYCLES = 120


def workload(seed: int) -> list[ApiObject]:
    """Two departments over 6 nodes: preemptible running pods, most of them in the queue over its quota
    (so reclaim and preempt evict), a stream of arrivals of every priority that complete, elastic jobs
    that grow a pod at a time, and gangs too large to fit that wait."""
    rng = random.Random(seed)
    objects: list[ApiObject] = [node(f"n{i}", gpus=8, labels={"zone": f"z{i % 2}"}) for i in range(6)]
    objects += [queue("dept"), queue("a", gpu=16, parent="dept"), queue("b", gpu=32, parent="dept")]
    for i in range(18):  # queue a far over its quota with preemptible pods: b reclaims, a preempts
        objects.append(
            pod(
                f"run-{i}",
                "a" if rng.random() < 0.8 else "b",
                gpus=rng.choice((1, 2)),
                node_name=f"n{i % 6}",
                priority_class="train",
                duration=f"{rng.randint(60, 400)}s",
            )
        )
    for g in range(3):  # 2 x 8 GPUs: two whole nodes, found by reclaim or not at all
        objects.append(pod_group(f"big-{g}", rng.choice("ab"), min_member=2, priority_class="train"))
        objects += [pod(f"big-{g}-{i}", None, gpus=8, group=f"big-{g}") for i in range(2)]
    # Elastic: one pod is the gang, the others follow one at a time as room allows; pods of 1 and 4 GPUs,
    # so what a job's next attempt asks moves as it grows (queue order must not read a stale one).
    for g in range(4):
        group = f"elastic-{g}"
        objects.append(pod_group(group, rng.choice("ab"), min_member=1, priority_class="build"))
        arrival = f"{rng.randint(0, 150)}s"
        objects += [
            pod(f"{group}-{i}", None, gpus=rng.choice((1, 4)), group=group, arrival=arrival, duration="90s")
            for i in range(3)
        ]
    for i in range(30):
        objects.append(
            pod(
                f"job-{i}",
                rng.choice("ab"),
                gpus=rng.choice((1, 1, 2, 4)),
                priority_class=rng.choice(("train", "build", "inference")),
                arrival=f"{rng.randint(0, 200)}s",
                duration=f"{rng.randint(30, 300)}s",
                node_selector={"zone": "z1"} if rng.random() < 0.15 else None,
            )
        )
    return objects


def cordon(sim: Simulation, rng: random.Random, nodes: dict[str, Node]) -> None:
    """Cordon or uncordon one node, as a node update from the cluster would."""
    name = rng.choice(sorted(nodes))
    current = nodes[name]
    spec = current.spec.model_copy(update={"unschedulable": not current.spec.unschedulable})
    nodes[name] = current.model_copy(update={"spec": spec})
    sim.cluster.cache.set_nodes(nodes.values())


def requeue(sim: Simulation, rng: random.Random) -> None:
    """Change the queues as an edit of the Queue objects would: a leaf's GPU quota or limit moves, or
    leaf c (which no pod names) comes or goes."""
    a_quota, b_quota = rng.choice((12, 16, 24)), rng.choice((24, 32, 40))
    queues: list[Queue] = [
        queue("dept"),
        queue("a", gpu=a_quota, gpu_limit=rng.choice((-1, -1, 20)), parent="dept"),
        queue("b", gpu=b_quota, parent="dept"),
    ]
    if rng.random() < 0.3:
        queues.append(queue("c", gpu=8, parent="dept"))
    sim.cluster.cache.set_queues(queues)


def with_reservations(config: SchedulerConfig, most: int) -> SchedulerConfig:
    """`config` with reservation and backfill on (issue #24), `most` jobs holding capacity at once."""
    plugin = PluginOption("reservation", {"maxReservations": str(most)})
    return replace(config, tiers=(*config.tiers[:-1], (*config.tiers[-1], plugin)))


def replay(
    seed: int, *, reuse: bool, config: SchedulerConfig | None = None
) -> tuple[list[tuple[Any, ...]], int]:
    """Every cycle's decisions, reasons and fair shares, and how many cycles were reused; `reuse` False
    evaluates every cycle from scratch (no cycle reused, nothing carried from one to the next)."""
    objects = workload(seed)
    nodes = {o.metadata.name: o for o in objects if isinstance(o, Node)}
    sim = Simulation(objects, config or SchedulerConfig(), SimulationOptions(start=START, cycles=CYCLES))
    sim.driver.reuse = reuse
    sim.driver.scheduler.memos.carry = reuse
    rng = random.Random(seed + 1000)
    seen: list[tuple[Any, ...]] = []
    now = 0.0
    for number in range(1, CYCLES + 1):
        if number > 1 and rng.random() < 0.08:
            cordon(sim, rng, nodes)
        if number > 1 and rng.random() < 0.05:
            requeue(sim, rng)
        # The engine's own cycle, on a clock that never skips ahead: cycles with nothing new happen.
        _, result = sim._cycle(now, number)
        seen.append((number, now, *view(result)))
        now += sim.config.period * rng.choice((1, 1, 1, 4))
    return seen, sim.driver.reused


def test_a_stale_gang_is_evicted_when_its_grace_period_ends() -> None:
    """Nothing changes after the cycle that finds the gang stale, but the clock: its pods are evicted at
    the end of the grace period all the same (cycles every 10 s, the grace period 60 s)."""
    objects = [loaded.obj for loaded in load_manifests([SCENARIOS / "stale-gang-eviction" / "input.yaml"])]
    evictions = []
    for reuse in (True, False):
        sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=10))
        sim.driver.reuse = reuse
        cycles = [sim._cycle(10.0 * n, n + 1) for n in range(10)]
        evictions.append([(r.time, d.type, d.pod) for r, _ in cycles for d in r.decisions])
    assert evictions[0] == evictions[1] == [(60.0, "evict", "default/g-0")]


def view(result: SessionResult) -> tuple[Any, ...]:
    decisions = [(d.action, d.type, d.pod, d.node, d.gpu_groups, d.reason) for d in result.decisions]
    held = sorted(result.reservations.items()), result.backfilled
    return decisions, sorted(result.unschedulable.items()), sorted(result.fair_share.items()), held


@pytest.mark.parametrize("seed", range(4))
def test_reused_cycles_decide_as_full_evaluations(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    carried = _carried_failures(monkeypatch)
    recounted = _recounted_explanations(monkeypatch)
    written = _walks_written_without_walking(monkeypatch)
    reused, reused_count = replay(seed, reuse=True)
    assert carried, "no attempt that found no node was carried"
    assert recounted, "no explanation was kept and counted again"
    assert written, "no allocate's walk was written without walking"
    full, full_count = replay(seed, reuse=False)
    for ours, theirs in zip(reused, full, strict=True):
        assert ours == theirs, f"cycle {ours[0]} differs"
    assert full_count == 0
    assert reused_count >= 10, reused_count  # the workload does have unchanged cycles
    kinds = {decision[1] for cycle in full for decision in cycle[2]}
    assert {"bind", "evict"} <= kinds, kinds
    assert any(cycle[3] for cycle in full)  # jobs wait, with reasons, while cycles are reused


@pytest.mark.parametrize("seed", range(2))
def test_what_is_carried_is_what_a_full_evaluation_works_out(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same replay with the debug variable set: every answer carried from one cycle to the next (per
    job, the queue sums, the groups of jobs the actions read) is worked out again in every cycle and must
    be the same, or the replay raises CarriedMismatch."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    replay(seed, reuse=True)


@pytest.mark.parametrize("seed", range(3))
def test_reservations_decide_alike_reused_or_evaluated(seed: int) -> None:
    """Reservation and backfill (issue #24) on the same replay: holds made, kept, moved and let go, and the
    jobs backfilled, are the same whether cycles are reused and answers carried or every cycle is worked
    out from scratch; and the workload's large gangs do hold capacity."""
    config = with_reservations(SchedulerConfig(), 2)
    reused, _ = replay(seed, reuse=True, config=config)
    full, _ = replay(seed, reuse=False, config=config)
    for ours, theirs in zip(reused, full, strict=True):
        assert ours == theirs, f"cycle {ours[0]} differs"
    made = {job for cycle in full for job, held in cycle[5][0] if held is not None}
    assert made, "no job held capacity"


def _one_waiting_pod(*, in_pod_group: bool = False) -> Simulation:
    """One full GPU node and a pod that waits for it (with `in_pod_group`, in a PodGroup of its own, named
    as a bare pod's job): every cycle after the first is unchanged."""
    group = "pg-waiting" if in_pod_group else None
    objects: list[ApiObject] = [
        node("n0", gpus=1),
        queue("q", gpu=1),
        pod("running", gpus=1, node_name="n0", priority_class="inference"),
        *([pod_group(group, "q", priority_class="inference")] if group else []),
        pod("waiting", gpus=1, priority_class="inference", group=group),
    ]
    return Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=3))


def test_a_reused_cycle_reports_the_same_reasons_and_no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metrics count what ran: a reused cycle's actions took nothing up and it measured no time."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    sim = _one_waiting_pod()
    _, first = sim._cycle(0.0, 1)
    _, second = sim._cycle(10.0, 2)
    assert sim.driver.reused == 1
    assert second.unschedulable == first.unschedulable and second.fair_share == first.fair_share
    assert first.counts and not second.counts
    assert second.open_seconds == 0.0 and not second.action_seconds


def test_verify_mode_fails_loudly_on_a_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the debug variable set, a cycle that could be reused is evaluated as well and compared: the
    same result passes, a remembered result that differs raises, naming what differs."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    sim = _one_waiting_pod()
    driver = sim.driver
    assert driver.verify
    _, first = sim._cycle(0.0, 1)
    assert not first.decisions and "default/pg-waiting" in first.unschedulable
    _, second = sim._cycle(10.0, 2)  # nothing changed: evaluated, compared, the same
    assert second.unschedulable == first.unschedulable
    last = driver.unchanged._last
    assert last is not None
    lying = replace(last.result, unschedulable={"default/pg-waiting": "made up"})
    driver.unchanged._last = replace(last, result=lying)
    with pytest.raises(ReuseMismatch, match="unschedulable"):
        sim._cycle(20.0, 3)


def test_verify_mode_checks_what_is_carried_per_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle after a change still reads what the last one worked out per unchanged job (its next pods,
    tried); with the debug variable set each is worked out again and compared. (A PodGroup's job: a bare
    pod's plain job keeps no next pods or request, they are read off its pod, `gang.kept_tasks`.)"""
    monkeypatch.setenv(VERIFY_ENV, "1")
    sim = _one_waiting_pod(in_pod_group=True)
    memos = sim.driver.scheduler.memos
    assert memos.verify
    sim._cycle(0.0, 1)
    (job,) = [job for job in memos.next_tasks if job.key == "default/pg-waiting"]
    version = memos.next_tasks[job][0]
    memos.job_keys[job] = (version, ("made up",))
    # A change that keeps the job (a node relabelled): the cycle runs, carrying per job.
    sim.cluster.cache.set_nodes([node("n0", gpus=1, labels={"zone": "z1"})])
    with pytest.raises(CarriedMismatch, match="default/pg-waiting: its job order key"):
        sim._cycle(10.0, 2)
    memos.job_keys.clear()
    memos.next_tasks[job] = (version, [])
    with pytest.raises(CarriedMismatch, match="the pods of its next attempt"):
        sim._cycle(20.0, 3)
    memos.next_tasks.clear()
    carried = memos.next_requests[job]
    memos.next_requests[job] = (carried[0], carried[1], Resources(gpu=7.0))
    with pytest.raises(CarriedMismatch, match="what its next attempt adds to its queue"):
        sim._cycle(30.0, 4)
    memos.next_requests.clear()
    memos.signatures[job] = (memos.signatures[job][0], ("made up",))
    with pytest.raises(CarriedMismatch, match="the scheduling signature of its next attempt"):
        sim._cycle(40.0, 5)
    memos.signatures.clear()
    kept_key, _ = memos.admissions[job]
    memos.admissions[job] = (kept_key, "made up")
    with pytest.raises(CarriedMismatch, match="whether its next attempt may be tried"):
        sim._cycle(50.0, 6)
    memos.admissions.clear()
    _, result = sim._cycle(60.0, 7)
    assert "default/pg-waiting" in result.unschedulable


def _carried_failures(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The jobs whose allocate attempt is carried as finding no node, as each is (`placement_failures`)."""
    carried: list[str] = []
    original = SessionFailures.fails_again

    def fails_again(self: SessionFailures, task: TaskInfo) -> bool:
        again = original(self, task)
        if again:
            carried.append(task.job.key)
        return again

    monkeypatch.setattr(SessionFailures, "fails_again", fails_again)
    return carried


def _full_node_and_waiting_gang() -> tuple[Simulation, list[Node]]:
    """Node n0 full until its pod ends at 30 s, n1 cordoned, and a gang of two 1-GPU pods that waits."""
    nodes = [node("n0", gpus=2), node("n1", gpus=2, unschedulable=True)]
    objects: list[ApiObject] = [
        *nodes,
        queue("q", gpu=4),
        pod("running", gpus=2, node_name="n0", priority_class="inference", duration="30s"),
        pod_group("gang", "q", min_member=2, priority_class="inference"),
        *(pod(f"gang-{i}", None, gpus=1, group="gang") for i in range(2)),
    ]
    sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=5))
    return sim, nodes


def test_an_attempt_that_found_no_node_is_carried_until_a_node_may_take_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Allocate does not try again a job whose first pod found no node while no node that may differ
    since is a candidate (a node relabelled is not), writing the same reason; a node freed or uncordoned
    is asked about, and the job placed there; the debug variable checks each carried failure too."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    carried = _carried_failures(monkeypatch)
    sim, (n0, n1) = _full_node_and_waiting_gang()
    _, first = sim._cycle(0.0, 1)
    assert not first.decisions and not carried
    sim.cluster.cache.set_nodes(
        [n0.model_copy(update={"metadata": n0.metadata.model_copy(update={"labels": {"a": "b"}})}), n1]
    )
    _, relabelled = sim._cycle(10.0, 2)
    assert carried == ["default/gang"]
    assert relabelled.unschedulable == first.unschedulable
    sim.cluster.cache.set_nodes([n0, node("n1", gpus=2)])  # uncordoned: the gang fits there
    _, uncordoned = sim._cycle(20.0, 3)
    assert carried == ["default/gang"]
    assert {d.node for d in uncordoned.decisions} == {"n1"}


def test_verify_mode_checks_a_carried_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure carried though a node was freed (here: the rows that may differ are said to be none)
    places the job when attempted again: the debug variable raises CarriedMismatch."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    sim, _ = _full_node_and_waiting_gang()
    sim._cycle(0.0, 1)
    monkeypatch.setattr(SessionFailures, "_differing_rows", lambda self: [])
    # (Its explanation is counted afresh: kept, it would be checked first, see the next test.)
    monkeypatch.setattr(SessionFailures, "kept_counts", lambda self, key: None)
    with pytest.raises(CarriedMismatch, match=r"default/gang: its attempt, carried .* placed it"):
        sim._cycle(30.0, 2)  # the running pod has ended: n0 is free


def test_verify_mode_checks_a_kept_explanation(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explanation kept from the last cycle and counted again over no row, though a node was freed,
    differs from counting every node: the debug variable raises CarriedMismatch."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    sim, _ = _full_node_and_waiting_gang()
    sim._cycle(0.0, 1)
    monkeypatch.setattr(SessionFailures, "_differing_rows", lambda self: [])
    with pytest.raises(CarriedMismatch, match=r"pod gang-0: why it does not fit, kept .* differs"):
        sim._cycle(30.0, 2)


def test_explanations_are_recounted_over_the_rows_that_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the gang waits, kept from one cycle to the next and counted again over the nodes that may
    differ (n0 relabelled, then n1 uncordoned while n0 stays full), reads as counting every node does."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    recounted = _recounted_explanations(monkeypatch)
    sim, (n0, n1) = _full_node_and_waiting_gang()
    first = sim._cycle(0.0, 1)[1].unschedulable["default/gang"]
    assert "1 node(s) were unschedulable, 1 Insufficient GPUs" in first and not recounted
    sim.cluster.cache.set_nodes(
        [n0.model_copy(update={"metadata": n0.metadata.model_copy(update={"labels": {"a": "b"}})}), n1]
    )
    assert sim._cycle(10.0, 2)[1].unschedulable["default/gang"] == first
    assert recounted == [[0]]
    sim.cluster.cache.set_nodes([n0, node("n1", gpus=2, cpu="500m")])  # uncordoned, too little CPU
    third = sim._cycle(20.0, 3)[1].unschedulable["default/gang"]
    assert "1 Insufficient cpu, 1 Insufficient GPUs" in third
    assert recounted[1:] == [[0, 1]]


def _walks_written_without_walking(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many reasons each allocate written without walking wrote (`actions.walk_replay`; with the
    debug variable set, walked as well)."""
    written: list[int] = []
    original = _Walk.replayed

    def replayed(self: _Walk, jobs: list[JobInfo]) -> list[tuple[str, str]] | None:
        reasons = original(self, jobs)
        if reasons is not None:
            written.append(len(reasons))
        return reasons

    monkeypatch.setattr(_Walk, "replayed", replayed)
    return written


def _recounted_explanations(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The rows each kept explanation was counted again over (`no_fit_counts`), as each is."""
    recounted: list[list[int]] = []
    original = NoFitCounts.recount

    def recount(self: NoFitCounts, rows: list[int], refusals: list[int], position: int) -> None:
        recounted.append(rows)
        original(self, rows, refusals, position)

    monkeypatch.setattr(NoFitCounts, "recount", recount)
    return recounted


def test_verify_mode_checks_the_static_masks_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nodes passing each placement's static predicates are kept while the nodes' specs stay (a pod
    ended: kept; n1 uncordoned: worked out again); a kept mask that differs from working it out again
    (here: made up) raises CarriedMismatch with the debug variable set."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    sim, (n0, _) = _full_node_and_waiting_gang()
    kept = sim.driver.scheduler.memos.static_masks
    sim._cycle(0.0, 1)
    first = dict(kept.masks)
    assert first
    sim.cluster.cache.set_nodes([n0, node("n1", gpus=2)])
    _, uncordoned = sim._cycle(10.0, 2)
    assert kept.masks.keys() == first.keys()
    assert all(kept.masks[key] is not masks for key, masks in first.items())
    assert {d.node for d in uncordoned.decisions} == {"n1"}
    second = dict(kept.masks)
    sim._cycle(40.0, 3)  # the running pod has ended: the specs stay
    assert all(kept.masks[key] is masks for key, masks in second.items())
    key, (ok, parts) = next(iter(kept.masks.items()))
    kept.masks[key] = (~ok, parts)
    sim.cluster.cache.set_queues([queue("q", gpu=3)])  # a change that keeps the specs
    with pytest.raises(CarriedMismatch, match="static predicates of placement"):
        sim._cycle(50.0, 4)


def backlog(seed: int) -> list[ApiObject]:
    """A full cluster with a deep backlog over five leaves under two departments and one root leaf: most
    of allocate's walks place nothing (the quiet order, `actions.quiet_order`); pods that complete free
    room now and then, and late arrivals of every shape and priority join the leaves, elastic jobs too."""
    rng = random.Random(seed)
    objects: list[ApiObject] = [node(f"n{i}", gpus=4, labels={"zone": f"z{i % 2}"}) for i in range(5)]
    objects += [queue("dept-a", gpu=8), queue("dept-b", gpu=12)]
    leaves = {"a1": "dept-a", "a2": "dept-a", "b1": "dept-b", "b2": "dept-b", "b3": "dept-b", "c": None}
    objects += [queue(name, gpu=rng.choice((-1, 2, 4)), parent=parent) for name, parent in leaves.items()]
    for i in range(20):
        objects.append(
            pod(
                f"run-{i}",
                rng.choice(sorted(leaves)),
                gpus=1,
                node_name=f"n{i % 5}",
                priority_class="train",
                duration=f"{rng.randint(40, 600)}s",
            )
        )
    for i in range(70):
        objects.append(
            pod(
                f"wait-{i}",
                rng.choice(sorted(leaves)),
                gpus=rng.choice((1, 1, 2, 3, 4)),
                cpu=rng.choice(("1", "1", "2")),
                priority_class=rng.choice(("train", "build", "inference")),
                arrival=f"{rng.choice((0, 0, rng.randint(0, 300)))}s",
                duration=f"{rng.randint(30, 200)}s",
                node_selector={"zone": "z1"} if rng.random() < 0.1 else None,
            )
        )
    for g in range(2):
        objects.append(
            pod_group(f"gang-{g}", rng.choice(sorted(leaves)), min_member=2, priority_class="train")
        )
        objects += [pod(f"gang-{g}-{i}", None, gpus=3, group=f"gang-{g}") for i in range(2)]
    for g in range(3):  # elastic: placed a pod at a time, the job handed back with pods left
        objects.append(
            pod_group(f"elastic-{g}", rng.choice(sorted(leaves)), min_member=1, priority_class="build")
        )
        arrival = f"{rng.randint(0, 300)}s"
        objects += [
            pod(f"elastic-{g}-{i}", None, gpus=1, group=f"elastic-{g}", arrival=arrival) for i in range(3)
        ]
    return objects


def walk_replay(
    seed: int, monkeypatch: pytest.MonkeyPatch, *, quiet: bool, tails: bool = False
) -> list[tuple[Any, ...]]:
    """Every cycle's decisions and reasons, the reasons in the order they were written, over the backlog
    with cordons and queue edits between cycles; `quiet` False walks every job through the job queue;
    `tails`: the rest of a walk that would try nothing is written without walking it, leaf by leaf
    (`_Walk.replayed_tail`), else walked."""
    with monkeypatch.context() as patched:
        if not tails:
            patched.setattr(_Walk, "replayed_tail", lambda walk, jobs, left: None)
        if not quiet:
            patched.setattr(
                _Walk,
                "in_quiet_order",
                lambda walk, jobs, _: walk.take_up(QueueOrderedJobs(walk.session, jobs), None),
            )
        objects = backlog(seed)
        nodes = {o.metadata.name: o for o in objects if isinstance(o, Node)}
        sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=60))
        rng = random.Random(seed + 1000)
        seen: list[tuple[Any, ...]] = []
        for number in range(1, 61):
            if number > 1 and rng.random() < 0.15:
                cordon(sim, rng, nodes)
            if number > 1 and rng.random() < 0.05:
                sim.cluster.cache.set_queues(
                    [
                        o if o.metadata.name != "c" else queue("c", gpu=rng.choice((0, 2, 6)))
                        for o in objects
                        if isinstance(o, Queue)
                    ]
                )
            _, result = sim._cycle(10.0 * (number - 1), number)
            decisions = [(d.action, d.type, d.pod, d.node, d.reason) for d in result.decisions]
            seen.append((number, decisions, list(result.unschedulable.items())))
        return seen


def _quiet_walks(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """Per walk in the quiet order, how many jobs were left to the job queue (None: none, the walk was
    quiet to its end)."""
    walks: list[int | None] = []
    original_init, original_remaining = QuietOrder.__init__, QuietOrder.remaining

    def init(order: QuietOrder, session: Session, by_leaf: KeyedJobs, reads: Any, kept: Any = None) -> None:
        walks.append(None)
        original_init(order, session, by_leaf, reads, kept)

    def remaining(order: QuietOrder) -> KeyedJobs:
        left = original_remaining(order)
        walks[-1] = sum(map(len, left.values()))
        return left

    monkeypatch.setattr(QuietOrder, "__init__", init)
    monkeypatch.setattr(QuietOrder, "remaining", remaining)
    return walks


@pytest.mark.parametrize("seed", range(4))
def test_walks_in_the_quiet_order_decide_and_explain_as_the_job_queue(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Allocate's walk reads the job queue's order as a merge while nothing moves, and carries on with the
    job queue from the first placement: every cycle's decisions and reasons (in the order written) are
    those of a walk that pops every job from the job queue, over arrivals, completions, cordons and queue
    edits; some walks are quiet to the end, others hand the rest to the job queue part way."""
    walks = _quiet_walks(monkeypatch)
    ours = walk_replay(seed, monkeypatch, quiet=True)
    assert any(left is None for left in walks) and any(left for left in walks), walks
    theirs = walk_replay(seed, monkeypatch, quiet=False)
    for mine, plain in zip(ours, theirs, strict=True):
        assert mine == plain, f"cycle {mine[0]} differs"
    assert any(cycle[1] for cycle in theirs) and all(cycle[2] for cycle in theirs[:20])


@pytest.mark.parametrize("seed", range(4))
def test_the_rest_of_a_walk_written_without_walking_is_the_job_queues(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk that places a job, then carries on to the end placing nothing, has the rest written
    without walking it (`walk_replay.tail_reasons`): every cycle's decisions and reasons are a walk's
    through the job queue (the reasons written leaf by leaf, in another order)."""
    tails: list[int] = []
    original = _Walk.replayed_tail

    def replayed_tail(walk: _Walk, jobs: list[JobInfo], left: KeyedJobs) -> list[dict[str, str]] | None:
        written = original(walk, jobs, left)
        if written is not None:
            tails.append(walk.session.cycle)
        return written

    monkeypatch.setattr(_Walk, "replayed_tail", replayed_tail)
    ours = walk_replay(seed, monkeypatch, quiet=True, tails=True)
    assert tails
    theirs = walk_replay(seed, monkeypatch, quiet=False)
    for (number, decisions, reasons), (_, plain_decisions, plain_reasons) in zip(ours, theirs, strict=True):
        assert decisions == plain_decisions, f"cycle {number} differs"
        assert sorted(reasons) == sorted(plain_reasons), f"cycle {number} differs"


def test_a_quiet_walk_pops_no_job_from_the_job_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """An arrival that cannot fit on the full backlog: the walk takes every job up in the quiet order and
    pops none from the job queue, where the plain walk pops each (the debug variable would pop one too).
    After a completion the first job takes the freed node: the job queue hands out the next jobs until
    `_CALM_POPS` in a row placed nothing, and the quiet order the rest. The orders hand one another the
    jobs keyed: the walk keys each job once, and the placed one again as it is pushed back."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    # (The walk, not its writing without walking, `test_walk_replay`: these cycles would be written so, and
    # the completion's walk after its calm pops.)
    monkeypatch.setattr(_Walk, "replayed", lambda walk, jobs: None)
    monkeypatch.setattr(_Walk, "replayed_tail", lambda walk, jobs, left: None)
    pops: list[JobInfo] = []
    keyed: list[JobInfo] = []  # the jobs keyed in allocate's walks
    job_order_key, in_quiet_order = Session.job_order_key, _Walk.in_quiet_order
    walking = False

    def counted_key(session: Session, job: JobInfo) -> tuple[Any, ...]:
        if walking:
            keyed.append(job)
        return job_order_key(session, job)

    def counted_walk(walk: _Walk, jobs: list[JobInfo], reads: Any) -> None:
        nonlocal walking
        walking = True
        in_quiet_order(walk, jobs, reads)
        walking = False

    monkeypatch.setattr(Session, "job_order_key", counted_key)
    monkeypatch.setattr(_Walk, "in_quiet_order", counted_walk)

    class Counted(QueueOrderedJobs):
        def pop(self) -> JobInfo | None:
            job = super().pop()
            if job is not None:
                pops.append(job)
            return job

    monkeypatch.setattr(allocate, "QueueOrderedJobs", Counted)  # allocate's own, not the victim actions'
    walks = _quiet_walks(monkeypatch)
    objects: list[ApiObject] = [node("n0", gpus=2), queue("q1", gpu=2), queue("q2", gpu=0)]
    objects += [pod("running", "q1", gpus=2, node_name="n0", priority_class="train", duration="25s")]
    objects += [pod(f"wait-{i}", f"q{1 + i % 2}", gpus=2, priority_class="train") for i in range(60)]
    objects += [pod("late", "q2", gpus=1, priority_class="train", arrival="15s")]
    sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=3))
    sim._cycle(0.0, 1)
    _, arrival = sim._cycle(20.0, 2)
    assert not arrival.decisions and "default/pg-late" in arrival.unschedulable
    assert walks == [None, None] and not pops
    keyed.clear()
    _, completion = sim._cycle(30.0, 3)
    assert [d.type for d in completion.decisions if d.action == "allocate"] == ["bind"]
    assert walks[2:] == [60, None] and len(pops) == allocate._CALM_POPS
    assert len(keyed) == len(set(keyed)) == 61
    monkeypatch.setattr(
        _Walk, "in_quiet_order", lambda walk, jobs, _: walk.take_up(Counted(walk.session, jobs), None)
    )
    sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=2))
    sim._cycle(0.0, 1)
    pops.clear()
    sim._cycle(20.0, 2)
    assert len(pops) == 61


def test_verify_mode_checks_the_quiet_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the debug variable set the job queue is popped alongside the quiet order: an order that hands
    out a job out of turn (here: the first two swapped) raises CarriedMismatch."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    objects = backlog(0)
    Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=1))._cycle(0.0, 1)
    original = QuietOrder.__iter__

    def first_two_swapped(order: QuietOrder) -> Iterator[JobInfo]:
        jobs = list(original(order))
        yield from [jobs[1], jobs[0], *jobs[2:]]

    monkeypatch.setattr(QuietOrder, "__iter__", first_two_swapped)
    with pytest.raises(CarriedMismatch, match="in the quiet order handed out"):
        Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=1))._cycle(0.0, 1)
