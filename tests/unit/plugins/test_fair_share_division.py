"""Example-based tests of the fair-share division (kai-reference §5.2, worked numbers of §5.3)."""

from __future__ import annotations

import pytest

from kai_scheduler.plugins.proportion.division import QueueShareInput, divide, tree_order


def queue(
    name: str,
    *,
    parent: str | None = None,
    priority: int = 100,
    rank: int = 0,
    deserved: float = 0.0,
    limit: float = -1.0,
    weight: float = 1.0,
    request: float = 0.0,
    usage: float = 0.0,
) -> QueueShareInput:
    return QueueShareInput(
        name=name,
        parent=parent,
        priority=priority,
        creation_rank=rank,
        deserved=deserved,
        limit=limit,
        over_quota_weight=weight,
        request=request,
        usage=usage,
    )


def two_queues(
    *,
    weights: tuple[float, float] = (2, 2),
    requests: tuple[float, float] = (6, 6),
    priorities: tuple[int, int] = (100, 100),
    q1_limit: float = -1,
) -> list[QueueShareInput]:
    """The two-queue setup of resource_division_test.go: deserved 2 each, q1 is the older queue."""
    return [
        queue(
            "q1",
            rank=0,
            deserved=2,
            weight=weights[0],
            request=requests[0],
            priority=priorities[0],
            limit=q1_limit,
        ),
        queue("q2", rank=1, deserved=2, weight=weights[1], request=requests[1], priority=priorities[1]),
    ]


# --- §5.3 worked numbers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "queues", "expected"),
    [
        pytest.param(15, two_queues(), (6, 6), id="T15-both-satisfied-3-left"),
        pytest.param(12, two_queues(), (6, 6), id="T12-exactly-enough"),
        pytest.param(8, two_queues(weights=(1, 3)), (3, 5), id="T8-weights-1-vs-3"),
        pytest.param(12, two_queues(q1_limit=5), (5, 6), id="T12-q1-limit-5"),
        pytest.param(11, two_queues(weights=(1, 4), requests=(10, 10)), (3, 8), id="T11-weights-1-vs-4"),
        pytest.param(11, two_queues(), (6, 5), id="T11-equal-older-wins-extra-unit"),
        pytest.param(4, two_queues(priorities=(1, 2), weights=(100, 1)), (2, 2), id="T4-priorities"),
        pytest.param(
            6, two_queues(priorities=(1, 2), weights=(100, 1)), (2, 4), id="T6-priority-beats-weight"
        ),
    ],
)
def test_worked_numbers_two_queues(
    total: float, queues: list[QueueShareInput], expected: tuple[float, float]
) -> None:
    shares = divide(total, queues)
    assert (shares["q1"], shares["q2"]) == expected


def test_worked_numbers_leave_unrequested_resources_unassigned() -> None:
    # T=15 -> 6/6 "(3 left over)"; limit q1=5, T=12 -> 5/6 "(1 left)".
    assert sum(divide(15, two_queues()).values()) == 12
    assert sum(divide(12, two_queues(q1_limit=5)).values()) == 11


def test_worked_numbers_three_queues_leftover_goes_to_older_queue() -> None:
    queues = [
        queue("q1", rank=0, priority=2, deserved=2, weight=2, request=5),
        queue("q2", rank=1, priority=2, deserved=2, weight=2, request=5),
        queue("q3", rank=2, priority=1, deserved=1, weight=2, request=0),
    ]
    assert divide(5, queues) == {"q1": 3, "q2": 2, "q3": 0}


# --- rounding and leftovers -----------------------------------------------------------------------------


def test_leftover_ties_break_by_creation_rank_then_name() -> None:
    # Offers 1.5 each -> 1 each + leftover 0.5 each; the single remaining unit goes to the older queue,
    # whatever the names and input order.
    older_named_z = [queue("z", rank=0, request=5), queue("a", rank=1, request=5)]
    assert divide(3, older_named_z) == {"z": 2, "a": 1}
    same_age = [queue("b", rank=0, request=5), queue("a", rank=0, request=5)]
    assert divide(3, same_age) == {"a": 2, "b": 1}


def test_largest_leftover_wins_the_last_unit() -> None:
    # Weights 1 vs 2, T=4: offers 1.33/2.67 -> 1/2; round 2 offers 0.33/0.67 -> nothing; q2 has the larger
    # leftover and gets the last unit even though q1 is older.
    queues = [queue("q1", rank=0, weight=1, request=10), queue("q2", rank=1, weight=2, request=10)]
    assert divide(4, queues) == {"q1": 1, "q2": 3}


def test_unit_controls_rounding_granularity() -> None:
    queues = [queue("q1", rank=0, request=10), queue("q2", rank=1, request=10)]
    assert divide(3, queues, unit=1) == {"q1": 2, "q2": 1}
    assert divide(3, queues, unit=0.5) == {"q1": 1.5, "q2": 1.5}


