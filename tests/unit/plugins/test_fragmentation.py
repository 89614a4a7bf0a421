"""gpufragmentation (issue #11): the measure of stranded GPUs, the mix it learns, and the plugin's choices
for whole GPUs, fractions, GPU memory, several devices, MIG and CPU-only pods, inside gangs and topology
constraints; and `nodeplacement`'s `cpuAvoidsIdleGpus` option.

The scenario tests `fragmentation-*` show the policy against KAI's bin-packing on the same clusters.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import (
    binds,
    config_with,
    node,
    one_cycle,
    open_session,
    pod,
    pod_group,
    pod_group_manifest,
    queue,
    simulate,
    snapshot_of,
)
from kai_scheduler.api.objects import PodGroup, Topology
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework import ranked_nodes
from kai_scheduler.framework.config import DEFAULT_PLUGINS, ConfigError, parse_config
from kai_scheduler.model.jobs import TaskStatus
from kai_scheduler.model.resources import PodRequest
from kai_scheduler.plugins.fragmentation import costs as costs_module
from kai_scheduler.plugins.fragmentation import kernels, measure
from kai_scheduler.plugins.fragmentation.costs import PlacementCosts
from kai_scheduler.plugins.fragmentation.measure import (
    NodeStates,
    evaluate,
    mig_columns,
    mix_arrays,
    scarcity_weighted,
)
from kai_scheduler.plugins.fragmentation.mix import learn_mix
from kai_scheduler.plugins.fragmentation.plugin import MAX_SCORE

PLUGINS = [
    "predicates",
    "proportion",
    "priority",
    "elastic",
    "nodeavailability",
    "resourcetype",
    "subgrouporder",
    "taskorder",
    "nominatednode",
    "gpufragmentation",
    "minruntime",
    "topology",
    "sg-nodelocalgreedy",
    "sg-multinodegang",
]


def fragmentation_config(actions: str = "allocate", **arguments: Any) -> Any:
    plugins = [{"name": n, "arguments": arguments if n == "gpufragmentation" else {}} for n in PLUGINS]
    return parse_config({"actions": actions, "tiers": [{"plugins": plugins}]})


ALLOCATE = fragmentation_config()


# --- the measure --------------------------------------------------------------------------------


def _stranded(node_cpu: float, whole: float, shared: list[float], *requests: tuple[Any, float]) -> float:
    """Stranded GPUs of one node state for a mix of (pod, weight); the node table only gives shapes."""
    snapshot = snapshot_of([node("n", gpus=8, cpu="64"), queue("q"), *(p for p, _ in requests)])
    table = snapshot.nodes
    tasks = {t.name: t for t in snapshot.tasks.values()}
    mig, units = mig_columns(table)
    mix = mix_arrays(
        [tasks[p.metadata.name].request for p, _ in requests],
        [w for _, w in requests],
        [np.ones(table.size, dtype=np.bool_) for _ in requests],
        table,
        mig,
    )
    states = NodeStates(
        nodes=np.array([0]),
        cpu=np.array([node_cpu]),
        memory=np.array([2.0**40]),
        whole=np.array([whole]),
        shared=np.array([[*shared, 0.0]]),
        mig=np.zeros((1, 0)),
    )
    return float(evaluate(mix, states, units)[0][0])


def test_gpus_without_cpu_for_them_are_partly_stranded() -> None:
    # 3 free GPUs, CPU for two 1-GPU pods of 4 CPUs: counted 3 usable with weight 3/4 (lighter pods may
    # use them) and 2 with weight 1/4: 2.75 usable, 0.25 stranded.
    assert _stranded(8000, 3, [], (pod("p", gpus=1, cpu="4"), 1.0)) == pytest.approx(0.25)


def test_what_a_shared_gpu_holds_after_whole_pods_is_stranded() -> None:
    # A shared GPU with 0.6 free holds two 0.25 pods: 0.1 stranded.
    assert _stranded(64000, 0, [0.6], (pod("p", fraction=0.25), 1.0)) == pytest.approx(0.1)


def test_multi_gpu_pods_use_free_gpus_in_their_multiples() -> None:
    # Three free GPUs hold one 2-GPU pod: one stranded (counted twice: over three offers, and as pods of
    # several GPUs are counted over one).
    assert _stranded(64000, 3, [], (pod("p", gpus=2), 1.0)) == pytest.approx(2 * 1.0)


def test_fragmentation_is_the_least_of_three_offers() -> None:
    # A GPU with 0.5 free: nothing stranded for 0.5 pods, all of it for 0.75 pods; half the mix each.
    # The least of three offers strands 0.5 only when all three are 0.75 pods: 0.5 x 0.5**3.
    mix = ((pod("half", fraction=0.5), 0.5), (pod("most", fraction=0.75), 0.5))
    assert _stranded(64000, 0, [0.5], *mix) == pytest.approx(0.0625)


def test_pods_of_several_gpus_also_count_over_one_pod() -> None:
    # 2 free GPUs: nothing stranded for 1-GPU pods, everything for 8-GPU pods; half the mix each. Three
    # offers strand 2 x 0.5**3; the 8-GPU pods, which need room no 1-GPU pod may break into, add what
    # one pod of them would strand (FGD's count): 2 x 0.5.
    mix = ((pod("one", gpus=1), 0.5), (pod("eight", gpus=8), 0.5))
    assert _stranded(64000, 2, [], *mix) == pytest.approx(0.25 + 1.0)
    # On an idle 8-GPU node they strand nothing; one 1-GPU pod there costs them the node: 7 x 0.5 (and
    # three offers 7 x 0.5**3).
    assert _stranded(64000, 8, [], *mix) == pytest.approx(0.0)
    assert _stranded(64000, 7, [], *mix) == pytest.approx(7 * 0.5 + 7 * 0.5**3)


def test_a_node_state_strands_the_same_whatever_rows_come_with_it() -> None:
    # A placement's cost is the difference of two evaluations, and a kept cost must be the one that
    # evaluating anew gives: each row alone gives the same bits as in any batch of rows (a BLAS product
    # over the rows summed a row by its neighbours: a third of recorded rows differed in the last bits).
    shapes = [
        pod(f"p{i}", gpus=g, cpu=f"{c}") for i, (g, c) in enumerate([(1, 4), (2, 12), (4, 30), (8, 60)])
    ]
    shapes += [pod("f1", fraction=0.25, cpu="3"), pod("f2", fraction=0.5, cpu="7")]
    snapshot = snapshot_of([node("n", gpus=8, cpu="64"), queue("q"), *shapes])
    table = snapshot.nodes
    mig, units = mig_columns(table)
    requests = [t.request for t in snapshot.tasks.values()]
    weights = [0.31, 0.07, 0.13, 0.11, 0.19, 0.19]
    mix = mix_arrays(requests, weights, [np.ones(table.size, dtype=np.bool_)] * len(requests), table, mig)
    rng = np.random.default_rng(7)
    rows = 64
    states = NodeStates(
        nodes=np.zeros(rows, dtype=np.int64),
        cpu=rng.integers(0, 64, rows) * 1000.0,
        memory=np.full(rows, 2.0**40),
        whole=rng.integers(0, 9, rows).astype(np.float64),
        shared=np.column_stack([rng.choice([0.0, 0.1, 0.35, 0.5, 0.75], rows), np.zeros(rows)]),
        mig=np.zeros((rows, 0)),
    )
    together = evaluate(mix, states, units)[0]
    for row in range(rows):
        alone = NodeStates(
            states.nodes[row : row + 1],
            states.cpu[row : row + 1],
            states.memory[row : row + 1],
            states.whole[row : row + 1],
            states.shared[row : row + 1],
            states.mig[row : row + 1],
        )
        assert evaluate(mix, alone, units)[0].tolist() == together[row : row + 1].tolist()


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_measure_is_its_definition_to_the_bit(seed: int) -> None:
    # The kernels take shortcuts (every class first as if no GPU were shared, in one loop without
    # branches; one pass per distinct stranded value instead of a sort): on states full of ties, shared
    # GPUs or none, negative room and MIG classes, they give the bits of the measure as defined, worked
    # out here in plain floats: each class's usable GPUs, then the classes stably sorted by what they
    # strand and the expectation summed over every step between neighbours.
    rng = np.random.default_rng(seed)
    nodes, shared, gpu, classes, migs = 40, 3, 7, 9, 2
    weight = rng.choice([0.0, 0.05, 0.1, 0.2], classes)
    mix = (
        weight,
        shared,
        gpu,
        rng.choice([1e-4, 2.5e-4, 1e-3], classes),
        rng.choice([1e-9, 4e-10], classes),
        1.0 / rng.integers(1, 4, classes),
        1.0 / rng.choice([0.25, 0.5, 0.3], (nodes, shared)),
        np.floor(1.0 / rng.choice([0.25, 0.5, 1.0], (nodes, classes)) + 1e-9),
        rng.choice([0.0, 1.0, 0.5], (classes - gpu, migs)),
        rng.choice([0.0, 1e30], (classes - gpu, migs)),
        rng.choice([0.0, 0.5, 1.0, 2.0], (nodes, classes)),
        np.where(rng.random(classes) < 0.3, weight, 0.0),
        rng.random(nodes),
        rng.integers(0, 9, nodes).astype(np.float64),
    )
    rows = 400
    states = np.column_stack(
        [
            rng.choice([-1000.0, 0.0, 4000.0, 16000.0, 64000.0], rows),
            rng.choice([0.0, 2.0**30, 2.0**40], rows),
            rng.integers(0, 9, rows).astype(np.float64),
            np.where(rng.random((rows, 4)) < 0.5, 0.0, rng.choice([0.1, 0.25, 0.5, 0.75, 1.0], (rows, 4))),
        ]
    )
    states[: rows // 2, kernels.SHARED :] = 0.0  # half the rows share no GPU
    mig = rng.choice([0.0, 1.0, 3.0], (rows, migs))
    units = np.array([1.0 / 7.0, 3.0 / 7.0])
    row_nodes = rng.integers(0, nodes, rows)
    usable = kernels.usable(mix, row_nodes, states, mig)
    frag, _ = kernels.evaluate(mix, row_nodes, states, mig, units)
    for row, node_of_row in enumerate(row_nodes.tolist()):
        state = states[row].tolist()
        assert usable[row].tolist() == _usable_by_definition(mix, node_of_row, state, mig[row].tolist())
        assert frag[row] == _stranded_by_definition(mix, node_of_row, state, mig[row], units)


def _usable_by_definition(mix: Any, node: int, state: list[float], mig: list[float]) -> list[float]:
    """`measure.usable` for one row, class by class in plain floats."""
    weight, shared, gpu, per_cpu, per_memory, per_device, per_portion, whole_portions = mix[:8]
    per_mig, mig_unasked, demand = mix[8:11]
    cpu, memory, whole, *shared_free = state
    slack, fill = kernels.SLACK, kernels.LIGHTER_FILL
    usable = []
    for k in range(weight.size):
        slots = whole * whole_portions[node, k]
        if k < shared:
            for free in shared_free:
                slots += math.floor(free * per_portion[node, k] + slack)
        slots = float(math.floor(slots * per_device[k] + slack))
        if k >= gpu:
            slots = math.inf if mig else 0.0
            for column, instances in enumerate(mig):
                held = math.floor(instances * per_mig[k - gpu, column] + slack)
                slots = min(slots, held + mig_unasked[k - gpu, column])
        by_cpu = float(math.floor(min(cpu * per_cpu[k], memory * per_memory[k]) + slack))
        bounded = max(min(slots, by_cpu), 0.0) * (1.0 - fill)
        fits = 1.0 if by_cpu >= 1.0 else 0.0
        usable.append(((slots * fits) * fill + bounded) * demand[node, k])
    return usable


def _stranded_by_definition(mix: Any, node: int, state: list[float], mig: Any, units: Any) -> float:
    """`measure.evaluate` for one row: the classes sorted by what they strand (stably: ties in class
    order), the least of `kernels.OFFERS` offers' expectation over every step between neighbours."""
    weight, several_weight, pressure, capacity = mix[0], mix[11], mix[12], mix[13]
    portions = instances = 0.0
    for free in state[kernels.SHARED :]:
        portions += free
    for column in range(mig.size):
        instances += mig[column] * units[column]
    idle = state[kernels.WHOLE] + portions + instances
    stranded = [idle - usable for usable in _usable_by_definition(mix, node, state, mig.tolist())]
    whole_nodes = 0.0
    for k, value in enumerate(stranded):
        whole_nodes += value * several_weight[k]
    order = sorted(range(len(stranded)), key=lambda k: stranded[k])
    expected = earlier = 0.0
    for i in range(len(order) - 1):
        earlier += weight[order[i]]
        later = max(1.0 - earlier, 0.0)
        expected += (later * later * later) * (stranded[order[i + 1]] - stranded[order[i]])
    value = stranded[order[0]] + expected + whole_nodes
    return float(value + pressure[node] * (capacity[node] - idle))


