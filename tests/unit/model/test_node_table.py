"""NodeTable: fit now (idle) vs soon (idle + releasing), whole GPUs vs shared GPU groups.

Reference: kai-reference §4.1 (active-used statuses occupy node resources; Releasing pods still hold them),
§4.3 allocate (d) (fit idle -> allocate, fit idle+releasing -> pipeline), §6 (a fractional pod lives on a
GPU group that consumes one idle whole GPU; gpu-memory is converted per node).
"""

from __future__ import annotations

import numpy as np
import pytest

from helpers import node, pod, queue, snapshot_of
from kai_scheduler.model.builder import build_node_table, pod_request
from kai_scheduler.model.nodes import NodeTable, PipelineTake
from kai_scheduler.model.resources import EPSILON, PodRequest

GI = 2**30


def table(*nodes_: object) -> NodeTable:
    return build_node_table(list(nodes_))  # type: ignore[arg-type]


def at(table_: NodeTable, name: str, mask: np.ndarray) -> bool:
    return bool(mask[table_.index[name]])


# --- construction ----------------------------------------------------------------------------------


def test_nodes_are_sorted_by_name_and_capacities_converted() -> None:
    t = table(node("b", gpus=2, cpu="8", memory="16Gi"), node("a", gpus=4, cpu="500m", memory="1Gi"))
    assert t.names == ["a", "b"]
    assert t.index == {"a": 0, "b": 1}
    assert list(t.cap_cpu) == [500.0, 8000.0]  # millicores
    assert list(t.cap_memory) == [GI, 16 * GI]
    assert list(t.cap_gpus) == [4.0, 2.0]
    assert list(t.free_gpus) == [4.0, 2.0]


def test_max_pods_defaults_to_110_when_allocatable_omits_pods() -> None:
    manifest_node = node("n", pods=3)
    t = table(manifest_node)
    assert t.cap_pods[0] == 3
    from kai_scheduler.api.objects import Node

    bare = Node.model_validate({"metadata": {"name": "bare"}, "status": {"allocatable": {"cpu": "1"}}})
    assert table(bare).cap_pods[0] == 110


def test_gpu_memory_label_is_floored_to_100_mib_and_missing_is_zero() -> None:
    t = table(node("a", gpu_memory=40536), node("b"))
    assert t.gpu_memory_mib[t.index["a"]] == 40500
    assert t.gpu_memory_mib[t.index["b"]] == 0


def test_each_nodes_capacity_is_its_own_whether_its_quantity_objects_are_shared_or_not() -> None:
    # The table converts each quantity object once: nodes holding one object, equal objects or
    # different ones all read their own values.
    from fractions import Fraction

    shared = Fraction(3, 2)
    nodes_ = [node(f"n{i}") for i in range(5)]
    values = [shared, shared, Fraction(3, 2), Fraction(5, 2), 4]
    for n, value in zip(nodes_, values, strict=True):
        n.status.allocatable["cpu"] = value
        n.status.allocatable["nvidia.com/gpu"] = value
    t = table(*nodes_)
    assert list(t.cap_cpu) == [1500.0, 1500.0, 1500.0, 2500.0, 4000.0]
    assert list(t.cap_gpus) == [1.5, 1.5, 1.5, 2.5, 4.0]


# --- fit now vs soon -------------------------------------------------------------------------------


def test_fit_now_vs_soon_with_a_terminating_pod() -> None:
    snap = snapshot_of(
        [
            node("n0", gpus=4, cpu="8", memory="32Gi"),
            queue("q"),
            pod("running", gpus=2, cpu="2", memory="4Gi", node_name="n0"),
            pod("leaving", gpus=2, cpu="2", memory="4Gi", node_name="n0", terminating=True),
        ]
    )
    t = snap.nodes
    assert t.free_gpus[0] == 0
    assert t.rel_gpus[0] == 2
    assert t.used_cpu[0] == 4000 and t.rel_cpu[0] == 2000
    two = PodRequest(cpu=1000, memory=GI, whole_gpus=2)
    three = PodRequest(cpu=1000, memory=GI, whole_gpus=3)
    assert not t.fit(two, soon=False)[0]
    assert t.fit(two, soon=True)[0]
    assert not t.fit(three, soon=True)[0]


