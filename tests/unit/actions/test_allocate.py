"""allocate: gangs all-or-nothing, elastic growth, pipelining onto releasing capacity, scheduling
signatures, best-effort pods, jobs that cannot be considered.

Reference: kai-reference §4.3 allocate ((c) podsets ask for minMember − allocated, satisfied elastic
podsets for 1 more; (d) fit idle → Binding, fit idle+releasing → Pipelined, "if any task of a gang is
pipelined the whole gang is pipelined; all-or-nothing per gang"; (e) pushed back while it has pending
tasks), "Scheduling signatures", §4.2 "Jobs filtered out before actions" (not ready, queue missing, not a
leaf), §4.1 (Releasing pods occupy node resources); simulate-contract "Rules" (terminating pods; missing
queues wait with QueueDoesNotExist) and "Cycles and effects" (pipeline: placed in a later cycle, on the
pipelined node when it still fits there).
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import (
    binds,
    bound_order,
    config,
    gang,
    groups_by_name,
    node,
    one_cycle,
    pipelines,
    pod,
    pod_group,
    queue,
    run,
    simulate,
)
from kai_scheduler.actions.allocate import _Walk
from kai_scheduler.controlplane.unchanged_cycles import VERIFY_ENV
from kai_scheduler.framework import walk_facts
from kai_scheduler.framework.gang import kept_tasks
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.placement_failures import SessionFailures
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.walk_facts import WalkFacts

ALLOCATE = config(actions="allocate")


def cycles(objects: list[Any], n: int) -> list[list[Any]]:
    return [record.decisions for record in run(objects, ALLOCATE, cycles=n).cycles]


# --- gangs ---------------------------------------------------------------------------------------


def test_a_gang_of_four_with_room_for_three_places_none() -> None:
    objects = [node("n0", gpus=3), queue("q"), *gang("g", size=4, gpus=1)]
    result = run(objects, ALLOCATE, cycles=1)
    assert result.cycles[0].decisions == []
    assert "gang of 4 pods" in result.reasons["default/g"]
    assert "Insufficient GPUs" in result.reasons["default/g"]


def test_a_failed_gang_leaves_its_room_to_the_next_job() -> None:
    objects = [node("n0", gpus=3), queue("q"), *gang("big", size=4, gpus=1), pod("small", gpus=3)]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["small"]


def test_a_gang_spans_nodes() -> None:
    objects = [node("a", gpus=2), node("b", gpus=2), queue("q"), *gang("g", size=4, gpus=1)]
    decided = binds(one_cycle(objects, ALLOCATE))
    assert sorted(decided.values()) == ["a", "a", "b", "b"]


def test_a_gang_whose_pods_do_not_all_exist_yet_waits() -> None:
    objects = [node("n0", gpus=8), queue("q"), pod_group("g", min_member=3), pod("g-0", group="g", gpus=1)]
    result = run(objects, ALLOCATE, cycles=1)
    assert result.cycles[0].decisions == []
    assert "minMember 3" in result.reasons["default/g"]


def test_min_member_then_one_more_per_pass_up_to_the_room() -> None:
    objects = [node("n0", gpus=5), queue("q"), *gang("g", size=8, min_member=3, gpus=1)]
    decisions = one_cycle(objects, ALLOCATE)
    assert bound_order(decisions) == ["g-0", "g-1", "g-2", "g-3", "g-4"]


def test_an_elastic_job_that_cannot_reach_min_member_gets_nothing() -> None:
    objects = [node("n0", gpus=2), queue("q"), *gang("g", size=5, min_member=3, gpus=1)]
    assert one_cycle(objects, ALLOCATE) == []


# --- pipelining ----------------------------------------------------------------------------------


def test_a_pod_is_pipelined_onto_a_terminating_pod_and_bound_there_next_cycle() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q"),
        pod("leaving", gpus=2, node_name="n0", terminating=True),
        pod("next", gpus=2),
    ]
    first, second = cycles(objects, 2)
    assert pipelines(first) == {"next": "n0"}
    assert binds(first) == {}
    assert "being released" in first[0].reason
    assert binds(second) == {"next": "n0"}


def test_pipelining_needs_the_releasing_capacity_to_be_enough() -> None:
    objects = [
        node("n0", gpus=4),
        queue("q"),
        pod("staying", gpus=3, node_name="n0"),
        pod("leaving", gpus=1, node_name="n0", terminating=True),
        pod("big", gpus=2),
    ]
    assert one_cycle(objects, ALLOCATE) == []


def test_a_gang_with_one_pod_on_releasing_capacity_is_pipelined_whole() -> None:
    objects = [
        node("a", gpus=1),
        node("b", gpus=1),
        queue("q"),
        pod("leaving", gpus=1, node_name="a", terminating=True),
        *gang("g", size=2, gpus=1),
    ]
    first, second = cycles(objects, 2)
    assert binds(first) == {}
    assert pipelines(first) == {"g-0": "b", "g-1": "a"} or pipelines(first) == {"g-0": "a", "g-1": "b"}
    assert sorted(binds(second)) == ["g-0", "g-1"]
    assert binds(second) == pipelines(first)  # back on the pipelined nodes


def test_pipelined_resources_are_not_given_away_again_in_the_same_cycle() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q"),
        pod("leaving", gpus=2, node_name="n0", terminating=True),
        pod("first", gpus=2),
        pod("second", gpus=1),
    ]
    decisions = one_cycle(objects, ALLOCATE)
    assert pipelines(decisions) == {"first": "n0"}
    assert binds(decisions) == {}


def test_a_gpu_pipelined_to_a_whole_gpu_pod_is_not_shared_out_in_the_same_cycle() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q"),
        pod("leaving", fraction=0.5, node_name="n0", terminating=True, labels={"runai-gpu-group": "g1"}),
        pod("whole", gpus=1),
        pod("frac", fraction=0.5),
    ]
    decisions = one_cycle(objects, ALLOCATE)
    assert pipelines(decisions) == {"whole": "n0"}
    assert binds(decisions) == {}


def test_a_fraction_waits_for_a_shared_gpu_whose_only_holder_is_terminating() -> None:
    # KAI joins no shared GPU all of whose holders are releasing (IsTaskFitOnGpuGroup, node_info's
    # gpu_sharing_node_info.go): the GPU comes back whole, and the pod is pipelined onto a new shared GPU
    # there. With a holder that stays, the GPU is joined, pipelined onto the releasing part.
    objects = [
        node("n0", gpus=1),
        queue("q"),
        pod("leaving", fraction=0.5, node_name="n0", terminating=True, labels={"runai-gpu-group": "g1"}),
        pod("frac", fraction=0.5),
    ]
    decisions = one_cycle(objects, ALLOCATE)
    assert [(d.type, d.pod) for d in decisions] == [("pipeline", "default/frac")]
    assert decisions[0].gpu_groups != ("g1",)
    staying = pod("staying", fraction=0.25, node_name="n0", labels={"runai-gpu-group": "g1"})
    decisions = one_cycle([*objects[:2], staying, *objects[2:]], ALLOCATE)
    assert [(d.type, d.pod, d.gpu_groups) for d in decisions] == [("pipeline", "default/frac", ("g1",))]


# --- scheduling signatures -----------------------------------------------------------------------


def _count_choose_node(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    original = Session.choose_node

    def counting(self: Session, task: Any) -> Any:
        calls.append(task.name)
        return original(self, task)

    monkeypatch.setattr(Session, "choose_node", counting)
    return calls


def _signature_objects() -> list[Any]:
    return [
        node("n0", gpus=1),
        queue("q"),
        *[pod(f"big{i}", gpus=2) for i in range(3)],
        pod("other-shape", gpus=2, node_selector={"x": "y"}),
        pod("small", gpus=1),
    ]


def test_jobs_shaped_like_a_failed_one_are_skipped_for_the_rest_of_the_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _count_choose_node(monkeypatch)
    result = run(_signature_objects(), ALLOCATE, cycles=1)
    assert bound_order(result.cycles[0].decisions) == ["small"]
    assert calls == ["big0", "other-shape", "small"]
    first = result.reasons["default/pg-big0"]
    for skipped in ("default/pg-big1", "default/pg-big2"):
        # The skipped job says which job's failure it shares, and why that one failed.
        assert "default/pg-big0" in result.reasons[skipped]
        assert result.reasons[skipped].endswith(first)


def test_without_signatures_every_job_is_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_choose_node(monkeypatch)
    decisions = one_cycle(_signature_objects(), config(actions="allocate", useSchedulingSignatures=False))
    assert bound_order(decisions) == ["small"]
    assert calls == ["big0", "big1", "big2", "other-shape", "small"]


def test_a_job_of_one_pod_has_its_facts_made_only_once_one_of_its_placement_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job is alike to an earlier failed one only with the same pods, placement keys and all: the facts
    that number its signatures are made for a job of one pod only if it fails, or if a pod of its
    placement key failed before it in the walk (its signatures then looked up)."""
    # (The walk itself: `walk_replay` reads the facts of the first jobs of each queue; with the debug
    # variable set every job's are made, to be checked.)
    monkeypatch.setattr(_Walk, "replayed", lambda walk, jobs: None)
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    made: list[str] = []
    original = WalkFacts.made

    def recording(facts: WalkFacts, session: Session, job: Any, names: Any, *tasks: Any) -> Any:
        made.append(job.key)
        return original(facts, session, job, names, *tasks)

    monkeypatch.setattr(WalkFacts, "made", recording)
    objects = [
        node("n0", gpus=2),
        queue("q"),
        pod("first", gpus=1),
        pod("nowhere", gpus=1, node_selector={"x": "y"}),
        pod("nowhere-too", gpus=1, node_selector={"x": "y"}),
        pod("last", gpus=1),
    ]
    result = run(objects, ALLOCATE, cycles=1)
    assert bound_order(result.cycles[0].decisions) == ["first", "last"]
    assert made == ["default/pg-nowhere", "default/pg-nowhere-too"]
    assert "default/pg-nowhere" in result.reasons["default/pg-nowhere-too"]