def test_the_compiled_measure_is_loaded_only_with_the_plugin() -> None:
    # numba costs some 0.2-0.4 s of CPU to import and start: a scheduler without the plugin never loads it.
    program = "import sys, kai_scheduler.cycle, kai_scheduler.cli; print('numba' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_every_kernel_a_session_calls_is_loaded_when_the_plugin_is_configured() -> None:
    # Loading a kernel in a process (from numba's cache) costs tens of ms: the plugin loads each one it
    # calls when it is configured (`kernels.start`), on the types a session calls it with, so that its
    # first session loads none (a kernel called on other types would be loaded again, as a new signature).
    program = f"""
import sys
sys.path[:0] = {[str(Path(__file__).parent), str(Path(__file__).parents[2])]!r}
import numba
from kai_scheduler.plugins.fragmentation import kernels
from kai_scheduler.plugins.fragmentation.plugin import GpuFragmentationPlugin
import test_fragmentation as here
GpuFragmentationPlugin({{}})
def loaded():
    return {{name: len(kernel.signatures) for name, kernel in vars(kernels).items()
            if isinstance(kernel, numba.core.registry.CPUDispatcher) and kernel.signatures}}
before = loaded()
for seed in (1, 2, 3):
    here.one_cycle(here._generated_cluster(seed), here.fragmentation_config("allocate, consolidation"))
print(before == loaded(), sorted(before))
"""
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    same, names = result.stdout.split(" ", 1)
    assert same == "True" and "'choose'" in names and "'place_costs'" in names


