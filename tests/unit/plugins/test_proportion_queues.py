"""proportion: queue order (hierarchical; over-utilised last; starved first; priority; dominant share;
creation), limits up the tree (OverLimit), non-preemptible jobs within deserved quota
(NonPreemptibleOverQuota), and the live accounting behind them.

Reference: kai-reference §4.2 Queue order (the 8 criteria) and Hierarchical job queue, §4.3 allocate (a)
(`IsJobOverQueueCapacity`: limits of every ancestor; non-preemptible within deserved for the queue or any
ancestor; "Preemptible (priority<100) jobs may allocate above deserved (up to limit); non-preemptible jobs
only within deserved"), §2.1 (limit 0 = no allowance, -1 unlimited), §5.1 (Allocated counts
Allocated/Binding/Bound/Running; in-session events update shares), gotcha 2.
"""

from __future__ import annotations

import pytest

from helpers import bound_order, config, node, one_cycle, open_session, pod, queue, run
from kai_scheduler.model.jobs import TaskStatus
from kai_scheduler.plugins.proportion.plugin import allocatable_share, dominant_share

ALLOCATE = config(actions="allocate")


def reasons(objects: list, **kwargs: object) -> dict[str, str]:  # type: ignore[type-arg]
    return run(objects, ALLOCATE, cycles=1).reasons


# --- queue order ---------------------------------------------------------------------------------