@pytest.mark.parametrize(
    ("request_", "now", "soon"),
    [
        (PodRequest(cpu=5000), False, True),  # 8 - 4 used = 4 idle, +2 releasing = 6
        (PodRequest(cpu=7000), False, False),
        (PodRequest(memory=30 * GI), False, True),  # 34 - 10 = 24Gi idle, +6 releasing = 30
        (PodRequest(cpu=4000), True, True),
    ],
)
def test_fit_checks_cpu_and_memory_now_and_soon(request_: PodRequest, now: bool, soon: bool) -> None:
    snap = snapshot_of(
        [
            node("n0", gpus=0, cpu="8", memory="34Gi"),
            queue("q"),
            pod("running", cpu="2", memory="4Gi", node_name="n0"),
            pod("leaving", cpu="2", memory="6Gi", node_name="n0", terminating=True),
        ]
    )
    t = snap.nodes
    assert bool(t.fit(request_, soon=False)[0]) is now
    assert bool(t.fit(request_, soon=True)[0]) is soon


def test_pod_slots_count_and_releasing_slots_come_back() -> None:
    snap = snapshot_of(
        [
            node("n0", gpus=0, pods=2),
            queue("q"),
            pod("a", node_name="n0"),
            pod("b", node_name="n0", terminating=True),
        ]
    )
    t = snap.nodes
    best_effort = PodRequest()
    assert not t.fit(best_effort, soon=False)[0]
    assert t.fit(best_effort, soon=True)[0]


def test_succeeded_and_failed_pods_hold_nothing() -> None:
    snap = snapshot_of(
        [
            node("n0", gpus=2),
            queue("q"),
            pod("done", gpus=2, node_name="n0", phase="Succeeded"),
            pod("broken", gpus=2, node_name="n0", phase="Failed"),
        ]
    )
    assert snap.nodes.free_gpus[0] == 2
    assert snap.nodes.used_pods[0] == 0


def test_hold_and_unhold_are_inverse() -> None:
    t = table(node("n0", gpus=4, cpu="8", memory="8Gi"))
    request = PodRequest(cpu=1500, memory=GI, whole_gpus=2, scalars=())
    before = (
        t.used_cpu.copy(),
        t.used_memory.copy(),
        t.used_pods.copy(),
        t.free_gpus.copy(),
        t.rel_gpus.copy(),
    )
    t.hold(0, request, releasing=True)
    assert t.free_gpus[0] == 2 and t.rel_gpus[0] == 2 and t.rel_cpu[0] == 1500
    t.unhold(0, request, releasing=True)
    after = (t.used_cpu, t.used_memory, t.used_pods, t.free_gpus, t.rel_gpus)
    for a, b in zip(before, after, strict=True):
        assert np.array_equal(a, b)


def test_mark_and_unmark_releasing_are_inverse() -> None:
    t = table(node("n0", gpus=4))
    request = PodRequest(cpu=1000, whole_gpus=1)
    t.hold(0, request, releasing=False)
    t.mark_releasing(0, request, "default/p", ())
    assert t.rel_gpus[0] == 1 and t.rel_cpu[0] == 1000 and t.rel_pods[0] == 1
    assert t.fit(PodRequest(whole_gpus=4), soon=True)[0]
    assert not t.fit(PodRequest(whole_gpus=4), soon=False)[0]
    t.unmark_releasing(0, request, "default/p", ())
    assert t.rel_gpus[0] == 0 and t.rel_cpu[0] == 0 and t.rel_pods[0] == 0


# --- shared GPU groups ----------------------------------------------------------------------------


def test_a_group_takes_one_whole_gpu_and_the_last_pod_out_returns_it() -> None:
    t = table(node("n0", gpus=2))
    t.join_group(0, "g1", "default/a", 0.5, releasing=False)
    assert t.free_gpus[0] == 1
    assert t.shared_free_now[0] == pytest.approx(0.5)
    t.join_group(0, "g1", "default/b", 0.25, releasing=False)
    assert t.free_gpus[0] == 1  # joining an existing group takes no further GPU
    assert t.group_by_id["g1"].used == pytest.approx(0.75)
    t.leave_group("g1", "default/a", releasing=False)
    assert t.free_gpus[0] == 1
    assert t.group_by_id["g1"].holders == {"default/b": 0.25}
    t.leave_group("g1", "default/b", releasing=False)
    assert t.free_gpus[0] == 2  # the GPU comes back whole
    assert "g1" not in t.group_by_id
    assert 0 not in t.groups
    assert t.shared_free_now[0] == 0