def test_a_kernel_that_cannot_be_cached_is_compiled_in_each_process() -> None:
    # Where no cache location is writable (a read-only package and home, NUMBA_CACHE_DIR unset), numba
    # refuses to cache; the kernels are then compiled without it rather than failing to import. Code
    # from a string has no file to cache beside, which numba refuses alike.
    namespace: dict[str, Any] = {}
    exec("def twice(x):\n    return 2.0 * x\n", namespace)
    assert kernels._compiled(namespace["twice"])(1.5) == 3.0
    assert kernels._uncounted(namespace["twice"])(1.5) == 3.0


def _uncounted_kernels() -> dict[str, Any]:
    """The kernels compiled without numba's reference counting (`kernels._uncounted`), by name."""
    found = {}
    for name, kernel in vars(kernels).items():
        options = getattr(kernel, "targetoptions", None)
        if isinstance(options, dict) and options.get("_nrt") is False:
            found[name] = kernel
    return found


def test_the_per_node_kernels_take_no_references_and_return_no_array() -> None:
    # The kernels of the per-node loops are compiled without numba's reference counting
    # (`kernels._uncounted`): the references each binding of an array took and gave back were some 100 M
    # instructions of the plugin's first run at 2,000 nodes. Such a kernel must return no array: its caller
    # would give back a reference it never took.
    uncounted = _uncounted_kernels()
    assert {"_frag_row", "_usable_row", "_summarize_stale", "_merge_summaries", "_stale_holding_into"} <= set(
        uncounted
    )
    for name, kernel in uncounted.items():
        assert "Array" not in kernel.py_func.__annotations__["return"], name


def test_a_kernel_without_reference_counts_cannot_allocate() -> None:
    # What keeps an uncounted kernel from leaking or freeing too soon: numba refuses to compile one that makes
    # an array.
    namespace: dict[str, Any] = {"np": np}
    exec("def fresh(n):\n    return np.zeros(n).sum()\n", namespace)
    with pytest.raises(Exception, match="Only accept returning of array passed into the function"):
        kernels._uncounted(namespace["fresh"])(3)


# --- the mix ------------------------------------------------------------------------------------


def test_the_mix_counts_live_and_recent_gpu_pods_by_kind_most_frequent_first() -> None:
    objects = [
        node("n", gpus=8),
        queue("q"),
        pod("a", gpus=1),
        pod("b", gpus=1),
        pod("c", gpus=1, node_name="n"),
        pod("d", fraction=0.5),
        pod("e", fraction=0.5, phase="Succeeded", node_name="n"),  # finished, still kept: recent
        pod("cpu", cpu="2"),  # asks for no GPU
    ]
    snapshot = snapshot_of(objects)
    mix = learn_mix(snapshot.tasks.values(), coverage=1.0, max_classes=10)
    assert [(c.request.whole_gpus, c.request.gpu_portion, c.weight) for c in mix] == [
        (1, 0.0, pytest.approx(0.6)),
        (0, 0.5, pytest.approx(0.4)),
    ]
    assert [c.weight for c in learn_mix(snapshot.tasks.values(), coverage=0.5, max_classes=10)] == [1.0]
    assert len(learn_mix(snapshot.tasks.values(), coverage=1.0, max_classes=1)) == 1


def test_the_mix_keeps_rare_classes_of_several_gpus() -> None:
    objects = [
        node("n", gpus=8),
        queue("q"),
        *(pod(f"one{i}", gpus=1) for i in range(6)),
        pod("half", fraction=0.5),
        pod("eight", gpus=8, cpu="60"),
    ]
    mix = learn_mix(snapshot_of(objects).tasks.values(), coverage=1.0, max_classes=1)
    assert [(c.request.whole_gpus, c.weight) for c in mix] == [
        (1, pytest.approx(6 / 7)),
        (8, pytest.approx(1 / 7)),
    ]


# --- the plugin's choices -----------------------------------------------------------------------


def test_a_pod_goes_where_it_keeps_room_for_the_larger_pods_of_the_mix() -> None:
    # a has 3 free GPUs, b 2. Pending: one 1-GPU pod, then two 2-GPU pods. Binpack takes b (fuller) and
    # strands one GPU on each node; keeping b's two GPUs whole lets every pod run.
    objects = [
        node("a", gpus=4),
        node("b", gpus=4),
        queue("q"),
        pod("r1", gpus=1, node_name="a"),
        pod("r2", gpus=2, node_name="b"),
        pod("small", gpus=1),
        pod("big1", gpus=2),
        pod("big2", gpus=2),
    ]
    assert binds(one_cycle(objects, ALLOCATE)) == {"small": "a", "big1": "a", "big2": "b"}
    assert binds(one_cycle(objects, config_with(actions="allocate"))) == {"small": "b", "big1": "a"}


