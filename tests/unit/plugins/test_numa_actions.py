"""The numa plugin driven by the real actions: KAI v0.17.0's `TestHandleAllocationNuma`
(`pkg/scheduler/actions/allocate/allocate_numa_test.go`, 6 cases), `TestHandlePreemptNuma`
(`preempt/preempt_numa_test.go`, 2) and `TestHandleReclaimNuma` (`reclaim/reclaim_numa_test.go`, 1),
ported by name. As KAI's harness: nodes of 1000 CPUs (so only NUMA can refuse), zones that report CPU
alone, pods that ask for whole CPUs and are Guaranteed unless the case says Burstable, the plugin with
its default arguments; each case checks the pods' status and node, the zones they take (the bind's
predicted zones, or a running pod's recorded ones) and what each zone has free after the action.
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import node, open_session, pod, priority_class, queue, run
from kai_scheduler.actions.allocate import Allocate
from kai_scheduler.actions.consolidation import Consolidation
from kai_scheduler.actions.preempt import Preempt
from kai_scheduler.actions.reclaim import Reclaim
from kai_scheduler.api.objects import ApiObject, Pod
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskStatus
from kai_scheduler.plugins.numa.plugin import NumaLedger
from numa_support import guaranteed_pod_manifest, ledger_of, nrt, numa_config, observed, zone, zone_room

TRAIN, BUILD = "train", "build"  # KAI's PriorityTrainNumber (50) and PriorityBuildNumber (100)


def numa_node(name: str, policy: str, *zones: Any) -> list[ApiObject]:
    return [node(name, gpus=0, cpu=1000, memory="1000Gi"), nrt(name, policy, "pod", *zones)]


def cpu(amount: str) -> dict[str, str]:
    return {"cpu": amount}


def job(
    name: str,
    cpus: int,
    *,
    queue_name: str = "queue0",
    priority: str = TRAIN,
    qos: str = "Guaranteed",
    node_name: str | None = None,
    placement: dict[str, dict[str, str]] | None = None,
) -> Pod:
    """A one-pod job, as KAI's `TestJobBasic` with `RequiredCPUsPerTask` and `QOSClass`."""
    kwargs: dict[str, Any] = {"priority_class": priority, "node_name": node_name}
    if placement is not None:
        kwargs["annotations"] = observed(placement)
    if qos == "Guaranteed":
        return Pod.model_validate(guaranteed_pod_manifest(name, str(cpus), queue=queue_name, **kwargs))
    return pod(name, queue_name, cpu=str(cpus), **kwargs)


def run_action(action: Any, objects: list[ApiObject]) -> Session:
    session = open_session(objects, numa_config())
    action().execute(session)
    return session


def outcome(session: Session, name: str) -> tuple[str, str | None, list[int]]:
    """A pod's status, node and zone indices (its bind's predicted zones, or its recorded ones)."""
    task = session.snapshot.tasks[f"default/{name}"]
    node_name = session.snapshot.nodes.names[task.node] if task.node >= 0 else None
    ledger = ledger_of(session)
    zones: list[int] = []
    if task.node >= 0:
        node_zones = ledger.by_node[task.node]
        placed = ledger.placed.get(task.key)
        if placed is not None and task.status in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            zones = [node_zones.zone_index(z.zone) or 0 for z in placed[1]]
        elif task.key in ledger.recorded:
            zones = sorted(ledger.recorded[task.key])
    return task.status.value, node_name, zones


QUEUE0 = queue("queue0")


# --- allocate_numa_test.go: TestHandleAllocationNuma ---------------------------------------------------


def test_guaranteed_pod_fits_a_single_numa_zone_placed_on_the_lowest_fitting_zone() -> None:
    """Case "Guaranteed pod fits a single NUMA zone - placed on the lowest fitting zone"."""
    objects = [*numa_node("node0", "single-numa-node", zone("zone-0", cpu("4")), zone("zone-1", cpu("4")))]
    session = run_action(Allocate, [*objects, QUEUE0, job("pending_job0", 3)])
    assert outcome(session, "pending_job0") == ("Allocated", "node0", [0])
    assert zone_room(session, "node0", "cpu") == [1.0, 4.0]


def test_guaranteed_pod_too_large_for_any_single_zone_stays_pending() -> None:
    """Case "Guaranteed pod too large for any single zone - stays pending (NUMA, not capacity)"."""
    objects = [*numa_node("node0", "single-numa-node", zone("zone-0", cpu("4")), zone("zone-1", cpu("4")))]
    session = run_action(Allocate, [*objects, QUEUE0, job("pending_job0", 6)])
    assert outcome(session, "pending_job0") == ("Pending", None, [])
    assert zone_room(session, "node0", "cpu") == [4.0, 4.0]
    assert not session.decisions
    reason = session.explain_no_fit(session.snapshot.tasks["default/pending_job0"])
    assert "1 node(s) cannot NUMA-align the pod's resources" in reason


