"""Scoring only the first of the empty nodes alike chooses as scoring every candidate does (issue #23,
point 2).

`framework.alike_nodes` leaves out of a pod's scoring the empty nodes of one capacity but the first; the
node chosen must be the one chosen when every candidate is scored, ties and near-ties included.
Generated clusters of a few kinds of node (some with more kinds than the shortcut takes, some tainted,
cordoned or labelled for soft preferences) take backlogs of whole-GPU, fractional and CPU-only pods,
gangs, node selectors, pods with preferred node affinity and pods running, terminating or finishing, over
a few cycles (pipelined pods come back nominated), under binpack, spread and `cpuAvoidsIdleGpus`; every
decision of every cycle and every waiting reason must be the same both ways.

The same for `framework.ranked_nodes`, which finds a pod's node through an index of the nodes by what binpack
ranks them by and scores a few of them: with it and without, on the same clusters and on clusters of one
kind of node (there CPU-only pods take it too), with CPU asks in millicores so that free CPU differs by
little. And under `gpufragmentation`, whose ranking searches the nodes itself (`PlacementCosts.best`):
with it, without it (every candidate scored), and through the index by its values (`PlacementCosts.values`,
which a sparse scorer beside it would use), over the examples' configuration with every action.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, pod, pod_group_manifest, queue, run
from kai_scheduler.api.objects import ApiObject, PodGroup
from kai_scheduler.framework import alike_nodes, ranked_nodes
from kai_scheduler.framework.config import SchedulerConfig, config_document, parse_config
from kai_scheduler.sim.engine import SimulationResult

RACKS = ("r0", "r1", "r2")
TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
SOFT_TAINT = {"key": "old", "value": "yes", "effect": "PreferNoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}
PREFERRED_RACK = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "preference": {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]},
            }
        ]
    }
}


@contextmanager
def shortcut(enabled: bool) -> Iterator[None]:
    """The shortcut on (for any number of candidates, however few) or off."""
    before = alike_nodes.ENABLED, alike_nodes.FEW_CANDIDATES
    alike_nodes.ENABLED, alike_nodes.FEW_CANDIDATES = enabled, 0
    try:
        yield
    finally:
        alike_nodes.ENABLED, alike_nodes.FEW_CANDIDATES = before


@contextmanager
def ranked(enabled: bool) -> Iterator[None]:
    before = ranked_nodes.ENABLED
    ranked_nodes.ENABLED = enabled
    try:
        yield
    finally:
        ranked_nodes.ENABLED = before


@contextmanager
def indexed_by_values() -> Iterator[None]:
    """Rankings that search the nodes themselves (`ranked_nodes.Finder`) go through the index instead."""
    made = ranked_nodes.Ranking.__init__

    def without_search(self: ranked_nodes.Ranking, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **{**kwargs, "finds": None})

    ranked_nodes.Ranking.__init__ = without_search  # type: ignore[method-assign]
    try:
        yield
    finally:
        ranked_nodes.Ranking.__init__ = made  # type: ignore[method-assign]


FRAGMENTATION = "gpufragmentation"
# With gpusharingorder beside it, a sparse scorer for shared-GPU pods: their node is found through the
# index by the plugin's values instead of its own search.
FRAGMENTATION_SHARING = "gpufragmentation-and-gpusharingorder"
# The example configuration with gpufragmentation (every action of KAI's default besides allocate).
FRAGMENTATION_CONFIG = Path(__file__).parents[2] / "examples" / "gpu-fragmentation-config.yaml"


def config(placement: str) -> SchedulerConfig:
    """The default configuration with nodeplacement's arguments for `placement` (gpufragmentation: the
    example's configuration with it)."""
    if placement in (FRAGMENTATION, FRAGMENTATION_SHARING):
        document = yaml.safe_load(FRAGMENTATION_CONFIG.read_text())
        if placement == FRAGMENTATION_SHARING:
            document["tiers"][0]["plugins"].append({"name": "gpusharingorder"})
        return parse_config(document)
    arguments: dict[str, Any] = {"gpu": "binpack", "cpu": "binpack"}
    if placement == "spread":
        arguments = {"gpu": "spread", "cpu": "spread"}
    elif placement == "cpu-avoids-idle-gpus":
        arguments["cpuAvoidsIdleGpus"] = "true"
    document = config_document(SchedulerConfig())
    for tier in document["tiers"]:
        for plugin in tier["plugins"]:
            if plugin["name"] == "nodeplacement":
                plugin["arguments"] = arguments
    return parse_config(document)


def cluster(
    rng: random.Random, nodes: int, *, one_kind: bool = False, quiet: bool = False
) -> list[ApiObject]:
    """Nodes of a few kinds (or, now and then, of more kinds than the shortcut takes; or of one); `quiet`:
    none tainted softly."""
    many_kinds = not one_kind and rng.random() < 0.2
    kinds = [(8, "64")] if one_kind else [(8, "64"), (8, "32"), (4, "64"), (0, "32")]
    soft = not quiet and rng.random() < 0.2
    objects: list[ApiObject] = []
    for i in range(nodes):
        gpus, cpu = (rng.choice((1, 2, 4, 8)), str(8 * (i + 1))) if many_kinds else rng.choice(kinds)
        taints = [TAINT] if rng.random() < 0.1 else []
        if soft and rng.random() < 0.3:
            taints.append(SOFT_TAINT)
        objects.append(
            node(
                f"n{i:02d}",
                gpus=gpus,
                cpu=cpu,
                labels={"rack": RACKS[i % len(RACKS)]},
                taints=taints or None,
                unschedulable=rng.random() < 0.05,
            )
        )
    return objects


