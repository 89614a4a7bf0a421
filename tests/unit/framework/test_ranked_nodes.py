"""A pod's node found through the index of nodes by what binpack ranks them by (`framework.ranked_nodes`):
the node chosen is the one scoring every candidate chooses, ties to the first name included, a shared-GPU
pod's shared GPUs with room included, and the shortcut stands aside when a scorer tells the candidates
apart otherwise."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from helpers import node, open_session, pod, queue
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework import alike_nodes, ranked_nodes
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import NamedPredicate, Session
from kai_scheduler.framework.statement import Statement
from kai_scheduler.model.jobs import Placement, TaskInfo
from kai_scheduler.model.nodes import BoolArray
from kai_scheduler.model.resources import PodRequest

PREFER_B = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 1,
                "preference": {"matchExpressions": [{"key": "x", "operator": "In", "values": ["b"]}]},
            }
        ]
    }
}


def chosen(objects: list[ApiObject], *, enabled: bool) -> tuple[str, bool]:
    """The node the session chooses for pod p, and whether the shortcut decided it."""
    session = open_session(objects)
    task = session.snapshot.tasks["default/p"]
    decided = not isinstance(ranked_nodes.best_node(session, task), ranked_nodes.Undecided)
    before = ranked_nodes.ENABLED
    ranked_nodes.ENABLED = enabled
    try:
        placed = session.choose_node(task)
    finally:
        ranked_nodes.ENABLED = before
    assert placed is not None
    return session.snapshot.nodes.names[placed.node], decided


def both_ways(objects: list[ApiObject]) -> tuple[str, bool]:
    fast, decided = chosen(objects, enabled=True)
    assert (fast, decided) == (chosen(objects, enabled=False)[0], decided)
    return fast, decided


def one_then_another(
    objects: list[ApiObject], first: str, then: str, between: Callable[[Session], None]
) -> list[str]:
    """The nodes chosen in one session for pod `first` and then, once `between` changed the session, for
    pod `then`; the same with the shortcut and without."""

    def choices(enabled: bool) -> list[str]:
        session = open_session(objects)
        tasks, names = session.snapshot.tasks, session.snapshot.nodes.names
        ranked_nodes.ENABLED = enabled
        try:
            placed = session.choose_node(tasks[f"default/{first}"])
            between(session)
            again = session.choose_node(tasks[f"default/{then}"])
        finally:
            ranked_nodes.ENABLED = True
        assert placed is not None and again is not None
        return [names[placed.node], names[again.node]]

    found = choices(True)
    assert found == choices(False)
    return found


def allocated(name: str, to: str) -> Callable[[Session], None]:
    """A change between `one_then_another`'s pods: pod `name` allocated to node `to`."""

    def allocate(session: Session) -> None:
        statement = session.statement("allocate")
        statement.allocate(
            session.snapshot.tasks[f"default/{name}"], session.snapshot.nodes.names.index(to), (), "test"
        )
        statement.commit()

    return allocate


def nodes_with_free_cpu(*used: int, **extra: Any) -> list[ApiObject]:
    """Nodes a, b, c... of 8 GPUs and 64 CPUs, each running a CPU-only pod of `used` millicores (0: none)."""
    objects: list[ApiObject] = [queue("q")]
    for i, millicores in enumerate(used):
        name = "abcdefgh"[i]
        objects.append(node(name, gpus=8, cpu="64", labels={"x": name}, **extra))
        if millicores:
            objects.append(pod(f"busy-{name}", cpu=f"{millicores}m", node_name=name))
    return objects


def test_a_cpu_only_pod_goes_to_the_node_with_least_cpu_free_that_holds_it() -> None:
    objects = nodes_with_free_cpu(60_000, 63_500, 50_000, 0)
    assert both_ways([*objects, pod("p", cpu="1")]) == ("a", True)
    assert both_ways([*objects, pod("p", cpu="8")]) == ("c", True)  # a and b hold less than 8 CPUs
    assert both_ways([*objects, pod("p", cpu="20")]) == ("d", True)


def test_equal_free_cpu_goes_to_the_first_name() -> None:
    assert both_ways([*nodes_with_free_cpu(0, 8_000, 8_000), pod("p", cpu="1")]) == ("b", True)


def test_scores_that_round_alike_go_to_the_first_name_though_its_value_is_higher() -> None:
    """Free CPU 1e14-1, 1e14-2 and 1e14-3 millicores beside a node of 6e14: binpack's scores of a, b and c
    differ by less than one rounding step of the sum (1,000 for nodeavailability plus binpack's 9), so
    they tie and a wins, although c has the least free; taking the least free alone would choose c."""
    objects: list[ApiObject] = [queue("q"), node("d", gpus=8, cpu="600000000000")]
    for name, pods in (("a", 1), ("b", 2), ("c", 3)):
        objects.append(node(name, gpus=8, cpu="100000000000"))
        objects += [pod(f"busy-{name}-{k}", cpu="1m", node_name=name) for k in range(pods)]
    assert both_ways([*objects, pod("p", cpu="1")]) == ("a", True)


def test_scores_that_round_alike_go_to_the_first_name_for_a_later_pod_of_the_shape_too() -> None:
    """As above, for the second pod of the shape, whose sums are read by the candidates' values in value
    order (c, b, a, d: `_Summed.of_values`) rather than in index order: the tie still goes to a, the
    first name, not to c, the first of the tied in value order."""
    objects: list[ApiObject] = [queue("q"), node("d", gpus=8, cpu="600000000000")]
    for name, pods in (("a", 1), ("b", 2), ("c", 3)):
        objects.append(node(name, gpus=8, cpu="100000000000"))
        objects += [pod(f"busy-{name}-{k}", cpu="1m", node_name=name) for k in range(pods)]
    objects += [pod("p", cpu="1"), pod("p-again", cpu="1")]
    assert one_then_another(objects, "p", "p-again", lambda session: None) == ["a", "a"]


def test_a_gpu_pod_goes_to_the_fullest_node_whose_gpus_hold_it() -> None:
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8) for name in "abcd")]
    objects += [pod("busy-a", gpus=7, node_name="a"), pod("busy-b", gpus=5, node_name="b")]
    objects += [pod("busy-c", gpus=5, node_name="c")]
    assert both_ways([*objects, pod("p", gpus=1)]) == ("a", True)
    assert both_ways([*objects, pod("p", gpus=2)]) == ("b", True)
    assert both_ways([*objects, pod("p", gpus=4)]) == ("d", True)


