"""`nodeplacement`'s `cpuAvoidsIdleGpus` option: CPU-only pods go first where they strand no GPU.

KAI's `nodeplacement` binpacks a CPU-only pod by free CPU like any other pod, so on a cluster of GPU
nodes it fills the nodes with the least CPU left, and a node whose CPU runs out keeps its idle GPUs
idle: on the FGD paper's Alibaba trace that alone strands about 5% of the GPUs. With the option on, the
candidates of a CPU-only pod are ranked first by their idle GPUs (fewest first: nodes without GPUs, and
GPU nodes whose GPUs are all taken, come first), and among equal ones by the configured `cpu` strategy
(binpack or spread), as before. GPU pods and CPU-only nodes (`resourcetype` still puts CPU-only pods
there first) are scored as without it; the scores stay in nodeplacement's band (0-9).
"""

from __future__ import annotations

from typing import Any, Final

from kai_scheduler.model.nodes import FloatArray, IntArray, NodeTable

ARGUMENT: Final = "cpuAvoidsIdleGpus"
MAX_SCORE: Final = 9.0  # nodeplacement's band
# One idle GPU outweighs any difference of the CPU strategy's score (0-9): one hundredth of a GPU, 10.
_PER_IDLE_GPU: Final = 1000.0


def flag(arguments: dict[str, Any]) -> bool:
    """The option's value: a boolean, or "true"/"false" as KAI writes plugin arguments."""
    value = arguments.get(ARGUMENT, False)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ValueError(f"nodeplacement.arguments.{ARGUMENT}: expected true or false, got {value!r}")
    return value


def avoid_idle_gpus(nodes: NodeTable, rows: IntArray, cpu_score: FloatArray | float) -> FloatArray | float:
    """The candidates `rows` ranked by idle GPUs (fewest first), then by `cpu_score`, scaled to 0-9."""
    idle = nodes.free_gpus.take(rows) + nodes.shared_free_total.take(rows)
    if rows.size == 0:
        return 0.0
    key = cpu_score - _PER_IDLE_GPU * idle
    low, high = float(key.min()), float(key.max())
    if high - low <= 0.0:
        return MAX_SCORE
    result: FloatArray = (key - low) * (MAX_SCORE / (high - low))
    return result
