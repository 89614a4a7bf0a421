"""Time-based fairness in the simulator, end to end through `kai-scheduler simulate`.

Reference: kai-reference §5.2 (shareWeight = max(0, w' + kValue * (w' - usage')), kValue a proportion
argument, default 1), §5.5 (usageDBConfig: windows, half-life). The simulator keeps the usage history
itself from its own cycles and revisits pending pods once per usage bucket, so fair shares drift and
reclaim follows as time passes.

The workload: one node of 8 GPUs, queues a and b (GPU quota 0, weight 1). Eight one-GPU pods of a run
from 0 to 1h; at 1h eight more pods of a and eight of b arrive. Equal weights, so without history the
split is 4/4; with history b (idle for the first hour) is favoured at first and a wins GPUs back as b's
own usage accrues.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_scheduler.cli import main
from kai_scheduler.framework.config import DEFAULT_PLUGIN_ARGUMENTS, DEFAULT_PLUGINS

HOUR = 3600.0
WEEK_WINDOW = {"usageDBConfig": {"clientType": "prometheus", "usageParams": {"windowSize": "1w"}}}


def workload() -> list[dict[str, Any]]:
    documents = [
        node_manifest("n0", gpus=8),
        queue_manifest("a", gpu=0),
        queue_manifest("b", gpu=0),
    ]
    one_gpu: dict[str, Any] = {"gpus": 1, "cpu": None, "memory": None, "priority_class": "train"}
    documents += [pod_manifest(f"a-early-{i}", "a", duration="1h", **one_gpu) for i in range(8)]
    documents += [pod_manifest(f"a-late-{i}", "a", arrival="1h", **one_gpu) for i in range(8)]
    documents += [pod_manifest(f"b-late-{i}", "b", arrival="1h", **one_gpu) for i in range(8)]
    return documents


def with_proportion_arguments(arguments: dict[str, Any], **document: Any) -> dict[str, Any]:
    """The default plugin list with the proportion plugin's arguments set, plus other keys."""
    plugins = [
        {
            "name": name,
            "arguments": arguments if name == "proportion" else DEFAULT_PLUGIN_ARGUMENTS.get(name, {}),
        }
        for name in DEFAULT_PLUGINS
    ]
    return {"tiers": [{"plugins": plugins}], **document}


def simulate(folder: Path, config: dict[str, Any] | None, until: str = "3h") -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    manifests = folder / "workload.yaml"
    manifests.write_text(yaml.safe_dump_all(workload(), sort_keys=False))
    out = folder / "result.json"
    args = ["simulate", str(manifests), "--until", until, "--output", "json", "--out", str(out)]
    if config is not None:
        config_path = folder / "config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        args += ["--config", str(config_path)]
    assert main(args) == 0
    document: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return document


def binds_at(document: dict[str, Any], time: float) -> dict[str, int]:
    """Queue -> pods bound at `time` (a-late / b-late pods)."""
    counts = {"a": 0, "b": 0}
    for d in document["decisions"]:
        name = d["pod"].split("/")[1]
        if d["type"] == "bind" and d["time"] == time and "-late-" in name:
            counts[name[0]] += 1
    return counts


def evictions(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in document["decisions"] if d["type"] == "evict"]


def queue_gpus(document: dict[str, Any], key: str) -> dict[str, float]:
    return {q["name"]: q[key]["gpu"] for q in document["queues"]}


def allocated_over_time(document: dict[str, Any]) -> list[tuple[float, int]]:
    """(time, late GPUs a holds after that decision) for every bind or evict of an a-late pod or a b-late
    pod after 1h."""
    held = {"a": 0, "b": 0}
    points = []
    for d in document["decisions"]:
        name = d["pod"].split("/")[1]
        if "-late-" not in name or d["type"] == "pipeline":
            continue
        held[name[0]] += 1 if d["type"] == "bind" else -1
        points.append((d["time"], held["a"]))
    return points


# --- without history: the control ---------------------------------------------------------------------


def test_without_usage_db_config_the_late_pods_split_four_four_and_stay(tmp_path: Path) -> None:
    doc = simulate(tmp_path, None)
    assert binds_at(doc, HOUR) == {"a": 4, "b": 4}
    assert evictions(doc) == []
    assert queue_gpus(doc, "fairShare") == {"a": 4.0, "b": 4.0}
    assert queue_gpus(doc, "allocated") == {"a": 4.0, "b": 4.0}
    assert doc["summary"]["steady"] is True


# --- with history -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def with_usage(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return simulate(tmp_path_factory.mktemp("usage"), WEEK_WINDOW)


def test_the_queue_that_was_idle_is_favoured_first(with_usage: dict[str, Any]) -> None:
    # At 1h a has used the whole cluster for the whole recorded time (usage 1), b nothing (usage 0):
    # shareWeights 0 and 1, so b's fair share is all 8 GPUs and a's late pods wait.
    assert binds_at(with_usage, HOUR) == {"a": 0, "b": 8}