@pytest.mark.parametrize(
    ("asking", "goes_to"),
    [
        pytest.param({"affinity": PREFER_B}, "b", id="preferred node affinity"),
        pytest.param({"node_selector": {"x": "b"}}, "b", id="a selector that most nodes fail"),
    ],
)
def test_the_shortcut_stands_aside_when_more_than_binpack_decides(
    asking: dict[str, Any], goes_to: str
) -> None:
    objects = nodes_with_free_cpu(60_000, 0, 0, 0)
    assert both_ways([*objects, pod("p", cpu="1", **asking)]) == (goes_to, False)


def shared_gpus(*holders: tuple[str, float]) -> list[ApiObject]:
    """Nodes a, b, c, d of 8 GPUs; a runs 6 whole GPUs (binpack's fullest), b 5, each (node, fraction) of
    `holders` a pod holding that part of a shared GPU there."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8) for name in "abcd")]
    objects += [pod("busy-a", gpus=6, node_name="a"), pod("busy-b", gpus=5, node_name="b")]
    objects += [
        pod(f"part-{i}", fraction=part, node_name=at, labels={"runai-gpu-group": f"g{i}"})
        for i, (at, part) in enumerate(holders)
    ]
    return objects


def test_a_shared_gpu_pod_goes_to_a_shared_gpu_with_room_before_the_fullest_node() -> None:
    """gpusharingorder outranks binpack: without the shared GPUs among the nodes scored, binpack's
    choice (a, the fullest; b scores below it, so the emptier nodes are not looked at) would be taken."""
    assert both_ways([*shared_gpus(("c", 0.5)), pod("p", fraction=0.5)]) == ("c", True)
    assert both_ways([*shared_gpus(("c", 0.5)), pod("p", fraction=0.25)]) == ("c", True)
    # c's shared GPU is fuller than d's: binpack decides between them (c: less not allocated).
    assert both_ways([*shared_gpus(("d", 0.25), ("c", 0.5)), pod("p", fraction=0.25)]) == ("c", True)
    # The same room and GPUs on c and d: the first name.
    assert both_ways([*shared_gpus(("d", 0.5), ("c", 0.5)), pod("p", fraction=0.5)]) == ("c", True)
    # A shared GPU with room on b, fuller than c.
    assert both_ways([*shared_gpus(("c", 0.5), ("b", 0.5)), pod("p", fraction=0.5)]) == ("b", True)


def test_a_shared_gpu_without_room_for_the_pod_counts_for_nothing() -> None:
    # c's shared GPU has a quarter left, the pod asks for half: binpack's fullest node that holds it.
    assert both_ways([*shared_gpus(("c", 0.75)), pod("p", fraction=0.5)]) == ("a", True)
    assert both_ways([*shared_gpus(), pod("p", fraction=0.5)]) == ("a", True)


def _filled(objects: list[ApiObject], pods: int, *, enabled: bool) -> list[int]:
    """Where the pending pods p00, p01, .. go, placed one after another in one session (with the index on
    or off)."""
    session = open_session(objects)
    ranked_nodes.ENABLED = enabled
    where = []
    try:
        for i in range(pods):
            task = session.snapshot.tasks[f"default/p{i:02d}"]
            placed = session.choose_node(task)
            assert placed is not None
            where.append(placed.node)
            statement = session.statement("allocate")
            statement.allocate(task, placed.node, placed.gpu_groups, "test")
            statement.commit()
    finally:
        ranked_nodes.ENABLED = True
    return where


def test_the_index_follows_the_nodes_a_session_fills() -> None:
    """Pods placed one after another in one session: each goes where scoring every candidate sends it;
    CPU-only pods of one shape between GPU pods of another, which move the nodes' free CPU that the
    CPU-only pods' index ranks by."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8, cpu="64") for name in "abcdef")]
    asks: list[dict[str, Any]] = [{"gpus": gpus, "cpu": cpu} for gpus in (1, 2, 4, 3) for cpu in ("1", "7")]
    asks += [{"fraction": part, "cpu": "1"} for part in (0.5, 0.25, 0.5, 0.75, 0.25)]
    asks += [{"cpu": "9"} if i % 2 else {"gpus": 1, "cpu": "20"} for i in range(12)]
    objects += [pod(f"p{i:02d}", **ask) for i, ask in enumerate(asks)]

    assert _filled(objects, len(asks), enabled=True) == _filled(objects, len(asks), enabled=False)


def test_the_index_follows_the_nodes_a_session_fills_across_chunks_of_nodes() -> None:
    """The same on 200 nodes already partly used in many ways (a value's nodes span several chunks of
    `_Members`, and pods move nodes between values in every chunk): each pod goes where scoring every
    candidate sends it."""
    rng = random.Random(7)
    names = [f"n{index:03d}" for index in range(200)]
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8, cpu="64") for name in names)]
    for index, name in enumerate(names):
        used = rng.choice((0, 0, 1, 2, 4, 7, 8))
        if used:
            objects.append(pod(f"run-{index:03d}", gpus=used, cpu=str(rng.randint(1, 60)), node_name=name))
    asks: list[dict[str, Any]] = [
        rng.choice(({"gpus": rng.choice((1, 2, 4))}, {"cpu": str(rng.randint(1, 30))}, {"fraction": 0.5}))
        for _ in range(80)
    ]
    objects += [pod(f"p{i:02d}", **ask) for i, ask in enumerate(asks)]

    assert _filled(objects, len(asks), enabled=True) == _filled(objects, len(asks), enabled=False)


def test_members_of_a_value_are_kept_in_index_order_through_moves() -> None:
    """`_Members` against a sorted list: nodes added and removed at random, in and across chunks."""
    rng = random.Random(3)
    members, reference = ranked_nodes._Members(), []
    for node_index in sorted(rng.sample(range(1000), 300)):
        members.add(node_index)
        reference.append(node_index)
    for _ in range(2000):
        if reference and rng.random() < 0.5:
            gone = reference.pop(rng.randrange(len(reference)))
            members.remove(gone)
        else:
            came = rng.choice(sorted(set(range(1000)) - set(reference)))
            members.add(came)
            reference = sorted([*reference, came])
        held = [n for chunk in members.order for n in members.chunks[chunk]]
        assert held == reference and members.size == len(reference)


