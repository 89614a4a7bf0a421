"""The victim actions' shortcuts decide exactly as the plain computation: preempt's attempt that ends
before ordering victims when no candidate of the queue has a lower priority (`Preempt._none_lower`, kept
per queue until a commit), and consolidation's nodes with a candidate kept until the candidates' nodes
change (`Consolidation._nodes_with_jobs`).

Generated clusters (preemptible and non-preemptible pods running on a few racks, some fragmented, pending
pods of every priority class, some with a rack selector) go through allocate and the three victim actions
twice: with the shortcuts, and with actions that work each answer out afresh. The decisions and every
reason given are the same, and consolidation's kept nodes are those with a candidate at every use.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, open_session, pod, queue
from kai_scheduler.actions.allocate import Allocate
from kai_scheduler.actions.consolidation import Consolidation
from kai_scheduler.actions.preempt import Preempt
from kai_scheduler.actions.reclaim import Reclaim
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.nodes import IntArray

CLASSES = st.sampled_from(["train", "build-preemptible", "build", "inference"])
PREEMPTIBLE = st.sampled_from(["train", "build-preemptible"])
GPUS_PER_NODE = 4


class PlainPreempt(Preempt):
    def _none_lower(self, job: JobInfo) -> bool:
        return False  # every attempt cuts the queue's heap to the lower priorities


class PlainConsolidation(Consolidation):
    def _nodes_with_jobs(self) -> IntArray:
        self._with_jobs = None
        return super()._nodes_with_jobs()


class CheckedConsolidation(Consolidation):
    """Consolidation whose kept nodes are compared with the nodes that have a candidate at each use (few
    of them change the outcome: a node that gains its first candidate seldom has the most room)."""

    def _nodes_with_jobs(self) -> IntArray:
        kept = super()._nodes_with_jobs()
        assert kept.tolist() == sorted(self._on_node)
        return kept


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


def _outcome(objects: list[Any], preemptees: int, *, plain: bool) -> tuple[list[str], dict[str, str]]:
    session = open_session(objects, SchedulerConfig(max_consolidation_preemptees=preemptees))
    Allocate().execute(session)
    plain_actions = (PlainConsolidation(), Reclaim(), PlainPreempt())
    for action in plain_actions if plain else (CheckedConsolidation(), Reclaim(), Preempt()):
        action.execute(session)
    return [repr(d) for d in session.decisions], {k: str(v) for k, v in session.unschedulable.items()}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), preemptees=st.integers(1, 4))
def test_the_shortcuts_decide_and_explain_as_the_plain_actions(objects: list[Any], preemptees: int) -> None:
    # (Few jobs considered for moving: the order of the nodes decides which.)
    assert _outcome(objects, preemptees, plain=False) == _outcome(objects, preemptees, plain=True)