def test_fractional_fit_uses_a_shared_gpu_with_room_or_a_free_whole_gpu() -> None:
    t = table(node("n0", gpus=1))
    half = PodRequest(gpu_portion=0.5, gpu_devices=1)
    big = PodRequest(gpu_portion=0.6, gpu_devices=1)
    assert t.fit(half, soon=False)[0]  # a whole free GPU would open a group
    t.join_group(0, "g1", "default/a", 0.5, releasing=False)
    assert t.free_gpus[0] == 0
    assert t.fit(half, soon=False)[0]  # room on the shared GPU
    assert not t.fit(big, soon=False)[0]
    assert not t.fit(PodRequest(whole_gpus=1), soon=False)[0]


def test_a_shared_gpu_whose_pods_all_release_comes_back_whole_soon() -> None:
    t = table(node("n0", gpus=1))
    t.hold(0, PodRequest(), releasing=True)
    t.join_group(0, "g1", "default/a", 0.5, releasing=True)
    assert t.rel_gpus[0] == 1
    assert not t.fit(PodRequest(whole_gpus=1), soon=False)[0]
    assert t.fit(PodRequest(whole_gpus=1), soon=True)[0]
    big = PodRequest(gpu_portion=0.75, gpu_devices=1)
    assert not t.fit(big, soon=False)[0]
    assert t.fit(big, soon=True)[0]
    # Once someone else joins and stays, the GPU no longer comes back whole.
    t.join_group(0, "g1", "default/b", 0.25, releasing=False)
    assert t.rel_gpus[0] == 0


def test_releasing_part_of_a_shared_gpu() -> None:
    t = table(node("n0", gpus=1))
    t.join_group(0, "g1", "default/a", 0.5, releasing=False)
    t.join_group(0, "g1", "default/b", 0.5, releasing=False)
    assert t.shared_free_now[0] == pytest.approx(0.0)
    t.mark_releasing(0, PodRequest(gpu_portion=0.5, gpu_devices=1), "default/b", ("g1",))
    assert t.shared_free_soon[0] == pytest.approx(0.5)
    assert t.shared_free_now[0] == pytest.approx(0.0)
    assert t.rel_gpus[0] == 0  # a still holds part of it
    t.unmark_releasing(0, PodRequest(gpu_portion=0.5, gpu_devices=1), "default/b", ("g1",))
    assert t.shared_free_soon[0] == pytest.approx(0.0)


def test_multi_device_fraction_needs_that_many_gpus() -> None:
    t = table(node("n0", gpus=2))
    two_halves = PodRequest(gpu_portion=0.5, gpu_devices=2)
    three_halves = PodRequest(gpu_portion=0.5, gpu_devices=3)
    assert t.fit(two_halves, soon=False)[0]
    assert not t.fit(three_halves, soon=False)[0]
    t.join_group(0, "g1", "default/a", 0.5, releasing=False)
    # one shared GPU with room + one whole GPU
    assert t.fit(two_halves, soon=False)[0]
    assert len(t.shared_candidates(0, 0.5, soon=False)) == 1


def test_a_shared_gpu_promised_more_than_it_has_marks_its_node_overcommitted_until_it_is_not() -> None:
    """A pod pipelined onto the part of a shared GPU a releasing holder gives back, that holder still on
    it: the GPU's unused parts sum below zero, and the node is overcommitted until the holder leaves (a
    copy keeps its own; a cleared node is not)."""
    t = table(node("n0", gpus=2), node("n1", gpus=2))
    t.join_group(0, "g1", "default/keep", 0.5, releasing=False)
    t.join_group(0, "g1", "default/leave", 0.25, releasing=True)
    assert t.overcommitted() == set()
    t.join_group(0, "g1", "default/new", 0.5, releasing=False)  # 1.25 of one GPU
    assert t.shared_free_total[0] == pytest.approx(-0.25)
    assert t.overcommitted() == {0}
    copy = t.copy()
    t.leave_group("g1", "default/leave", releasing=True)
    assert t.overcommitted() == set()
    assert copy.overcommitted() == {0}
    copy.clear_node(0)
    assert copy.overcommitted() == set()