def test_a_large_pod_keeps_the_only_kind_of_node_it_fits() -> None:
    # Pods of 4 GPUs and 48 CPUs, frequent, and a rare pod of 8 GPUs and 120 CPUs that only the 128-CPU
    # node holds. CPU counted, a 4-GPU pod strands less there (80 CPUs left, for the next 4-GPU pod,
    # rather than 32, for none); but that is the node the rare pod needs whole.
    objects = [
        node("wide", gpus=8, cpu="128"),
        node("narrow1", gpus=8, cpu="80"),
        node("narrow2", gpus=8, cpu="80"),
        queue("q"),
        pod("four1", gpus=4, cpu="48"),
        pod("four2", gpus=4, cpu="48"),
        pod("four3", gpus=4, cpu="48", phase="Succeeded", node_name="narrow1"),  # recent: in the mix
        pod("eight", gpus=8, cpu="120"),
    ]
    placed = binds(one_cycle(objects, fragmentation_config(maxClasses="1")))
    assert placed == {"four1": "narrow1", "four2": "narrow2", "eight": "wide"}


def test_pods_that_may_run_anywhere_leave_the_gpus_of_a_model_others_need() -> None:
    # Two 2-GPU nodes; pods bound to the T4 model (one in the mix, recent) may use only one. CPU counted,
    # a 1-GPU pod that may run anywhere strands less on the T4 node (92 CPUs left for its other GPU,
    # rather than 8, too few for another such pod); but the T4 node's GPUs are asked for by the T4-bound
    # pods as well, the other node's by this pod's kind alone.
    t4 = {"nvidia.com/gpu.product": "T4"}
    objects = [
        node("other", gpus=2, cpu="20", labels={"nvidia.com/gpu.product": "G2"}),
        node("t4", gpus=2, cpu="104", labels=t4),
        queue("q"),
        pod("bound", gpus=1, cpu="12", node_selector=t4, phase="Succeeded", node_name="t4"),
        pod("anywhere", gpus=1, cpu="12"),
    ]
    assert binds(one_cycle(objects, ALLOCATE)) == {"anywhere": "other"}


def _generated_cluster(seed: int) -> list[Any]:
    """Nodes of 1-4 GPUs (fewer than 8 shared GPUs a node: numpy sums them in order) and pods of whole
    GPUs, fractions, GPU memory and CPU only, some running."""
    rng = np.random.default_rng(seed)
    objects: list[Any] = [queue("q")]
    for n in range(12):
        objects.append(node(f"n{n}", gpus=int(rng.choice([1, 2, 4])), cpu=str(int(rng.integers(4, 33)))))
    shapes: list[dict[str, Any]] = [
        {"gpus": 1},
        {"gpus": 2},
        {"fraction": 0.5},
        {"fraction": 0.25},
        {"gpus": 0, "cpu": "3"},
    ]
    for i in range(40):
        shape = dict(shapes[int(rng.integers(len(shapes)))])
        running = i < 8
        objects.append(pod(f"p{i}", node_name=f"n{i % 12}" if running else None, **shape))
    return objects


@pytest.mark.parametrize("block_shift", [1, 6])
@pytest.mark.parametrize("seed", range(1, 7))
def test_costs_kept_through_placements_are_those_from_scratch(
    seed: int, block_shift: int, monkeypatch: Any
) -> None:
    # The costs are kept per request and brought up to date at the nodes each placement changed; every
    # order the session asks for must be exactly (bit for bit, so the same decisions) what a PlacementCosts
    # built from the node table as it is then gives, costing every candidate in one go (alike nodes once).
    # The searches read the keys' summaries by blocks (of 2 nodes: six blocks; of 64: one).
    monkeypatch.setattr(costs_module, "_BLOCK_SHIFT", block_shift)
    asked: list[int] = []
    kept_scores = PlacementCosts.scores

    def checked(self: PlacementCosts, request: Any, rows: Any) -> Any:
        scores = kept_scores(self, request, rows)
        keys = self.order(request, rows)  # as the scores just brought them up to date
        with monkeypatch.context() as scratch_only:
            scratch_only.setattr(costs_module, "_FEW_ROWS", -1)
            scratch = PlacementCosts(self.table, self.mix, self.top_score).order(request, rows)
        assert keys.tolist() == scratch.tolist()
        asked.append(rows.size)
        return scores

    searched: list[int] = []
    kept_best = PlacementCosts.best

    def checked_search(self: PlacementCosts, request: Any, allowed: Any, count: int) -> Any:
        found = kept_best(self, request, allowed, count)
        excluded = self._costs[request].excluded.copy()  # (lacking, or found not to hold the pod)
        assert found == _searched_from_scratch(
            PlacementCosts(self.table, self.mix, self.top_score), request, allowed, excluded, count
        )
        searched.append(count)
        return found

    kept_choose = PlacementCosts.choose

    def checked_choice(self: PlacementCosts, request: Any, allowed: Any, around: Any) -> Any:
        chosen = kept_choose(self, request, allowed, around)
        excluded = self._costs[request].excluded.copy()
        scratch = PlacementCosts(self.table, self.mix, self.top_score)
        assert chosen == _chosen_from_scratch(scratch, request, allowed, excluded, around)
        chose.append(chosen)
        return chosen

    chose: list[Any] = []
    monkeypatch.setattr(PlacementCosts, "scores", checked)
    monkeypatch.setattr(PlacementCosts, "best", checked_search)
    monkeypatch.setattr(PlacementCosts, "choose", checked_choice)
    assert binds(one_cycle(_generated_cluster(seed), ALLOCATE))
    assert len(asked) + len(chose) > 10 and chose


def _chosen_from_scratch(
    scratch: PlacementCosts, request: Any, allowed: Any, excluded: Any, around: Any
) -> int | ranked_nodes.Undecided | None:
    """`PlacementCosts.choose` worked out from every key: `_searched_from_scratch`, walked by ranked_nodes'
    own walk in Python (`_best_of_listed`) over sums added as `_Summed` adds them."""
    before, after = around

    class Sums:
        def scores(self, task: Any, rows: list[int], values: list[float]) -> Any:
            scratch.order(request, np.array(rows, dtype=np.int64))  # (the keys at rows current)
            summed: Any = 0.0
            for term in [before, scratch.plain_scores(request, rows), *after.tolist()]:
                summed = ranked_nodes._add_plain(summed, term)
            return summed

    count = ranked_nodes.FOUND_VALUES
    while count <= ranked_nodes.BUDGET:
        firsts, top, more = _searched_from_scratch(scratch, request, allowed, excluded, count)
        if top < 0:
            return None
        chosen = ranked_nodes._best_of_listed(firsts, top, more, Sums(), None)  # type: ignore[arg-type]
        if not isinstance(chosen, ranked_nodes.Undecided):
            return chosen
        count *= 4
    return ranked_nodes.UNDECIDED