def test_two_queues_take_turns_when_gpus_are_scarce() -> None:
    objects = [
        node("n0", gpus=4),
        queue("q1", gpu=1),
        queue("q2", gpu=1),
        *[pod(f"q1-{i}", "q1", gpus=1) for i in range(3)],
        *[pod(f"q2-{i}", "q2", gpus=1) for i in range(3)],
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["q1-0", "q2-0", "q1-1", "q2-1"]


def test_a_starved_queue_goes_before_a_queue_with_a_lower_dominant_share() -> None:
    # a: no quota, big fair share (8 of 10); b: quota 1, fair share 2. a's dominant share with the
    # job is 1/8 < b's 1/2, and a is older, but b is below its deserved quota: b first.
    objects = [
        node("n0", gpus=10),
        queue("a", gpu=0),
        queue("b", gpu=1),
        *[pod(f"a-{i}", "a", gpus=1) for i in range(10)],
        *[pod(f"b-{i}", "b", gpus=1) for i in range(2)],
    ]
    session = open_session(objects)
    assert session.snapshot.queues["a"].fair_share.gpu == pytest.approx(8)
    assert session.snapshot.queues["b"].fair_share.gpu == pytest.approx(2)
    assert bound_order(one_cycle(objects, ALLOCATE))[0] == "b-0"


def test_higher_priority_queue_goes_first() -> None:
    objects = [
        node("n0", gpus=4),
        queue("lo", gpu=0),
        queue("hi", gpu=0, priority=200),
        pod("lo-0", "lo", gpus=1),
        pod("hi-0", "hi", gpus=1),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["hi-0", "lo-0"]


def test_priority_dominates_deserved_quota_order_only_among_equally_starved_queues() -> None:
    objects = [
        node("n0", gpus=4),
        queue("hi", gpu=0, priority=200),
        queue("starved", gpu=2),
        pod("hi-0", "hi", gpus=1),
        pod("starved-0", "starved", gpus=1),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["starved-0", "hi-0"]


def test_an_over_utilised_queue_goes_last() -> None:
    # old (older queue) holds 3 of 4 GPUs, CPUs and memory, but its fair share is 2 of each: it is
    # over-utilised in every resource, so the new queue's job goes first.
    objects = [
        node("n0", gpus=4, cpu="4", memory="4Gi"),
        queue("old", gpu=0, cpu=0, memory=0),
        queue("new", gpu=0, cpu=0, memory=0),
        *[pod(f"old-run-{i}", "old", gpus=1, node_name="n0") for i in range(3)],
        pod("old-more", "old", gpus=1),
        *[pod(f"new-{i}", "new", gpus=1) for i in range(2)],
    ]
    session = open_session(objects)
    old = session.snapshot.queues["old"]
    assert old.allocated.gpu == 3
    assert old.fair_share.gpu == pytest.approx(2)
    assert all(old.fair_share.get(r) < old.allocated.get(r) for r in ("gpu", "cpu", "memory"))
    key = session.queue_order_key
    job_old = session.snapshot.jobs["default/pg-old-more"]
    job_new = session.snapshot.jobs["default/pg-new-0"]
    assert key(old, job_old)[0] is True
    assert key(session.snapshot.queues["new"], job_new)[0] is False
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["new-0"]


def test_the_queue_tree_is_ordered_level_by_level() -> None:
    objects = [
        node("n0", gpus=4),
        queue("dept-a", gpu=2),
        queue("dept-b", gpu=2),
        queue("a1", gpu=1, parent="dept-a"),
        queue("a2", gpu=1, parent="dept-a"),
        queue("b1", gpu=2, parent="dept-b"),
        *[pod(f"a1-{i}", "a1", gpus=1) for i in range(2)],
        *[pod(f"a2-{i}", "a2", gpus=1) for i in range(2)],
        *[pod(f"b1-{i}", "b1", gpus=1) for i in range(2)],
    ]
    # Departments alternate (both starved; then the one with the lower share), and inside dept-a the
    # two teams alternate.
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["a1-0", "b1-0", "a2-0", "b1-1"]


def test_queue_creation_breaks_the_last_tie() -> None:
    objects = [
        node("n0", gpus=1),
        queue("zeta", gpu=0),
        queue("alpha", gpu=0),
        pod("alpha-0", "alpha", gpus=1),
        pod("zeta-0", "zeta", gpus=1),
    ]
    # Equal queues: the older queue (zeta, listed first) is served first although its job is newer.
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["zeta-0"]


def test_queue_creation_timestamp_beats_document_order() -> None:
    objects = [
        node("n0", gpus=1),
        queue("young", gpu=0, created="2025-12-31T12:00:00Z"),
        queue("old", gpu=0, created="2025-12-30T12:00:00Z"),
        pod("young-0", "young", gpus=1),
        pod("old-0", "old", gpus=1),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["old-0"]


# --- helpers of the order ------------------------------------------------------------------------


def test_allocatable_share_and_dominant_share() -> None:
    session = open_session([node("n0", gpus=8), queue("q", gpu=2, gpu_limit=3), queue("z", gpu=0)])
    q, z = session.snapshot.queues["q"], session.snapshot.queues["z"]
    q.fair_share.gpu = 5
    assert allocatable_share(q, "gpu", 8) == 3  # min(limit 3, max(2, 5))
    q.fair_share.gpu = 1
    assert allocatable_share(q, "gpu", 8) == 2
    unlimited = session.snapshot.queues["q"]
    assert allocatable_share(unlimited, "cpu", 64000) == 64000  # quota -1: the cluster
    assert allocatable_share(z, "gpu", 8) == 0
    from kai_scheduler.model.resources import Resources

    assert dominant_share(Resources(gpu=1, cpu=100), {"gpu": 2, "cpu": 1000, "memory": 1}) == 0.5
    assert dominant_share(Resources(gpu=1), {"gpu": 0, "cpu": 1, "memory": 1}) == 1000  # zero share


# --- limits --------------------------------------------------------------------------------------


def test_leaf_limit() -> None:
    objects = [node("n0", gpus=8), queue("q", gpu_limit=2), *[pod(f"p{i}", gpus=1) for i in range(3)]]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["p0", "p1"]
    reason = reasons(objects)["default/pg-p2"]
    assert reason.startswith("OverLimit")
    assert "queue q" in reason


def test_a_parent_limit_caps_all_its_children() -> None:
    objects = [
        node("n0", gpus=8),
        queue("dept", gpu_limit=2),
        queue("t1", parent="dept"),
        queue("t2", parent="dept"),
        pod("t1-0", "t1", gpus=1),
        pod("t2-0", "t2", gpus=1),
        pod("t1-1", "t1", gpus=1),
        pod("other", "solo", gpus=1),
        queue("solo"),
    ]
    decided = bound_order(one_cycle(objects, ALLOCATE))
    assert sorted(decided) == ["other", "t1-0", "t2-0"]
    reason = reasons(objects)["default/pg-t1-1"]
    assert reason.startswith("OverLimit") and "queue dept" in reason


def test_limit_zero_allows_nothing_but_only_for_that_resource() -> None:
    objects = [
        node("n0", gpus=8),
        queue("q", gpu_limit=0),
        pod("gpu", gpus=1),
        pod("cpu-only", cpu="1"),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["cpu-only"]
    assert reasons(objects)["default/pg-gpu"].startswith("OverLimit")


def test_a_gang_counts_its_whole_request_against_the_limit() -> None:
    from helpers import gang

    objects = [node("n0", gpus=8), queue("q", gpu_limit=3), *gang("g", size=4, gpus=1)]
    assert bound_order(one_cycle(objects, ALLOCATE)) == []
    assert reasons(objects)["default/g"].startswith("OverLimit")


def test_cpu_and_memory_limits_use_queue_units() -> None:
    # cpu limit 1500 millicores, memory limit 3000 MB (3e9 bytes)
    objects = [
        node("n0", gpus=0, cpu="16", memory="64Gi"),
        queue("q", cpu_limit=1500, memory_limit=3000),
        pod("a", cpu="1", memory="1G"),
        pod("b", cpu="500m", memory="1G"),
        pod("c", cpu="100m", memory="100M"),
        pod("d", cpu=None, memory="1G"),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["a", "b", "d"]
    assert "cpu limit" in reasons(objects)["default/pg-c"]


# --- non-preemptible within deserved --------------------------------------------------------------


def test_inference_waits_in_a_queue_with_quota_zero_but_train_runs() -> None:
    objects = [
        node("n0", gpus=8),
        queue("q", gpu=0),
        pod("inf", gpus=1, priority_class="inference"),
        pod("train", gpus=1, priority_class="train"),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["train"]
    reason = reasons(objects)["default/pg-inf"]
    assert reason.startswith("NonPreemptibleOverQuota")
    assert "queue q" in reason


def test_non_preemptible_jobs_fill_deserved_quota_and_no_more() -> None:
    objects = [
        node("n0", gpus=8),
        queue("q", gpu=2),
        *[pod(f"build-{i}", gpus=1, priority_class="build") for i in range(3)],
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["build-0", "build-1"]
    assert reasons(objects)["default/pg-build-2"].startswith("NonPreemptibleOverQuota")


def test_running_preemptible_pods_do_not_use_up_the_non_preemptible_quota() -> None:
    objects = [
        node("n0", gpus=8),
        queue("q", gpu=2),
        pod("train-0", gpus=1, priority_class="train", node_name="n0"),
        pod("train-1", gpus=1, priority_class="train", node_name="n0"),
        pod("inf", gpus=2, priority_class="inference"),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["inf"]


def test_a_parent_quota_bounds_non_preemptible_jobs_of_its_children() -> None:
    objects = [
        node("n0", gpus=8),
        queue("dept", gpu=1),
        queue("team", gpu=4, parent="dept"),
        pod("inf-0", "team", gpus=1, priority_class="inference"),
        pod("inf-1", "team", gpus=1, priority_class="inference"),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["inf-0"]
    reason = reasons(objects)["default/pg-inf-1"]
    assert reason.startswith("NonPreemptibleOverQuota") and "queue dept" in reason


def test_the_non_preemptible_check_compares_only_the_queues_with_a_quota(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A queue without a quota (every resource unlimited) never refuses a non-preemptible job: only the
    queues of the job's path that have one are compared (asked for every such job handed out)."""
    from kai_scheduler.model.resources import Resources
    from kai_scheduler.plugins.proportion import plugin as proportion

    objects = [
        node("n0", gpus=8),
        queue("dept", gpu=1),
        queue("team", parent="dept"),
        pod("inf-0", "team", gpus=1, priority_class="inference"),
    ]
    session = open_session(objects)
    checked: list[tuple[float, ...]] = []
    compare = proportion._first_exceeded

    def counted(used: Resources, request: Resources, bounds: tuple[float, ...]) -> str | None:
        checked.append(bounds)
        return compare(used, request, bounds)

    monkeypatch.setattr(proportion, "_first_exceeded", counted)
    plugin = session.points.queue_order.__self__  # type: ignore[union-attr]
    job = session.snapshot.jobs["default/pg-inf-0"]
    assert plugin.non_preemptible_over_quota(job, Resources(gpu=1)) is None
    assert plugin.non_preemptible_over_quota(job, Resources(gpu=2)).startswith("NonPreemptibleOverQuota")
    assert len(checked) == 2 and all(bounds[0] == 1 for bounds in checked)  # the department's, each time


def test_preemptible_jobs_may_go_above_deserved_up_to_the_limit() -> None:
    objects = [node("n0", gpus=8), queue("q", gpu=1, gpu_limit=3), *[pod(f"t{i}", gpus=1) for i in range(4)]]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["t0", "t1", "t2"]


def test_non_preemptible_check_ignores_resources_the_job_does_not_ask_for() -> None:
    objects = [node("n0", gpus=8), queue("q", gpu=0), pod("inf-cpu", cpu="1", priority_class="inference")]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["inf-cpu"]


# --- live accounting -----------------------------------------------------------------------------


def test_queue_allocation_counts_running_pods_up_the_tree_and_requests_include_pending() -> None:
    objects = [
        node("n0", gpus=8, gpu_memory=40000),
        queue("dept"),
        queue("team", parent="dept"),
        pod("run", "team", gpus=2, cpu="2", node_name="n0"),
        pod("frac", "team", fraction=0.5, node_name="n0", labels={"runai-gpu-group": "g"}),
        pod("mem", "team", gpu_memory=10000, node_name="n0", labels={"runai-gpu-group": "h"}),
        pod("wait", "team", gpus=1),
        pod("leaving", "team", gpus=1, node_name="n0", terminating=True),
    ]
    session = open_session(objects)
    team, dept = session.snapshot.queues["team"], session.snapshot.queues["dept"]
    assert team.allocated.gpu == pytest.approx(2 + 0.5 + 0.25)  # releasing pods are not counted
    assert dept.allocated.gpu == pytest.approx(team.allocated.gpu)
    assert team.request.gpu == pytest.approx(2 + 0.5 + 0.25 + 1)
    assert team.allocated_non_preemptible.gpu == 0


# --- fullHierarchyFairness: false ----------------------------------------------------------------


def _departments() -> list:  # type: ignore[type-arg]
    return [
        node("n0", gpus=4),
        queue("dept-a", gpu=1),
        queue("dept-b", gpu=3),
        queue("a1", gpu=2, parent="dept-a"),
        queue("a2", gpu=2, parent="dept-a"),
        queue("b1", gpu=0, parent="dept-b"),
        *[pod(f"{q}-{i}", q, gpus=1) for q in ("a1", "a2", "b1") for i in range(4)],
    ]


def test_full_hierarchy_fairness_divides_through_the_departments() -> None:
    # dept-a 1, dept-b 3 at the top; b1 inherits dept-b's 3. Departments are ordered first: dept-b is
    # starved with the lower share (1/3, 2/3), then tie and dept-a's lower share without the job, then
    # only dept-b is still starved.
    decisions = one_cycle(_departments(), ALLOCATE)
    assert bound_order(decisions) == ["b1-0", "b1-1", "a1-0", "b1-2"]
    session = open_session(_departments())
    assert session.snapshot.queues["b1"].fair_share.gpu == pytest.approx(3)


def test_flat_fairness_divides_among_leaf_queues() -> None:
    session = open_session(_departments(), config(fullHierarchyFairness=False))
    shares = {q.name: q.fair_share.gpu for q in session.snapshot.queues}
    assert shares["a1"] == pytest.approx(2) and shares["a2"] == pytest.approx(2)
    assert shares["b1"] == pytest.approx(0)


def test_flat_fairness_orders_leaf_queues_directly() -> None:
    decisions = one_cycle(_departments(), config(actions="allocate", fullHierarchyFairness=False))
    assert bound_order(decisions) == ["a1-0", "a2-0", "a1-1", "a2-1"]


@pytest.mark.parametrize("dominant", ["gpu", "cpu", "memory"])
@pytest.mark.parametrize("zero_share", [None, "gpu", "cpu", "memory"])
def test_the_dominant_share_is_the_largest_ratio_of_any_resource(
    dominant: str, zero_share: str | None
) -> None:
    """Each resource in turn the largest ratio, with each share in turn 0 (any use counts 1000 times
    over) or none: the answer is the largest of the ratios, 0 with no use (fails when a resource is left
    out or weighed with another's share)."""
    from kai_scheduler.model.resources import RESOURCE_NAMES, Resources

    used = {"gpu": 1.0, "cpu": 1.0, "memory": 1.0, dominant: 6.0}
    shares = {"gpu": 4.0, "cpu": 2.0, "memory": 8.0}
    if zero_share is not None:
        shares[zero_share] = 0.0
    ratios = [used[r] * 1000 if shares[r] == 0 else used[r] / shares[r] for r in RESOURCE_NAMES]
    assert dominant_share(Resources(**used), shares) == max(ratios)
    assert dominant_share(Resources(), shares) == 0.0


@pytest.mark.parametrize("dominant", ["gpu", "cpu", "memory", None])
def test_the_queue_order_key_weighs_the_dominant_share_with_and_without_the_request(
    dominant: str | None,
) -> None:
    """The order key's dominant shares (with the job's request, then without) are `dominant_share` of the
    queue's allocation with and without it: each resource in turn the largest ratio, or (None) every
    allocation a rounding below zero (undone placements), which counts as 0 (fails when the key leaves a
    resource out, or gives a negative ratio)."""
    from kai_scheduler.model.resources import RESOURCE_NAMES, Resources
    from kai_scheduler.plugins.proportion.plugin import ProportionPlugin

    session = open_session([node("n0", gpus=8), queue("q", gpu=4), pod("p", "q", gpus=1)])
    plugin = session.points.queue_order.__self__  # type: ignore[union-attr]
    assert isinstance(plugin, ProportionPlugin)
    q = session.snapshot.queues["q"]
    shares = dict(zip(RESOURCE_NAMES, plugin._allocatable_shares(q), strict=True))
    assert all(share > 0 for share in shares.values())
    used = {r: -1e-9 if dominant is None else shares[r] / 8 for r in RESOURCE_NAMES}
    asked = {r: shares[r] / 16 for r in RESOURCE_NAMES}
    if dominant is not None:
        used[dominant], asked[dominant] = shares[dominant] / 2, 0.0
    with_request = {r: used[r] + asked[r] for r in RESOURCE_NAMES}
    key = plugin._order_key_at(q, Resources(**used).values(), Resources(**asked))
    assert key[4] == dominant_share(Resources(**with_request), shares)
    assert key[5] == dominant_share(Resources(**used), shares)
    assert key[5] == (0.0 if dominant is None else 0.5)


def test_shared_gpu_pods_on_nodes_alike_take_their_queue_through_one_kept_amount() -> None:
    """What a shared-GPU pod on a node takes of its queue reads the node's GPU memory: kept by the request
    and that memory (one object for the pods alike on nodes alike), not worked out for each pod placed."""
    objects = [
        node("n0", gpus=1, gpu_memory=100),
        node("n1", gpus=1, gpu_memory=100),
        node("n2", gpus=1, gpu_memory=200),
        queue("q"),
        *[pod(f"p{i}", gpu_memory=40, cpu=None, memory=None) for i in range(3)],
    ]
    session = open_session(objects)
    plugin = session.points.job_capacity_checks[0].__self__  # type: ignore[attr-defined]
    tasks = sorted(session.snapshot.tasks.values(), key=lambda task: task.name)
    for node_index, task in enumerate(tasks):
        session.state.place(task, node_index, (f"g{node_index}",), TaskStatus.ALLOCATED)
    first, alike, other = (plugin._task_resources(task) for task in tasks)
    assert alike is first and other is not first
    assert (first.gpu, other.gpu) == (0.4, 0.2)
