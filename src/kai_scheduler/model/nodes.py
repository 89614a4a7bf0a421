"""Nodes as columns: every node's capacity and usage in numpy arrays, so that filtering and scoring one
pod against thousands of nodes is a handful of vector operations.

Usage is split the way KAI splits it: *used* counts every pod that occupies the node (including the
*releasing* ones that are terminating); *releasing* is the part that will free up soon. A pod fits a node
now when it fits the idle resources (capacity - used), and can be *pipelined* there when it fits idle +
releasing.

Whole GPUs and shared GPUs: a fractional (gpu-fraction / gpu-memory) pod lives on a *GPU group*, one
physical GPU shared by several pods. A group takes one whole GPU out of the node's free whole GPUs while it
has any pod, and gives it back when its last pod leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import is_not
from typing import Final, TypeVar

import numpy as np
import numpy.typing as npt

from kai_scheduler.api.objects import Taint
from kai_scheduler.model.resources import EPSILON, PodRequest, mig_gpu_units

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
# Which nodes a computation covers: all of them (slice(None)) or the given indices, in index order.
Rows = slice | IntArray
ALL_ROWS: Final = slice(None)
# The element type of an array kept up to date across changes (`NodeTable._kept`).
_Cell = TypeVar("_Cell", np.bool_, np.float64)
# CPU, memory, pod slots and whole GPUs free on one node (`NodeTable._room`).
_Room = tuple[float, float, float, float]

MIG_NONE: Final = 0
MIG_SINGLE: Final = 1
MIG_MIXED: Final = 2
# `not_allocated_at` sums the columns at its rows when they are fewer than 1/this of the nodes.
_FEW_ROWS_SHARE: Final = 8
# Up to this many changed nodes, `NodeTable.fit` re-checks them one by one in Python (about a
# microsecond each); beyond, with numpy (tens of microseconds, whatever the count).
_FEW_CHANGED_NODES: Final = 16


@dataclass(slots=True)
class GpuGroup:
    """One physical GPU shared by fractional pods (KAI's `runai-gpu-group`)."""

    group_id: str
    node: int
    used: float = 0.0  # portion held by its pods, releasing ones included
    releasing: float = 0.0  # portion that terminating pods will give back
    holders: dict[str, float] = field(default_factory=dict)  # pod key -> portion
    # All holders release, and a whole-GPU pod has been pipelined onto the GPU: nobody may join it.
    claimed: bool = False

    @property
    def fully_releasing(self) -> bool:
        return self.used - self.releasing <= EPSILON

    # A shared GPU all of whose holders release is joined by nobody (KAI's IsTaskFitOnGpuGroup): it comes
    # back as a whole GPU (see `_refresh_shared`), on which a pod opens a new shared GPU.

    @property
    def free_now(self) -> float:
        return 0.0 if self.claimed or self.fully_releasing else 1.0 - self.used

    @property
    def free_soon(self) -> float:
        return 0.0 if self.claimed or self.fully_releasing else 1.0 - self.used + self.releasing


@dataclass(frozen=True, slots=True)
class PipelineTake:
    """The part of a pipelined pod's request that comes out of resources being released."""

    cpu: float
    memory: float
    pods: float
    gpus: float
    claimed_groups: tuple[str, ...] = ()  # shared GPUs whose release the pod takes as whole GPUs


@dataclass(frozen=True, slots=True)
class SoonRoom:
    """What one node had free once its releasing pods are gone, as `NodeTable.node_fits(..., soon=True)`
    read it at that moment: kept so that the node can be ruled out for a pod later, when the cluster is
    no longer in that state (the victim solver's replays, see actions/solvers/replays.py)."""

    cpu: float
    memory: float
    pods: float
    gpus: float
    shared: float  # the most any shared GPU on the node had free
    gpu_memory_mib: float  # of each GPU (for gpu-memory requests)

    def may_hold(self, request: PodRequest) -> bool:
        """False only when `node_fits(request, node, soon=True)` was False then: the same comparisons for
        CPU, memory, the pod slot, whole GPUs and one-device shared GPUs; what else a request asks for
        (shared GPUs on several devices, extended resources) is not looked at, so it may hold."""
        ok = (
            self.cpu >= request.cpu - EPSILON
            and self.memory >= request.memory - EPSILON
            and self.pods >= 1 - EPSILON
        )
        if ok and request.whole_gpus:
            ok = self.gpus >= request.whole_gpus - EPSILON
        shared = request.shared_gpu
        if ok and shared is not None and shared.devices == 1:
            portion = shared.fit_portion(self.gpu_memory_mib)
            joins = self.shared >= portion - EPSILON
            opens = self.gpus >= 1 - EPSILON and self.pods >= 2 - EPSILON
            ok = portion <= 1.0 + EPSILON and (joins or opens)
        return ok


@dataclass(slots=True)
class NodeSpecInfo:
    """The static facts of one node that placement reads outside the arrays. Not changed once made, though
    not frozen: a frozen dataclass sets each field through object.__setattr__, and a table is made of
    thousands (a changed node gets a new one, `ClusterCache._respecified`)."""

    name: str
    labels: dict[str, str]
    unschedulable: bool
    taints: tuple[Taint, ...] = ()
    ready: bool = True  # its Ready condition; a node that is not ready takes no pods and adds no capacity


class NodeTable:
    """All nodes of a snapshot, sorted by name so that index order is name order (KAI breaks score ties by
    node name)."""

    def __init__(
        self,
        specs: list[NodeSpecInfo],
        *,
        cpu: FloatArray,
        memory: FloatArray,
        pods: FloatArray,
        gpus: FloatArray,
        gpu_memory_mib: FloatArray,
        mig_mode: npt.NDArray[np.int8],
        scalar_names: list[str],
        scalars: FloatArray,
    ) -> None:
        self.specs = specs
        self.names = [spec.name for spec in specs]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.size = len(specs)
        n = self.size
        self.cap_cpu = cpu
        self.cap_memory = memory
        self.cap_pods = pods
        self.cap_gpus = gpus
        self.gpu_memory_mib = gpu_memory_mib
        self.mig_mode = mig_mode
        self.scalar_names = scalar_names
        self.scalar_index = {name: j for j, name in enumerate(scalar_names)}
        self.cap_scalars = scalars
        self.used_cpu = np.zeros(n)
        self.used_memory = np.zeros(n)
        self.used_pods = np.zeros(n)
        self.used_scalars = np.zeros_like(scalars)
        self.rel_cpu = np.zeros(n)
        self.rel_memory = np.zeros(n)
        self.rel_pods = np.zeros(n)
        self.rel_scalars = np.zeros_like(scalars)
        # Whole GPUs not held by any pod or group, and whole GPUs that releasing pods will give back
        # (GPUs of releasing whole-GPU pods plus shared GPUs all of whose holders release).
        self.free_gpus = gpus.copy()
        self.rel_gpus = np.zeros(n)
        mig_columns = [j for j, name in enumerate(scalar_names) if name.startswith("nvidia.com/mig-")]
        self.has_gpus = (gpus > 0) | (scalars[:, mig_columns].sum(axis=1) > 0 if mig_columns else False)
        self._rel_group_gpus = np.zeros(n)
        # Best free portion among the node's shared GPUs, now and once releasing pods are gone.
        self.shared_free_now = np.zeros(n)
        self.shared_free_total = np.zeros(n)  # unused parts of all its shared GPUs together
        self.shared_free_soon = np.zeros(n)
        self.groups: dict[int, list[GpuGroup]] = {}
        self.group_by_id: dict[str, GpuGroup] = {}
        # The nodes whose shared GPUs' unused parts sum below zero (`overcommitted`).
        self._overcommitted: set[int] = set()
        # Every node whose usage changed, in order (a node may repeat), and the fit masks computed so
        # far with how much of that log they had seen: a mask is brought up to date by re-checking only
        # the nodes changed since (placing a pod changes one node), see `fit`.
        self._changes: list[int] = []
        # Entries dropped from the front of that log so far: a position in the log that outlives a
        # reset is `_changes_dropped + index` (see `changed_since`).
        self._changes_dropped = 0
        # Bumped by every change of usage: equal versions of one table, equal usage.
        self.version = 0
        self._free_soon: tuple[int, tuple[FloatArray, FloatArray, FloatArray]] | None = None
        self._fit_masks: dict[tuple[PodRequest, bool], tuple[BoolArray, int]] = {}
        # The nodes whose releasing resources may have changed (`_releasing_may_change`), in order, and the
        # nodes with anything being released as of a position in that log (None: not known). Why a log of
        # its own: most changes (a pod placed on idle resources) leave what is released as it was, and
        # `anything_releasing` is asked after each.
        self._releasing_log: list[int] = []
        self._releasing_nodes: set[int] = set()
        self._releasing_seen: int | None = None
        # `not_allocated` columns computed so far, with how much of the log they had seen (as `fit`).
        self._not_allocated: dict[bool, tuple[FloatArray, int]] = {}
        # The mask of empty nodes, with how much of the log it had seen (as `fit`), see `empty`.
        self._empty: tuple[BoolArray, int] | None = None
        # What `node_fits` reads of a node (see `_room`), now and soon, kept until the node changes: a
        # changed node is asked about again by each kept mask brought up to date.
        self._rooms_now: dict[int, _Room] = {}
        self._rooms_soon: dict[int, _Room] = {}

    # --- copies ----------------------------------------------------------------------------------

    USAGE_COLUMNS = (
        "used_cpu",
        "used_memory",
        "used_pods",
        "used_scalars",
        "rel_cpu",
        "rel_memory",
        "rel_pods",
        "rel_scalars",
        "free_gpus",
        "rel_gpus",
        "_rel_group_gpus",
        "shared_free_now",
        "shared_free_total",
        "shared_free_soon",
    )
    # The per-node facts that do not change with usage (capacities and what they imply): two nodes equal in
    # these and both empty differ in no column of the table.
    CAPACITY_COLUMNS = (
        "cap_cpu",
        "cap_memory",
        "cap_pods",
        "cap_gpus",
        "cap_scalars",
        "gpu_memory_mib",
        "mig_mode",
        "has_gpus",
    )

    def copy(self) -> NodeTable:
        """A table a session may change freely: the usage columns and shared GPUs are copied, the static
        facts (specs, capacities) shared."""
        table = object.__new__(NodeTable)
        table.__dict__.update(self.__dict__)
        for name in self.USAGE_COLUMNS:
            setattr(table, name, getattr(self, name).copy())
        table.group_by_id = {
            group_id: GpuGroup(g.group_id, g.node, g.used, g.releasing, dict(g.holders), g.claimed)
            for group_id, g in self.group_by_id.items()
        }
        table.groups = {
            node: [table.group_by_id[g.group_id] for g in groups] for node, groups in self.groups.items()
        }
        # The copy keeps its own record of changes and its own fit masks (see `fit`).
        table._changes = []
        table._fit_masks = {}
        table._releasing_log = []
        table._releasing_nodes = set()
        table._releasing_seen = None
        table._free_soon = None
        table._not_allocated = {}
        table._empty = None
        table._rooms_now = {}
        table._rooms_soon = {}
        table._overcommitted = set(self._overcommitted)
        return table

    def respecify(self, specs: Mapping[int, NodeSpecInfo]) -> None:
        """Give nodes (by row) new static facts (a cordon, a label, a taint, readiness) that leave their
        capacity as it was, so every row keeps its usage: what a table built again and accounted from
        the same pods would hold. The specs become a new list (whoever derives facts from a table's specs
        keeps them by that list: `plugins.predicates`)."""
        replaced = list(self.specs)
        for node, spec in specs.items():
            assert spec.name == self.names[node], f"{spec.name} is not the node at row {node}"
            replaced[node] = spec
        self.specs = replaced

    def same_capacity(self, other: NodeTable) -> bool:
        """Whether `other` has the same nodes with the same capacities (`CAPACITY_COLUMNS`, the extended
        resources' names): as one node's facts, a node whose object changed but not in these."""
        return (
            self.names == other.names
            and self.scalar_names == other.scalar_names
            and all(
                np.array_equal(getattr(self, name), getattr(other, name)) for name in self.CAPACITY_COLUMNS
            )
        )

    def rows_differing(self, other: NodeTable) -> IntArray | None:
        """The rows (in index order) where `other`, a table of the same nodes, may hold another state than
        this one: any usage or capacity column, shared GPU, or static facts not the same object; None when
        the tables are not of the same nodes. Rows outside answer every question about the node alike."""
        if other.names != self.names or other.scalar_names != self.scalar_names:
            return None
        differ = np.zeros(self.size, dtype=np.bool_)
        for name in (*self.USAGE_COLUMNS, *self.CAPACITY_COLUMNS):
            unequal = getattr(self, name) != getattr(other, name)
            differ |= unequal.any(axis=1) if unequal.ndim == 2 else unequal
        if other.specs is not self.specs:  # (the same nodes: as many specs, in the same order)
            differ |= np.fromiter(map(is_not, self.specs, other.specs), dtype=np.bool_, count=self.size)
        for node in self.groups.keys() | other.groups.keys():
            if _group_states(self.groups.get(node, [])) != _group_states(other.groups.get(node, [])):
                differ[node] = True
        return np.flatnonzero(differ)

    def clear_node(self, node: int) -> None:
        """Forget every pod on one node (its usage and shared GPUs), to account them again."""
        self._changed(node)
        self._releasing_may_change(node)
        for name in self.USAGE_COLUMNS:
            getattr(self, name)[node] = 0
        self.free_gpus[node] = self.cap_gpus[node]
        self._overcommitted.discard(node)
        for group in self.groups.pop(node, ()):
            del self.group_by_id[group.group_id]

    # --- queries ---------------------------------------------------------------------------------

    def gpu_units(self, among: BoolArray | None = None) -> float:
        """The GPUs of the nodes (or of those in `among`) in queue-accounting units (MIG instances count
        their compute slices)."""
        rows = slice(None) if among is None else among
        mig = sum(
            mig_gpu_units(name) * float(self.cap_scalars[rows, j].sum())
            for j, name in enumerate(self.scalar_names)
            if name.startswith("nvidia.com/mig-")
        )
        return float(self.cap_gpus[rows].sum()) + mig

    def free_soon(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """CPU, memory and pod slots free once releasing pods are gone, per node (read-only arrays, kept
        while the usage does not change)."""
        cached = self._free_soon
        if cached is None or cached[0] != self.version:
            arrays = (
                self.cap_cpu - self.used_cpu + self.rel_cpu,
                self.cap_memory - self.used_memory + self.rel_memory,
                self.cap_pods - self.used_pods + self.rel_pods,
            )
            for array in arrays:
                array.flags.writeable = False
            cached = self._free_soon = (self.version, arrays)
        return cached[1]

    def idle_gpus_total(self) -> FloatArray:
        """Free GPU capacity including the unused parts of shared GPUs (for spread/binpack scoring)."""
        return self.free_gpus + self.shared_free_total

    def portion_for(self, request: PodRequest, rows: Rows = ALL_ROWS) -> FloatArray:
        """The portion of one GPU that a shared-GPU request takes on each node (of `rows`), by
        `SharedGpuRequest.fit_portion` over the nodes' GPU memory at once: gpu-memory depends on the node's
        device memory; nodes without a known memory size cannot take a gpu-memory pod (`inf`)."""
        shared = request.shared_gpu
        if shared is None:
            return np.zeros(self.row_count(rows))
        return shared.fit_portions(self.gpu_memory_mib[rows])

    def row_count(self, rows: Rows) -> int:
        return self.size if isinstance(rows, slice) else len(rows)

    def fit(self, request: PodRequest, *, soon: bool) -> BoolArray:
        """Nodes whose idle resources (or idle + releasing, when `soon`) hold the request.

        The mask is kept per request across calls: when not too many nodes changed since it was last
        asked for (placing a pod changes one node), only those are checked again. It is read-only (a
        later call returns a new array)."""
        if not soon and not self.anything_releasing():
            soon = True  # nothing is being released: fitting now and fitting soon are the same question
        key = (request, soon)
        mask = self._kept(
            self._fit_masks.get(key),
            lambda node: self.node_fits(request, node, soon=soon),
            lambda rows: self.fit_rows(request, rows, soon=soon),
        )
        self._fit_masks[key] = (mask, len(self._changes))
        return mask

    def _kept(
        self,
        cached: tuple[npt.NDArray[_Cell], int] | None,
        one_node: Callable[[int], bool | float],
        at_rows: Callable[[Rows], npt.NDArray[_Cell]],
    ) -> npt.NDArray[_Cell]:
        """A per-node array computed by `at_rows` (`one_node` for one node, the same answer to the last
        bit), brought up to date from `cached` (the array and how much of the log of changes it had
        seen) at the nodes changed since: one by one in plain Python for a few, with numpy for more, and
        afresh when too many changed. The result is read-only (callers may keep it)."""
        seen = len(self._changes)
        if cached is not None and cached[1] == seen:
            return cached[0]
        if cached is None or seen - cached[1] > self.size // 4:
            array = at_rows(ALL_ROWS)
        else:
            # Placing one pod changes one node: the usual case needs no set.
            changed = {self._changes[-1]} if seen - cached[1] == 1 else set(self._changes[cached[1] :])
            array = cached[0].copy()
            if len(changed) <= _FEW_CHANGED_NODES:
                for node in changed:
                    array[node] = one_node(node)
            else:
                rows = np.fromiter(changed, dtype=np.int64, count=len(changed))
                array[rows] = at_rows(rows)
        array.flags.writeable = False
        return array

    def not_allocated(self, *, gpus: bool) -> FloatArray:
        """Per node, what is not allocated, idle plus releasing (KAI's NonAllocatedResource, which
        binpack and spread rank by): GPUs (`gpus`: whole idle GPUs, plus the unused parts of shared GPUs,
        plus the GPUs being released) or CPU (capacity - used + releasing).

        Guarantee: every element is, to the last bit, what the same sums over the current usage give
        (`_not_allocated_rows`, in that order), so a scorer reading it ranks exactly as one summing the
        columns itself. Kept across calls as `fit` keeps its masks: only the nodes changed since are
        summed again (placing a pod changes one). Read-only."""
        column = self._kept(
            self._not_allocated.get(gpus),
            lambda node: self.not_allocated_of(node, gpus=gpus),
            lambda rows: self._not_allocated_rows(rows, gpus=gpus),
        )
        self._not_allocated[gpus] = (column, len(self._changes))
        return column

    def not_allocated_at(self, rows: IntArray, *, gpus: bool) -> FloatArray:
        """`not_allocated` at `rows` only, as a new array: summed there when they are a small part of the
        nodes (the kept column is brought up to date by copying it whole), else read from the kept column;
        the same values to the last bit either way."""
        if rows.size * _FEW_ROWS_SHARE < self.size:
            return self._not_allocated_rows(rows, gpus=gpus)
        return self.not_allocated(gpus=gpus).take(rows)

    def not_allocated_of(self, node: int, *, gpus: bool) -> float:
        """`not_allocated` at one node, summed now as a plain float (the same bits): the same IEEE sums in
        the same order as `_not_allocated_rows`, on plain floats (`item`)."""
        return self.gpus_not_allocated_of(node) if gpus else self.cpu_not_allocated_of(node)

    # `not_allocated_of` for each kind, asked without a keyword. Why: binpack's ranked index reads one
    # at every node a pod changed, and a keyword bound in (`functools.partial`) is copied at every call.

    def gpus_not_allocated_of(self, node: int) -> float:
        return (self.free_gpus.item(node) + self.shared_free_total.item(node)) + self.rel_gpus.item(node)

    def cpu_not_allocated_of(self, node: int) -> float:
        return (self.cap_cpu.item(node) - self.used_cpu.item(node)) + self.rel_cpu.item(node)

    def _not_allocated_rows(self, rows: Rows, *, gpus: bool) -> FloatArray:
        if gpus:
            return (self.free_gpus[rows] + self.shared_free_total[rows]) + self.rel_gpus[rows]
        return (self.cap_cpu[rows] - self.used_cpu[rows]) + self.rel_cpu[rows]

    def empty(self) -> BoolArray:
        """Nodes that hold nothing: every usage column as a new table starts it (no pod, no shared GPU,
        nothing being released), so that two empty nodes equal in `CAPACITY_COLUMNS` differ in no column
        of the table. Kept across calls as `fit`'s masks. Read-only."""
        mask = self._kept(self._empty, self._node_empty, self._empty_rows)
        self._empty = (mask, len(self._changes))
        return mask

    def _empty_rows(self, rows: Rows) -> BoolArray:
        empty = np.asarray(self.free_gpus[rows] == self.cap_gpus[rows], dtype=np.bool_)
        for name in self.USAGE_COLUMNS:
            if name != "free_gpus":
                column = getattr(self, name)[rows]
                empty &= ~column.any(axis=1) if column.ndim == 2 else column == 0
        if self.groups:
            holding = np.zeros(self.size, dtype=np.bool_)
            holding[list(self.groups)] = True
            empty &= ~holding[rows]
        return empty

    def _node_empty(self, node: int) -> bool:
        # As `_empty_rows` for one node, on plain floats (`item`).
        if node in self.groups or self.free_gpus.item(node) != self.cap_gpus.item(node):
            return False
        for name in self.USAGE_COLUMNS:
            if name == "free_gpus":
                continue  # compared with the capacity above
            column = getattr(self, name)
            if any(column[node].tolist()) if column.ndim == 2 else column.item(node) != 0:
                return False
        return True

    def change_position(self) -> int:
        """Where the log of usage changes stands now, for `changed_since`."""
        return self._changes_dropped + len(self._changes)

    def changed_since(self, position: int) -> list[int] | None:
        """The nodes whose usage changed since `change_position` answered `position` (a node may repeat),
        or None when the log no longer reaches back that far (any node may have changed)."""
        start = position - self._changes_dropped
        return None if start < 0 else self._changes[start:]

    def overcommitted(self) -> set[int]:
        """The nodes whose shared GPUs are promised more than they have (not to be changed): a pod pipelined
        onto the part of a shared GPU that a releasing holder gives back (`GpuGroup.free_soon`), that
        holder still on it. There the unused parts of the node's shared GPUs (`shared_free_total`) sum
        below zero, and what is not allocated (`not_allocated`) is less than its whole GPUs free soon."""
        return self._overcommitted

    def anything_releasing(self) -> bool:
        """Whether any node has resources being released (only then can fitting soon differ from fitting
        now); kept across calls, brought up to date at the nodes whose releasing resources may have
        changed since (`_releasing_may_change`)."""
        seen = len(self._releasing_log)
        if seen == self._releasing_seen:
            return bool(self._releasing_nodes)  # asked a few times a pod; placing one changes nothing here
        if self._releasing_seen is None or seen - self._releasing_seen > self.size // 4:
            releasing = (
                (self.rel_cpu != 0)
                | (self.rel_memory != 0)
                | (self.rel_pods != 0)
                | (self.rel_gpus != 0)
                | self.rel_scalars.any(axis=1)
            )
            self._releasing_nodes = set(np.flatnonzero(releasing).tolist())
            self._releasing_nodes.update(node for node in self.groups if self._groups_releasing(node))
        else:
            for node in set(self._releasing_log[self._releasing_seen :]):
                if self._node_releasing(node):
                    self._releasing_nodes.add(node)
                else:
                    self._releasing_nodes.discard(node)
        self._releasing_seen = seen
        return bool(self._releasing_nodes)

    def _node_releasing(self, node: int) -> bool:
        # Anything but exact zeros counts (rounding residue too): then the two questions are asked apart.
        # (`item` reads a plain float: far cheaper than a numpy scalar for one node.)
        return bool(
            self.rel_cpu.item(node) != 0
            or self.rel_memory.item(node) != 0
            or self.rel_pods.item(node) != 0
            or self.rel_gpus.item(node) != 0
            or (self.rel_scalars.shape[1] > 0 and any(self.rel_scalars[node].tolist()))
            or self._groups_releasing(node)
        )

    def _groups_releasing(self, node: int) -> bool:
        return any(group.releasing != 0 or group.claimed for group in self.groups.get(node, ()))

    def node_fits(self, request: PodRequest, node: int, *, soon: bool) -> bool:
        """`fit` for one node, in plain Python (for a handful of nodes that is far cheaper than numpy);
        the same arithmetic in the same order, so the same answer to the last bit."""
        rooms = self._rooms_soon if soon else self._rooms_now
        room = rooms.get(node)
        if room is None:
            room = rooms[node] = self._room(node, soon=soon)
        cpu_free, mem_free, pods_free, gpus_free = room
        ok = (
            cpu_free >= request.cpu - EPSILON
            and mem_free >= request.memory - EPSILON
            and pods_free >= 1 - EPSILON
        )
        if ok and request.whole_gpus:
            ok = gpus_free >= request.whole_gpus - EPSILON
        if ok and request.shared_gpu is not None:  # (`is_shared_gpu`, read without a property's call)
            portion = self.portion_on(request, node)
            if request.gpu_devices == 1:
                best = (self.shared_free_soon if soon else self.shared_free_now).item(node)
                joins = best >= portion - EPSILON
                opens = gpus_free >= 1 - EPSILON and pods_free >= 2 - EPSILON
                ok = portion <= 1.0 + EPSILON and (joins or opens)
            else:
                ok = portion <= 1.0 + EPSILON and self._devices_fit(
                    request, node, portion, gpus_free, pods_free, soon=soon
                )
        for name, amount in request.scalars:
            j = self.scalar_index.get(name)
            if j is None:
                return False
            free = self.cap_scalars[node, j] - self.used_scalars[node, j]
            if soon:
                free = free + self.rel_scalars[node, j]
            ok = ok and free >= amount - EPSILON
        return bool(ok)

    def _room(self, node: int, *, soon: bool) -> _Room:
        """CPU, memory, pod slots and whole GPUs free on a node now (or once releasing pods are gone, when
        `soon`), as `fit_rows` computes them."""
        # Plain floats (`item`): the same IEEE doubles as numpy's, at a fraction of a numpy scalar's cost.
        cpu_free = self.cap_cpu.item(node) - self.used_cpu.item(node)
        mem_free = self.cap_memory.item(node) - self.used_memory.item(node)
        pods_free = self.cap_pods.item(node) - self.used_pods.item(node)
        gpus_free = self.free_gpus.item(node)
        if soon and self.anything_releasing():  # (else the releasing columns hold zeros: see `fit_rows`)
            cpu_free = cpu_free + self.rel_cpu.item(node)
            mem_free = mem_free + self.rel_memory.item(node)
            pods_free = pods_free + self.rel_pods.item(node)
            gpus_free = gpus_free + self.rel_gpus.item(node)
        return cpu_free, mem_free, pods_free, gpus_free

    def soon_room(self, node: int) -> SoonRoom:
        """What the node has free once its releasing pods are gone (computed as `node_fits` does)."""
        cpu = self.cap_cpu.item(node) - self.used_cpu.item(node)
        memory = self.cap_memory.item(node) - self.used_memory.item(node)
        pods = self.cap_pods.item(node) - self.used_pods.item(node)
        return SoonRoom(
            cpu=cpu + self.rel_cpu.item(node),
            memory=memory + self.rel_memory.item(node),
            pods=pods + self.rel_pods.item(node),
            gpus=self.free_gpus.item(node) + self.rel_gpus.item(node),
            shared=self.shared_free_soon.item(node),
            gpu_memory_mib=float(self.gpu_memory_mib[node]),
        )

    def fit_rows(self, request: PodRequest, rows: Rows, *, soon: bool) -> BoolArray:
        """Whether each node of `rows` holds the request (see `fit`), computed afresh."""
        cpu_free = self.cap_cpu[rows] - self.used_cpu[rows]
        mem_free = self.cap_memory[rows] - self.used_memory[rows]
        pods_free = self.cap_pods[rows] - self.used_pods[rows]
        gpus_free = self.free_gpus[rows]
        # (Nothing being released, every releasing column holds zeros, whose sums change no comparison.)
        if soon and self.anything_releasing():
            cpu_free = cpu_free + self.rel_cpu[rows]
            mem_free = mem_free + self.rel_memory[rows]
            pods_free = pods_free + self.rel_pods[rows]
            gpus_free = gpus_free + self.rel_gpus[rows]
        ok = (
            (cpu_free >= request.cpu - EPSILON)
            & (mem_free >= request.memory - EPSILON)
            & (pods_free >= 1 - EPSILON)
        )
        if request.whole_gpus:
            ok &= gpus_free >= request.whole_gpus - EPSILON
        if request.is_shared_gpu:
            ok &= self._shared_fit(request, rows, gpus_free, pods_free, soon=soon)
        for name, amount in request.scalars:
            j = self.scalar_index.get(name)
            if j is None:
                return np.zeros(len(ok), dtype=np.bool_)
            free = self.cap_scalars[rows, j] - self.used_scalars[rows, j]
            if soon:
                free = free + self.rel_scalars[rows, j]
            ok &= free >= amount - EPSILON
        return ok

    def _shared_fit(
        self, request: PodRequest, rows: Rows, gpus_free: FloatArray, pods_free: FloatArray, *, soon: bool
    ) -> BoolArray:
        """A shared-GPU pod joins GPUs that have room, or opens new ones; each new shared GPU also takes a
        pod slot for its reservation pod (KAI's binder pins the GPU with one)."""
        portion = self.portion_for(request, rows)
        if request.gpu_devices == 1:
            best = (self.shared_free_soon if soon else self.shared_free_now)[rows]
            joins = best >= portion - EPSILON
            opens = (gpus_free >= 1 - EPSILON) & (pods_free >= 2 - EPSILON)
            return (portion <= 1.0 + EPSILON) & (joins | opens)
        ok = np.zeros(len(portion), dtype=np.bool_)
        for i, node in enumerate(np.arange(self.size)[rows].tolist()):
            if portion[i] <= 1.0 + EPSILON:
                ok[i] = self._devices_fit(
                    request, node, float(portion[i]), gpus_free[i], pods_free[i], soon=soon
                )
        return ok

    def _devices_fit(
        self,
        request: PodRequest,
        node: int,
        portion: float,
        gpus_free: float,
        pods_free: float,
        *,
        soon: bool,
    ) -> bool:
        """A shared-GPU pod on several devices: the shared GPUs with room it joins, new ones for the rest."""
        joined = min(len(self.shared_candidates(node, portion, soon=soon)), request.gpu_devices)
        opened = request.gpu_devices - joined
        return bool(gpus_free >= opened - EPSILON and pods_free >= 1 + opened - EPSILON)

    def shared_candidates(self, node: int, portion: float, *, soon: bool) -> list[GpuGroup]:
        return [
            group
            for group in self.groups.get(node, ())
            if (group.free_soon if soon else group.free_now) >= portion - EPSILON
        ]

    # --- changes ---------------------------------------------------------------------------------

    def _changed(self, node: int) -> None:
        """Note that a node's usage changed (every change below goes through here), for `fit`."""
        self.version += 1
        self._rooms_now.pop(node, None)
        self._rooms_soon.pop(node, None)
        if len(self._changes) >= 8 * self.size + 1024:
            # Keep the log short: start afresh, every cached mask is recomputed once.
            self._changes_dropped += len(self._changes)
            self._changes.clear()
            self._releasing_log.clear()
            self._fit_masks.clear()
            self._not_allocated.clear()
            self._empty = None
            self._releasing_seen = None
        self._changes.append(node)

    def _releasing_may_change(self, node: int) -> None:
        """Note that what a node releases may have changed (what `_node_releasing` reads: every change of
        a releasing column or of a shared GPU's releasing part or claim goes through here), for
        `anything_releasing`. Called besides `_changed`, whose log it follows."""
        self._releasing_log.append(node)

    def hold(self, node: int, request: PodRequest, *, releasing: bool) -> None:
        """Account a pod's non-GPU resources and whole GPUs on a node."""
        self._changed(node)
        if releasing:
            self._releasing_may_change(node)
        # (Each read as a Python float, `.item`, and written back: a NumPy scalar's `+=` costs a third
        # more, on every pod a cycle places and every pod its cache accounts.)
        self.used_cpu[node] = self.used_cpu.item(node) + request.cpu
        self.used_memory[node] = self.used_memory.item(node) + request.memory
        self.used_pods[node] = self.used_pods.item(node) + 1
        if request.whole_gpus:  # (none taken leaves the column as it is: a CPU-only or shared-GPU pod)
            self.free_gpus[node] = self.free_gpus.item(node) - request.whole_gpus
        for name, amount in request.scalars:
            j = self.scalar_index.get(name)
            if j is not None:
                self.used_scalars[node, j] += amount
                if releasing:
                    self.rel_scalars[node, j] += amount
        if releasing:
            self.rel_cpu[node] += request.cpu
            self.rel_memory[node] += request.memory
            self.rel_pods[node] += 1
            self.rel_gpus[node] += request.whole_gpus

    def hold_pipelined(self, node: int, request: PodRequest) -> PipelineTake:
        """Account a pod pipelined onto the node: it takes what is being released first and only the rest
        from the idle resources, so pods that fit the idle part can still bind now."""
        gpus = min(max(self.rel_gpus[node], 0.0), float(request.whole_gpus))
        take = PipelineTake(
            cpu=min(max(self.rel_cpu[node], 0.0), request.cpu),
            memory=min(max(self.rel_memory[node], 0.0), request.memory),
            pods=min(max(self.rel_pods[node], 0.0), 1.0),
            gpus=gpus,
            claimed_groups=self._claim_releasing_groups(node, gpus),
        )
        self.hold(node, request, releasing=False)
        self._shift_releasing(node, take, -1.0)
        return take

    def unhold_pipelined(self, node: int, request: PodRequest, take: PipelineTake) -> None:
        self._shift_releasing(node, take, 1.0)  # (noting that what the node releases changes)
        self.unhold(node, request, releasing=False)
        for group_id in take.claimed_groups:
            self.group_by_id[group_id].claimed = False
        self._refresh_shared(node)

    def _claim_releasing_groups(self, node: int, gpus: float) -> tuple[str, ...]:
        """Whole GPUs taken from what is being released come first from releasing whole-GPU pods, then
        from shared GPUs whose holders all release; those shared GPUs are then closed to newcomers."""
        from_whole_pods = self.rel_gpus[node] - self._rel_group_gpus[node]
        needed = round(max(0.0, gpus - from_whole_pods))
        if needed == 0:
            return ()
        claimed = [g for g in self.groups.get(node, ()) if g.fully_releasing and not g.claimed][:needed]
        for group in claimed:
            group.claimed = True  # (`hold_pipelined` notes that what the node releases changes)
        self._refresh_shared(node)
        return tuple(g.group_id for g in claimed)

    def _shift_releasing(self, node: int, take: PipelineTake, sign: float) -> None:
        # What a pipelined pod takes from releasing stays "used" but no longer frees up for others.
        self._changed(node)
        self._releasing_may_change(node)
        self.used_cpu[node] += sign * take.cpu
        self.rel_cpu[node] += sign * take.cpu
        self.used_memory[node] += sign * take.memory
        self.rel_memory[node] += sign * take.memory
        self.used_pods[node] += sign * take.pods
        self.rel_pods[node] += sign * take.pods
        self.free_gpus[node] -= sign * take.gpus
        self.rel_gpus[node] += sign * take.gpus

    def unhold(self, node: int, request: PodRequest, *, releasing: bool) -> None:
        self._changed(node)
        if releasing:
            self._releasing_may_change(node)
        self.used_cpu[node] -= request.cpu
        self.used_memory[node] -= request.memory
        self.used_pods[node] -= 1
        self.free_gpus[node] += request.whole_gpus
        for name, amount in request.scalars:
            j = self.scalar_index.get(name)
            if j is not None:
                self.used_scalars[node, j] -= amount
                if releasing:
                    self.rel_scalars[node, j] -= amount
        if releasing:
            self.rel_cpu[node] -= request.cpu
            self.rel_memory[node] -= request.memory
            self.rel_pods[node] -= 1
            self.rel_gpus[node] -= request.whole_gpus

    def mark_releasing(self, node: int, request: PodRequest, pod_key: str, groups: tuple[str, ...]) -> None:
        """A pod on the node starts terminating: its resources stay used but become releasing."""
        self._changed(node)
        self._releasing_may_change(node)
        self.rel_cpu[node] += request.cpu
        self.rel_memory[node] += request.memory
        self.rel_pods[node] += 1
        self.rel_gpus[node] += request.whole_gpus
        for name, amount in request.scalars:
            j = self.scalar_index.get(name)
            if j is not None:
                self.rel_scalars[node, j] += amount
        for group_id in groups:
            group = self.group_by_id[group_id]
            group.releasing += group.holders.get(pod_key, 0.0)
        if groups:  # otherwise no shared GPU of the node changed
            self._refresh_shared(node)

    def unmark_releasing(self, node: int, request: PodRequest, pod_key: str, groups: tuple[str, ...]) -> None:
        self._changed(node)
        self._releasing_may_change(node)
        self.rel_cpu[node] -= request.cpu
        self.rel_memory[node] -= request.memory
        self.rel_pods[node] -= 1
        self.rel_gpus[node] -= request.whole_gpus
        for name, amount in request.scalars:
            j = self.scalar_index.get(name)
            if j is not None:
                self.rel_scalars[node, j] -= amount
        for group_id in groups:
            group = self.group_by_id[group_id]
            group.releasing -= group.holders.get(pod_key, 0.0)
        if groups:
            self._refresh_shared(node)

    def portion_on(self, request: PodRequest, node: int) -> float:
        """The portion of one GPU a shared-GPU request takes on one node (see `portion_for`)."""
        shared = request.shared_gpu
        return shared.fit_portion(self.gpu_memory_mib.item(node)) if shared else 0.0

    def share_gpus(
        self, node: int, request: PodRequest, pod_key: str, groups: tuple[str, ...], *, releasing: bool
    ) -> None:
        """Put a shared-GPU pod's portion on each GPU group it holds on the node."""
        shared = request.shared_gpu
        if shared is not None:
            # (`portion_on` and its `min` with one GPU, written out: asked for every shared-GPU pod placed.)
            portion = shared.fit_portion(self.gpu_memory_mib.item(node))
            if portion > 1.0:
                portion = 1.0
            for group_id in groups:
                self.join_group(node, group_id, pod_key, portion, releasing=releasing)

    def unshare_gpus(self, pod_key: str, groups: tuple[str, ...], *, releasing: bool) -> None:
        for group_id in groups:
            self.leave_group(group_id, pod_key, releasing=releasing)

    def join_group(self, node: int, group_id: str, pod_key: str, portion: float, *, releasing: bool) -> None:
        """Put a pod's portion on a shared GPU, opening the group (taking a whole GPU) if it is new."""
        group = self.group_by_id.get(group_id)
        if group is None:
            group = GpuGroup(group_id, node)
            self.group_by_id[group_id] = group
            self.groups.setdefault(node, []).append(group)
            self.free_gpus[node] -= 1
            self.used_pods[node] += 1  # the GPU's reservation pod
        group.used += portion
        group.holders[pod_key] = group.holders.get(pod_key, 0.0) + portion
        if releasing:
            group.releasing += portion
            self._releasing_may_change(node)
        self._refresh_shared(node)

    def leave_group(self, group_id: str, pod_key: str, *, releasing: bool) -> None:
        """Take a pod off a shared GPU; the last pod out closes the group and frees the whole GPU."""
        group = self.group_by_id[group_id]
        node = group.node
        portion = group.holders.pop(pod_key, 0.0)
        group.used -= portion
        if releasing:
            group.releasing -= portion
        if releasing or not group.holders:  # (a shared GPU closed takes its releasing part and claim along)
            self._releasing_may_change(node)
        if not group.holders:
            self.free_gpus[node] += 1
            self.used_pods[node] -= 1
            del self.group_by_id[group_id]
            self.groups[node].remove(group)
            if not self.groups[node]:
                del self.groups[node]
        self._refresh_shared(node)

    def _refresh_shared(self, node: int) -> None:
        # Hot (every change to a pod holding shared GPUs): one pass over the node's few groups, and the
        # arrays written once each.
        self._changed(node)
        best_now = total_now = best_soon = 0.0
        fully_releasing = 0
        for group in self.groups.get(node, ()):
            if group.used - group.releasing <= EPSILON:
                # A shared GPU all of whose holders are releasing comes back as a whole GPU, and its
                # reservation pod's slot with it; nobody joins it (see GpuGroup.free_now).
                fully_releasing += 1
            elif not group.claimed:
                now = 1.0 - group.used
                total_now += now
                best_now = max(best_now, now)
                best_soon = max(best_soon, now + group.releasing)
        self.shared_free_now[node] = best_now
        self.shared_free_total[node] = total_now
        if total_now < 0.0:
            self._overcommitted.add(node)
        elif self._overcommitted:
            self._overcommitted.discard(node)
        self.shared_free_soon[node] = best_soon
        change = fully_releasing - self._rel_group_gpus[node]
        if change:
            self._releasing_may_change(node)
            self.rel_gpus[node] += change
            self.rel_pods[node] += change
            self._rel_group_gpus[node] = fully_releasing


def _group_states(groups: list[GpuGroup]) -> list[tuple[str, float, float, bool, dict[str, float]]]:
    """What of a node's shared GPUs a fit reads, in their order."""
    return [(g.group_id, g.used, g.releasing, g.claimed, g.holders) for g in groups]