def _searched_from_scratch(
    scratch: PlacementCosts, request: Any, allowed: Any, excluded: Any, count: int
) -> tuple[list[int], int, bool]:
    """`PlacementCosts.best` worked out from every key: the nodes allowed, not excluded, that may hold the
    pod, costed in one go; the first node of each distinct key, the best first."""
    portions = scratch.table.portion_for(request) if request.is_shared_gpu else np.zeros(scratch.table.size)
    taken = np.array([request.cpu, request.memory, request.whole_gpus], dtype=np.float64)
    mig_taken = np.zeros(scratch.mig.size)
    rows = [
        node
        for node in range(scratch.table.size)
        if allowed[node]
        and not excluded[node]
        and kernels.may_hold(
            scratch._matrix, scratch.state.mig, node, (taken, mig_taken, portions, request.gpu_devices)
        )
    ]
    if not rows:
        return [], -1, False
    keys = scratch.order(request, np.array(rows)).tolist()
    firsts: dict[float, int] = {}
    for row, key in zip(rows, keys, strict=True):
        firsts.setdefault(key, row)
    lowest = min(firsts)
    above = sorted((key for key in firsts if key != lowest), reverse=True)
    return [firsts[key] for key in above[:count]], firsts[lowest], len(above) > count


@pytest.mark.parametrize("shift", [0, 2, 3])
def test_a_search_from_the_blocks_summaries_is_the_search_of_every_key(shift: int) -> None:
    # A search reads what it kept of the keys by blocks (`kernels.summarized_best`), summarizing again only
    # the blocks marked out of date: after any change to the keys and flags of some nodes, their blocks
    # marked, it answers as the pass over every key (`best_keyed`): the first node of each best key, ties
    # to the lower index across blocks, the lowest, and whether keys were left out.
    rng = np.random.default_rng(shift)
    size = 61
    blocks = (size + (1 << shift) - 1) >> shift
    keys = rng.choice([0.5, 1.0, 1.5, 2.0, 3.0], size)  # few values: ties within and across blocks
    changed, excluded, allowed = (rng.random(size) < p for p in (0.2, 0.2, 0.8))
    width = kernels.SUMMARY_WIDTH
    summary_keys, summary_nodes = np.empty((blocks, width + 1)), np.zeros((blocks, width + 2), dtype=np.int64)
    stale = np.ones(blocks, dtype=np.bool_)
    summary = (summary_keys, summary_nodes, stale, 0, shift)
    for step in range(300):
        count = int(rng.integers(1, width))
        found = kernels.summarized_best(keys, changed, allowed, excluded, count, summary)
        expected = kernels.best_keyed(keys, changed, allowed, excluded, count)
        assert (found[0].tolist(), *found[1:]) == (expected[0].tolist(), *expected[1:]), step
        assert not stale.any()  # (every block summarized again)
        for row in rng.choice(size, int(rng.integers(1, 4)), replace=False):
            keys[row] = rng.choice([0.5, 1.0, 1.5, 2.0, 3.0, 2.5 + step])
            changed[row], excluded[row] = rng.random(2) < 0.2
            stale[row >> shift] = True


def test_the_compiled_walk_is_ranked_nodes_walk() -> None:
    # The plugin walks a pod's candidates in its compiled search (`kernels.walk`) as ranked_nodes walks them
    # (`_best_of_listed`): the same node on random keys, including sums that tie once rounded (a large
    # constant beside the scores), where the walk goes on and ties go to the lower index.
    rng = np.random.default_rng(11)
    for _ in range(3000):
        size = int(rng.integers(2, 12))
        keys = rng.choice([-8000.5, -3.0, -1e-9, 0.0, 2.5, 2.5 + 1e-12, 7.0], size)
        keys += rng.choice([0.0, 1e-10], size)
        distinct: dict[float, int] = {}
        for at in rng.permutation(size).tolist():
            distinct.setdefault(float(keys[at]), at)
        lowest = min(distinct)
        above = sorted((key for key in distinct if key != lowest), reverse=True)
        count = int(rng.integers(1, 4))
        firsts, top, more = [distinct[key] for key in above[:count]], distinct[lowest], len(above) > count
        before = float(rng.choice([0.0, 1.0, 1e16]))
        after = rng.choice([1e-3, 3.0, 1e17], int(rng.integers(0, 3)))
        sums = _SumsOfKeys(keys, before, after.tolist())
        expected = ranked_nodes._best_of_listed(firsts, top, more, sums, None)  # type: ignore[arg-type]
        walked = (MAX_SCORE, before, after)
        chosen, _ = kernels.walk(keys, np.array(firsts, dtype=np.int64), top, more, walked)
        assert chosen == (kernels.MORE_KEYS if isinstance(expected, ranked_nodes.Undecided) else expected)


class _SumsOfKeys:
    """Sums as `ranked_nodes._Summed` adds them for a ranking between constants, the ranking's scores those
    of `PlacementCosts.plain_scores` over `keys`."""

    def __init__(self, keys: Any, before: float, after: list[float]) -> None:
        self.keys, self.before, self.after = keys, before, after

    def scores(self, task: Any, rows: list[int], values: list[float]) -> Any:
        at_rows = [float(self.keys[row]) for row in rows]
        low, high = min(at_rows), max(at_rows)
        spread = high - low
        scores: Any = MAX_SCORE
        if spread > 0.0:
            scores = [(key - low) * (MAX_SCORE / spread) for key in at_rows]
        summed: Any = 0.0
        for term in [self.before, scores, *self.after]:
            summed = ranked_nodes._add_plain(summed, term)
        return summed


def test_a_node_the_search_finds_without_room_comes_back_once_it_changes() -> None:
    # A node out of pod slots has the GPUs and CPU a pod takes (`kernels.may_hold`) yet does not hold it:
    # the search leaves it out until it changes; freed, it is a candidate again.
    table, request, costs = _costs_on_two_nodes(cpu="16", pods=1)
    every = np.ones(2, dtype=np.bool_)
    assert costs.best(request, every, 3) == ([], 0, False)  # two idle nodes alike: the first
    cpu_only = PodRequest(cpu=1000.0)
    table.hold(0, cpu_only, releasing=False)  # its one pod slot taken
    assert costs.best(request, every, 3) == ([], 1, False)
    table.hold(1, cpu_only, releasing=False)
    assert costs.best(request, every, 3) == ([], -1, False)
    table.unhold(0, cpu_only, releasing=False)
    assert costs.best(request, every, 3) == ([], 0, False)
    assert costs.best(request, np.array([False, True]), 3) == ([], -1, False)


def test_a_mask_of_allowed_nodes_in_pieces_is_read_as_it_is() -> None:
    # The plugin calls its choice's compiled code without numba's dispatch (`kernels.Bound`), which reads
    # each argument as the type of its first call: a mask of the nodes allowed that is not one plain array
    # (a view of every other element) goes through numba's dispatch instead, read as it is.
    _, request, costs = _costs_on_two_nodes()
    around = (0.0, np.zeros(0))
    assert costs.choose(request, np.ones(2, dtype=np.bool_), around) == 0
    only_b = np.array([False, False, True, False])[::2]  # b alone; its memory's first two: neither
    assert costs.choose(request, only_b, around) == 1
    assert costs.choose(request, only_b.copy(), around) == 1


