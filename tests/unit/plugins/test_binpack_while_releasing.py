"""Binpack's ranking (`NodePlacementPlugin.ranks_by`) while something is being released: a node that holds a
GPU pod soon may be valued below the pod's floor where a shared GPU is overcommitted, so the ranked index
stands aside for a pod with a candidate there (`Ranking.below_floor`), and `choose_node` picks what scoring
every candidate picks (what `ranked_nodes` must always give)."""

from __future__ import annotations

from typing import Any

from helpers import node, open_session, pod, queue
from kai_scheduler.framework import ranked_nodes
from kai_scheduler.framework.config import DEFAULT_PLUGINS
from kai_scheduler.framework.session import Session

# The default plugins but nodeavailability (a configuration may leave it out): binpack alone decides.
WITHOUT_NODE_AVAILABILITY = [name for name in DEFAULT_PLUGINS if name != "nodeavailability"]


def chosen_both_ways(session: Session, name: str) -> tuple[Any, Any]:
    """The node `choose_node` picks for job `name`'s pod, through the ranked index and by scoring every
    candidate."""
    (task,) = next(job for job in session.snapshot.jobs.values() if job.name == name).tasks
    ranked = session.choose_node(task)
    ranked_nodes.ENABLED = False
    try:
        scored = session.choose_node(task)
    finally:
        ranked_nodes.ENABLED = True
    return ranked and ranked.node, scored and scored.node


def test_a_gpu_pod_goes_where_scoring_every_candidate_puts_it_while_a_shared_gpu_is_overcommitted() -> None:
    """Node a runs w (one GPU) and f1 and f2 (half of its other GPU each); b runs x (one GPU of two). With w
    and f1 evicted and f3 (half a GPU) pipelined onto f1's releasing half, a's shared GPU has half a GPU
    less than nothing free now: a holds a one-GPU pod soon (w's GPU) but is valued 0.5 not allocated, b
    1.0. Binpack prefers the fuller a; a ranking with the pod's floor (one GPU) would not see it."""
    group = {"runai-gpu-group": "g1"}
    objects = [
        node("a", gpus=2),
        node("b", gpus=2),
        queue("q"),
        pod("w", gpus=1, node_name="a"),
        pod("f1", fraction=0.5, node_name="a", labels=group),
        pod("f2", fraction=0.5, node_name="a", labels=group),
        pod("x", gpus=1, node_name="b"),
        pod("f3", fraction=0.5),
        pod("p", gpus=1),
    ]
    session = open_session(objects, plugins=WITHOUT_NODE_AVAILABILITY)
    tasks = {job.name: job.tasks[0] for job in session.snapshot.jobs.values()}
    statement = session.statement("reclaim", "")
    statement.evict(tasks["pg-w"], "test")
    statement.evict(tasks["pg-f1"], "test")
    statement.pipeline(tasks["pg-f3"], 0, tasks["pg-f2"].gpu_groups, "test")
    nodes = session.snapshot.nodes
    assert nodes.gpus_not_allocated_of(0) == 0.5 and nodes.gpus_not_allocated_of(1) == 1.0
    assert chosen_both_ways(session, "pg-p") == (0, 0)


def test_a_cpu_pod_is_still_ranked_while_something_is_released() -> None:
    """A CPU-only pod's value is the CPU `fit` compares with: its ranking holds while pods are released."""
    objects = [node("a", gpus=0, cpu="8"), node("b", gpus=0, cpu="8"), queue("q")]
    objects += [pod("r", cpu="2", node_name="a"), pod("s", cpu="6", node_name="b"), pod("c", cpu="1")]
    session = open_session(objects, plugins=WITHOUT_NODE_AVAILABILITY)
    tasks = {job.name: job.tasks[0] for job in session.snapshot.jobs.values()}
    session.statement("reclaim", "").evict(tasks["pg-r"], "test")
    assert session.snapshot.nodes.anything_releasing()
    (task,) = [tasks["pg-c"]]
    assert not isinstance(ranked_nodes.best_node(session, task), ranked_nodes.Undecided)
    assert chosen_both_ways(session, "pg-c") == (1, 1)