class _LoggedValues:
    """A node table's log of usage changes (`NodeTable.change_position`, `changed_since`) over values set
    by hand, and a ranking of them: what `_ValueIndex` reads."""

    def __init__(self, values: list[float]) -> None:
        self.values = values
        self.log: list[int] = []
        self.ranking = ranked_nodes.Ranking("test", lambda: np.array(self.values), self.values.__getitem__)

    def change_position(self) -> int:
        return len(self.log)

    def changed_since(self, position: int) -> list[int]:
        return self.log[position:]

    def set(self, node: int, value: float) -> None:
        self.values[node] = value
        self.log.append(node)


def test_the_index_moves_nodes_between_values_as_a_rebuilt_index_holds_them() -> None:
    """`_ValueIndex` brought up to date over random changes against one built afresh: the values in
    order, each one's nodes in index order. Most changes take a node alone in its value to a value no
    node has, below or above its neighbours or between them (binpack filling one node, `_revalue`)."""
    rng = random.Random(5)
    table = _LoggedValues([float(rng.choice((0, 2, 4, 8))) for _ in range(150)])
    index = ranked_nodes._ValueIndex(table, table.ranking)  # type: ignore[arg-type]  # (what it reads)
    for _ in range(3000):
        node_index = rng.randrange(len(table.values))
        if rng.random() < 0.6:  # a fresh value, near the node's own or anywhere
            near = table.values[node_index] + rng.choice((-1, 1)) * rng.random()
            table.set(node_index, round(near if rng.random() < 0.7 else rng.uniform(-1, 10), 3))
        else:
            table.set(node_index, rng.choice(table.values))
        if rng.random() < 0.5:
            index.caught_up()
    index.caught_up()
    fresh = ranked_nodes._ValueIndex(table, table.ranking)  # type: ignore[arg-type]
    assert index.values == fresh.values == sorted(set(table.values))
    assert index.value_at == table.values
    for value in fresh.values:
        held = [n for chunk in index.members[value].order for n in index.members[value].chunks[chunk]]
        assert held == [n for n, at in enumerate(table.values) if at == value]
        assert index.members[value].size == len(held)


def _held_by_value(index: ranked_nodes._ValueIndex) -> dict[float, list[list[int]]]:
    """Each value's nodes as its `_Members` holds them, chunk by chunk."""
    held = {}
    for value in index.values:
        members = index.members[value]
        held[value] = [members.chunks[chunk] for chunk in members.order]
        assert members.size == sum(map(len, held[value]))
    return held


@pytest.mark.parametrize("kinds", [1, 3, 40, 1000])
def test_an_index_built_afresh_holds_each_values_nodes_in_index_order_chunk_by_chunk(kinds: int) -> None:
    """`_ValueIndex` built from the values (one sort, taken in runs) against the nodes added one by one:
    each value once, in order, and its nodes in chunks of consecutive indices, ascending; one value, a few
    spanning many chunks, and nearly every node its own."""
    rng = random.Random(kinds)
    values = [float(rng.randrange(kinds)) - 1.0 for _ in range(700)]
    values[5], values[600] = -0.0, 0.0  # (one value, as dict keys: the lower node's bits kept)
    table = _LoggedValues(values)
    index = ranked_nodes._ValueIndex(table, table.ranking)  # type: ignore[arg-type]  # (what it reads)

    expected: dict[float, list[list[int]]] = {}
    for node_index, value in enumerate(values):
        chunks = expected.setdefault(value, [])
        if chunks and chunks[-1][-1] >> ranked_nodes._CHUNK_BITS == node_index >> ranked_nodes._CHUNK_BITS:
            chunks[-1].append(node_index)
        else:
            chunks.append([node_index])
    assert index.values == sorted(expected)
    assert _held_by_value(index) == expected
    assert index.value_at == values
    first_zero = next(value for value in values if value == 0.0)
    kept_zero = next(value for value in index.values if value == 0.0)
    assert math.copysign(1.0, kept_zero) == math.copysign(1.0, first_zero)