def test_a_node_the_choice_finds_without_room_comes_back_once_it_changes() -> None:
    # As `best` above, for the choice that asks whether a node holds the pod in its compiled call
    # (`kernels.choose_fitting`): a node out of pod slots is left out until it changes.
    table, request, costs = _costs_on_two_nodes(cpu="16", pods=1)
    every, around = np.ones(2, dtype=np.bool_), (0.0, np.zeros(0))
    assert costs._costs_of(request).fits_judged
    assert costs.choose(request, every, around) == 0
    cpu_only = PodRequest(cpu=1000.0)
    table.hold(0, cpu_only, releasing=False)  # its one pod slot taken
    assert costs.choose(request, every, around) == 1
    table.hold(1, cpu_only, releasing=False)
    assert costs.choose(request, every, around) is None
    table.unhold(0, cpu_only, releasing=False)
    assert costs.choose(request, every, around) == 0
    assert costs.choose(request, np.array([False, True]), around) is None


def _table_in_use(seed: int) -> Any:
    """A node table of twelve nodes of different sizes (GPUs of 0, 40 and 80 GB, two or three pod slots on
    some, two MIG profiles on some), a random part of it taken by pods, some of them releasing, and by
    shared GPUs, some of their holders releasing."""
    rng = np.random.default_rng(seed)
    mig = {"nvidia.com/mig.strategy": "mixed"}
    objects: list[Any] = [queue("q")]
    for n in range(12):
        extra = {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-3g.40gb": 1} if n % 4 == 3 else {}
        objects.append(
            node(
                f"n{n}",
                gpus=int(rng.choice([1, 2, 4])),
                cpu=str(int(rng.choice([4, 8, 16]))),
                memory="64Gi",
                pods=int(rng.choice([2, 3, 110])),
                gpu_memory=[None, 40000, 80000][n % 3],
                labels=mig if extra else None,
                extra=extra,
            )
        )
    table = snapshot_of(objects).nodes
    placed: list[Callable[[], None]] = []
    for step in range(30):
        _change_at_random(table, rng, step, placed)
    return table


def _change_at_random(table: Any, rng: Any, step: int, placed: list[Callable[[], None]]) -> None:
    """Place a random pod on a random node (whole GPUs, a MIG instance, CPU only, or a shared GPU's
    portion), releasing or not, or take one placed before off again (`placed`: how to take each off)."""
    if placed and rng.random() < 0.2:
        placed.pop(int(rng.integers(len(placed))))()
        return
    node_index = int(rng.integers(table.size))
    releasing = bool(rng.random() < 0.3)
    kind = int(rng.integers(4))
    if kind == 3 and table.free_gpus[node_index] >= 1:
        group, key = f"g{node_index}-{step % 2}", f"p{step}"
        table.join_group(node_index, group, key, float(rng.choice([0.25, 0.5, 0.75])), releasing=releasing)
        placed.append(lambda: table.leave_group(group, key, releasing=releasing))
        return
    request = PodRequest(
        cpu=float(rng.choice([500.0, 1000.0, 2000.0])),
        memory=float(rng.choice([1.0, 16.0])) * 2**30,
        whole_gpus=kind % 2,
        scalars=(("nvidia.com/mig-1g.10gb", 1.0),) if kind == 2 else (),
    )
    table.hold(node_index, request, releasing=releasing)
    placed.append(lambda: table.unhold(node_index, request, releasing=releasing))


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_fit_is_node_fits(seed: int) -> None:
    # A request of no scalar resources on at most one device is asked whether it fits a node in compiled
    # code (`kernels.fits_soon`): on tables in use, with releasing pods and shared GPUs, it answers as
    # `NodeTable.node_fits(..., soon=True)` for requests of what each node has free now, free soon (with
    # what is releasing), and a little more.
    table = _table_in_use(seed)
    columns = PlacementCosts(table, _mix_of(table, [PodRequest(whole_gpus=1)]), MAX_SCORE)._held_table
    cpu = {
        *(table.cap_cpu - table.used_cpu).tolist(),
        *(table.cap_cpu - table.used_cpu + table.rel_cpu).tolist(),
    }
    memory = {*(table.cap_memory - table.used_memory + table.rel_memory).tolist()}
    requests = [
        PodRequest(cpu=c + extra, memory=m, whole_gpus=gpus)
        for c in cpu
        for extra in (0.0, 1.0)
        for m in (0.0, *memory)
        for gpus in (0, 1, 2)
    ]
    requests += [
        PodRequest(cpu=c, gpu_portion=portion, gpu_devices=1)
        for c in cpu
        for portion in (0.25, 0.5, 0.75, 1.0)
    ]
    requests += [
        PodRequest(cpu=1.0, gpu_memory_mib=mib, gpu_devices=1) for mib in (10000, 20000, 40000, 60000)
    ]
    answers = set()
    for request in requests:
        asks = costs_module._asks(request)
        for node_index in range(table.size):
            expected = table.node_fits(request, node_index, soon=True)
            assert kernels.fits_soon(columns, asks, node_index) == expected, (request, node_index)
            answers.add(expected)
    assert answers == {True, False}


@pytest.mark.parametrize("seed", range(4))
def test_node_states_kept_through_changes_are_those_from_scratch(seed: int) -> None:
    # The plugin brings a node's state up to date from the table in compiled code (`kernels.refresh`) but
    # for its shared GPUs' free portions: after any change the states it keeps are those it makes afresh.
    rng = np.random.default_rng(seed)
    table = _table_in_use(seed)
    mix = _mix_of(table, [PodRequest(whole_gpus=1), PodRequest(gpu_portion=0.5, gpu_devices=1)])
    kept = PlacementCosts(table, mix, MAX_SCORE)
    placed: list[Callable[[], None]] = []
    for step in range(40):
        _change_at_random(table, rng, 100 + step, placed)
        kept._sync()
        fresh = PlacementCosts(table, mix, MAX_SCORE)
        width = fresh._matrix.shape[1]
        assert kept._matrix[:, :width].tolist() == fresh._matrix.tolist(), step
        assert not kept._matrix[:, width:].any()  # (kept wider once a node shared more GPUs)
        assert kept.state.mig.tolist() == fresh.state.mig.tolist(), step


def _mix_of(table: Any, requests: list[PodRequest]) -> Any:
    """The mix of `requests`, equally often, over `table`."""
    mig, units = mig_columns(table)
    every = [np.ones(table.size, dtype=np.bool_)] * len(requests)
    weights = [1.0 / len(requests)] * len(requests)
    return scarcity_weighted(mix_arrays(requests, weights, every, table, mig), table, mig, units)


def _costs_on_two_nodes(**capacity: Any) -> tuple[Any, PodRequest, PlacementCosts]:
    """Two idle nodes "a" and "b" of two GPUs (and `capacity`), a pending one-GPU pod's request, and the
    plugin's costs over the nodes for a mix of that pod alone."""
    snapshot = snapshot_of(
        [queue("q"), node("a", gpus=2, **capacity), node("b", gpus=2, **capacity), pod("one", gpus=1)]
    )
    table = snapshot.nodes
    request = next(iter(snapshot.tasks.values())).request
    mig, units = mig_columns(table)
    mix = scarcity_weighted(
        mix_arrays([request], [1.0], [np.ones(2, dtype=np.bool_)], table, mig), table, mig, units
    )
    return table, request, PlacementCosts(table, mix, MAX_SCORE)


def test_nodes_costed_once_as_alike_differ_in_no_pressure(monkeypatch: Any) -> None:
    # Two 8-GPU nodes left in the same state (32 idle CPUs, 8 idle GPUs), one of them a 64-CPU node half
    # taken by a CPU-only pod: only it could hold a 48-CPU GPU pod when idle, so its GPUs are asked for
    # more (pressure) and a 1-GPU pod costs more there. Costed together as alike nodes (as a request's
    # first ask over many candidates is), each keeps its own cost.
    objects = [
        queue("q"),
        node("half-taken", gpus=8, cpu="64"),
        node("small", gpus=8, cpu="32", memory="511Gi"),
        pod("cpu-only", node_name="half-taken", cpu="32", memory="1Gi"),
        pod("wide", gpus=1, cpu="48"),
        pod("narrow", gpus=1, cpu="1"),
    ]
    snapshot = snapshot_of(objects)
    table = snapshot.nodes
    tasks = {t.name: t for t in snapshot.tasks.values()}
    requests = [tasks["wide"].request, tasks["narrow"].request]
    mig, units = mig_columns(table)
    mix = mix_arrays(requests, [0.5, 0.5], [np.ones(table.size, dtype=np.bool_)] * 2, table, mig)
    mix = scarcity_weighted(mix, table, mig, units)
    both = np.arange(table.size)
    one_by_one = PlacementCosts(table, mix, MAX_SCORE).order(requests[1], both)
    monkeypatch.setattr(costs_module, "_FEW_ROWS", -1)  # alike nodes looked for however few
    costed_together = PlacementCosts(table, mix, MAX_SCORE).order(requests[1], both)
    assert one_by_one[0] < one_by_one[1]  # the half-taken node's GPUs are the scarcer
    assert costed_together.tolist() == one_by_one.tolist()


def test_rows_are_told_apart_as_numpy_compares_them() -> None:
    # Alike nodes are found by a projection of their rows, checked row by row in compiled code
    # (`kernels.rows_as_sets`): two rows put together that differ in any column (NaN equals nothing) are
    # told apart as `np.array_equal` tells them, and then every row is a set of its own.
    rng = np.random.default_rng(5)
    for _ in range(200):
        matrix = rng.choice([0.0, 1.0, 2.5, np.nan], (int(rng.integers(1, 9)), int(rng.integers(1, 4))))
        first = np.arange(matrix.shape[0])[: int(rng.integers(1, matrix.shape[0] + 1))]
        inverse = rng.integers(0, first.size, matrix.shape[0])
        firsts = first[inverse].tolist()
        expected = all(
            row == other or np.array_equal(matrix[row], matrix[other]) for row, other in enumerate(firsts)
        )
        assert kernels.rows_as_sets(matrix, first, inverse) == expected
    alike = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0]])
    assert [a.tolist() for a in costs_module._row_sets(alike)] == [[0, 1], [0, 1, 0]]
    assert [a.tolist() for a in costs_module._row_sets(np.array([[np.nan], [np.nan]]))] == [[0, 1], [0, 1]]