def test_node_selection_lands_on_the_node_that_can_numa_align() -> None:
    """Case "Node selection - lands on the node that can NUMA-align, skips the one whose zones are too
    small"."""
    small = numa_node("small-node", "single-numa-node", zone("zone-0", cpu("2")), zone("zone-1", cpu("2")))
    good = numa_node("good-node", "single-numa-node", zone("zone-0", cpu("4")), zone("zone-1", cpu("4")))
    session = run_action(Allocate, [*small, *good, QUEUE0, job("pending_job0", 3)])
    assert outcome(session, "pending_job0") == ("Allocated", "good-node", [0])


def test_in_cycle_per_zone_accounting_two_pods_fill_both_zones_third_has_no_zone_left() -> None:
    """Case "In-cycle per-zone accounting - two pods fill both zones, third has no zone left"."""
    objects = [*numa_node("node0", "single-numa-node", zone("zone-0", cpu("4")), zone("zone-1", cpu("4")))]
    jobs = [job("high", 3), job("mid", 3), job("low", 3)]
    session = run_action(Allocate, [*objects, QUEUE0, *jobs])
    assert outcome(session, "high") == ("Allocated", "node0", [0])
    assert outcome(session, "mid") == ("Allocated", "node0", [1])
    assert outcome(session, "low") == ("Pending", None, [])
    assert zone_room(session, "node0", "cpu") == [1.0, 1.0]


def test_restricted_policy_request_spanning_two_zones_is_admitted_and_split_across_the_mask() -> None:
    """Case "Restricted policy - request spanning two zones is admitted and split across the mask"."""
    objects = [*numa_node("node0", "restricted", zone("zone-0", cpu("4")), zone("zone-1", cpu("4")))]
    session = run_action(Allocate, [*objects, QUEUE0, job("pending_job0", 6)])
    assert outcome(session, "pending_job0") == ("Allocated", "node0", [0, 1])
    assert zone_room(session, "node0", "cpu") == [0.0, 2.0]


def test_pass_through_a_burstable_pod_is_not_numa_constrained() -> None:
    """Case "Pass-through - a Burstable pod is not NUMA-constrained even when it fits no single zone"."""
    objects = [*numa_node("node0", "single-numa-node", zone("zone-0", cpu("4")), zone("zone-1", cpu("4")))]
    session = run_action(Allocate, [*objects, QUEUE0, job("pending_job0", 6, qos="Burstable")])
    assert outcome(session, "pending_job0") == ("Allocated", "node0", [])
    assert zone_room(session, "node0", "cpu") == [4.0, 4.0]


# --- preempt_numa_test.go: TestHandlePreemptNuma -------------------------------------------------------


def two_full_zones_node() -> list[ApiObject]:
    return numa_node(
        "node0",
        "single-numa-node",
        zone("zone-0", cpu("4"), cpu("1")),
        zone("zone-1", cpu("4"), cpu("1")),
    )


def test_preemptor_fits_only_after_a_zone_is_freed() -> None:
    """Case "Preemptor fits only after a zone is freed - lowest-priority victim is evicted, preemptor
    takes the freed zone"."""
    objects = [
        *two_full_zones_node(),
        QUEUE0,
        priority_class("train-minus-one", 49),
        job("victim0", 3, priority="train-minus-one", node_name="node0", placement={"zone-0": cpu("3")}),
        job("victim1", 3, node_name="node0", placement={"zone-1": cpu("3")}),
        job("preemptor", 3, priority=BUILD),
    ]
    session = run_action(Preempt, objects)
    assert outcome(session, "victim0")[:2] == ("Releasing", "node0")
    assert outcome(session, "victim1") == ("Running", "node0", [1])
    assert outcome(session, "preemptor") == ("Pipelined", "node0", [0])
    assert zone_room(session, "node0", "cpu") == [1.0, 1.0]
    assert [(d.type, d.pod) for d in session.decisions] == [
        ("evict", "default/victim0"),
        ("pipeline", "default/preemptor"),
    ]


def test_preemptor_cannot_be_numa_aligned_even_after_eviction_no_victim_is_preempted() -> None:
    """Case "Preemptor cannot be NUMA-aligned even after eviction - no victim is preempted"."""
    objects = [
        *two_full_zones_node(),
        QUEUE0,
        job("victim0", 3, node_name="node0", placement={"zone-0": cpu("3")}),
        job("victim1", 3, node_name="node0", placement={"zone-1": cpu("3")}),
        job("preemptor", 5, priority=BUILD),  # no 4-CPU zone holds 5 CPUs, even emptied
    ]
    session = run_action(Preempt, objects)
    assert outcome(session, "victim0") == ("Running", "node0", [0])
    assert outcome(session, "victim1") == ("Running", "node0", [1])
    assert outcome(session, "preemptor") == ("Pending", None, [])
    assert zone_room(session, "node0", "cpu") == [1.0, 1.0]
    assert not session.decisions


