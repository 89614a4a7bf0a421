"""The victim actions' shortcuts decide exactly as the plain computation: preempt's attempt that ends
before ordering victims when no candidate of the queue has a lower priority (`Preempt._none_lower`, kept
per queue until a commit) or none of those runs on a node the job may use
(`Preempt._none_lower_within_reach`), consolidation's nodes with a candidate kept and brought up to date
at the nodes a commit changed (`Consolidation._nodes_with_jobs`), the jobs it considers kept until a commit
(`Consolidation._considered`) and the cluster's free GPUs kept while the node table's usage version stays
(`Consolidation._free_gpus`), the victim order consolidation's attempts share until a commit
(`Consolidation._shared_order`, checked unit by unit against the order worked out again), the victim order
that ranks nothing when no candidate runs on a node the preemptor may use (`victim_order._nothing_to_order`),
and the candidates and jobs with a pending pod one action hands the next, brought up to date by the
decisions taken in between (`VictimInputs`).

Generated clusters (preemptible and non-preemptible pods running on a few racks, some fragmented, pending
pods of every priority class, some with a rack selector) go through allocate and the three victim actions
twice: with the shortcuts, and with actions that work each answer out afresh. The decisions, every
reason given and what each action counts are the same, and consolidation's kept nodes and jobs are
those worked out afresh at every use. A cluster whose candidates all run where the pending jobs may not
go shows the attempts ruled out without ranking a single victim.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, open_session, pod, queue
from kai_scheduler.actions.allocate import Allocate
from kai_scheduler.actions.consolidation import Consolidation
from kai_scheduler.actions.preempt import Preempt
from kai_scheduler.actions.reclaim import Reclaim
from kai_scheduler.actions.solvers import victim_order
from kai_scheduler.actions.solvers.victim_order import VictimUnit
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.nodes import IntArray

CLASSES = st.sampled_from(["train", "build-preemptible", "build", "inference"])
PREEMPTIBLE = st.sampled_from(["train", "build-preemptible"])
GPUS_PER_NODE = 4


class PlainPreempt(Preempt):
    def _none_lower(self, job: JobInfo) -> bool:
        return False  # every attempt cuts the queue's heap to the lower priorities

    def _none_lower_within_reach(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        return False


class PlainConsolidation(Consolidation):
    def _nodes_with_jobs(self) -> IntArray:
        self._with_jobs = None
        return super()._nodes_with_jobs()

    def _considered(self, session: Session, cap: int) -> list[JobInfo]:
        self._considered_jobs = None
        return super()._considered(session, cap)

    def _free_gpus(self, session: Session) -> float:
        self._free = None
        return super()._free_gpus(session)

    def _shared_order(
        self, session: Session, job: JobInfo, tasks: list[TaskInfo], chosen: list[JobInfo]
    ) -> Iterable[VictimUnit]:
        return victim_order.order_victims(session, self.name, job, tasks, chosen)


@contextmanager
def ordering_every_time() -> Iterator[None]:
    """Victim orders rank the queue tree even with no candidate on a node the preemptor may use."""
    with mock.patch.object(victim_order, "_nothing_to_order", lambda source: False):
        yield


class CheckedConsolidation(Consolidation):
    """Consolidation whose kept nodes are compared with the nodes that have a candidate at each use (few
    of them change the outcome: a node that gains its first candidate seldom has the most room)."""

    def _nodes_with_jobs(self) -> IntArray:
        kept = super()._nodes_with_jobs()
        assert kept.tolist() == sorted(self._on_node)
        return kept

    def _considered(self, session: Session, cap: int) -> list[JobInfo]:
        with _taking_kept_answers(session):
            kept = super()._considered(session, cap)
        self._considered_jobs = None
        assert super()._considered(session, cap) == kept
        return kept

    def _free_gpus(self, session: Session) -> float:
        with _taking_kept_answers(session):
            kept = super()._free_gpus(session)
        nodes = session.snapshot.nodes
        assert kept == float(nodes.idle_gpus_total().sum() + nodes.rel_gpus.sum())
        return kept


@contextmanager
def _taking_kept_answers(session: Session) -> Iterator[None]:
    """Verify mode off for a while: a kept answer is taken as it is, to be compared by the caller."""
    verify, session.verify_carried = session.verify_carried, False
    try:
        yield
    finally:
        session.verify_carried = verify


@st.composite
def clusters(draw: st.DrawFn) -> list[Any]:
    nodes = draw(st.integers(2, 6))
    objects: list[Any] = [
        node(f"n{i}", gpus=GPUS_PER_NODE, labels={"rack": f"r{i % 2}"}) for i in range(nodes)
    ]
    objects += [queue(f"q{i}", gpu=draw(st.sampled_from([0, 2, 4, 8]))) for i in range(3)]
    # Fragmented: half of each node's GPUs taken by single-GPU pods, and pods that want more than half a
    # node wait, so that several in turn need pods moved (or taken).
    fragmented = draw(st.booleans())
    for i in range(nodes):
        free = GPUS_PER_NODE
        for k in range(GPUS_PER_NODE // 2 if fragmented else draw(st.integers(0, 4))):
            gpus = 1 if fragmented else draw(st.sampled_from([1, 1, 2]))
            if gpus > free:
                break
            free -= gpus
            objects.append(
                pod(
                    f"run-{i}-{k}",
                    f"q{draw(st.integers(0, 2))}",
                    gpus=gpus,
                    priority_class=draw(CLASSES),
                    node_name=f"n{i}",
                )
            )
    least = GPUS_PER_NODE // 2 + 1 if fragmented else 1
    for k in range(draw(st.integers(1, 8))):
        selector = draw(st.sampled_from([None, None, {"rack": "r0"}, {"rack": "r1"}]))
        objects.append(
            pod(
                f"wait-{k}",
                f"q{draw(st.integers(0, 2))}",
                gpus=draw(st.integers(least, GPUS_PER_NODE)),
                priority_class=draw(st.one_of(PREEMPTIBLE, CLASSES)),
                node_selector=selector,
            )
        )
    return objects


Outcome = tuple[list[str], dict[str, str], dict[str, tuple[object, ...]]]


def _outcome(objects: list[Any], preemptees: int, *, plain: bool) -> Outcome:
    session = open_session(objects, SchedulerConfig(max_consolidation_preemptees=preemptees))
    # (The shortcuts' run also checks the candidates and pending jobs each action brought up to date
    # against the full walks: `VictimInputs`.)
    session.verify_carried = not plain
    Allocate().execute(session)
    plain_actions = (PlainConsolidation(), Reclaim(), PlainPreempt())
    with ordering_every_time() if plain else nullcontext():
        for action in plain_actions if plain else (CheckedConsolidation(), Reclaim(), Preempt()):
            action.execute(session)
    counts = {
        name: (c.acted_on, c.scenarios_simulated, c.scenarios_filtered, c.search.jobs, c.search.scenarios)
        for name, c in session.counts.items()
    }
    return [repr(d) for d in session.decisions], {k: str(v) for k, v in session.unschedulable.items()}, counts


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), preemptees=st.integers(1, 4))
def test_the_shortcuts_decide_and_explain_as_the_plain_actions(objects: list[Any], preemptees: int) -> None:
    # (Few jobs considered for moving: the order of the nodes decides which.)
    assert _outcome(objects, preemptees, plain=False) == _outcome(objects, preemptees, plain=True)


def _out_of_reach() -> list[Any]:
    """Preemptible train pods (the lowest priority) run on rack r0, half of each node; rack r1 runs
    non-preemptible pods, half of each node too. Two pods of one queue that want three GPUs on rack r1 wait:
    a train pod (consolidation could move pods for it: the cluster has the GPUs, scattered) and a
    build-preemptible one (preempt could take train pods for it). Neither finds a candidate on r1 (the
    train pod waits as the other: consolidation takes them for one shape)."""
    objects: list[Any] = [node(f"n{i}", gpus=GPUS_PER_NODE, labels={"rack": f"r{i // 2}"}) for i in range(4)]
    objects.append(queue("q0", gpu=16))
    for i in range(4):
        for k in range(2):
            kind = "train" if i < 2 else "build"
            objects.append(pod(f"run-{i}-{k}", "q0", gpus=1, priority_class=kind, node_name=f"n{i}"))
    for name, kind in (("move-me", "train"), ("preempt-me", "build-preemptible")):
        objects.append(pod(name, "q0", gpus=3, priority_class=kind, node_selector={"rack": "r1"}))
    return objects


def test_attempts_without_a_candidate_within_reach_rank_no_victim() -> None:
    ranked: list[JobInfo] = []
    rank = Session.victim_order_key

    def counted(session: Session, job: JobInfo, pods: int) -> tuple[Any, ...]:
        ranked.append(job)
        return rank(session, job, pods)

    outcomes = []
    for plain in (False, True):
        ranked.clear()
        with mock.patch.object(Session, "victim_order_key", counted):
            outcomes.append(_outcome(_out_of_reach(), 16, plain=plain))
        if plain:
            assert ranked  # the full attempts rank the train jobs, to find none on rack r1
        else:
            assert not ranked
    shortcut, full = outcomes
    assert shortcut == full
    decisions, waiting, counts = shortcut
    assert not decisions
    # Each action took the build-preemptible job up and gave up on it (consolidation after an empty search).
    assert counts["consolidation"][3] == {("generators_exhausted", False): 1}
    assert "consolidation: moving running pods" in waiting["default/pg-preempt-me"]
    assert "preempt: evicting lower-priority" in waiting["default/pg-preempt-me"]