def backlog(
    rng: random.Random, nodes: int, jobs: int, *, one_kind: bool = False, quiet: bool = False
) -> list[ApiObject]:
    """`quiet`: nothing is released and nothing preferred (soft taints, preferred affinity), so that every
    scorer but the ranking one scores a pod's candidates alike (where the ranked shortcut is taken)."""
    objects: list[ApiObject] = [
        queue("q", gpu=-1),
        queue("r", gpu=4),
        *cluster(rng, nodes, one_kind=one_kind, quiet=quiet),
    ]
    kinds: tuple[str, ...] = ("whole", "whole", "fraction", "cpu", "gang", "gang", "running")
    if not quiet:
        kinds += ("preferring", "running", "finishing")
    for j in range(jobs):
        kind = rng.choice(kinds)
        q = rng.choice(("q", "r"))
        gpus = rng.choice((1, 1, 2, 4, 8))
        cpu = rng.choice(("1", "2", "4", "12", "100m", "250m", "1500m"))
        extra: dict[str, Any] = {}
        if rng.random() < 0.15:
            extra["node_selector"] = {"rack": rng.choice(RACKS)}
        if rng.random() < 0.25:
            extra["tolerations"] = [TOLERATION]
        if kind == "whole":
            objects.append(pod(f"p{j}", q, gpus=gpus, cpu=cpu, **extra))
        elif kind == "preferring":
            objects.append(pod(f"p{j}", q, gpus=gpus, cpu=cpu, affinity=PREFERRED_RACK))
        elif kind == "fraction":
            objects.append(pod(f"p{j}", q, fraction=rng.choice((0.25, 0.5)), cpu=cpu))
        elif kind == "cpu":
            objects.append(pod(f"p{j}", q, cpu=cpu, **extra))
        elif kind in ("running", "finishing"):
            where = f"n{rng.randrange(nodes):02d}"
            terminating = kind == "running" and not quiet and rng.random() < 0.3
            duration = 30 if kind == "finishing" else None
            objects.append(
                pod(f"p{j}", q, gpus=1, cpu="1", node_name=where, terminating=terminating, duration=duration)
            )
        else:
            size = rng.randint(2, 6)
            objects.append(PodGroup.model_validate(pod_group_manifest(f"g{j}", q, min_member=size)))
            objects += [
                pod(f"g{j}-{k}", q, group=f"g{j}", gpus=min(gpus, 2), cpu=cpu, **extra) for k in range(size)
            ]
    return objects


def decided(result: SimulationResult) -> tuple[object, ...]:
    return (
        [[str(decision) for decision in record.decisions] for record in result.cycles],
        sorted(result.reasons.items()),
    )


def compare(objects: list[ApiObject], placement: str) -> None:
    with shortcut(True):
        fast = run(objects, config(placement), cycles=3)
    with shortcut(False):
        full = run(objects, config(placement), cycles=3)
    assert decided(fast) == decided(full)


def compare_ranked(objects: list[ApiObject], placement: str) -> None:
    with ranked(True):
        fast = run(objects, config(placement), cycles=3)
    with ranked(False):
        full = run(objects, config(placement), cycles=3)
    assert decided(fast) == decided(full)
    if placement == FRAGMENTATION:
        with ranked(True), indexed_by_values():
            by_values = run(objects, config(placement), cycles=3)
        assert decided(by_values) == decided(full)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.randoms(use_true_random=False),
    st.integers(2, 12),
    st.integers(1, 30),
    st.sampled_from(("binpack", "spread", "cpu-avoids-idle-gpus")),
)
def test_scoring_the_first_of_empty_nodes_alike_chooses_as_scoring_all(
    rng: random.Random, nodes: int, jobs: int, placement: str
) -> None:
    compare(backlog(rng, nodes, jobs), placement)


@pytest.mark.parametrize("seed", range(3))
def test_the_same_over_a_deep_backlog(seed: int) -> None:
    """Larger: most candidates empty at first, then fewer and fewer."""
    compare(backlog(random.Random(seed), 40, 160), "binpack")


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.randoms(use_true_random=False),
    st.integers(2, 12),
    st.integers(1, 30),
    st.booleans(),
    st.sampled_from(("binpack", "spread", "cpu-avoids-idle-gpus")),
)
def test_finding_the_node_through_the_ranked_index_chooses_as_scoring_all(
    rng: random.Random, nodes: int, jobs: int, one_kind: bool, placement: str
) -> None:
    compare_ranked(backlog(rng, nodes, jobs, one_kind=one_kind), placement)


@pytest.mark.parametrize("seed", range(3))
def test_the_ranked_index_over_a_deep_backlog(seed: int) -> None:
    compare_ranked(backlog(random.Random(seed), 40, 160, one_kind=seed > 0), "binpack")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.randoms(use_true_random=False), st.integers(2, 12), st.integers(1, 30), st.booleans(), st.booleans()
)
def test_gpufragmentations_own_search_chooses_as_scoring_all(
    rng: random.Random, nodes: int, jobs: int, one_kind: bool, quiet: bool
) -> None:
    compare_ranked(backlog(rng, nodes, jobs, one_kind=one_kind, quiet=quiet), FRAGMENTATION)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(2, 12), st.integers(1, 30))
def test_gpufragmentation_beside_a_sparse_scorer_chooses_as_scoring_all(
    rng: random.Random, nodes: int, jobs: int
) -> None:
    compare_ranked(backlog(rng, nodes, jobs, quiet=True), FRAGMENTATION_SHARING)


@pytest.mark.parametrize("seed", range(4))
def test_gpufragmentations_own_search_over_a_deep_backlog(seed: int) -> None:
    objects = backlog(random.Random(seed), 40, 160, one_kind=seed % 2 == 1, quiet=seed < 2)
    compare_ranked(objects, FRAGMENTATION)