# --- reclaim_numa_test.go: TestHandleReclaimNuma -------------------------------------------------------


def reclaim_cluster() -> list[ApiObject]:
    return [
        *two_full_zones_node(),
        queue("d1"),
        queue("victim_queue", cpu=3000, parent="d1"),
        queue("reclaimer_queue", cpu=3000, parent="d1"),
        priority_class("train-minus-one", 49),
        job(
            "victim0",
            3,
            queue_name="victim_queue",
            priority="train-minus-one",
            node_name="node0",
            placement={"zone-0": cpu("3")},
        ),
        job("victim1", 3, queue_name="victim_queue", node_name="node0", placement={"zone-1": cpu("3")}),
        job("reclaimer", 3, queue_name="reclaimer_queue"),
    ]


def test_under_quota_queue_reclaims_a_numa_zone_from_an_over_quota_queues_victim() -> None:
    """Case "Under-quota queue reclaims a NUMA zone from an over-quota queue's victim"."""
    session = run_action(Reclaim, reclaim_cluster())
    assert outcome(session, "victim0")[:2] == ("Releasing", "node0")
    assert outcome(session, "victim1") == ("Running", "node0", [1])
    assert outcome(session, "reclaimer") == ("Pipelined", "node0", [0])
    assert zone_room(session, "node0", "cpu") == [1.0, 1.0]


# --- integration_tests/numa/numa_test.go: TestNumaBookkeepingThroughFullPipeline ----------------------


def full_pipeline(objects: list[ApiObject]) -> Session:
    session = open_session(objects, numa_config())
    for action in (Allocate, Consolidation, Reclaim, Preempt):
        action().execute(session)
    return session


def test_preempt_frees_a_zone_ledger_stays_exact_through_the_full_pipeline() -> None:
    """Case "Preempt frees a zone - ledger stays exact through the full pipeline"."""
    session = full_pipeline(
        [
            *two_full_zones_node(),
            QUEUE0,
            priority_class("train-minus-one", 49),
            job("victim0", 3, priority="train-minus-one", node_name="node0", placement={"zone-0": cpu("3")}),
            job("victim1", 3, node_name="node0", placement={"zone-1": cpu("3")}),
            job("preemptor", 3, priority=BUILD),
        ]
    )
    assert outcome(session, "victim0")[:2] == ("Releasing", "node0")
    assert outcome(session, "victim1") == ("Running", "node0", [1])
    assert outcome(session, "preemptor") == ("Pipelined", "node0", [0])
    assert zone_room(session, "node0", "cpu") == [1.0, 1.0]


def test_reclaim_frees_a_zone_ledger_stays_exact_through_the_full_pipeline() -> None:
    """Case "Reclaim frees a zone - ledger stays exact through the full pipeline"."""
    session = full_pipeline(reclaim_cluster())
    assert outcome(session, "victim0")[:2] == ("Releasing", "node0")
    assert outcome(session, "victim1") == ("Running", "node0", [1])
    assert outcome(session, "reclaimer") == ("Pipelined", "node0", [0])
    assert zone_room(session, "node0", "cpu") == [1.0, 1.0]


# --- across cycles: the prediction written at bind is read back ------------------------------------------


def test_a_placement_made_in_one_cycle_counts_in_the_next() -> None:
    """Three Guaranteed pods arrive a minute apart on a single-numa-node node of two 4-CPU zones: the
    first two take a zone each and their binds carry the zone (the simulator writes it on the pod as
    `kai.scheduler/numa-placement-predicted`, as KAI's binder does); the third fits the node (2 of 8 CPUs
    free) but no zone, because the next cycles read those placements back."""
    objects: list[ApiObject] = [
        node("node0", gpus=0, cpu=8, memory="64Gi"),
        nrt("node0", "single-numa-node", "container", zone("node-0", cpu("4")), zone("node-1", cpu("4"))),
        QUEUE0,
        Pod.model_validate(guaranteed_pod_manifest("first", "3", queue="queue0")),
        Pod.model_validate(guaranteed_pod_manifest("second", "3", queue="queue0", arrival="1m")),
        Pod.model_validate(guaranteed_pod_manifest("third", "2", queue="queue0", arrival="2m")),
    ]
    result = run(objects, numa_config())
    bound = [d for cycle in result.cycles for d in cycle.decisions if d.type == "bind"]
    assert [(d.pod, [(z.zone, z.amount) for z in d.numa_zones]) for d in bound] == [
        ("default/first", [("node-0", (("cpu", "3"),))]),
        ("default/second", [("node-1", (("cpu", "3"),))]),
    ]
    reason = result.reasons["default/pg-third"]
    assert "1 node(s) cannot NUMA-align the pod's resources" in reason


