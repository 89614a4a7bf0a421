"""Node-order plugins: nodeplacement (binpack / spread, for GPU and CPU pods), nodeavailability,
resourcetype, gpusharingorder, nominatednode.

Reference: kai-reference §4.2 ("Node order: sum of every plugin's node score; highest first; ties by node
name ascending"), §4.4 plugin table and score constants (MaxHighDensity 9, ResourceType 10, Availability
100, GpuSharing 1000, NominatedNode 1 000 000; KAI v0.17 put Numa at 100 and moved Availability and every
band above it up tenfold: kai-v017 §2.4, pkg/scheduler/plugins/scores), §2.6 (placementStrategy gpu/cpu
binpack|spread).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from helpers import (
    binds,
    cluster_state,
    config,
    config_with,
    node,
    one_cycle,
    open_session,
    pipelines,
    pod,
    queue,
)
from kai_scheduler.framework.config import DEFAULT_PLUGINS, SchedulerConfig
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.snapshot import ClusterState, PodState
from kai_scheduler.plugins import scoring

ALLOCATE = config(actions="allocate")


def placement_config(
    gpu: str = "binpack", cpu: str = "binpack", *, without: tuple[str, ...] = ()
) -> SchedulerConfig:
    plugins = [
        {"name": name, "arguments": {"gpu": gpu, "cpu": cpu} if name == "nodeplacement" else {}}
        for name in DEFAULT_PLUGINS
        if name not in without
    ]
    return config(actions="allocate", tiers=[{"plugins": plugins}])


def gpu_nodes() -> list[Any]:
    # a: 8 GPUs free; b: 2 of 8 free (6 held by a running pod); c: 5 of 8 free.
    return [
        node("a"),
        node("b"),
        node("c"),
        queue("q"),
        pod("busy-b", gpus=6, node_name="b"),
        pod("busy-c", gpus=3, node_name="c"),
    ]


@pytest.mark.parametrize(("strategy", "expected"), [("binpack", "b"), ("spread", "a")])
def test_gpu_placement(strategy: str, expected: str) -> None:
    decisions = one_cycle([*gpu_nodes(), pod("p", gpus=1)], placement_config(gpu=strategy))
    assert binds(decisions) == {"p": expected}


def cpu_nodes() -> list[Any]:
    return [
        node("a", gpus=0, cpu="16"),
        node("b", gpus=0, cpu="16"),
        node("c", gpus=0, cpu="16"),
        queue("q"),
        pod("busy-b", cpu="12", node_name="b"),
        pod("busy-c", cpu="4", node_name="c"),
    ]


@pytest.mark.parametrize(("strategy", "expected"), [("binpack", "b"), ("spread", "a")])
def test_cpu_placement(strategy: str, expected: str) -> None:
    decisions = one_cycle([*cpu_nodes(), pod("p", cpu="2")], placement_config(cpu=strategy))
    assert binds(decisions) == {"p": expected}


def test_gpu_and_cpu_strategies_are_independent() -> None:
    objects = [
        *gpu_nodes(),
        node("x", gpus=0, cpu="16"),
        node("y", gpus=0, cpu="16"),
        pod("busy-y", cpu="12", node_name="y"),
        pod("g", gpus=1),
        pod("k", cpu="2", memory="1Gi"),
    ]
    decisions = binds(one_cycle(objects, placement_config(gpu="binpack", cpu="spread")))
    assert decisions["g"] == "b"  # GPU pods pack
    assert decisions["k"] == "x"  # CPU pods spread (x is the emptiest CPU-only node)


def test_binpack_spreads_nothing_when_all_nodes_are_equal_and_breaks_ties_by_name() -> None:
    objects = [node("z"), node("m"), node("b"), queue("q"), pod("p", gpus=1)]
    assert binds(one_cycle(objects, ALLOCATE)) == {"p": "b"}


def test_binpack_fills_one_node_before_the_next() -> None:
    objects = [node("a", gpus=4), node("b", gpus=4), queue("q"), *[pod(f"p{i}", gpus=1) for i in range(5)]]
    decisions = binds(one_cycle(objects, ALLOCATE))
    assert [decisions[f"p{i}"] for i in range(5)] == ["a", "a", "a", "a", "b"]


def test_spread_alternates_between_nodes() -> None:
    objects = [node("a", gpus=4), node("b", gpus=4), queue("q"), *[pod(f"p{i}", gpus=1) for i in range(4)]]
    decisions = binds(one_cycle(objects, placement_config(gpu="spread")))
    assert [decisions[f"p{i}"] for i in range(4)] == ["a", "b", "a", "b"]


# --- nodeavailability ----------------------------------------------------------------------------


def _releasing_vs_free() -> list[Any]:
    # a is full but its pod is terminating (binpack prefers it: fewer free GPUs); b has room now.
    return [
        node("a", gpus=2),
        node("b", gpus=8),
        queue("q"),
        pod("leaving", gpus=2, node_name="a", terminating=True),
        pod("p", gpus=1),
    ]


def test_nodeavailability_prefers_a_node_where_the_pod_fits_now() -> None:
    decisions = one_cycle(_releasing_vs_free(), ALLOCATE)
    assert binds(decisions) == {"p": "b"}


def test_without_nodeavailability_binpack_pipelines_onto_releasing_capacity() -> None:
    decisions = one_cycle(_releasing_vs_free(), placement_config(without=("nodeavailability",)))
    assert pipelines(decisions) == {"p": "a"}
    assert binds(decisions) == {}


# --- resourcetype --------------------------------------------------------------------------------


def test_resourcetype_keeps_cpu_pods_on_cpu_only_nodes() -> None:
    objects = [node("a-gpu", cpu="64"), node("b-cpu", gpus=0, cpu="64"), queue("q"), pod("cpu", cpu="1")]
    assert binds(one_cycle(objects, ALLOCATE)) == {"cpu": "b-cpu"}
    assert binds(one_cycle(objects, placement_config(without=("resourcetype",)))) == {"cpu": "a-gpu"}


def test_resourcetype_does_not_pull_gpu_pods_anywhere() -> None:
    objects = [node("a", gpus=4), node("b", gpus=4), queue("q"), pod("g", gpus=1)]
    assert binds(one_cycle(objects, ALLOCATE)) == {"g": "a"}


def test_resourcetype_does_not_count_a_mig_node_as_cpu_only() -> None:
    mig = node(
        "a-mig",
        gpus=0,
        cpu="64",
        labels={"nvidia.com/mig.strategy": "mixed"},
        extra={"nvidia.com/mig-1g.10gb": 7},
    )
    objects = [mig, node("b-cpu", gpus=0, cpu="64"), queue("q"), pod("cpu", cpu="1")]
    assert binds(one_cycle(objects, ALLOCATE)) == {"cpu": "b-cpu"}


# --- gpusharingorder -----------------------------------------------------------------------------


def _sharing_objects() -> list[Any]:
    # big: 8 GPUs, one shared at 0.5 (7.5 idle); small: 2 whole GPUs free. binpack alone prefers small.
    return [
        node("big", gpus=8),
        node("small", gpus=2),
        queue("q"),
        pod("half", fraction=0.5, node_name="big", labels={"runai-gpu-group": "big-g1"}),
        pod("f", fraction=0.5),
    ]


def test_gpusharingorder_sends_a_fraction_to_a_shared_gpu_with_room() -> None:
    decisions = one_cycle(_sharing_objects(), ALLOCATE)
    assert binds(decisions) == {"f": "big"}
    assert decisions[0].gpu_groups == ("big-g1",)


def test_without_gpusharingorder_binpack_decides() -> None:
    decisions = one_cycle(_sharing_objects(), placement_config(without=("gpusharingorder",)))
    assert binds(decisions) == {"f": "small"}


def test_gpusharingorder_ignores_shared_gpus_without_enough_room() -> None:
    objects = _sharing_objects()
    objects[-1] = pod("f", fraction=0.75)
    assert binds(one_cycle(objects, ALLOCATE)) == {"f": "small"}


# --- nominatednode -------------------------------------------------------------------------------


def test_nominated_node_beats_every_other_score() -> None:
    objects = [node("a", gpus=2), node("b", gpus=8), queue("q"), pod("p", gpus=1)]
    state = cluster_state(objects)
    pods = [PodState(s.pod, s.rank, nominated_node="b") for s in state.pods]
    state = ClusterState(state.nodes, pods, state.pod_groups, state.queues, state.priority_classes)
    session = open_session(build_snapshot(state))
    placed = session.choose_node(session.snapshot.tasks["default/p"])
    assert placed is not None and session.snapshot.nodes.names[placed.node] == "b"


def test_scores_add_up_with_the_documented_constants() -> None:
    objects = [node("a", gpus=4), node("b-cpu", gpus=0), queue("q"), pod("cpu", cpu="1")]
    session = open_session(objects, plugins=["resourcetype", "nodeavailability"])
    task = session.snapshot.tasks["default/cpu"]
    candidates = session.candidate_nodes(task).nonzero()[0]  # scorers take row indices
    total = np.zeros(2)
    for scorer in session.points.node_scorers:
        total += scorer(task, candidates)
    assert list(total) == [1000.0, 1010.0]


def test_config_with_swaps_gpupack_for_gpuspread() -> None:
    swapped = config_with({"gpuspread": {}})
    names = [p.name for p in swapped.plugins()]
    assert "gpuspread" in names and "gpupack" not in names


@pytest.mark.parametrize("seed", range(10))
def test_binpack_scores_a_few_candidates_to_the_last_bit_as_it_scores_many(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Binpack scores a few candidates in plain Python floats (`scoring.FEW_ROWS`), the ranked index's
    usual case: every score must have numpy's bits, near-ties of huge nodes and shared GPUs included."""
    rng = random.Random(seed)
    objects: list[Any] = [queue("q")]
    for i in range(10):
        objects.append(node(f"n{i}", gpus=8, cpu=rng.choice(("64", "100000000000"))))
        for k in range(rng.randint(0, 3)):
            ask = {"fraction": 0.25} if rng.random() < 0.3 else {"gpus": rng.randint(0, 2)}
            objects.append(pod(f"busy-{i}-{k}", cpu=f"{rng.randint(1, 9000)}m", node_name=f"n{i}", **ask))
    objects += [pod("gpu-pod", gpus=1), pod("cpu-pod", cpu="1")]
    session = open_session(objects)
    (position,) = session.points.scorers_ranking
    binpack = session.points.node_scorers[position]
    for _ in range(20):
        rows = np.array(sorted(rng.sample(range(10), rng.randint(0, 6))), dtype=np.int64)
        for name in ("default/gpu-pod", "default/cpu-pod"):
            task = session.snapshot.tasks[name]
            few = binpack(task, rows)
            monkeypatch.setattr(scoring, "FEW_ROWS", 0)
            many = binpack(task, rows)
            monkeypatch.undo()
            assert type(few) is type(many)
            assert np.array_equal(few, many)
            assert np.asarray(few).tobytes() == np.asarray(many).tobytes()


