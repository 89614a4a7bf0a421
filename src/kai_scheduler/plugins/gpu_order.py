"""Which physical GPUs of the chosen node a fractional pod shares: gpupack or gpuspread."""

from __future__ import annotations

from typing import Any

from kai_scheduler.framework.session import Session, pack_gpus
from kai_scheduler.model.nodes import GpuGroup, NodeTable


def spread_gpus(
    nodes: NodeTable, node: int, portion: float, devices: int, soon: bool
) -> list[GpuGroup | None]:
    """gpuspread: a GPU of its own while the node has whole GPUs free, then the least-used shared GPUs."""
    free_whole = int(nodes.free_gpus[node] + (nodes.rel_gpus[node] if soon else 0))
    chosen: list[GpuGroup | None] = [None] * min(devices, max(free_whole, 0))
    if len(chosen) < devices:
        candidates = sorted(
            nodes.shared_candidates(node, portion, soon=soon), key=lambda g: (g.used, g.group_id)
        )
        chosen.extend(candidates[: devices - len(chosen)])
    return chosen


class GpuPackPlugin:
    name = "gpupack"

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, session: Session) -> None:
        session.points.gpu_chooser = pack_gpus

    def on_session_close(self, session: Session) -> None:
        return None


class GpuSpreadPlugin(GpuPackPlugin):
    name = "gpuspread"

    def on_session_open(self, session: Session) -> None:
        session.points.gpu_chooser = spread_gpus