def _where_p_goes(enabled: bool, moves: list[str]) -> list[str]:
    """Where a one-GPU pod `p` goes, asked once after each of `moves` ("": none, "hog": a statement holds
    a pod taking every CPU of node a, "rollback": the statement is rolled back, "churn": a small pod is
    placed on c and taken off again, more times than the node table's log of changes keeps; "x+y": x then
    y), with the index on or off. Nodes a, b, c of 8 GPUs and 8 CPUs: a the fullest by GPUs (7 used), b
    emptier (4), c empty."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8, cpu="8") for name in "abc")]
    objects += [pod("busy-a", gpus=7, node_name="a"), pod("busy-b", gpus=4, node_name="b")]
    objects += [pod("cpu-hog", cpu="8"), pod("small", cpu="1"), pod("p", gpus=1, cpu="1")]
    session = open_session(objects)
    tasks, names = session.snapshot.tasks, session.snapshot.nodes.names
    ranked_nodes.ENABLED = enabled
    try:
        where = []
        statement = session.statement("allocate")
        for move in moves:
            for step in move.split("+"):
                if step == "hog":
                    statement.allocate(tasks["default/cpu-hog"], names.index("a"), (), "test")
                elif step == "rollback":
                    statement.rollback()
                elif step == "churn":
                    for _ in range(4 * len(names) + 512):  # two changes each: the log starts afresh
                        churn = session.statement("allocate")
                        churn.allocate(tasks["default/small"], names.index("c"), (), "test")
                        churn.rollback()
            placed = session.choose_node(tasks["default/p"])
            assert placed is not None
            where.append(names[placed.node])
    finally:
        ranked_nodes.ENABLED = True
    return where


def test_a_node_found_not_to_hold_a_shape_is_asked_again_once_it_changes() -> None:
    """The index passes over the nodes it found not to hold a pod's shape until they change: node a (the
    fullest by GPUs) is out of CPU while a statement holds a CPU pod there, and holds the pod again once
    that statement is rolled back."""
    moves = ["hog", "rollback"]
    assert _where_p_goes(True, moves) == _where_p_goes(False, moves) == ["b", "a"]


def test_a_node_found_to_hold_a_shape_is_asked_again_once_it_changes() -> None:
    """The index takes the nodes it found to hold a pod's shape for candidates until they change: node a
    (the fullest by GPUs) holds the pod, is out of CPU while a statement holds a CPU pod there (the pod
    goes to b, emptier), and holds it again once that statement is rolled back."""
    moves = ["", "hog", "rollback"]
    assert _where_p_goes(True, moves) == _where_p_goes(False, moves) == ["a", "b", "a"]


def test_a_node_found_not_to_hold_a_shape_is_asked_again_once_the_log_of_changes_starts_afresh() -> None:
    """Node a is found out of CPU while a statement holds a CPU pod there; the statement is rolled back,
    and so many changes follow elsewhere that the node table's log no longer names a's: a holds the pod
    again, as when every candidate is scored."""
    moves = ["hog", "rollback+churn"]
    assert _where_p_goes(True, moves) == _where_p_goes(False, moves) == ["b", "a"]


def test_nodes_found_not_to_hold_a_shape_do_not_count_against_the_nodes_a_pod_may_ask() -> None:
    """More nodes out of CPU in the walk than `BUDGET`: the first pod of the shape gives up (its
    candidates are scored as before), the next ones pass over what the first found and decide; each goes
    where scoring every candidate sends it."""
    count = ranked_nodes.BUDGET + 8
    names = [f"n{i:03d}" for i in range(count + 2)]
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8, cpu="8") for name in names)]
    # Every node but the last two: one GPU left and no CPU.
    objects += [pod(f"busy-{name}", gpus=7, cpu="8", node_name=name) for name in names[:count]]
    objects += [pod(f"p{i}", gpus=1, cpu="1") for i in range(3)]
    session = open_session(objects)
    decided, where = [], []
    for i in range(3):
        task = session.snapshot.tasks[f"default/p{i}"]
        found = ranked_nodes.best_node(session, task)
        decided.append(not isinstance(found, ranked_nodes.Undecided))
        placed = session.choose_node(task)
        ranked_nodes.ENABLED = False
        try:
            assert placed == session.choose_node(task)
        finally:
            ranked_nodes.ENABLED = True
        assert placed is not None
        where.append(session.snapshot.nodes.names[placed.node])
        statement = session.statement("allocate")
        statement.allocate(task, placed.node, placed.gpu_groups, "test")
        statement.commit()
    assert decided == [False, True, True]
    assert where == [names[count]] * 3


def test_what_the_scorers_say_for_a_shape_is_asked_again_once_something_is_released() -> None:
    """What the scorers say is kept per pod shape and whether anything is being released: once a's and b's
    last pods are evicted, a and b are the fullest by what is not allocated but hold the pod only once
    those pods are gone, so nodeavailability (one score for every candidate while nothing is released)
    sends it to c, the fullest that fits it now, rather than to the emptiest (d)."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8) for name in "abcd")]
    objects += [pod("busy-a", gpus=7, node_name="a"), pod("leaving-a", gpus=1, node_name="a")]
    objects += [pod("busy-b", gpus=6, node_name="b"), pod("leaving-b", gpus=2, node_name="b")]
    objects += [pod("busy-c", gpus=5, node_name="c"), pod("p", gpus=1), pod("p-again", gpus=1)]

    def evict(session: Session) -> None:
        statement = session.statement("reclaim")
        statement.evict(session.snapshot.tasks["default/leaving-a"], "test")
        statement.evict(session.snapshot.tasks["default/leaving-b"], "test")

    assert one_then_another(objects, "p", "p-again", evict) == ["c", "c"]