def test_idle_gpus_total_counts_free_parts_of_shared_gpus() -> None:
    t = table(node("n0", gpus=4))
    t.join_group(0, "g1", "default/a", 0.25, releasing=False)
    assert t.idle_gpus_total()[0] == pytest.approx(3.75)


# --- gpu-memory converted per node ---------------------------------------------------------------


def test_gpu_memory_request_is_a_portion_of_each_nodes_device_memory() -> None:
    t = table(
        node("a40", gpus=1, gpu_memory=40000), node("a80", gpus=1, gpu_memory=80000), node("nomem", gpus=1)
    )
    request = PodRequest(gpu_memory_mib=20000, gpu_devices=1)
    portions = t.portion_for(request)
    assert portions[t.index["a40"]] == pytest.approx(0.5)
    assert portions[t.index["a80"]] == pytest.approx(0.25)
    assert np.isinf(portions[t.index["nomem"]])
    fits = t.fit(request, soon=False)
    assert at(t, "a40", fits) and at(t, "a80", fits) and not at(t, "nomem", fits)
    too_big = PodRequest(gpu_memory_mib=60000, gpu_devices=1)
    fits = t.fit(too_big, soon=False)
    assert not at(t, "a40", fits) and at(t, "a80", fits)


def test_pod_request_from_annotations() -> None:
    fractional = pod_request(pod("f", fraction=0.25, num_devices=2))
    assert fractional.gpu_portion == 0.25 and fractional.gpu_devices == 2 and fractional.whole_gpus == 0
    assert fractional.queue_gpus(0) == pytest.approx(0.5)
    memory = pod_request(pod("m", gpu_memory=10000))
    assert memory.gpu_memory_mib == 10000 and memory.gpu_devices == 1
    assert memory.queue_gpus(40000) == pytest.approx(0.25)
    whole = pod_request(pod("w", gpus=2, cpu="500m", memory="1Gi"))
    assert (whole.whole_gpus, whole.cpu, whole.memory) == (2, 500.0, float(GI))
    best_effort = pod_request(pod("b", cpu=None, memory=None))
    assert best_effort == PodRequest()
    assert not best_effort.uses_gpu


# --- scalars (MIG instances) ---------------------------------------------------------------------


def test_mig_instances_fit_only_nodes_offering_that_profile() -> None:
    t = table(
        node("mig", gpus=0, extra={"nvidia.com/mig-1g.5gb": 2}, labels={"nvidia.com/mig.strategy": "mixed"}),
        node("plain", gpus=4),
    )
    request = PodRequest(scalars=(("nvidia.com/mig-1g.5gb", 1.0),))
    fits = t.fit(request, soon=False)
    assert at(t, "mig", fits) and not at(t, "plain", fits)
    assert not t.fit(PodRequest(scalars=(("nvidia.com/mig-1g.5gb", 3.0),)), soon=False).any()
    unknown = PodRequest(scalars=(("nvidia.com/mig-7g.40gb", 1.0),))
    assert not t.fit(unknown, soon=False).any()


# --- fit masks kept across changes -----------------------------------------------------------------


def _fresh_fit(t: NodeTable, request: PodRequest, *, soon: bool) -> list[bool]:
    return [bool(x) for x in t.fit_rows(request, slice(None), soon=soon)]


Held = list[tuple[int, PodRequest, str, tuple[str, ...]]]


def _change_randomly(
    t: NodeTable, rng: np.random.Generator, requests: tuple[PodRequest, ...], held: Held
) -> None:
    """A burst of 1, a few or many changes (pods placed, removed, starting to release), so that every
    update path of the kept masks and columns runs before the next ask."""
    for _ in range(int(rng.choice([1, 3, 20, 40]))):
        node_ = int(rng.integers(t.size))
        if held and rng.random() < 0.3:
            n, request, key, groups = held.pop(int(rng.integers(len(held))))
            if rng.random() < 0.5:
                t.mark_releasing(n, request, key, groups)
            else:
                t.unhold(n, request, releasing=False)
                t.unshare_gpus(key, groups, releasing=False)
            continue
        request = requests[int(rng.integers(len(requests)))]
        if not t.fit_rows(request, slice(None), soon=False)[node_]:
            continue
        key = f"pod-{len(held)}-{rng.integers(1 << 40)}"
        groups = tuple(f"{key}-g{d}" for d in range(request.gpu_devices))
        t.hold(node_, request, releasing=False)
        t.share_gpus(node_, request, key, groups, releasing=False)
        held.append((node_, request, key, groups))