def test_a_job_whose_facts_are_made_to_be_looked_up_is_not_asked_its_pods_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk hands the facts it makes of a job of one pod to look it up the pods it read to decide
    (`WalkFacts.made`'s `tasks`): a deep backlog's last stretch makes the facts of thousands of jobs."""
    monkeypatch.setattr(_Walk, "replayed", lambda walk, jobs: None)
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    asked: list[str] = []

    def recording(session: Session, job: Any) -> Any:
        asked.append(job.key)
        return kept_tasks(session, job)

    monkeypatch.setattr(walk_facts, "kept_tasks", recording)
    objects = [
        node("n0", gpus=2),
        queue("q"),
        pod("nowhere", gpus=1, node_selector={"x": "y"}),
        pod("nowhere-too", gpus=1, node_selector={"x": "y"}),
    ]
    result = run(objects, ALLOCATE, cycles=1)
    # The first one's facts are made as it fails (from its pods as kept), the second's to look it up.
    assert asked == ["default/pg-nowhere"]
    assert "default/pg-nowhere" in result.reasons["default/pg-nowhere-too"]


def test_with_the_debug_variable_a_job_taken_as_alike_to_none_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With `KAI_SCHEDULER_VERIFY_REUSE=1` a job whose facts the walk does not make is checked against the
    attempts that failed: one alike to them raises (here every job is taken as alike to none)."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    monkeypatch.setattr(_Walk, "replayed", lambda walk, jobs: None)
    monkeypatch.setattr(_Walk, "_facts_to_look_up", lambda walk, job: None)
    objects = [
        node("n0", gpus=2),
        queue("q"),
        pod("nowhere", gpus=1, node_selector={"x": "y"}),
        pod("nowhere-too", gpus=1, node_selector={"x": "y"}),
    ]
    with pytest.raises(CarriedMismatch, match="pg-nowhere-too"):
        run(objects, ALLOCATE, cycles=1)


def test_the_first_pod_of_a_lone_pods_attempt_is_read_only_once_it_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no attempt known to find no node (no last session's), the first pod of an attempt of one pod
    is read for what its failure notes: only once it failed."""
    monkeypatch.setattr(_Walk, "replayed", lambda walk, jobs: None)  # (the walk itself)
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    asked: list[str] = []
    original = SessionFailures.first_pod

    def recording(session: Session, job: Any, tasks: Any) -> Any:
        asked.append(job.key)
        return original(session, job, tasks)

    monkeypatch.setattr(SessionFailures, "first_pod", staticmethod(recording))
    objects = [
        node("n0", gpus=1),
        queue("q"),
        pod("fits", gpus=1),
        pod("nowhere", gpus=1, node_selector={"x": "y"}),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["fits"]
    assert asked == ["default/pg-nowhere"]


def test_signatures_distinguish_queues() -> None:
    objects = [
        node("n0", gpus=2),
        queue("limited", gpu_limit=1),
        queue("free"),
        pod("a", "limited", gpus=2),
        pod("b", "free", gpus=2),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["b"]


def test_a_shape_no_node_holds_is_not_tried_again_for_another_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    # (The walk itself: a walk that places nothing is written without walking, `test_walk_replay`.)
    monkeypatch.setattr(_Walk, "replayed", lambda walk, jobs: None)
    calls = _count_choose_node(monkeypatch)
    objects = [
        node("n0", gpus=1),
        queue("a"),
        queue("b"),
        pod("a-big", "a", gpus=2),
        pod("b-big", "b", gpus=2),
    ]
    result = run(objects, ALLOCATE, cycles=1)
    assert result.cycles[0].decisions == []
    assert len(calls) == 1
    tried, skipped = ("a-big", "b-big") if calls == ["a-big"] else ("b-big", "a-big")
    first = result.reasons[f"default/pg-{tried}"]
    # KAI's MaxNodePoolResources says why no node can hold it.
    assert "Max GPU resources available in a single node in the default node-pool is topped at 1" in first
    # Not tried, it is written as its own attempt would be: its own pod, refused alike.
    assert result.reasons[f"default/pg-{skipped}"] == first.replace(tried, skipped)


def test_a_shape_without_room_still_gets_its_own_queue_checks() -> None:
    """The other queue's job says why its own queue stops it (its limit), not that no node has room."""
    objects = [
        node("n0", gpus=1),
        queue("free"),
        queue("limited", gpu_limit=1),
        pod("free-big", "free", gpus=2),
        pod("limited-big", "limited", gpus=2),
    ]
    reasons = run(objects, ALLOCATE, cycles=1).reasons
    assert "Max GPU resources available in a single node" in reasons["default/pg-free-big"]
    assert reasons["default/pg-limited-big"].startswith("OverLimit")


# --- best-effort pods ----------------------------------------------------------------------------


def test_best_effort_pods_need_only_a_pod_slot() -> None:
    objects = [
        node("a", gpus=0, cpu="1", memory="1Gi", pods=2),
        queue("q", gpu=0, cpu=0, memory=0, gpu_limit=0, cpu_limit=0, memory_limit=0),
        *[pod(f"be{i}", cpu=None, memory=None) for i in range(3)],
        pod("busy", cpu="1", memory="1Gi", node_name="a", scheduler="default-scheduler", queue=None),
    ]
    # The node's CPU and memory are all taken by another scheduler's pod, and the queue allows nothing,
    # but a pod that asks for nothing still fits (one slot is left).
    result = run(objects, ALLOCATE, cycles=1)
    assert bound_order(result.cycles[0].decisions) == ["be0"]
    assert "Too many pods" in result.reasons["default/pg-be1"]


def test_best_effort_pods_count_nothing_against_their_queue() -> None:
    document = simulate([node("a", gpus=0), queue("q"), pod("be", cpu=None, memory=None)], ALLOCATE)
    (q,) = document["queues"]
    assert q["allocated"] == {"gpu": 0.0, "cpu": 0.0, "memory": 0.0}
    assert document["pods"][0]["phase"] == "Running"


# --- jobs that are not considered ----------------------------------------------------------------


def test_jobs_of_missing_queues_wait_with_queue_does_not_exist() -> None:
    document = simulate(
        [node("n0"), queue("q"), pod("lost", "nowhere", gpus=1), pod("fine", gpus=1)], ALLOCATE
    )
    groups = groups_by_name(document)
    assert groups["pg-lost"]["unschedulableReason"].startswith("QueueDoesNotExist")
    assert groups["pg-lost"]["pending"] == 1
    assert groups["pg-fine"]["unschedulableReason"] is None
    assert groups["pg-fine"]["running"] == 1


def test_jobs_in_a_parent_queue_are_not_scheduled() -> None:
    result = run(
        [node("n0"), queue("dept"), queue("team", parent="dept"), pod("p", "dept", gpus=1)],
        ALLOCATE,
        cycles=1,
    )
    assert result.cycles[0].decisions == []
    assert "leaf" in result.reasons["default/pg-p"]


def test_pods_of_other_schedulers_are_never_scheduled() -> None:
    objects = [node("n0"), queue("q"), pod("theirs", gpus=1, scheduler="default-scheduler")]
    assert one_cycle(objects, ALLOCATE) == []


def test_queue_depth_per_action_bounds_the_jobs_considered_per_queue() -> None:
    objects = [node("n0", gpus=8), queue("q"), *[pod(f"p{i}", gpus=1) for i in range(3)]]
    decisions = one_cycle(objects, config(actions="allocate", queueDepthPerAction={"allocate": 1}))
    assert bound_order(decisions) == ["p0"]


def test_a_gang_with_sub_groups_needs_every_sub_group_minimum() -> None:
    sub_groups = [{"name": "workers", "minMember": 2}, {"name": "leader", "minMember": 1}]

    def objects(gpus: int) -> list[Any]:
        return [
            node("n0", gpus=gpus),
            queue("q"),
            pod_group("g", min_member=3, sub_groups=sub_groups),
            *[
                pod(f"w{i}", group="g", gpus=1, labels={"kai.scheduler/subgroup-name": "workers"})
                for i in range(3)
            ],
            pod("l", group="g", gpus=1, labels={"kai.scheduler/subgroup-name": "leader"}),
        ]

    # Sub-groups equally short of their minimum are placed in the PodGroup's order (KAI's sort keeps it).
    assert bound_order(one_cycle(objects(2), ALLOCATE)) == []
    assert bound_order(one_cycle(objects(3), ALLOCATE)) == ["w0", "w1", "l"]
    assert bound_order(one_cycle(objects(4), ALLOCATE)) == ["w0", "w1", "l", "w2"]


def test_an_allocate_after_pods_moved_hands_out_only_jobs_still_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While no pod has moved in the session, every job waiting as it opened still waits and is handed
    out as it is; once pods moved (here: the first allocate placed one), a job with no pod left to place
    is not handed out again."""
    handed_out: list[list[str]] = []
    original = _Walk.replayed

    def recording(walk: _Walk, jobs: list[Any]) -> Any:
        handed_out.append(sorted(job.key for job in jobs))
        return original(walk, jobs)

    monkeypatch.setattr(_Walk, "replayed", recording)
    objects = [node("n0", gpus=1), queue("q"), pod("fits", gpus=1), pod("waits", gpus=1)]
    result = run(objects, config(actions="allocate, allocate"), cycles=1)
    assert bound_order(result.cycles[0].decisions) == ["fits"]
    assert handed_out == [["default/pg-fits", "default/pg-waits"], ["default/pg-waits"]]