def test_while_something_is_released_a_whole_gpu_pod_is_placed_through_the_index_where_it_fits_now() -> None:
    """While pods are being released, nodeavailability scores a whole-GPU pod only at nodes whose idle
    whole GPUs hold it (a sparse scorer): the index decides, and sends the pod to c, the fullest node
    where it fits now, rather than to a or b (fuller, but free only once their pods are gone), as
    scoring every candidate does."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8) for name in "abcd")]
    objects += [pod("busy-a", gpus=7, node_name="a"), pod("leaving-a", gpus=1, node_name="a")]
    objects += [pod("busy-b", gpus=6, node_name="b"), pod("leaving-b", gpus=2, node_name="b")]
    objects += [pod("busy-c", gpus=5, node_name="c"), pod("p", gpus=1)]
    session = open_session(objects)
    statement = session.statement("reclaim")
    statement.evict(session.snapshot.tasks["default/leaving-a"], "test")
    statement.evict(session.snapshot.tasks["default/leaving-b"], "test")
    task, names = session.snapshot.tasks["default/p"], session.snapshot.nodes.names
    found = ranked_nodes.best_node(session, task)
    assert not isinstance(found, ranked_nodes.Undecided)
    ranked_nodes.ENABLED = False
    try:
        placed = session.choose_node(task)
    finally:
        ranked_nodes.ENABLED = True
    assert placed is not None
    assert names[found] == names[placed.node] == "c"


def _released_then_filled(session: Session) -> tuple[Statement, int]:
    """Pods leaving-a and leaving-b evicted, then fill allocated to c's three idle GPUs: the statement and
    its checkpoint before fill (rolled back to, c's GPUs are idle again)."""
    tasks = session.snapshot.tasks
    statement = session.statement("reclaim")
    statement.evict(tasks["default/leaving-a"], "test")
    statement.evict(tasks["default/leaving-b"], "test")
    checkpoint = statement.checkpoint()
    statement.allocate(tasks["default/fill"], session.snapshot.nodes.index["c"], (), "test")
    return statement, checkpoint


def test_while_released_with_no_node_holding_a_pod_now_its_sums_read_values_alone() -> None:
    """While pods are being released and no node holds a whole-GPU pod now (c filled), nodeavailability
    scores 0 at every candidate: the index decides from binpack's values alone (the sums without the
    sparse scorer) and sends p to a, the fullest, as scoring every candidate does. Once fill is rolled
    back, c's idle GPUs hold the pod now and the sparse scorer's score counts again: p-again goes to c."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8) for name in "abcd")]
    objects += [pod("busy-a", gpus=7, node_name="a"), pod("leaving-a", gpus=1, node_name="a")]
    objects += [pod("busy-b", gpus=6, node_name="b"), pod("leaving-b", gpus=2, node_name="b")]
    objects += [pod("busy-c", gpus=5, node_name="c"), pod("fill", gpus=3)]
    objects += [pod("busy-d", gpus=8, node_name="d")]
    objects += [pod("p", gpus=1), pod("p-again", gpus=1)]

    def choices(enabled: bool) -> tuple[list[str], bool]:
        session = open_session(objects)
        tasks, names = session.snapshot.tasks, session.snapshot.nodes.names
        statement, checkpoint = _released_then_filled(session)
        ranked_nodes.ENABLED = enabled
        try:
            decided = ranked_nodes.best_node(session, tasks["default/p"])
            placed = session.choose_node(tasks["default/p"])
            asked = ranked_nodes._kept(session).asked.values()
            read_values_alone = any(
                found is not None and found[4].unscored is not None and found[4].unscored.reads_values_alone()
                for found in asked
            )
            statement.rollback(checkpoint)
            again = session.choose_node(tasks["default/p-again"])
        finally:
            ranked_nodes.ENABLED = True
        assert placed is not None and again is not None
        assert isinstance(decided, ranked_nodes.Undecided) != enabled
        return [names[placed.node], names[again.node]], read_values_alone

    assert choices(True) == (["a", "c"], True)
    assert choices(False) == (["a", "c"], False)


def test_a_sum_with_zeros_added_is_the_same_sum_or_differs_only_in_the_sign_of_zero() -> None:
    """What the sums without a sparse scorer scoring 0 rest on: adding 0.0 (or -0.0) elementwise, as
    `add_score` adds a scorer's array, gives each float back, but -0.0 + 0.0, which is 0.0; and such sums
    compare alike however more terms are added after."""
    values = np.array([-0.0, 0.0, 1e-300, -1e-300, 5e-324, 0.1, -7.5, 1e308, -math.inf, math.inf])
    for zero in (0.0, -0.0):
        added = ranked_nodes.add_score(values, np.full(values.size, zero))
        assert isinstance(added, np.ndarray)
        for before, after in zip(values.tolist(), added.tolist(), strict=True):
            assert after == before
            assert math.copysign(1.0, after) == math.copysign(1.0, before) or before == 0.0
        for later in (0.0, -0.0, 2.5, -1e-320):
            with_zero, without = (added + later).tolist(), (values + later).tolist()
            assert with_zero == without
            assert [a > b for a in with_zero for b in with_zero] == [a > b for a in without for b in without]


def _overcommitted_beside(session: Session) -> None:
    """Node a's shared GPU promised more than it has: keep (0.5) and leave (0.25) on it, leave evicted,
    and new (0.5) pipelined onto the part leave gives back; and the whole-GPU pods gone-a and gone-b
    evicted."""
    tasks, index = session.snapshot.tasks, session.snapshot.nodes.index
    statement = session.statement("reclaim")
    for name in ("keep", "leave"):
        statement.allocate(tasks[f"default/{name}"], index["a"], ("a-gpu",), "test")
    for name in ("leave", "gone-a", "gone-b"):
        statement.evict(tasks[f"default/{name}"], "test")
    statement.pipeline(tasks["default/new"], index["a"], ("a-gpu",), "test")


def test_an_overcommitted_candidate_below_the_pods_floor_is_not_passed_over() -> None:
    """Where a shared GPU is overcommitted, what binpack ranks a node by is less than its whole GPUs free
    soon: a (6 GPUs busy, one shared, one being released: 0.75 not allocated) holds a one-GPU pod once
    gone-a is gone, below the pod's floor. No node holds the pod now, so binpack decides, and a, the
    fullest, wins; the index, which walks from the floor (b, 1 not allocated), stands aside."""
    objects: list[ApiObject] = [queue("q"), node("a", gpus=8), node("b", gpus=8)]
    objects += [pod("busy-a", gpus=6, node_name="a"), pod("gone-a", gpus=1, node_name="a")]
    objects += [pod("busy-b", gpus=7, node_name="b"), pod("gone-b", gpus=1, node_name="b")]
    objects += [pod(name, fraction=0.5) for name in ("keep", "new")]
    objects += [pod("leave", fraction=0.25), pod("p", gpus=1)]
    session = open_session(objects)
    _overcommitted_beside(session)
    nodes = session.snapshot.nodes
    assert nodes.overcommitted() == {nodes.index["a"]}
    task = session.snapshot.tasks["default/p"]
    assert isinstance(ranked_nodes.best_node(session, task), ranked_nodes.Undecided)
    placed = session.choose_node(task)
    assert placed is not None and nodes.names[placed.node] == "a"


def test_constant_scores_kept_for_a_shape_are_added_where_their_scorers_stand() -> None:
    """Scorers constant for every pod, asked once per shape, still add up in scorer order: 1e16 and then
    -1e16 after binpack round binpack's 9 (b, fullest) and 7.2 (a) to one value, so a (the first name)
    wins as when every scorer is asked; adding the two constants together first would choose b. Three
    pods of one shape: the first sum asks every scorer, the later ones only binpack."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8) for name in "abc")]
    objects += [pod("busy-a", gpus=4, node_name="a"), pod("busy-b", gpus=5, node_name="b")]
    objects += [pod(f"p{i}", gpus=1) for i in range(3)]

    def choices(enabled: bool) -> list[str]:
        session = open_session(objects)
        for constant in (1e16, -1e16):
            alike_nodes.add_scorer(
                session.points, lambda task, rows, score=constant: score, constant_for=alike_nodes.always
            )
        tasks, names = session.snapshot.tasks, session.snapshot.nodes.names
        ranked_nodes.ENABLED = enabled
        try:
            where = []
            for i in range(3):
                task = tasks[f"default/p{i}"]
                decided = ranked_nodes.best_node(session, task)
                assert isinstance(decided, ranked_nodes.Undecided) != enabled
                placed = session.choose_node(task)
                assert placed is not None
                where.append(names[placed.node])
        finally:
            ranked_nodes.ENABLED = True
        return where

    assert choices(True) == choices(False) == ["a", "a", "a"]


def test_what_is_kept_for_a_shape_is_not_a_nominated_pods_of_that_shape() -> None:
    """Two pods of one shape, the second nominated to the emptiest node: what `best_node` kept for the
    first (binpack alone decides) is not the second's, which goes back to its nominated node (c) as when
    every candidate is scored."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8) for name in "abc")]
    objects += [pod("busy-a", gpus=4, node_name="a"), pod("busy-b", gpus=2, node_name="b")]
    objects += [pod("first", gpus=1), pod("nominated", gpus=1)]

    def nominate(session: Session) -> None:
        session.snapshot.tasks["default/nominated"].nominated_node = session.snapshot.nodes.names.index("c")

    assert one_then_another(objects, "first", "nominated", nominate) == ["a", "c"]


def test_the_highest_value_kept_for_a_shape_is_asked_again_once_its_node_changes() -> None:
    """A first CPU-only pod's walk keeps e, the only node of the highest free CPU, as a candidate of that
    value (`_Looks.witness`); a pod then fills e's memory, leaving its CPU free: the next pod of the
    shape ranks by d's free CPU as the highest, so c (the least free) scores best, as when every
    candidate is scored; e's 6e15 millicores taken as still the highest would round a, b, c and d alike
    (the first pod's choice, a) and send the pod to a node that cannot hold it."""
    objects: list[ApiObject] = [queue("q")]
    for name, pods in (("a", 1), ("b", 2), ("c", 3), ("d", 0)):
        objects.append(node(name, gpus=8, cpu="100000000000"))
        objects += [pod(f"busy-{name}-{k}", cpu="1m", node_name=name) for k in range(pods)]
    objects += [node("e", gpus=8, cpu="6000000000000"), pod("hog", cpu=None, memory="512Gi")]
    objects += [pod("p", cpu="1"), pod("p-again", cpu="1")]

    assert one_then_another(objects, "p", "p-again", allocated("hog", "e")) == ["a", "c"]


def test_a_kept_shape_reads_its_index_as_other_shapes_left_it() -> None:
    """A CPU-only pod's shape is kept from a first pod's; a GPU pod then takes 40 CPUs of b (ranked by
    another index): the next CPU-only pod of the shape goes to b, now the fullest by CPU, as when every
    candidate is scored (b's value before would leave it out: a and c rank first)."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8, cpu="64") for name in "abcdef")]
    objects += [pod("busy-a", cpu="30", node_name="a"), pod("busy-c", cpu="20", node_name="c")]
    objects += [pod("busy-b", gpus=7, cpu="1", node_name="b")]
    objects += [pod("cpu-1", cpu="4"), pod("gpu", gpus=1, cpu="40"), pod("cpu-2", cpu="4")]

    assert one_then_another(objects, "cpu-1", "cpu-2", allocated("gpu", "b")) == ["a", "b"]


def _of_rows_both_ways(objects: list[ApiObject], names: list[str]) -> list[str]:
    """Where `choose_node` sends each pending pod of `names` (in one session, nothing placed between them)
    through `best_of_rows` (asked of every candidate, and found to decide), and where scoring every
    candidate sends it; the two must agree."""
    session = open_session(objects)
    tasks, node_names = session.snapshot.tasks, session.snapshot.nodes.names
    found = []
    for name in names:
        task = tasks[f"default/{name}"]
        rows = session.candidate_nodes(task).nonzero()[0]
        best = ranked_nodes.best_of_rows(session, task, rows)
        assert not isinstance(best, ranked_nodes.Undecided)
        found.append(node_names[best])
    session = open_session(objects)
    ranked_nodes.ENABLED = False
    try:
        scored = [session.choose_node(session.snapshot.tasks[f"default/{name}"]) for name in names]
    finally:
        ranked_nodes.ENABLED = True
    assert found == [node_names[placed.node] if placed else "" for placed in scored]
    return found


def test_a_selector_pods_candidates_round_alike_to_the_first_name_for_each_pod_of_the_shape() -> None:
    """A pod whose selector leaves too few nodes for the index (`best_of_rows`): as
    `test_scores_that_round_alike_go_to_the_first_name_though_its_value_is_higher` among its candidates,
    for the first pod of the shape (its sums learned from scores in index order) and the next (its sums
    read by the candidates' values, in value order): a, the first name, although c has the least free."""
    objects: list[ApiObject] = [queue("q"), node("d", gpus=8, cpu="600000000000", labels={"x": "y"})]
    objects += [node(f"other-{i}", gpus=8, cpu="64") for i in range(6)]
    for name, pods in (("a", 1), ("b", 2), ("c", 3)):
        objects.append(node(name, gpus=8, cpu="100000000000", labels={"x": "y"}))
        objects += [pod(f"busy-{name}-{k}", cpu="1m", node_name=name) for k in range(pods)]
    objects += [pod(name, cpu="1", node_selector={"x": "y"}) for name in ("p", "p-again")]
    assert _of_rows_both_ways(objects, ["p", "p-again"]) == ["a", "a"]


def test_a_selector_pod_goes_where_scoring_every_candidate_sends_it() -> None:
    """`best_of_rows` against scoring every candidate on nodes used at random (two or three values
    alike, the fullest not first), for CPU-only and GPU pods of a selector, the first pod of a shape and
    the next."""
    rng = random.Random(11)
    for _ in range(30):
        objects: list[ApiObject] = [queue("q")]
        for index in range(16):
            name = f"n{index:02d}"
            objects.append(node(name, gpus=8, cpu="64", labels={"x": "y" if index % 4 else "z"}))
            gpus = rng.choice((0, 1, 4, 7))
            if gpus or rng.random() < 0.5:
                cpu = str(rng.choice((1, 8, 30, 60)))
                objects.append(pod(f"run-{index:02d}", gpus=gpus, cpu=cpu, node_name=name))
        ask = rng.choice(({"gpus": rng.choice((1, 2))}, {"cpu": str(rng.choice((1, 4, 20)))}))
        objects += [pod(name, node_selector={"x": "y"}, **ask) for name in ("p", "p-again")]
        _of_rows_both_ways(objects, ["p", "p-again"])


def test_binpacks_values_at_a_few_nodes_are_its_values_there_to_the_last_bit() -> None:
    """`Ranking.values_at` (read by `best_of_rows` for a pod's candidates) against `Ranking.values` at the
    same nodes, for binpack's GPU and CPU rankings on nodes used at random in millicores."""
    rng = random.Random(13)
    names = [f"n{index:02d}" for index in range(40)]
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8, cpu="64") for name in names)]
    for index, name in enumerate(names):
        if rng.random() < 0.7:
            cpu = f"{rng.randint(1, 60_000)}m"
            objects.append(pod(f"run-{index:02d}", gpus=rng.choice((0, 1, 4)), cpu=cpu, node_name=name))
    objects += [pod("gpu", gpus=1), pod("cpu", cpu="1")]
    session = open_session(objects)
    for name in ("gpu", "cpu"):
        task = session.snapshot.tasks[f"default/{name}"]
        (ranking, _), *_ = [
            said for ranks in session.points.scorers_ranking.values() if (said := ranks(task))
        ]
        assert ranking.values_at is not None
        for _ in range(10):
            rows = np.array(sorted(rng.sample(range(len(names)), 4)), dtype=np.int64)
            assert ranking.values_at(rows).tolist() == ranking.values().take(rows).tolist()