def test_fit_masks_kept_across_changes_match_a_fresh_computation() -> None:
    """The masks `fit` keeps per request are brought up to date at the changed nodes only (one by one for
    a few, vectorised for more); after any mix of changes they equal a computation from scratch."""
    t = table(*(node(f"n{i:02d}", gpus=4, cpu="16", memory="64Gi", pods=6) for i in range(200)))
    whole = PodRequest(cpu=2000, memory=8 * GI, whole_gpus=2)
    half = PodRequest(cpu=1000, memory=4 * GI, gpu_portion=0.5, gpu_devices=1)
    pair = PodRequest(cpu=1000, memory=4 * GI, gpu_portion=0.5, gpu_devices=2)
    requests = (whole, half, pair)
    rng = np.random.default_rng(7)
    held: Held = []
    for _ in range(200):
        _change_randomly(t, rng, requests, held)
        for request in requests:
            for soon in (False, True):
                assert [bool(x) for x in t.fit(request, soon=soon)] == _fresh_fit(t, request, soon=soon)


@pytest.mark.parametrize("seed", range(5))
def test_not_allocated_kept_across_changes_is_the_sum_from_scratch_to_the_last_bit(seed: int) -> None:
    """binpack and spread rank nodes by `not_allocated`: kept across changes, it must be bit for bit the
    sum from the current usage, or two nodes could swap places (portions like 0.3 leave rounding residue
    in the sums, which a different order of additions would round differently)."""
    t = table(*(node(f"n{i:02d}", gpus=4, cpu="16", memory="64Gi", pods=8) for i in range(120)))
    requests = (
        PodRequest(cpu=1500, memory=8 * GI, whole_gpus=1),
        PodRequest(cpu=700, memory=4 * GI, gpu_portion=0.3, gpu_devices=1),
        PodRequest(cpu=300, memory=4 * GI, gpu_portion=0.1, gpu_devices=2),
        PodRequest(cpu=333, memory=GI),
    )
    rng = np.random.default_rng(seed)
    held: Held = []
    residue = False
    for _ in range(150):
        _change_randomly(t, rng, requests, held)
        residue |= any(float(x) != round(float(x), 6) for x in t.shared_free_total)
        gpus = (t.free_gpus + t.shared_free_total) + t.rel_gpus
        cpu = (t.cap_cpu - t.used_cpu) + t.rel_cpu
        assert t.not_allocated(gpus=True).tobytes() == gpus.tobytes()
        assert t.not_allocated(gpus=False).tobytes() == cpu.tobytes()
    assert residue  # sums with rounding residue were among those compared


def test_fit_now_is_fit_soon_while_nothing_is_released_and_apart_once_something_is() -> None:
    t = table(node("a", gpus=2), node("b", gpus=2))
    request = PodRequest(cpu=100, memory=GI, whole_gpus=2)
    full = PodRequest(cpu=100, memory=GI, whole_gpus=2)
    t.hold(0, full, releasing=False)
    assert not t.anything_releasing()
    assert list(t.fit(request, soon=False)) == list(t.fit(request, soon=True)) == [False, True]
    t.mark_releasing(0, full, "p", ())
    assert t.anything_releasing()
    assert list(t.fit(request, soon=False)) == [False, True]
    assert list(t.fit(request, soon=True)) == [True, True]
    t.unmark_releasing(0, full, "p", ())
    assert not t.anything_releasing()
    assert list(t.fit(request, soon=False)) == [False, True]


def test_a_fit_mask_is_read_only() -> None:
    t = table(node("a", gpus=1))
    mask = t.fit(PodRequest(whole_gpus=1), soon=True)
    with pytest.raises(ValueError, match="read-only"):
        mask[0] = False


