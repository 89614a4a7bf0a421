"""Time-based fairness: the usage history an edge keeps (`model.usage`) and how it reaches the queues.

Reference: kai-reference §5.5 (usageDBConfig: sliding or tumbling windows, halfLifePeriod, queryResolution;
usage normalised by the cluster's capacity over the window), §5.1 (`Usage` is an input of the division).

Times are seconds on the edge's clock; resolution 60 unless a test says otherwise, so bucket k covers
[60k, 60k + 60).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from helpers import cluster_state, node, queue
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.usage import WEEK, UsageHistory, UsageParams, UsageRecorder

HOUR = 3600.0


def gpus(n: float) -> Resources:
    return Resources(gpu=n)


def history(**params: object) -> UsageHistory:
    return UsageHistory(UsageParams(**params))  # type: ignore[arg-type]


def gpu_usage(h: UsageHistory, now: float) -> dict[str, float]:
    return {name: res.gpu for name, res in h.usage(now).items()}


# --- defaults ----------------------------------------------------------------------------------------


def test_defaults_follow_kai() -> None:
    params = UsageParams()
    assert params.window_size == WEEK == 7 * 24 * HOUR
    assert params.window_type == "sliding"
    assert params.half_life == 0.0  # no decay
    assert params.resolution == 60.0


# --- normalisation -----------------------------------------------------------------------------------


def test_usage_is_the_share_of_capacity_held_over_the_recorded_time() -> None:
    h = history()
    h.record(0, 600, {"a": gpus(1), "b": gpus(3)}, gpus(8))
    h.record(600, 1200, {"a": gpus(4)}, gpus(8))
    # a: (1*600 + 4*600) / (8*1200); b: 3*600 / (8*1200).
    assert gpu_usage(h, 1200) == pytest.approx({"a": 3000 / 9600, "b": 1800 / 9600})


def test_each_resource_is_normalised_by_its_own_capacity() -> None:
    h = history()
    h.record(0, 60, {"a": Resources(gpu=2, cpu=1000, memory=4e9)}, Resources(gpu=8, cpu=4000, memory=16e9))
    usage = h.usage(60)["a"]
    assert (usage.gpu, usage.cpu, usage.memory) == pytest.approx((0.25, 0.25, 0.25))


def test_a_resource_the_cluster_does_not_have_counts_zero() -> None:
    h = history()
    # A CPU-only cluster: no GPU capacity at all. No division by zero, and 0 GPU usage.
    h.record(0, 600, {"a": Resources(cpu=1000)}, Resources(cpu=2000))
    usage = h.usage(600)["a"]
    assert usage.gpu == 0.0
    assert usage.cpu == pytest.approx(0.5)
    assert usage.memory == 0.0


def test_queues_that_held_nothing_are_absent() -> None:
    h = history()
    h.record(0, 600, {"a": gpus(2), "idle": Resources()}, gpus(8))
    assert set(h.usage(600)) == {"a"}
    assert history().usage(1000) == {}  # nothing recorded yet


def test_an_empty_or_backwards_interval_records_nothing() -> None:
    h = history()
    h.record(100, 100, {"a": gpus(1)}, gpus(1))
    h.record(200, 100, {"a": gpus(1)}, gpus(1))
    assert h.usage(300) == {}


# --- buckets -----------------------------------------------------------------------------------------


def test_an_interval_is_split_across_buckets_by_the_seconds_in_each() -> None:
    # a holds [30, 150): 30 s in bucket 0, 60 s in bucket 1, 30 s in bucket 2; b holds [150, 240).
    h = history(window_size=120.0)
    h.record(30, 150, {"a": gpus(1)}, gpus(1))
    h.record(150, 240, {"b": gpus(1)}, gpus(1))
    # The sliding window at 240 starts at 120: buckets 0 and 1 are out, bucket 2 [120, 180) has 30 s of a
    # and 30 s of b, bucket 3 [180, 240) 60 s of b.
    assert gpu_usage(h, 240) == pytest.approx({"a": 30 / 120, "b": 90 / 120})


def test_resolution_sets_the_bucket_size() -> None:
    def shares(resolution: float) -> dict[str, float]:
        h = history(window_size=120.0, resolution=resolution)
        h.record(30, 150, {"a": gpus(1)}, gpus(1))
        h.record(150, 240, {"b": gpus(1)}, gpus(1))
        return gpu_usage(h, 240)

    # 30 s buckets: the window [120, 240] holds 30 s of a and 90 s of b.
    assert shares(30.0) == pytest.approx({"a": 30 / 120, "b": 90 / 120})
    # One 240 s bucket holds the whole history; it straddles the window's start and counts whole.
    assert shares(240.0) == pytest.approx({"a": 120 / 210, "b": 90 / 210})


def test_old_buckets_are_pruned_so_memory_stays_bounded() -> None:
    # A week of one-minute cycles with a one-hour window keeps about an hour of buckets, not a week.
    h = history(window_size=HOUR)
    for minute in range(7 * 24 * 60):
        start = minute * 60.0
        h.record(start, start + 60, {f"q{minute % 5}": gpus(1)}, gpus(4))
        h.usage(start + 60)
        assert len(h._buckets) <= HOUR / 60 + 1
    # ...and what is left is the last hour: each of the five queues held 1 of 4 GPUs for 12 of 60 minutes.
    assert gpu_usage(h, 7 * 24 * HOUR) == pytest.approx({f"q{i}": 12 / 240 for i in range(5)})


# --- windows -----------------------------------------------------------------------------------------


def test_sliding_window_forgets_what_is_older_than_the_window() -> None:
    h = history(window_size=HOUR)
    # As an edge asks: what was recorded up to `now`, at `now`.
    h.record(0, 600, {"a": gpus(1)}, gpus(2))  # a: 1 of 2 GPUs for ten minutes
    assert gpu_usage(h, 600) == pytest.approx({"a": 0.5})
    h.record(600, HOUR + 300, {}, gpus(2))  # then nobody holds anything
    # At 3900 the window is [300, 3900]: a's last 300 s remain, over 3600 s of 2 GPUs.
    assert gpu_usage(h, HOUR + 300) == pytest.approx({"a": 300 / 7200})
    h.record(HOUR + 300, 2 * HOUR, {}, gpus(2))
    # At 2h the window is [3600, 7200]: a is forgotten.
    assert h.usage(2 * HOUR) == {}


def test_without_a_window_limit_reached_nothing_is_forgotten() -> None:
    h = history()  # a week
    h.record(0, 600, {"a": gpus(1)}, gpus(2))
    h.record(600, 2 * HOUR, {}, gpus(2))
    assert gpu_usage(h, 2 * HOUR) == pytest.approx({"a": 600 / (2 * 2 * HOUR)})


def test_tumbling_window_resets_at_each_boundary() -> None:
    h = history(window_size=HOUR, window_type="tumbling")
    h.record(0, 3000, {"a": gpus(1)}, gpus(1))
    h.record(3000, 3590, {"b": gpus(1)}, gpus(1))
    # Before the boundary at 3600 the window is [0, now]: everything counts.
    assert gpu_usage(h, 3590) == pytest.approx({"a": 3000 / 3590, "b": 590 / 3590})
    h.record(3590, HOUR + 600, {"b": gpus(1)}, gpus(1))
    # After it the window is [3600, now]: a's hour is gone, only b's last ten minutes are left.
    assert gpu_usage(h, HOUR + 600) == pytest.approx({"b": 1.0})


def test_tumbling_windows_start_at_the_configured_time() -> None:
    # Windows [1800, 5400), [5400, 9000), ... (and [-1800, 1800) before the start).
    h = history(window_size=HOUR, window_type="tumbling", tumbling_start=1800.0)
    h.record(0, 1800, {"a": gpus(1)}, gpus(1))
    h.record(1800, 5400 + 600, {"b": gpus(1)}, gpus(1))
    assert gpu_usage(h, 1800 + 600) == pytest.approx({"b": 1.0})  # a's half hour was before 1800
    assert gpu_usage(h, 5400 + 600) == pytest.approx({"b": 1.0})
    # A sliding hour at 2400 would still see 1200 s of a.
    sliding = history(window_size=HOUR)
    sliding.record(0, 1800, {"a": gpus(1)}, gpus(1))
    sliding.record(1800, 2400, {"b": gpus(1)}, gpus(1))
    assert gpu_usage(sliding, 2400) == pytest.approx({"a": 1800 / 2400, "b": 600 / 2400})


# --- decay -------------------------------------------------------------------------------------------


def test_a_bucket_weighs_half_as_much_after_one_half_life() -> None:
    # a held the cluster in bucket 0, b in bucket 10: b's bucket is 600 s younger.
    def shares(half_life: float) -> dict[str, float]:
        h = history(half_life=half_life)
        h.record(0, 60, {"a": gpus(1)}, gpus(1))
        h.record(60, 600, {}, gpus(1))
        h.record(600, 660, {"b": gpus(1)}, gpus(1))
        return gpu_usage(h, 660)

    decayed = shares(600.0)
    assert decayed["a"] / decayed["b"] == pytest.approx(0.5)
    two_half_lives = shares(300.0)
    assert two_half_lives["a"] / two_half_lives["b"] == pytest.approx(0.25)
    undecayed = shares(0.0)  # 0: no decay
    assert undecayed["a"] == undecayed["b"] == pytest.approx(60 / 660)


def test_decay_lets_old_usage_fade_while_the_capacity_is_decayed_alike() -> None:
    # a held the whole cluster for an hour, then nobody for an hour. Without decay a's usage is 1/2;
    # with a 10-minute half-life the first hour weighs 2**-6 as much as the second: a's usage is small.
    def usage_of_a(half_life: float) -> float:
        h = history(half_life=half_life)
        h.record(0, HOUR, {"a": gpus(4)}, gpus(4))
        h.record(HOUR, 2 * HOUR, {}, gpus(4))
        return h.usage(2 * HOUR)["a"].gpu

    assert usage_of_a(0.0) == pytest.approx(0.5)
    assert usage_of_a(600.0) == pytest.approx(1 / 65, rel=0.05)  # 2**-6 / (1 + 2**-6)
    assert usage_of_a(600.0) < usage_of_a(1800.0) < usage_of_a(0.0)


# --- the recorder: what an edge does each cycle -----------------------------------------------------


def queues_holding(**held: int) -> list[QueueInfo]:
    """Queues as a session leaves them: `allocated` is what each holds (in GPUs)."""
    return [
        QueueInfo(name, None, 0, rank, Resources(), Resources(), Resources(), allocated=gpus(count))
        for rank, (name, count) in enumerate(held.items())
    ]


def test_recorder_records_what_queues_held_from_one_cycle_to_the_next() -> None:
    recorder = UsageRecorder(UsageParams())
    assert recorder.before_cycle(0.0) == {}  # first cycle: no history
    recorder.after_cycle(0.0, queues_holding(a=6, b=2), gpus(8))
    usage = recorder.before_cycle(600.0)
    assert {name: res.gpu for name, res in usage.items()} == pytest.approx({"a": 0.75, "b": 0.25})
    recorder.after_cycle(600.0, queues_holding(a=0, b=8), gpus(8))
    usage = recorder.before_cycle(1200.0)
    assert {name: res.gpu for name, res in usage.items()} == pytest.approx({"a": 0.375, "b": 0.625})


def test_recorder_takes_a_copy_of_the_allocations() -> None:
    recorder = UsageRecorder(UsageParams())
    queues = queues_holding(a=4)
    recorder.after_cycle(0.0, queues, gpus(8))
    queues[0].allocated.gpu = 8  # a later session mutates its snapshot
    assert recorder.before_cycle(60.0)["a"].gpu == pytest.approx(0.5)


def test_an_interrupted_recorder_leaves_the_gap_out() -> None:
    # The edge stopped deciding between 600 and 4200 (it lost leadership): what a held at 600 is not
    # charged for that hour; the history from before the gap is kept.
    recorder = UsageRecorder(UsageParams())
    recorder.before_cycle(0.0)
    recorder.after_cycle(0.0, queues_holding(a=4, b=4), gpus(8))
    recorder.before_cycle(600.0)
    recorder.after_cycle(600.0, queues_holding(a=8), gpus(8))
    recorder.interrupt()
    usage = recorder.before_cycle(4200.0)
    assert {name: res.gpu for name, res in usage.items()} == pytest.approx({"a": 0.5, "b": 0.5})


# --- into the snapshot -------------------------------------------------------------------------------


def test_the_state_usage_becomes_each_queues_usage_and_absent_queues_get_zero() -> None:
    state = replace(
        cluster_state([node("n0"), queue("a"), queue("b")]),
        queue_usage={"a": Resources(gpu=0.75, cpu=0.5)},
    )
    queues = build_snapshot(state).queues
    a, b = queues.queues["a"], queues.queues["b"]
    assert (a.usage.gpu, a.usage.cpu, a.usage.memory) == (0.75, 0.5, 0.0)
    assert (b.usage.gpu, b.usage.cpu, b.usage.memory) == (0.0, 0.0, 0.0)