def test_a_selector_pods_values_are_each_taken_once_with_the_first_row_so_valued() -> None:
    """`best_of_rows` reads each value of a pod's candidates once, with the first candidate (in index
    order) so valued, as numpy's `unique` gives them: equal values are one, 0.0 and -0.0 too, held as
    that first candidate holds it."""
    firsts = ranked_nodes._firsts_of_values([3, 5, 8, 9, 12, 20], [2.0, 1.0, 2.0, -0.0, 0.0, 1.0])
    assert firsts == {2.0: 3, 1.0: 5, 0.0: 9}
    assert [math.copysign(1.0, value) for value in firsts] == [1.0, 1.0, -1.0]


def test_a_pods_lowest_value_next_to_the_highest_is_decided_without_summing_its_few() -> None:
    """A second whole-GPU pod of a shape whose lowest candidate's value (b's 1 GPU free) is the one just
    below the highest (every other node's 8): the highest sums strictly below it, so b is the best
    without R's sums (`_next_below` with the top's value next), as when every candidate is scored."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8) for name in "abcd")]
    objects += [pod("busy-b", gpus=6, node_name="b"), pod("p", gpus=1), pod("p-again", gpus=1)]
    session = open_session(objects)
    tasks, names = session.snapshot.tasks, session.snapshot.nodes.names
    assert names[ranked_nodes.best_node(session, tasks["default/p"])] == "b"  # type: ignore[index]

    def not_summed(*args: object) -> object:
        raise AssertionError("R's sums asked")

    before = ranked_nodes._best_of_sums
    ranked_nodes._best_of_sums = not_summed  # type: ignore[assignment]
    try:
        again = ranked_nodes.best_node(session, tasks["default/p-again"])
    finally:
        ranked_nodes._best_of_sums = before
    assert isinstance(again, int) and names[again] == "b"
    assert one_then_another(objects, "p", "p-again", lambda session: None) == ["b", "b"]


def test_the_best_of_a_pods_few_sums_ties_to_the_lowest_row_with_the_first_of_equal_sums() -> None:
    """R's best, as numpy's argmax over the candidates in index order picks it: the highest sum, ties to
    the lowest row wherever it stands in R (R is in value order), with the sum as max gives it (the first
    of equal sums: 0.0 before -0.0); all alike, the lowest row."""
    assert ranked_nodes._best_of_sums([5, 9, 3, 7], [1.0, 2.0, 2.0, 0.5], 3) == (3, 2.0, 0.5)
    best, score, last = ranked_nodes._best_of_sums([8, 2], [0.0, -0.0], -1)
    assert (best, math.copysign(1.0, score), math.copysign(1.0, last)) == (2, 1.0, 1.0)
    assert ranked_nodes._best_of_sums([6, 4, 9], 3.0, 0) == (4, 3.0, 3.0)
    assert ranked_nodes._ties_for_best([1.0, 3.0, 3.0]) and not ranked_nodes._ties_for_best([1.0, 3.0, 2.0])


class _CountedMask:
    """A static mask that counts its reads (`item`)."""

    def __init__(self, size: int) -> None:
        self.reads = 0
        self._mask = np.ones(size, dtype=np.bool_)

    def item(self, node: int) -> bool:
        self.reads += 1
        return bool(self._mask.item(node))


def test_a_node_found_to_hold_a_shape_is_asked_only_whether_it_holds_it_once_it_changes() -> None:
    """A node found to hold a shape passed its static predicates, which read no usage: once it changes,
    it is asked again whether it holds the request, and not whether it passes them."""
    static = _CountedMask(4)
    asked: list[int] = []

    def fits(request: object, node: int, *, soon: bool) -> bool:
        asked.append(node)
        return True

    looks = ranked_nodes._Looks(static, fits, PodRequest(cpu=1.0), ranked_nodes._Shape())  # type: ignore[arg-type]
    members = ranked_nodes._Members()
    members.extend([0, 1, 2])
    stamps = [0, 0, 0, 0]
    looks.begin([], stamps, 1)
    assert looks.first(members) == 0 and (asked, static.reads) == ([0], 1)
    looks.begin([], stamps, 1)
    assert looks.first(members) == 0 and (asked, static.reads) == ([0], 1)  # unchanged: known to hold it
    stamps[0] = 2  # node 0 changed
    looks.begin([], stamps, 2)
    assert looks.first(members) == 0 and (asked, static.reads) == ([0, 0], 1)


def _refusals_asked(*, said: bool, refusal: str | None) -> tuple[list[str], list[object]]:
    """The pods of three of one shape a pre-predicate is asked about by `best_node`, and its answers, the
    pre-predicate said to read a pod's request and placement alone (`shape_pre_predicates`) or not."""
    objects: list[ApiObject] = [queue("q"), node("a", gpus=8), *(pod(f"p{i}", gpus=1) for i in range(3))]
    session = open_session(objects)
    asked: list[str] = []

    def refuse(task: TaskInfo) -> str | None:
        asked.append(task.name)
        return refusal

    session.points.pre_predicates.append(refuse)
    if said:
        session.points.shape_pre_predicates.add(refuse)
    answers = [ranked_nodes.best_node(session, session.snapshot.tasks[f"default/p{i}"]) for i in range(3)]
    return asked, answers