def test_class_weights_are_summed_first_to_last() -> None:
    # The class weights and node pressures are sums over nodes and classes: added in one fixed order their
    # bits are the same on every machine (a BLAS product's order, and so its bits, depend on the machine;
    # on these values it differs from the running sum).
    rng = np.random.default_rng(7)
    values = rng.random((1000, 3)) * 10.0 ** rng.integers(-3, 6, (1000, 3))
    running = [0.0, 0.0, 0.0]
    for row in values.tolist():
        running = [total + value for total, value in zip(running, row, strict=True)]
    assert measure._in_order_sum(values, axis=0).tolist() == running
    assert measure._in_order_sum(values, axis=1).tolist() == [(a + b) + c for a, b, c in values.tolist()]
    assert measure._in_order_sum(np.zeros((0, 3)), axis=0).tolist() == [0.0, 0.0, 0.0]


def test_a_gang_is_placed_whole_or_not_at_all() -> None:
    # Two 2-GPU members but only one node with 2 free GPUs: the gang waits, nothing of it is bound, and
    # the 1-GPU pod behind it still runs.
    objects = [
        node("a", gpus=2),
        node("b", gpus=2),
        queue("q"),
        pod("r", gpus=1, node_name="b"),
        pod_group("g", min_member=2),
        pod("w0", gpus=2, group="g"),
        pod("w1", gpus=2, group="g"),
        pod("one", gpus=1),
    ]
    assert binds(one_cycle(objects, ALLOCATE)) == {"one": "b"}


def test_gpu_memory_pods_are_costed_with_each_nodes_portion() -> None:
    # 20 GB is half of x's 40 GB GPUs and a quarter of y's 80 GB ones. m joins x's half-used GPU and
    # fills it (on y it would break a whole GPU).
    objects = [
        node("x", gpus=1, gpu_memory=40000),
        node("y", gpus=1, gpu_memory=80000),
        queue("q"),
        pod("r", gpu_memory=20000, node_name="x"),
        pod("m", gpu_memory=20000),
    ]
    document = simulate(objects, ALLOCATE, cycles=1)
    pods = {p["name"]: p for p in document["pods"]}
    assert pods["m"]["node"] == "x"
    assert pods["m"]["gpuGroups"] == pods["r"]["gpuGroups"]


