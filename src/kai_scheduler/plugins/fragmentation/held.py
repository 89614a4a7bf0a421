"""What `kernels.choose` and `kernels.refresh` read, held by numba between calls (structrefs: numba's own
objects).

Why: numba takes a call's arguments apart one by one, and an array costs a memory block made and freed
each call (~550 instructions); `choose`'s 32 arrays cost some 18,700 instructions a call (as much as
half of a search), at 19,000 calls in the first cycle at 5,000 nodes. A structref is taken as one
reference, and the arrays it holds are the caller's own (the same memory: what either side writes, the
other reads), which is why one is made again whenever the plugin replaces one of its arrays. Made by
`kernels.hold_*` (compiled and cached: a proxy made from Python compiles its constructor in each process).

Defined here, apart from the kernels that read them: numba caches the compiled code of a function that
takes a structref only when the structref's type comes from another module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from numba.core import types
from numba.experimental import structref

if TYPE_CHECKING:
    from kai_scheduler.model.nodes import BoolArray, FloatArray, IntArray
    from kai_scheduler.plugins.fragmentation.kernels import FitKernel, NodeStatesKernel

_unliteral: Callable[[Any], Any] = types.unliteral  # (numba's own, untyped)
_define_proxy: Callable[[type, type, list[str]], None] = structref.define_proxy


class _Fields(types.StructRef):
    def preprocess_fields(self, fields: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
        # (literal ints and floats as plain ones: a field holds any value of its type)
        return tuple((name, _unliteral(kind)) for name, kind in fields)


@structref.register
class SessionType(_Fields):
    pass


@structref.register
class RequestType(_Fields):
    pass


@structref.register
class SummaryType(_Fields):
    pass


@structref.register
class TableType(_Fields):
    pass


class Session(structref.StructRefProxy):
    """A session's node states, its log of node refreshes, where `choose` writes the nodes to ask and
    `choose_fitting` the nodes it found not to hold the pod (`costs.PlacementCosts`)."""

    if TYPE_CHECKING:  # (fields, read in compiled code only)
        node_states: NodeStatesKernel
        changes: IntArray
        asked: IntArray
        unfit: IntArray

        def __init__(
            self, node_states: NodeStatesKernel, changes: IntArray, asked: IntArray, unfit: IntArray
        ) -> None: ...


class Request(structref.StructRefProxy):
    """A request's keys, flags and GPUs (`costs._Costs.flags`), what its pod takes (`_Costs.pod`), the
    weights of what a placement leaves idle (`_Costs.per_idle`) and what `kernels.fits_soon` reads of it
    (`_Costs.asks`)."""

    if TYPE_CHECKING:  # (fields, read in compiled code only)
        flags: tuple[FloatArray, BoolArray, BoolArray, BoolArray, IntArray]
        pod: tuple[FloatArray, FloatArray, FloatArray, int]
        per_idle: tuple[float, float]
        asks: FitKernel

        def __init__(
            self,
            flags: tuple[FloatArray, BoolArray, BoolArray, BoolArray, IntArray],
            pod: tuple[FloatArray, FloatArray, FloatArray, int],
            per_idle: tuple[float, float],
            asks: FitKernel,
        ) -> None: ...


class Summary(structref.StructRefProxy):
    """A summary's keys, nodes and out-of-date blocks (`costs._Summary`)."""

    if TYPE_CHECKING:  # (fields, read in compiled code only)
        keys: FloatArray
        nodes: IntArray
        stale: BoolArray

        def __init__(self, keys: FloatArray, nodes: IntArray, stale: BoolArray) -> None: ...


class Table(structref.StructRefProxy):
    """A node table's columns that `kernels.refresh` and `kernels.fits_soon` read (`kernels.hold_table`).
    A table replaces none of them in its life (a copy is another table), so one is made per table."""

    if TYPE_CHECKING:  # (fields, read in compiled code only)
        cpu: tuple[FloatArray, FloatArray, FloatArray]
        memory: tuple[FloatArray, FloatArray, FloatArray]
        pods: tuple[FloatArray, FloatArray, FloatArray]
        gpus: tuple[FloatArray, FloatArray, FloatArray]
        gpu_memory_mib: FloatArray
        mig: tuple[FloatArray, FloatArray, IntArray]

        def __init__(
            self,
            cpu: tuple[FloatArray, FloatArray, FloatArray],
            memory: tuple[FloatArray, FloatArray, FloatArray],
            pods: tuple[FloatArray, FloatArray, FloatArray],
            gpus: tuple[FloatArray, FloatArray, FloatArray],
            gpu_memory_mib: FloatArray,
            mig: tuple[FloatArray, FloatArray, IntArray],
        ) -> None: ...


_define_proxy(Session, SessionType, ["node_states", "changes", "asked", "unfit"])
_define_proxy(Request, RequestType, ["flags", "pod", "per_idle", "asks"])
_define_proxy(Summary, SummaryType, ["keys", "nodes", "stale"])
_define_proxy(Table, TableType, ["cpu", "memory", "pods", "gpus", "gpu_memory_mib", "mig"])