def test_a_refusal_that_reads_a_pods_shape_alone_is_asked_once_per_shape() -> None:
    """A pre-predicate said to read of a pod only its request and placement is asked of a shape's first
    pod alone, its answer the next pods' too; one not said so is asked of every pod."""
    assert _refusals_asked(said=True, refusal=None) == (["p0"], [0, 0, 0])
    assert _refusals_asked(said=True, refusal="no") == (["p0"], [None, None, None])
    assert _refusals_asked(said=False, refusal=None) == (["p0", "p1", "p2"], [0, 0, 0])
    assert _refusals_asked(said=False, refusal="no") == (["p0", "p1", "p2"], [None, None, None])


def test_a_refusal_kept_for_a_shape_is_compared_with_each_pods_in_the_verify_mode() -> None:
    """With `verify_carried`, a pre-predicate said to read a pod's shape alone that refuses a later pod of
    the shape (by its name) raises `CarriedMismatch`, the refusal kept for the shape being wrong."""
    objects: list[ApiObject] = [queue("q"), node("a", gpus=8), pod("p0", gpus=1), pod("p1", gpus=1)]
    session = open_session(objects)
    session.verify_carried = True

    def refuse(task: TaskInfo) -> str | None:
        return "no" if task.name == "p1" else None

    session.points.pre_predicates.append(refuse)
    session.points.shape_pre_predicates.add(refuse)
    tasks = session.snapshot.tasks
    assert ranked_nodes.best_node(session, tasks["default/p0"]) == 0
    with pytest.raises(CarriedMismatch):
        ranked_nodes.best_node(session, tasks["default/p1"])