def test_cpu_millicores_and_memory_bytes_with_unit_one() -> None:
    cpu = [queue("q1", rank=0, deserved=1000, request=8000), queue("q2", rank=1, deserved=1000, request=8000)]
    assert divide(4001, cpu) == {"q1": 2001, "q2": 2000}
    memory = [queue("q1", rank=0, request=64e9), queue("q2", rank=1, weight=3, request=64e9)]
    assert divide(32e9, memory) == {"q1": 8e9, "q2": 24e9}


def test_fractional_gpu_requests() -> None:
    halves = [queue("q1", rank=0, request=0.5), queue("q2", rank=1, request=0.5)]
    assert divide(1, halves) == {"q1": 0.5, "q2": 0.5}
    # Offers of 0.3 are below one unit, so the leftover hand-out gives the older queue its whole 0.5 and the
    # other one the fractional rest.
    assert divide(0.6, halves) == pytest.approx({"q1": 0.5, "q2": 0.1})


def test_fractional_deserved() -> None:
    queues = [
        queue("q1", rank=0, deserved=0.5, weight=0, request=3),
        queue("q2", rank=1, deserved=1.5, request=3),
    ]
    assert divide(4, queues) == {"q1": 0.5, "q2": 3}


# --- quota semantics (§2.1) -------------------------------------------------------------------------------


def test_unlimited_deserved_means_the_whole_level_total() -> None:
    queues = [queue("q1", rank=0, deserved=-1, request=3), queue("q2", rank=1, weight=1, request=10)]
    assert divide(10, queues) == {"q1": 3, "q2": 7}


def test_unlimited_deserved_can_oversubscribe_the_level() -> None:
    # Deserved phase gives min(T, request) = 10 and 2 -> 12 > T: remaining is negative, no over-quota phase.
    queues = [queue("q1", rank=0, deserved=-1, request=20), queue("q2", rank=1, deserved=2, request=5)]
    assert divide(10, queues) == {"q1": 10, "q2": 2}


def test_oversubscribed_deserved_is_still_given_in_full() -> None:
    queues = [queue("q1", rank=0, deserved=4, request=6), queue("q2", rank=1, deserved=4, request=6)]
    assert divide(6, queues) == {"q1": 4, "q2": 4}


def test_limit_zero_means_nothing_allowed() -> None:
    queues = [
        queue("q1", rank=0, deserved=2, limit=0, weight=5, request=5),
        queue("q2", rank=1, deserved=2, request=10),
    ]
    assert divide(8, queues) == {"q1": 0, "q2": 8}


def test_limit_caps_deserved_and_over_quota() -> None:
    queues = [queue("q1", rank=0, deserved=5, limit=3, request=10), queue("q2", rank=1, request=10)]
    assert divide(10, queues) == {"q1": 3, "q2": 7}


def test_zero_weight_gets_no_over_quota_share() -> None:
    queues = [
        queue("q1", rank=0, deserved=2, weight=0, request=6),
        queue("q2", rank=1, deserved=2, weight=1, request=6),
    ]
    # q2 is satisfied at 6; the remaining 2 stay unassigned rather than going to the weight-0 queue.
    assert divide(10, queues) == {"q1": 2, "q2": 6}


def test_no_over_quota_when_total_is_zero() -> None:
    queues = [queue("q1", rank=0, deserved=1, request=2), queue("q2", rank=1, request=2)]
    assert divide(0, queues) == {"q1": 1, "q2": 0}


# --- priority buckets (§5.2 step 3) -----------------------------------------------------------------------


def test_higher_bucket_takes_its_leftover_units_before_lower_bucket_gets_anything() -> None:
    # Bucket 2: offers 4/3 each -> 1 each, 1 unit left whose offers (1/3) are below one unit; it is handed out
    # inside bucket 2 (older queue first) instead of flowing down to the weight-100 queue of bucket 1.
    queues = [
        queue("a", rank=0, priority=2, request=5),
        queue("b", rank=1, priority=2, request=5),
        queue("c", rank=2, priority=2, request=5),
        queue("low", rank=3, priority=1, weight=100, request=5),
    ]
    assert divide(4, queues) == {"a": 2, "b": 1, "c": 1, "low": 0}


def test_lower_bucket_gets_what_higher_bucket_did_not_request() -> None:
    queues = [
        queue("high", rank=1, priority=2, deserved=1, request=3),
        queue("low", rank=0, priority=1, deserved=1, request=10),
    ]
    assert divide(10, queues) == {"high": 3, "low": 7}


# --- time-based fairness (§5.5) ---------------------------------------------------------------------------


def test_usage_shifts_over_quota_towards_less_used_queue() -> None:
    # w' = 0.5 each; shareWeight = w' + k(w' - usage) = 0.5 and 1.0 -> offers 2 and 4 of 6.
    queues = [queue("q1", rank=0, request=10, usage=0.5), queue("q2", rank=1, request=10)]
    assert divide(6, queues, k_value=1.0) == {"q1": 2, "q2": 4}
    assert divide(6, queues, k_value=0.0) == {"q1": 3, "q2": 3}


def test_usage_that_zeroes_every_share_weight_falls_back_to_plain_weights() -> None:
    queues = [queue("q1", rank=0, request=10, usage=2), queue("q2", rank=1, weight=3, request=10, usage=2)]
    assert divide(4, queues) == {"q1": 1, "q2": 3}