def test_a_copy_and_its_original_keep_their_fit_masks_apart() -> None:
    t = table(node("a", gpus=2), node("b", gpus=2))
    request = PodRequest(cpu=100, memory=GI, whole_gpus=2)
    assert list(t.fit(request, soon=True)) == [True, True]
    copy = t.copy()
    copy.hold(0, request, releasing=False)
    assert list(copy.fit(request, soon=True)) == [False, True]
    assert list(t.fit(request, soon=True)) == [True, True]
    t.hold(1, request, releasing=False)
    assert list(t.fit(request, soon=True)) == [True, False]
    t.clear_node(1)
    assert list(t.fit(request, soon=True)) == [True, True]
    assert list(copy.fit(request, soon=True)) == [False, True]


# --- the room a node has soon, kept for later (SoonRoom) ----------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_soon_room_holds_what_node_fits_soon_holds(seed: int) -> None:
    """`soon_room(n).may_hold(r)` answers as `node_fits(r, n, soon=True)` for plain, whole-GPU and
    one-device shared requests, and never says no where node_fits says yes for the rest."""
    rng = np.random.default_rng(seed)
    t = table(
        *(node(f"n{i}", gpus=8, cpu="16", memory="64Gi", gpu_memory=81920) for i in range(6)),
    )
    for array, scale in (
        (t.used_cpu, 16000),
        (t.rel_cpu, 4000),
        (t.used_memory, 64 * GI),
        (t.rel_memory, 16 * GI),
        (t.used_pods, 110),
        (t.rel_pods, 3),
        (t.rel_gpus, 3),
    ):
        array[:] = np.round(rng.random(t.size) * scale)
    t.free_gpus[:] = rng.integers(0, 9, t.size)
    t.shared_free_soon[:] = np.round(rng.random(t.size), 2)
    requests = [
        PodRequest(cpu=float(cpu), memory=float(memory) * GI, whole_gpus=gpus)
        for cpu in (0, 2000, 9000)
        for memory in (0, 8, 40)
        for gpus in (0, 1, 4, 8)
    ]
    requests += [
        PodRequest(cpu=1000.0, memory=GI, gpu_portion=portion, gpu_devices=1) for portion in (0.1, 0.5, 0.9)
    ]
    requests += [PodRequest(cpu=1000.0, memory=GI, gpu_memory_mib=40960, gpu_devices=1)]
    partial = [
        PodRequest(cpu=1000.0, memory=GI, gpu_portion=0.5, gpu_devices=2),
        PodRequest(cpu=1000.0, memory=GI, scalars=(("example.com/fpga", 1.0),)),
    ]
    answers = set()
    for n in range(t.size):
        room = t.soon_room(n)
        for request in requests:
            answers.add(room.may_hold(request))
            assert room.may_hold(request) == t.node_fits(request, n, soon=True), (n, request)
        for request in partial:
            assert room.may_hold(request) or not t.node_fits(request, n, soon=True), (n, request)
    assert answers == {True, False}