def test_whether_a_placement_passes_half_the_nodes_is_asked_once_for_its_shapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pods of two requests selecting one rack: the count of nodes passing its static predicates is asked
    for the first shape alone (too few: the shortcut stands aside for both)."""
    objects: list[ApiObject] = [queue("q")]
    objects += [node(name, gpus=8, labels={"rack": "r1" if name == "a" else "r2"}) for name in "abc"]
    objects += [pod("one", gpus=1, node_selector={"rack": "r1"})]
    objects += [pod("two", gpus=2, node_selector={"rack": "r1"})]
    session = open_session(objects)
    counted: list[str] = []
    count = Session.static_passing_count

    def counting(self: Session, placement: Placement) -> int:
        counted.append(placement.key)
        return count(self, placement)

    monkeypatch.setattr(Session, "static_passing_count", counting)
    for name in ("one", "two"):
        assert (
            ranked_nodes.best_node(session, session.snapshot.tasks[f"default/{name}"])
            is ranked_nodes.UNDECIDED
        )
    assert len(counted) == 1


def _masks_asked(*, shape_alone: bool) -> tuple[list[str], list[str]]:
    """The pods of three of one shape a per-pod predicate that keeps them off the fullest node (a) is asked
    about by `choose_node`, and where they go (b, the fullest left), the predicate said to read a pod's
    request and placement alone (`NamedPredicate.reads_shape_alone`) or not."""
    objects: list[ApiObject] = [queue("q"), *(node(name, gpus=8) for name in "abc")]
    objects += [pod("busy-a", gpus=6, node_name="a"), pod("busy-b", gpus=2, node_name="b")]
    objects += [pod(f"p{i}", gpus=1) for i in range(3)]
    session = open_session(objects)
    names = session.snapshot.nodes.names
    not_a = np.array([name != "a" for name in names])
    asked: list[str] = []

    def keep_off_a(task: TaskInfo) -> BoolArray:
        asked.append(task.name)
        return not_a

    session.points.task_predicates.append(
        NamedPredicate("not-a", "a", keep_off_a, reads_shape_alone=shape_alone)
    )
    where = []
    for i in range(3):
        task = session.snapshot.tasks[f"default/p{i}"]
        assert not isinstance(ranked_nodes.best_node(session, task), ranked_nodes.Undecided)
        placed = session.choose_node(task)
        assert placed is not None
        where.append(names[placed.node])
    return asked, where


def test_a_per_pod_predicate_that_reads_a_pods_shape_alone_is_asked_once_per_shape() -> None:
    """A per-pod predicate said to read of a pod only its request and placement is asked for a shape's
    first pod alone, its mask kept for the next pods (which it still keeps off a); one not said so is
    asked of every pod (twice a pod here: `best_node` asked first, then through `choose_node`)."""
    assert _masks_asked(shape_alone=True) == (["p0"], ["b", "b", "b"])
    assert _masks_asked(shape_alone=False) == ([f"p{i}" for i in range(3) for _ in range(2)], ["b", "b", "b"])


def test_a_shape_mask_kept_is_compared_with_each_pods_in_the_verify_mode() -> None:
    """With `verify_carried`, a per-pod predicate said to read a pod's shape alone that keeps a later pod
    of the shape off another node (by its name) raises `CarriedMismatch`."""
    objects: list[ApiObject] = [queue("q"), node("a", gpus=8), node("b", gpus=8)]
    objects += [pod("p0", gpus=1), pod("p1", gpus=1)]
    session = open_session(objects)
    session.verify_carried = True
    size = session.snapshot.nodes.size

    def by_name(task: TaskInfo) -> BoolArray:
        return np.array([task.name == "p0" or row == 1 for row in range(size)])

    session.points.task_predicates.append(NamedPredicate("by-name", "n", by_name, reads_shape_alone=True))
    tasks = session.snapshot.tasks
    assert ranked_nodes.best_node(session, tasks["default/p0"]) == 0
    with pytest.raises(CarriedMismatch):
        ranked_nodes.best_node(session, tasks["default/p1"])


def _summed_sharing(
    constant: float, shared: ranked_nodes.SumsByTerms, scores_of_values: Callable[[list[float]], list[float]]
) -> Any:
    """A question's sums of a constant scorer's `constant` and a ranking's `scores_of_values`, learned with
    `shared` (the session's sums by terms)."""

    def constant_scorer(task: object, rows: object) -> float:
        return constant

    def ranking_scorer(task: object, rows: object) -> np.ndarray:
        return np.array([1.0, 2.0])

    summed = ranked_nodes._Summed(
        [constant_scorer, ranking_scorer],  # type: ignore[list-item]
        frozenset({0}),
        {1: lambda task, rows, values: scores_of_values(values)},
        scores_of_values,
        shared=shared,
    )
    summed.scores(None, [0, 1], [1.0, 2.0])  # type: ignore[arg-type]  # (the first sum learns the terms)
    return summed


def test_questions_adding_the_same_terms_share_their_sums_by_values() -> None:
    """A sum by values one question worked out is not worked out again by another whose terms are the same
    constants and ranking (the same floats), and is by one whose constant differs."""
    shared: ranked_nodes.SumsByTerms = {}
    asked: list[list[float]] = []

    def scores_of_values(values: list[float]) -> list[float]:
        asked.append(values)
        return [value * 10.0 for value in values]

    first, same, other = (_summed_sharing(constant, shared, scores_of_values) for constant in (3.0, 3.0, 5.0))
    asked.clear()  # (the sums that learned the terms)
    assert first.of_values((1.0, 2.0)) == [13.0, 23.0] and asked == [[1.0, 2.0]]
    assert same.of_values((1.0, 2.0)) == [13.0, 23.0] and asked == [[1.0, 2.0]]  # kept by the first
    assert other.of_values((1.0, 2.0)) == [15.0, 25.0] and asked == [[1.0, 2.0], [1.0, 2.0]]
    assert len(shared) == 2