# --- hierarchy --------------------------------------------------------------------------------------------


def hierarchy(parent_request: float = 0.0) -> list[QueueShareInput]:
    return [
        queue("p1", rank=0, deserved=3, request=parent_request),
        queue("a", parent="p1", rank=1, deserved=1, weight=1, request=4),
        queue("b", parent="p1", rank=2, deserved=1, weight=3, request=4),
        queue("p2", rank=3, deserved=3, request=4),
    ]


def test_parent_share_is_divided_among_children() -> None:
    # Top: 3/3 deserved, offers 2/2 of the remaining 4; p2 only needs 1, so round 2 gives p1 the other 1:
    # p1=6, p2=4.  Inside p1: 1/1 deserved, offers 1 vs 3 of the remaining 4 (weights 1:3): a=2, b=4.
    assert divide(10, hierarchy()) == {"p1": 6, "p2": 4, "a": 2, "b": 4}


def test_parent_request_is_the_sum_of_its_children() -> None:
    assert divide(10, hierarchy(parent_request=100)) == divide(10, hierarchy())


def test_unlimited_deserved_child_means_the_parent_share() -> None:
    queues = [
        queue("p", rank=0, deserved=4),
        queue("c", parent="p", rank=1, deserved=-1, request=10),
        queue("other", rank=2, deserved=6, request=6),
    ]
    assert divide(10, queues) == {"p": 4, "c": 4, "other": 6}


def test_three_level_hierarchy() -> None:
    queues = [
        queue("root", rank=0, deserved=-1),
        queue("dept", parent="root", rank=1, deserved=6),
        queue("team1", parent="dept", rank=2, deserved=2, request=5),
        queue("team2", parent="dept", rank=3, deserved=2, request=5),
        queue("dept2", parent="root", rank=4, deserved=2, request=3),
    ]
    # root takes the whole 9 (-1 deserved); dept/dept2 get 6/2 deserved and tie on the last unit (offers 0.5
    # each), which goes to the older dept; dept's 7 is then 2+2 deserved, 1+1 rounds and 1 to older team1.
    assert divide(9, queues) == {"root": 9, "dept": 7, "team1": 4, "team2": 3, "dept2": 2}


def test_result_does_not_depend_on_input_order() -> None:
    queues = [*hierarchy(), queue("p3", rank=9, weight=2, request=7)]
    assert divide(13, queues) == divide(13, list(reversed(queues)))


# --- weight monotonicity (documented counterexample) ------------------------------------------------------


def test_raising_weight_can_cost_one_unit_because_of_whole_unit_rounding() -> None:
    """KAI's round structure is not monotone in the weight; the loss is at most one unit.

    Weights 5/3/4/2, requests 1/5/4/3, T=11 gives q1 = 5: rounds hand out 7, 3 and 0 units, and the last unit
    goes to q1 as the largest leftover (0.6 vs 0.4).  With q1's weight raised to 4, round 2 offers exactly
    2/2/1 whole units, nobody gets less than offered, the rounds end with nothing left, and q1 ends at 4.
    """

    def queues(q1_weight: float) -> list[QueueShareInput]:
        return [
            queue("q0", rank=0, weight=5, request=1),
            queue("q1", rank=1, weight=q1_weight, request=5),
            queue("q2", rank=2, weight=4, request=4),
            queue("q3", rank=3, weight=2, request=3),
        ]

    assert divide(11, queues(3)) == {"q0": 1, "q1": 5, "q2": 4, "q3": 1}
    assert divide(11, queues(4)) == {"q0": 1, "q1": 4, "q2": 4, "q3": 2}


# --- input validation -------------------------------------------------------------------------------------


def test_empty_input() -> None:
    assert divide(10, []) == {}
    assert divide(10, [], carried={}) == {}


@pytest.mark.parametrize(
    "queues",
    [
        pytest.param([queue("a"), queue("a")], id="duplicate"),
        pytest.param([queue("a", parent="missing")], id="unknown-parent"),
        pytest.param([queue("a", parent="b"), queue("b", parent="a")], id="cycle"),
    ],
)
def test_invalid_trees_are_rejected(queues: list[QueueShareInput]) -> None:
    with pytest.raises(ValueError):
        divide(10, queues)


def test_unit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        divide(10, [queue("a")], unit=0)


def test_one_tree_order_serves_every_resource_of_the_tree() -> None:
    gpus = [
        queue("d", rank=0, deserved=4, request=6),
        queue("d-b", parent="d", rank=2, deserved=1, request=3, weight=3),
        queue("d-a", parent="d", rank=1, deserved=1, request=3),
        queue("e", rank=3, deserved=2, request=5),
    ]
    cpus = [q._replace(deserved=q.deserved * 1000, request=q.request * 700) for q in gpus]
    order = tree_order(gpus)
    assert divide(8, gpus, order=order) == divide(8, gpus)
    assert divide(8000, cpus, order=order) == divide(8000, cpus)