@pytest.mark.parametrize("seed", range(10))
def test_gpusharingorder_scores_a_few_candidates_as_it_scores_many(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpusharingorder scores a few candidates in plain Python (`scoring.FEW_ROWS`): the same scores, for a
    fraction and for gpu-memory on nodes of different GPU memory (none known included), shared GPUs with
    and without room, and one whose room falls a rounding step short of a fifth (two pods of 0.4)."""
    rng = random.Random(seed)
    objects: list[Any] = [queue("q"), node("n10", gpus=8)]
    objects += [
        pod(f"part-10-{k}", fraction=0.4, node_name="n10", labels={"runai-gpu-group": "g"}) for k in (0, 1)
    ]
    for i in range(10):
        memory = rng.choice((None, 16000, 40000, 80000))
        objects.append(node(f"n{i}", gpus=8, gpu_memory=memory))
        for k in range(rng.randint(0, 3)):
            group = {"runai-gpu-group": f"g{i}-{rng.randint(0, 1)}"}
            part = rng.choice((0.25, 0.5, 0.75))
            objects.append(pod(f"part-{i}-{k}", fraction=part, node_name=f"n{i}", labels=group))
    objects += [pod("fraction", fraction=0.25), pod("fifth", fraction=0.2), pod("memory", gpu_memory=10000)]
    session = open_session(objects)
    sharing = scoring.GpuSharingOrderPlugin({})
    nodes = session.snapshot.nodes
    for _ in range(20):
        rows = np.array(sorted(rng.sample(range(11), rng.randint(0, 6))), dtype=np.int64)
        for name in ("default/fraction", "default/fifth", "default/memory"):
            task = session.snapshot.tasks[name]
            few = sharing.score(nodes, task, rows)
            monkeypatch.setattr(scoring, "FEW_ROWS", -1)
            many = sharing.score(nodes, task, rows)
            monkeypatch.undo()
            assert type(few) is type(many)
            assert np.asarray(few).tobytes() == np.asarray(many).tobytes()


@pytest.mark.parametrize("seed", range(10))
def test_nodeavailability_scores_a_few_candidates_while_pods_are_released_as_it_scores_many(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While pods are being released, nodeavailability scores a few candidates by asking each node whether
    the pod fits now (`scoring.FEW_ROWS`), without the whole cluster's fit mask of the pod's request: the
    same scores as from that mask, for whole-GPU, fraction, gpu-memory and CPU-only pods, on nodes whose
    pods are partly evicted (releasing) and partly placed again onto what they release."""
    rng = random.Random(seed)
    objects: list[Any] = [queue("q")]
    for i in range(10):
        objects.append(node(f"n{i}", gpus=8, cpu="16", gpu_memory=rng.choice((None, 40000, 80000))))
        for k in range(rng.randint(0, 4)):
            ask = {"fraction": 0.5} if rng.random() < 0.3 else {"gpus": rng.randint(1, 3)}
            group = {"labels": {"runai-gpu-group": f"g{i}-{k}"}} if "fraction" in ask else {}
            objects.append(
                pod(f"busy-{i}-{k}", cpu=f"{rng.randint(1, 5000)}m", node_name=f"n{i}", **ask, **group)
            )
    asks = {"whole": {"gpus": 2}, "fraction": {"fraction": 0.5}, "memory": {"gpu_memory": 20000}, "cpu": {}}
    objects += [pod(name, cpu="2", **ask) for name, ask in asks.items()]
    session = open_session(objects)
    tasks, nodes = session.snapshot.tasks, session.snapshot.nodes
    statement = session.statement("reclaim")
    for task in [t for key, t in sorted(tasks.items()) if key.startswith("default/busy")]:
        if rng.random() < 0.4:
            statement.evict(task, "test")
    assert nodes.anything_releasing()
    availability = scoring.NodeAvailabilityPlugin({})
    for _ in range(20):
        rows = np.array(sorted(rng.sample(range(10), rng.randint(0, 6))), dtype=np.int64)
        for name in asks:
            task = tasks[f"default/{name}"]
            with monkeypatch.context() as no_mask:
                no_mask.setattr(type(nodes), "fit", _no_fit_mask_now)
                few = availability.score(nodes, task, rows)
            monkeypatch.setattr(scoring, "FEW_ROWS", -1)
            many = availability.score(nodes, task, rows)
            monkeypatch.undo()
            assert isinstance(few, np.ndarray) and isinstance(many, np.ndarray)
            assert few.tobytes() == many.tobytes()


def _no_fit_mask_now(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a few candidates' scores read the whole cluster's fit mask")