# --- whether anything is being released, kept across changes ------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_anything_releasing_kept_across_changes_is_what_a_fresh_look_finds(seed: int) -> None:
    """`anything_releasing` looks again only at the nodes whose releasing resources may have changed:
    after any mix of pods placed (on idle or releasing resources, whole or on shared GPUs, some joining
    another's), pods starting to release and taken back, pods leaving and nodes cleared, asked after one
    change or several, it answers as a copy of the table that looks at every node."""
    # Few nodes, so that whether anything is released turns often.
    t = table(*(node(f"n{i:02d}", gpus=2, cpu="16", memory="64Gi", pods=30) for i in range(3)))
    requests = (
        PodRequest(cpu=1000, memory=GI, whole_gpus=1),
        PodRequest(cpu=500, memory=GI, gpu_portion=0.5, gpu_devices=1),
        PodRequest(cpu=500, memory=GI, gpu_portion=0.25, gpu_devices=1),
        PodRequest(cpu=300, memory=GI),
    )
    rng = np.random.default_rng(seed)
    # Per pod: node, request, key, shared GPUs, how it holds them ("idle", "releasing", a pipelined take).
    pods: list[tuple[int, PodRequest, str, tuple[str, ...], object]] = []
    answers = set()
    for step in range(1000):
        roll = rng.random()
        if pods and roll < 0.4:
            n, request, key, groups, held = pods.pop(int(rng.integers(len(pods))))
            if held == "idle" and rng.random() < 0.6:
                t.mark_releasing(n, request, key, groups)
                pods.append((n, request, key, groups, "releasing"))
            elif held == "releasing" and rng.random() < 0.5:
                t.unmark_releasing(n, request, key, groups)
                pods.append((n, request, key, groups, "idle"))
            elif isinstance(held, str):
                t.unhold(n, request, releasing=held == "releasing")
                t.unshare_gpus(key, groups, releasing=held == "releasing")
            elif isinstance(held, PipelineTake) and set(held.claimed_groups) <= t.group_by_id.keys():
                t.unhold_pipelined(n, request, held)
                t.unshare_gpus(key, groups, releasing=False)
            else:
                pods.append((n, request, key, groups, held))  # a shared GPU it claimed is gone: it stays
        elif roll < 0.45:
            cleared = int(rng.integers(t.size))
            t.clear_node(cleared)
            pods = [entry for entry in pods if entry[0] != cleared]
        else:
            n = int(rng.integers(t.size))
            request = requests[int(rng.integers(len(requests)))]
            key = f"pod-{step}"
            joinable = [g.group_id for g in t.groups.get(n, ()) if g.free_now >= request.gpu_portion]
            groups = (
                (joinable[0] if joinable and rng.random() < 0.7 else f"{key}-g",)
                if request.is_shared_gpu
                else ()
            )
            how = rng.random()
            held: object = "idle" if how < 0.6 else "releasing" if how < 0.8 else None
            if held is None:
                held = t.hold_pipelined(n, request)
                t.share_gpus(n, request, key, groups, releasing=False)
            else:
                t.hold(n, request, releasing=held == "releasing")
                t.share_gpus(n, request, key, groups, releasing=held == "releasing")
            pods.append((n, request, key, groups, held))
        if rng.random() < 0.6:
            answer = t.anything_releasing()
            assert answer == t.copy().anything_releasing()
            answers.add(answer)
        assert t.overcommitted() == set(np.flatnonzero(t.shared_free_total < 0.0).tolist())
    assert answers == {False, True}


@pytest.mark.parametrize("seed", range(3))
def test_fit_soon_sums_what_is_released_in_while_anything_is(seed: int) -> None:
    """`fit_rows` and `node_fits` asked about soon add the releasing columns only while something is
    released (zeros otherwise, which change no comparison): their answers are those of the free amounts
    summed with the releasing ones, before any pod releases and after some do."""
    t = table(*(node(f"n{i:02d}", gpus=4, cpu="16", memory="64Gi", pods=6) for i in range(60)))
    requests = (
        PodRequest(cpu=2000, memory=8 * GI, whole_gpus=2),
        PodRequest(cpu=1000, memory=4 * GI, gpu_portion=0.5, gpu_devices=1),
        PodRequest(cpu=3000, memory=GI),
    )
    rng = np.random.default_rng(seed)
    held: Held = []
    released = False
    for _ in range(60):
        _change_randomly(t, rng, requests, held)
        released |= t.anything_releasing()
        cpu = (t.cap_cpu - t.used_cpu) + t.rel_cpu
        memory = (t.cap_memory - t.used_memory) + t.rel_memory
        pods = (t.cap_pods - t.used_pods) + t.rel_pods
        gpus = t.free_gpus + t.rel_gpus
        for request in requests:
            room = (cpu >= request.cpu - EPSILON) & (memory >= request.memory - EPSILON)
            room &= pods >= 1 - EPSILON
            if request.whole_gpus:
                room &= gpus >= request.whole_gpus - EPSILON
            fits = t.fit_rows(request, slice(None), soon=True)
            assert not (fits & ~room).any()
            if not request.is_shared_gpu:
                assert fits.tolist() == room.tolist()
            assert [t.node_fits(request, n, soon=True) for n in range(t.size)] == fits.tolist()
        for n in range(t.size):
            assert t.gpus_not_allocated_of(n).hex() == t.not_allocated(gpus=True).item(n).hex()
            assert t.cpu_not_allocated_of(n).hex() == t.not_allocated(gpus=False).item(n).hex()
    assert released  # some pods released between asks