def test_without_the_plugin_the_zones_change_nothing() -> None:
    """Opt-in, as in KAI: with the default configuration the same cluster binds all three pods."""
    objects: list[ApiObject] = [
        node("node0", gpus=0, cpu=8, memory="64Gi"),
        nrt("node0", "single-numa-node", "container", zone("node-0", cpu("4")), zone("node-1", cpu("4"))),
        QUEUE0,
        *(
            Pod.model_validate(guaranteed_pod_manifest(n, c, queue="queue0"))
            for n, c in [("a", "3"), ("b", "3")]
        ),
        Pod.model_validate(guaranteed_pod_manifest("c", "2", queue="queue0")),
    ]
    session = open_session(objects, SchedulerConfig())
    assert not any(isinstance(getattr(h, "__self__", None), NumaLedger) for h in session.points.on_allocate)
    Allocate().execute(session)
    assert sorted(d.pod for d in session.decisions if d.type == "bind") == [
        "default/a",
        "default/b",
        "default/c",
    ]


# --- reclaim_repipeline_test.go / consolidation_discard_test.go: the ledger through a statement ----------


def repipeline_session() -> Session:
    """KAI's TestReclaimRepipelineDoesNotGoNegative cluster: two 4-CPU zones, a victim of 3 CPUs
    recorded in each, a pending preemptor of 3."""
    return open_session(
        [
            node("node0", gpus=0, cpu=16, memory="64Gi"),
            nrt(
                "node0",
                "single-numa-node",
                "pod",
                zone("node-0", cpu("4"), cpu("1")),
                zone("node-1", cpu("4"), cpu("1")),
            ),
            QUEUE0,
            job("victim0", 3, node_name="node0", placement={"node-0": cpu("3")}),
            job("victim1", 3, node_name="node0", placement={"node-1": cpu("3")}),
            job("preemptor", 3),
        ],
        numa_config(),
    )


def test_reclaim_repipeline_does_not_go_negative() -> None:
    """TestReclaimRepipelineDoesNotGoNegative: both victims evicted (both zones free), the preemptor
    pipelined onto zone 0, then a victim placed back on its node: its recorded zone is the preemptor's
    now, so it does not simply keep running there (that would charge zone 0 twice); it is pipelined onto
    zone 1."""
    session = repipeline_session()
    tasks = session.snapshot.tasks
    victim0, victim1, preemptor = (tasks[f"default/{n}"] for n in ("victim0", "victim1", "preemptor"))
    statement = session.statement("reclaim")
    statement.evict(victim0, "reclaim")
    statement.evict(victim1, "reclaim")
    assert zone_room(session, "node0", "cpu") == [4.0, 4.0]
    statement.pipeline(preemptor, 0, (), "reclaim")
    assert zone_room(session, "node0", "cpu") == [1.0, 4.0]
    statement.pipeline(victim0, 0, (), "reclaim")
    assert zone_room(session, "node0", "cpu") == [1.0, 1.0]
    assert victim0.status is TaskStatus.PIPELINED
    statement.discard()
    assert zone_room(session, "node0", "cpu") == [1.0, 1.0]  # as the session opened


def scenario(session: Session, statement: Any) -> None:
    """KAI's `runScenario`: both victims evicted, the preemptor pipelined onto zone 0, victim0 placed back
    (onto zone 1: zone 0 is the preemptor's now), victim1 left out (no zone holds it)."""
    tasks = session.snapshot.tasks
    for name in ("victim0", "victim1"):
        statement.evict(tasks[f"default/{name}"], "consolidation")
    assert zone_room(session, "node0", "cpu") == [4.0, 4.0]
    statement.pipeline(tasks["default/preemptor"], 0, (), "consolidation")
    statement.pipeline(tasks["default/victim0"], 0, (), "consolidation")
    assert zone_room(session, "node0", "cpu") == [1.0, 1.0]  # neither zone over-committed


@pytest.mark.parametrize("rollback_first", [False, True], ids=["Discard", "RollbackThenDiscard"])
def test_consolidation_discard_restores_ledger(rollback_first: bool) -> None:
    """TestConsolidationDiscardRestoresLedger: a scenario undone (discarded, or rolled back to a
    checkpoint and then discarded) leaves the zones as they were before it."""
    session = repipeline_session()
    before = zone_room(session, "node0", "cpu")
    statement = session.statement("consolidation")
    checkpoint = statement.checkpoint()
    scenario(session, statement)
    if rollback_first:
        statement.rollback(checkpoint)
    statement.discard()
    assert zone_room(session, "node0", "cpu") == before
