"""The fair-share explanation (issue #25, section 3): the division records its steps when asked, and what
it records ends in the very fair shares the cycle used, for every queue and resource; asked nothing, it
records nothing and divides the same."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from helpers import cluster_state, node_manifest, objects_of, pod_manifest, queue_manifest
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.fair_share_record import DivisionRecorder, FairShareRecord, as_json, from_json
from kai_scheduler.model.fair_share_text import explanation_text
from kai_scheduler.model.resources import RESOURCE_NAMES, Resources
from kai_scheduler.model.snapshot import ClusterState
from kai_scheduler.plugins.proportion.division import QueueShareInput, divide
from kai_scheduler.sim.engine import Simulation, SimulationOptions
from kai_scheduler.sim.loader import load_manifests

DEMO = Path(str(resources.files("kai_scheduler.sim").joinpath("demo")))


def _cycle(state: ClusterState, *, record: bool) -> SessionResult:
    return Scheduler(SchedulerConfig()).run(build_snapshot(state), cycle=1, now=0.0, record_fair_share=record)


def _assert_explains(record: FairShareRecord, result: SessionResult) -> None:
    """Every queue's explained share is its fair share in the cycle, bit for bit, also through JSON."""
    assert record.queues() == set(result.fair_share)
    for queue, shares in result.fair_share.items():
        shown = from_json(json.loads(json.dumps(as_json(record, queue))))
        for resource, share in zip(RESOURCE_NAMES, shares, strict=True):
            assert record.resources[resource].fair_share(queue) == share, (queue, resource)
            assert shown.resources[resource].fair_share(queue) == pytest.approx(share, rel=1e-12, abs=1e-9)
            level = record.resources[resource].path(queue)[-1]
            assert level.shares[queue] == share


def test_the_demo_is_explained_by_the_numbers_its_cycles_used() -> None:
    loaded = load_manifests([str(DEMO)])
    options = SimulationOptions(start=datetime(2026, 1, 1, tzinfo=UTC))
    simulation = Simulation([entry.obj for entry in loaded], SchedulerConfig(), replace(options, cycles=3))
    simulation.driver.record_fair_share = True
    results: list[SessionResult] = []
    simulation.observers.append(lambda _, result: results.append(result))
    simulation.run()
    assert len(results) == 3
    for result in results:
        assert result.fair_share_record is not None
        _assert_explains(result.fair_share_record, result)
    text = explanation_text(results[-1].fair_share_record, "vision")  # type: ignore[arg-type]
    # vision: quota 40, weight 2, asks for 96 of research's share; the text names each step.
    assert "Level 2: queue research's" in text and "vision" in text
    assert "Quota phase: each gets min(quota, request, limit)" in text
    assert text.count("Result: vision's ") == 3


def _tree(seed: int, count: int = 50) -> list[dict[str, Any]]:
    """`count` queues in several levels: priorities, limits, zero and unlimited quotas, weights 0-3."""
    rng = random.Random(seed)
    manifests: list[dict[str, Any]] = []
    parents: list[tuple[str, int]] = []
    for index in range(count):
        depth_parent = rng.choice([p for p in parents if p[1] < 3]) if parents and index >= 4 else None
        name = f"q{index}"
        quota = rng.choice([0, 0, -1, 1, 2, 4, 8])
        limit = rng.choice([-1, -1, 0, max(quota, 0) + rng.choice([0, 2, 6])])
        manifests.append(
            queue_manifest(
                name,
                gpu=quota,
                gpu_limit=limit,
                gpu_weight=rng.choice([0, 1, 1, 2, 3]),
                cpu=rng.choice([-1, 0, 2000, 8000]),
                cpu_weight=rng.choice([0, 1, 2]),
                parent=depth_parent[0] if depth_parent else None,
                priority=rng.choice([50, 100, 100, 200]),
            )
        )
        parents.append((name, 0 if depth_parent is None else depth_parent[1] + 1))
    return manifests


def _hierarchy_state(seed: int) -> ClusterState:
    manifests = _tree(seed)
    children = {m["spec"].get("parentQueue") for m in manifests}
    leaves = [m["metadata"]["name"] for m in manifests if m["metadata"]["name"] not in children]
    rng = random.Random(seed + 1)
    objects = [node_manifest(f"n{i}", gpus=8, cpu="64", memory="256Gi") for i in range(10)]
    objects += manifests
    for leaf in leaves:
        for number in range(rng.randint(0, 4)):
            objects.append(pod_manifest(f"{leaf}-{number}", queue=leaf, gpus=rng.choice([1, 2, 4]), cpu="2"))
    state = cluster_state(objects_of(*objects))
    # Time-based fairness on: each queue's recent usage, a share of the cluster.
    usage = {m["metadata"]["name"]: Resources(rng.random() * 0.4, rng.random() * 0.2, 0.0) for m in manifests}
    return replace(state, queue_usage=usage)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_generated_hierarchy_of_fifty_queues_is_explained_by_its_own_cycle(seed: int) -> None:
    state = _hierarchy_state(seed)
    recorded = _cycle(state, record=True)
    assert recorded.fair_share_record is not None
    assert len(recorded.fair_share) == 50
    _assert_explains(recorded.fair_share_record, recorded)
    # Asked nothing: nothing recorded, and every decision and share the same.
    plain = _cycle(state, record=False)
    assert plain.fair_share_record is None
    assert plain.fair_share == recorded.fair_share
    assert plain.decisions == recorded.decisions
    # The usage adjustment, priority buckets and rounds are in it for the queues they decided.
    gpu = recorded.fair_share_record.resources["gpu"]
    assert any(q.usage > 0 for level in gpu.levels for q in level.queues)
    assert any(len(level.buckets) > 1 for level in gpu.levels)
    assert max(len(gpu.path(queue)) for queue in recorded.fair_share) >= 3
    texts = [explanation_text(recorded.fair_share_record, queue) for queue in recorded.fair_share]
    assert any("Time-based fairness is on (kValue 1)" in text for text in texts)


def test_the_rounds_are_the_division_s_own() -> None:
    """kai-reference §5.3: weights 1 and 3, deserved 2 each, requests 6, T=8 gives 3/5: the record shows
    the over-quota round that split the 4 left by weight, and the leftover hand-out."""
    queues = [
        QueueShareInput("a", None, 100, 0, deserved=2, limit=-1, over_quota_weight=1, request=6),
        QueueShareInput("b", None, 100, 1, deserved=2, limit=-1, over_quota_weight=3, request=6),
    ]
    recorder = DivisionRecorder()
    recorder.resource("gpu", 8, 1.0)
    shares = divide(8, queues, recorder=recorder)
    assert shares == divide(8, queues) == {"a": 3, "b": 5}
    (level,) = recorder.record.resources["gpu"].levels
    assert (level.parent, level.total, level.after_quota) == (None, 8, 4)
    assert [q.quota_share for q in level.queues] == [2, 2]
    (bucket,) = level.buckets
    first = bucket.rounds[0]
    assert first.amount == 4 and first.relative == [0.25, 0.75]
    assert [(g.queue, g.offer, g.granted) for g in first.grants] == [("a", 1.0, 1.0), ("b", 3.0, 3.0)]
    assert level.shares == shares


def test_a_cluster_without_queues_records_an_empty_division() -> None:
    recorder = DivisionRecorder()
    recorder.resource("gpu", 8, 1.0)
    assert divide(8, [], recorder=recorder) == {}
    (level,) = recorder.record.resources["gpu"].levels
    assert (level.parent, level.queues, level.after_quota) == (None, [], 8)