def test_a_pod_on_several_shared_devices_gets_that_many_gpus() -> None:
    objects = [
        node("a", gpus=4),
        queue("q"),
        pod("r", fraction=0.5, node_name="a"),
        pod("p", fraction=0.5, num_devices=2),
    ]
    document = simulate(objects, ALLOCATE, cycles=1)
    pods = {p["name"]: p for p in document["pods"]}
    assert pods["p"]["node"] == "a"
    assert len(set(pods["p"]["gpuGroups"])) == 2
    assert pods["r"]["gpuGroups"][0] in pods["p"]["gpuGroups"]  # the half-used GPU is filled first


def test_a_mig_pod_leaves_the_cpu_that_another_nodes_instances_need() -> None:
    # Both nodes have a free 1g and a free 3g instance; on m1 the 1g pod's 4 CPUs would leave the 3g
    # instance without the CPU a 3g pod asks for. Binpack (by whole GPUs: none on either) takes m1.
    mig = {"nvidia.com/mig.strategy": "mixed"}
    instances = {"nvidia.com/mig-1g.10gb": 1, "nvidia.com/mig-3g.40gb": 1}
    objects = [
        node("m1", gpus=0, cpu="8", labels=mig, extra=instances),
        node("m2", gpus=0, cpu="64", labels=mig, extra=instances),
        queue("q"),
        pod("small", cpu="4", extra_requests={"nvidia.com/mig-1g.10gb": 1}),
        pod("large", cpu="6", extra_requests={"nvidia.com/mig-3g.40gb": 1}),
        pod("large2", cpu="6", extra_requests={"nvidia.com/mig-3g.40gb": 1}),
    ]
    placed = binds(one_cycle(objects, ALLOCATE))
    assert placed["small"] == "m2"
    assert sorted(placed.values()) == ["m1", "m2", "m2"]  # every pod runs
    assert binds(one_cycle(objects, config_with(actions="allocate"))) == {"small": "m1", "large": "m2"}


def test_a_cpu_only_pod_goes_where_no_gpu_is_idle() -> None:
    # busy's only GPU is taken; idle's is free; the CPU-only pod would fit both.
    objects = [
        node("busy", gpus=1, cpu="32"),
        node("idle", gpus=1, cpu="16"),
        queue("q"),
        pod("r", gpus=1, node_name="busy"),
        pod("etl", cpu="4"),
    ]
    assert binds(one_cycle(objects, ALLOCATE)) == {"etl": "busy"}


def test_a_topology_constraint_still_decides_where_a_gang_may_go() -> None:
    rack = "example.com/rack"
    topology = Topology.model_validate(
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": rack}]},
        }
    )
    objects = [
        topology,
        node("a1", gpus=4, labels={rack: "r1"}),
        node("a2", gpus=4, labels={rack: "r1"}),
        node("b1", gpus=4, labels={rack: "r2"}),
        queue("q"),
        pod("r", gpus=3, node_name="b1"),
        PodGroup.model_validate(
            {
                **pod_group_manifest("g", min_member=2),
                "spec": {
                    "minMember": 2,
                    "queue": "q",
                    "topologyConstraint": {"topology": "dc", "requiredTopologyLevel": rack},
                },
            }
        ),
        pod("w0", gpus=1, group="g"),
        pod("w1", gpus=1, group="g"),
    ]
    placed = binds(one_cycle(objects, ALLOCATE))
    assert set(placed) == {"w0", "w1"}
    assert {name[0] for name in placed.values()} == {"a"}  # one rack, though b1's last GPU would pack


def test_consolidation_and_reclaim_run_with_the_plugin() -> None:
    # The plugin scores the moves too: consolidation moves p1 next to p0 so that big gets a whole node.
    objects = [
        node("a", gpus=2),
        node("b", gpus=2),
        queue("q"),
        pod("p0", gpus=1, node_name="a"),
        pod("p1", gpus=1, node_name="b"),
        pod("big", gpus=2),
    ]
    document = simulate(objects, fragmentation_config("allocate, consolidation, reclaim, preempt"))
    pods = {p["name"]: p for p in document["pods"]}
    assert {pods["p0"]["node"], pods["p1"]["node"]} != {"a", "b"}
    assert pods["big"]["phase"] == "Running"


# --- configuration ------------------------------------------------------------------------------


def test_the_default_configuration_does_not_use_it() -> None:
    assert "gpufragmentation" not in DEFAULT_PLUGINS
    assert not any(p.name == "gpufragmentation" for p in parse_config(None).plugins())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"coverage": "0"}, "gpufragmentation.arguments.coverage: expected a number in (0, 1], got 0"),
        ({"coverage": "most"}, "gpufragmentation.arguments.coverage: expected a number, got 'most'"),
        (
            {"maxClasses": "2.5"},
            "gpufragmentation.arguments.maxClasses: expected a positive integer, got 2.5",
        ),
    ],
)
def test_bad_arguments_are_one_line_errors(arguments: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        Scheduler(fragmentation_config(**arguments))
    assert str(error.value) == message


def test_arguments_as_kai_writes_them() -> None:
    Scheduler(fragmentation_config(coverage="0.9", maxClasses="16"))


def test_a_session_without_gpu_pods_scores_by_idle_gpus_and_cpu() -> None:
    objects = [node("a", gpus=1, cpu="8"), node("b", gpus=1, cpu="16"), queue("q"), pod("c", cpu="4")]
    session = open_session(objects, ALLOCATE)
    task = next(t for t in session.snapshot.tasks.values() if t.status is TaskStatus.PENDING)
    placed = session.choose_node(task)
    assert placed is not None and session.snapshot.nodes.names[placed.node] == "a"  # less CPU left


# --- nodeplacement's cpuAvoidsIdleGpus ----------------------------------------------------------


def test_cpu_avoids_idle_gpus_option() -> None:
    objects = [
        node("busy", gpus=1, cpu="64"),
        node("idle", gpus=1, cpu="16"),
        queue("q"),
        pod("r", gpus=1, node_name="busy"),
        pod("etl", cpu="4"),
    ]
    steering = {"nodeplacement": {"gpu": "binpack", "cpu": "binpack", "cpuAvoidsIdleGpus": "true"}}
    assert binds(one_cycle(objects, config_with(actions="allocate"))) == {"etl": "idle"}  # KAI: least CPU
    assert binds(one_cycle(objects, config_with(steering, actions="allocate"))) == {"etl": "busy"}


def test_cpu_avoids_idle_gpus_must_be_a_boolean() -> None:
    bad = {"nodeplacement": {"gpu": "binpack", "cpu": "binpack", "cpuAvoidsIdleGpus": "maybe"}}
    with pytest.raises(
        ConfigError, match=r"^nodeplacement.arguments.cpuAvoidsIdleGpus: expected true or false"
    ):
        Scheduler(config_with(bad))