def test_the_queue_that_ran_alone_reclaims_gpus_back_one_at_a_time(with_usage: dict[str, Any]) -> None:
    evicted = evictions(with_usage)
    assert len(evicted) >= 2
    for decision in evicted:
        assert decision["action"] == "reclaim"
        assert decision["pod"].startswith("default/b-late-")
        assert "queue a below fair share" in decision["reason"]
    times = [d["time"] for d in evicted]
    # Gradual: not at 1h, and each later than the one before, as b's usage accrues.
    assert times[0] > HOUR + 60
    assert times == sorted(times) and len(set(times)) == len(times)
    # Each reclaimed GPU goes to a pending a-late pod, and a's holding only grows.
    held = [gpus for _, gpus in allocated_over_time(with_usage)]
    assert held == sorted(held)
    assert held[-1] == len(evicted)


def test_after_three_hours_a_still_holds_less_than_an_equal_split(with_usage: dict[str, Any]) -> None:
    # a's hour alone still weighs in the week's window: its share is below 4 but above 0.
    allocated = queue_gpus(with_usage, "allocated")
    fair = queue_gpus(with_usage, "fairShare")
    assert 0 < allocated["a"] < 4 < allocated["b"]
    assert allocated == fair
    assert allocated["a"] + allocated["b"] == 8


def test_usage_revisits_pending_pods_without_new_events(with_usage: dict[str, Any]) -> None:
    # Nothing arrives or completes after 1h, yet cycles keep running (once per 1m usage bucket) while
    # pods are pending, so the reclaims above can happen at all.
    assert with_usage["summary"]["cycles"] > (3 * HOUR - HOUR) / 60


# --- kValue -------------------------------------------------------------------------------------------


def test_with_k_value_zero_usage_has_no_effect(tmp_path: Path) -> None:
    # KAI writes plugin arguments as strings.
    doc = simulate(tmp_path, with_proportion_arguments({"kValue": "0"}, **WEEK_WINDOW))
    assert binds_at(doc, HOUR) == {"a": 4, "b": 4}
    assert evictions(doc) == []
    assert queue_gpus(doc, "fairShare") == {"a": 4.0, "b": 4.0}


def test_k_value_scales_the_effect_of_usage(tmp_path: Path) -> None:
    # kValue 0.5 at 1h: shareWeights 0.5 + 0.5 * (0.5 - 1) = 0.25 for a and 0.5 + 0.5 * 0.5 = 0.75 for b.
    doc = simulate(tmp_path, with_proportion_arguments({"kValue": 0.5}, **WEEK_WINDOW), until="1h")
    assert binds_at(doc, HOUR) == {"a": 2, "b": 6}
    assert queue_gpus(doc, "fairShare") == {"a": 2.0, "b": 6.0}


# --- windows and decay --------------------------------------------------------------------------------


def test_a_tumbling_window_that_starts_at_1h_has_forgotten_a_s_hour(tmp_path: Path) -> None:
    config = {"usageDBConfig": {"usageParams": {"windowType": "tumbling", "windowSize": "1h"}}}
    doc = simulate(tmp_path, config, until="1h")  # windows start at second 0: [0, 1h), [1h, 2h), ...
    assert binds_at(doc, HOUR) == {"a": 4, "b": 4}


def test_a_tumbling_window_from_the_configured_start_still_holds_a_s_hour(tmp_path: Path) -> None:
    # --start is 2026-01-01T00:00:00Z; windows of 1h from 00:30 put 1h in the window [30m, 1h30m).
    params = {"windowType": "tumbling", "windowSize": "1h", "tumblingWindowStartTime": "2026-01-01T00:30:00Z"}
    doc = simulate(tmp_path, {"usageDBConfig": {"usageParams": params}}, until="1h")
    assert binds_at(doc, HOUR) == {"a": 0, "b": 8}


def test_a_short_half_life_lets_a_regain_its_share_sooner(tmp_path: Path) -> None:
    # With a 10m half-life a's hour alone fades within minutes; without decay it weighs the same all week.
    until = "4500s"  # well before the shares settle
    decayed = simulate(
        tmp_path / "decay",
        {"usageDBConfig": {"usageParams": {"windowSize": "1w", "halfLifePeriod": "10m"}}},
        until=until,
    )
    plain = simulate(tmp_path / "plain", WEEK_WINDOW, until=until)
    # Both start by favouring b: a's hour is recent either way.
    assert binds_at(decayed, HOUR) == binds_at(plain, HOUR) == {"a": 0, "b": 8}
    decayed_times = [d["time"] for d in evictions(decayed)]
    plain_times = [d["time"] for d in evictions(plain)]
    assert decayed_times and plain_times
    assert decayed_times[0] < plain_times[0]
    assert len(decayed_times) > len(plain_times)
    assert queue_gpus(decayed, "allocated")["a"] > queue_gpus(plain, "allocated")["a"]


# --- convergence -------------------------------------------------------------------------------------


def test_once_the_shares_settle_reclaim_stops(tmp_path: Path) -> None:
    """Once the usages meet, differences of hundredths of a percent must not flip a whole GPU of fair
    share back and forth (with it, reclaim would move two GPUs between the queues every minute)."""
    doc = simulate(tmp_path, WEEK_WINDOW, until="5h")
    evicted = [d["pod"] for d in evictions(doc)]
    assert len(evicted) == len(set(evicted)), "a pod was evicted more than once"
