"""`gpufragmentation`: place each pod where it strands the fewest GPUs for the workload the cluster sees.

A node-order plugin and a GPU chooser in one. It learns the mix of GPU pods from the snapshot (`mix`),
measures each node's stranded GPUs against it (`measure`) and scores each candidate node by what placing
the pod there adds to them (`costs`); for a shared-GPU pod it also chooses which of the node's GPUs the
pod shares. It takes the place of `nodeplacement` (binpack or spread), `gpusharingorder` and
`gpupack`/`gpuspread`, whose preferences it replaces; the other scores keep their meaning around it, as
its scores lie in `nodeplacement`'s band (0-9): a nominated node, pod affinity, fitting now rather than
after releases (nodeavailability) and CPU-only nodes for CPU-only pods (resourcetype) still come first.

It works wherever the session places a pod: allocate, and the moves and preemptors of consolidation,
reclaim and preempt; gangs, topology domains and queue order are the session's, unchanged. It also judges
the outcomes of those actions' scenarios (`outcome_stranded`: the GPUs stranded on some nodes once their
releases end), so that among victims KAI's order ranks alike the solver takes those whose outcome strands
the fewest GPUs (see `actions.solvers.victim_search`).

Arguments (numbers, or strings as KAI writes plugin arguments): `coverage` (default 1.0), the share of
the GPU pods (live and recent) the mix's classes must cover, the most frequent classes first;
`maxClasses` (default 64), the most classes it keeps (and at most half as many rare classes of several
whole GPUs besides, `mix.learn_mix`). Each class's weight is its share of the pods
divided by the share of the cluster's GPUs on nodes that could hold one of its pods
(`measure.scarcity_weighted`); a GPU in use counts by how much more the mix asks for its node than for
one every class may use (`measure`'s pressure).
"""

from __future__ import annotations

import sys
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from kai_scheduler.framework import alike_nodes, ranked_nodes
from kai_scheduler.framework.session import Session, pack_gpus
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import FloatArray, GpuGroup, IntArray, NodeTable
from kai_scheduler.model.resources import PodRequest
from kai_scheduler.plugins.arguments import number
from kai_scheduler.plugins.fragmentation.mix import learn_mix
from kai_scheduler.plugins.predicates import gpu_kind_nodes

if TYPE_CHECKING:
    from kai_scheduler.plugins.fragmentation.costs import PlacementCosts

MAX_SCORE: Final = 9.0  # nodeplacement's band (KAI's MaxHighDensity)
DEFAULT_COVERAGE: Final = 1.0
DEFAULT_MAX_CLASSES: Final = 64
# The ranked index's floor (`_ranks_by`): every finite value is at or above it.
_LOWEST: Final = -sys.float_info.max


def _number(arguments: dict[str, Any], key: str, default: float) -> float:
    return number("gpufragmentation", arguments, key, default)


def _coverage(arguments: dict[str, Any]) -> float:
    value = _number(arguments, "coverage", DEFAULT_COVERAGE)
    if not 0 < value <= 1:
        raise ValueError(f"gpufragmentation.arguments.coverage: expected a number in (0, 1], got {value:g}")
    return value


def _max_classes(arguments: dict[str, Any]) -> int:
    value = _number(arguments, "maxClasses", DEFAULT_MAX_CLASSES)
    if value < 1 or value != int(value):
        raise ValueError(f"gpufragmentation.arguments.maxClasses: expected a positive integer, got {value:g}")
    return int(value)


class GpuFragmentationPlugin:
    name = "gpufragmentation"

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.coverage = _coverage(arguments)
        self.max_classes = _max_classes(arguments)
        self.costs: PlacementCosts | None = None
        _start_compiled()

    def on_session_open(self, session: Session) -> None:
        from kai_scheduler.plugins.fragmentation.costs import PlacementCosts
        from kai_scheduler.plugins.fragmentation.measure import (
            evaluate,
            mig_columns,
            mix_arrays,
            node_states_soon,
            scarcity_weighted,
        )

        table = session.snapshot.nodes
        classes = learn_mix(session.snapshot.tasks.values(), self.coverage, self.max_classes)
        access = [session.usable_nodes([c.example]) & gpu_kind_nodes(table, c.request) for c in classes]
        mig, mig_units = mig_columns(table)
        mix = mix_arrays([c.request for c in classes], [c.weight for c in classes], access, table, mig)
        mix = scarcity_weighted(mix, table, mig, mig_units)
        costs = self.costs = PlacementCosts(table, mix, MAX_SCORE)
        alike_nodes.add_scorer(
            session.points,
            lambda task, rows: score(costs, task, rows),
            _never,  # nodes of one capacity differ for the mix (GPU model, predicates, pressure)
            ranks_by=_ranks_by(costs, table),
        )

        def choose(
            nodes: NodeTable, node: int, portion: float, devices: int, soon: bool
        ) -> list[GpuGroup | None]:
            if soon:  # pipelined onto GPUs being released: their state now says nothing of then
                return pack_gpus(nodes, node, portion, devices, soon)
            return costs.choose_gpus(node, portion, devices)

        session.points.gpu_chooser = choose

        def stranded(rows: list[int]) -> float:
            nodes = np.array(sorted(rows), dtype=np.int64)
            return float(evaluate(mix, node_states_soon(table, nodes, mig), mig_units)[0].sum())

        session.points.outcome_stranded = stranded

    def on_session_close(self, session: Session) -> None:
        self.costs = None


@cache
def _start_compiled() -> None:
    """Import the compiled measure (`kernels`), start numba and load every kernel, once a process: some
    0.6-1 s of CPU (0.2 to import numba, the rest to load the kernels from its cache) that only a scheduler
    configured with this plugin pays, when it is configured (`Scheduler` makes every plugin to check its
    arguments), not in its first session. The modules a session opens with (`costs`, `measure`) are
    imported then too: where Python writes no bytecode, importing one compiles it (some 20 ms)."""
    from kai_scheduler.plugins.fragmentation import costs, kernels, measure

    kernels.start()
    del costs, measure  # (imported for the session's open)


def _never(task: TaskInfo) -> bool:
    return False


def _ranks_by(costs: PlacementCosts, table: NodeTable) -> ranked_nodes.RanksBy:
    """The plugin ranks a pod's candidates by its request's order keys (`PlacementCosts.values`): its score
    never increases with the value (the key negated), is the same at nodes of one value, and reads the
    candidates only through their lowest and highest key (`PlacementCosts.scores`); a node valued below
    the lowest finite float does not hold the pod (valued -inf). One ranking per request, which searches
    the nodes itself (`PlacementCosts.best`) where no other scorer scores sparsely. Not while anything is
    being released: the search tells which nodes may hold a pod from what is idle now."""
    rankings: dict[PodRequest, ranked_nodes.Ranking] = {}

    def ranks(task: TaskInfo) -> tuple[ranked_nodes.Ranking, float] | None:
        if table.anything_releasing():
            return None
        request = task.request
        ranking = rankings.get(request)
        if ranking is None:
            ranking = rankings[request] = ranked_nodes.Ranking(
                ("gpufragmentation", request),
                partial(costs.values, request),
                lambda node: costs.values_at(request, [node])[0],
                values_of=partial(costs.values_at, request),
                scores_at_rows=lambda task, rows: costs.plain_scores(task.request, rows),
                finds=costs,
            )
        return ranking, _LOWEST

    return ranks


def score(costs: PlacementCosts, task: TaskInfo, rows: IntArray) -> FloatArray | float:
    """The candidates' scores: the best place MAX_SCORE, the worst 0, the others in between in order."""
    return costs.scores(task.request, rows)
