"""How much of a node's idle GPU capacity the workload mix cannot use: its *stranded* GPUs.

For one class of the mix on one node, the pods of that class the node could still take:

* by GPUs: whole-GPU pods of n GPUs, free whole GPUs // n; shared-GPU pods of portion p on d devices, the
  sum over its GPUs of free portion // p (a free whole GPU gives 1 // p), // d; MIG pods, the free
  instances of each profile they ask for // the count;
* by CPU and memory: idle CPU // the class's CPU request (any number when it asks for none), memory
  alike. These pods may be fewer than the GPUs hold, but the GPUs they leave are not lost if lighter pods
  come: the count is the GPU-bound one if at least one pod fits, weighed `kernels.LIGHTER_FILL` (3/4), and the
  CPU- and memory-bound one, weighed the rest.

Those pods would use (that count x the class's GPUs per pod) of the node's idle GPUs; the rest is
stranded for that class (a class the node may not take, e.g. one that asks for another GPU model, uses
none of it). A node is not judged by the next pod alone: its idle capacity is offered pod after pod until
it is full, and what one class strands another may use. Its fragmentation is the expected least that
any of `kernels.OFFERS` (3) pods drawn from the mix would strand:

    frag(node) = E[ min over 3 classes drawn by weight of (idle GPUs - GPUs the class could use) ]

The measure follows FGD's idea (Weng et al., ATC'23: the expected idle GPU capacity a pod of the target
workload cannot use) and goes past it: a GPU's leftover after the pods of a class that fit on it is
stranded too (FGD counts a GPU either wholly usable or not: a 0.6 free GPU serves two 0.25 pods and
strands 0.1 here, none in FGD); multi-GPU pods use whole GPUs in multiples of their size (three free
GPUs serve one 2-GPU pod and strand one); CPU and memory bound the pods a node can take (FGD only asks
whether one more pod fits); and stranding that another class of the mix would avoid counts less than
stranding that none avoids (FGD's expectation is over one pod).

Offers that rescue stranding are right for the pods that fill a node's last room, wrong for the pods
that need a node's room whole: an idle 8-GPU node that a 1-GPU pod breaks into still serves the next
1-GPU pods (three offers: at least one of them is likely small), but the next 8-GPU pod fails. As the
cluster fills, those failures are what FGD avoids and three offers do not. So the classes of several
whole GPUs also count as FGD counts them, over one pod, added to the expectation over three:

    frag(node) += sum over classes k of several whole GPUs of
                  weight(k) / share(k) x (idle GPUs - GPUs k could use)

where share(k) is the share of the cluster's GPUs on nodes that could hold one pod of k (weight(k) is
divided by it already, `scarcity_weighted`): a node is weighed as the share of k's room it is. Where
CPU counts, a node with more CPU is the cheaper place for a smaller pod, yet it may be the only kind of
node a rare large pod fits (8 GPUs and 120 CPUs, on the trace of the FGD paper: 39 of 1,213 nodes); once
small pods have broken all of them, that pod fails where FGD, which sees both nodes alike, would have
left some whole.

A GPU in use is not stranded, yet it may be taken from the wrong pods: where some classes may run only
on some nodes (a GPU model, nodes with enough CPU or GPUs for them), those nodes' GPUs are asked for by
more of the mix than the rest are. So each GPU in use counts too, by how much more its node is asked for
than a node every class may use:

    frag(node) += pressure(node) x (the node's GPUs - idle GPUs)
    pressure(node) = sum over classes k the node could hold when idle of weight(k) x (1 - share(k))

(weight(k) is divided by share(k) already: a class that a tenth of the GPUs can take arrives at them
ten times as often). Classes that every node can take add to no node's pressure more than another's. A
placement then costs, besides what it strands, its GPUs times its node's pressure: the CPU-aware measure
finds the least stranding on nodes with the most CPU per GPU, and where those are the only GPU model some
pods may use, the pods that may run anywhere filled them first (gpuspec10 of the FGD paper's trace: 10%
of the pods bound to a model; its 2-GPU 104-CPU T4 nodes full at 30% of the arrivals, and the T4-bound
pods failed from there).

Placing a pod changes only its own node, so the cost of a placement is that node's change of
fragmentation, `frag(after) - frag(before)`: it is lowest where the pod takes capacity the mix could not
have used anyway, and highest where it breaks up room the mix needs (an idle node a large pod would
take, the last CPUs that let a node's idle GPUs be used). A row of node states is evaluated by a compiled
kernel (`kernels`), the same bits for a state on every machine and in every batch of rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

import numpy as np

from kai_scheduler.model.nodes import BoolArray, FloatArray, IntArray, NodeTable
from kai_scheduler.model.resources import PodRequest, mig_gpu_units
from kai_scheduler.plugins.fragmentation import kernels
from kai_scheduler.plugins.fragmentation.kernels import SLACK as _SLACK
from kai_scheduler.plugins.fragmentation.kernels import MixKernel

# A class's portion on nodes where it cannot share a GPU (unknown GPU memory): larger than a GPU, so
# that it fits nowhere.
_NO_PORTION: Final = 2.0
# The reciprocal of a request of nothing: whatever is idle holds more such pods than anything else allows.
_UNBOUNDED: Final = 1e30


@dataclass(frozen=True, slots=True)
class MixArrays:
    """The mix as arrays over its classes (K), in this order: shared-GPU classes, whole-GPU classes, MIG
    classes; and over nodes and classes (N x K) where a class differs by node (a gpu-memory portion
    depends on the node's GPU memory; the predicates decide where it may run). Requests appear as
    reciprocals (per_*: 1 / what one pod takes), so that counting pods is a multiplication; asking for
    nothing has the reciprocal _UNBOUNDED."""

    weight: FloatArray  # K, adding up to 1
    shared: int  # how many shared-GPU classes come first
    gpu: int  # how many classes ask for shared or whole GPUs (the rest: MIG)
    per_cpu: FloatArray  # K, per millicore
    per_memory: FloatArray  # K, per byte
    # GPUs: a whole-GPU pod of n GPUs counts as portion 1 on n devices.
    per_device: FloatArray  # K: 1 / devices per pod
    per_portion: FloatArray  # N x shared: 1 / portion of one GPU per device, on each node (finite)
    whole_portions: FloatArray  # N x K: pods (devices) one free whole GPU holds, 1 // portion
    per_mig: FloatArray  # K - gpu x S: 1 / instances of each MIG column per pod (0: none asked)
    mig_unasked: FloatArray  # K - gpu x S: _UNBOUNDED where a class asks for none of a column
    demand: FloatArray  # N x K: GPUs one pod of the class takes on the node (0 where it may not run)
    several: BoolArray  # K: the classes of several whole GPUs per pod (see the module)
    several_weight: FloatArray  # K: `weight` where `several`, else 0
    any_several: bool  # whether any class is `several`
    # N: the GPUs the mix asks of each node, and each node's GPUs when idle (see the module; both 0
    # until `scarcity_weighted` weighs the classes)
    pressure: FloatArray
    capacity: FloatArray

    def kernel(self) -> MixKernel:
        """The arrays as `kernels` takes them."""
        return (
            self.weight,
            self.shared,
            self.gpu,
            self.per_cpu,
            self.per_memory,
            self.per_device,
            self.per_portion,
            self.whole_portions,
            self.per_mig,
            self.mig_unasked,
            self.demand,
            self.several_weight,
            self.pressure,
            self.capacity,
        )


@dataclass(slots=True)
class NodeStates:
    """Rows of node states: idle CPU, memory, whole GPUs, the free portion of each shared GPU (at least
    the last column empty, for a GPU a placement would start sharing), and free MIG instances per
    column."""

    nodes: IntArray  # which node each row is (for the per-node columns of the mix)
    cpu: FloatArray
    memory: FloatArray
    whole: FloatArray
    shared: FloatArray  # rows x columns
    mig: FloatArray  # rows x S

    def matrix(self) -> FloatArray:
        """The rows as `kernels` lays a node state out (idle CPU, memory, whole GPUs, shared GPUs)."""
        matrix: FloatArray = np.column_stack([self.cpu, self.memory, self.whole, self.shared])
        return matrix


def mig_columns(table: NodeTable) -> tuple[IntArray, FloatArray]:
    """The node table's MIG scalar columns, and the GPUs one instance of each counts for."""
    columns = [j for j, name in enumerate(table.scalar_names) if name.startswith("nvidia.com/mig-")]
    units = [float(mig_gpu_units(table.scalar_names[j])) for j in columns]
    return np.array(columns, dtype=np.int64), np.array(units, dtype=np.float64)


def node_states(table: NodeTable, rows: IntArray, width: int, mig: IntArray) -> NodeStates:
    """The idle resources of the nodes `rows` now (shared GPUs in the node's own order)."""
    shared = np.zeros((rows.size, width))
    groups = table.groups
    for i, node in enumerate(rows.tolist()):
        for j, group in enumerate(groups.get(node, ())):
            shared[i, j] = group.free_now
    return NodeStates(
        nodes=rows,
        cpu=table.cap_cpu[rows] - table.used_cpu[rows],
        memory=table.cap_memory[rows] - table.used_memory[rows],
        whole=table.free_gpus[rows].astype(np.float64),
        shared=shared,
        mig=table.cap_scalars[rows][:, mig] - table.used_scalars[rows][:, mig],
    )


def node_states_soon(table: NodeTable, rows: IntArray, mig: IntArray) -> NodeStates:
    """`node_states` once the pods being released are gone: what a scenario of the victim actions (its
    victims evicted, its preemptor and moved victims pipelined) leaves on the nodes."""
    groups = table.groups
    width = max((len(groups.get(node, ())) for node in rows.tolist()), default=0) + 1
    shared = np.zeros((rows.size, width))
    for i, node in enumerate(rows.tolist()):
        for j, group in enumerate(groups.get(node, ())):
            shared[i, j] = group.free_soon
    return NodeStates(
        nodes=rows,
        cpu=table.cap_cpu[rows] - table.used_cpu[rows] + table.rel_cpu[rows],
        memory=table.cap_memory[rows] - table.used_memory[rows] + table.rel_memory[rows],
        whole=(table.free_gpus[rows] + table.rel_gpus[rows]).astype(np.float64),
        shared=shared,
        mig=table.cap_scalars[rows][:, mig]
        - table.used_scalars[rows][:, mig]
        + table.rel_scalars[rows][:, mig],
    )


def evaluate(mix: MixArrays, states: NodeStates, mig_units: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Each row's stranded GPUs, the expected least any of `kernels.OFFERS` pods of the mix would strand there
    (see the module's description), and its idle GPUs; each row alone, in a fixed order (`kernels`)."""
    return kernels.evaluate(mix.kernel(), states.nodes, states.matrix(), states.mig, mig_units)


def usable(mix: MixArrays, states: NodeStates) -> FloatArray:
    """Rows x classes: the GPUs of each row that pods of each class could use.

    Pods by GPUs: a free whole GPU holds 1 // portion devices; a shared one, its free portion // portion
    (none of a whole-GPU class's); summed over the GPUs, // devices per pod; a MIG class, the fewest that
    any profile it asks for holds. And by CPU and memory: as many as they hold (a class asking for none
    has a per-pod reciprocal so large that they never bind; negative idle amounts, of pods that fit only
    once others leave, hold none), or all that the GPUs hold if one more fits, weighed
    `kernels.LIGHTER_FILL` to one. Times the GPUs one pod takes on the node (none where the class may
    not run)."""
    return kernels.usable(mix.kernel(), states.nodes, states.matrix(), states.mig)


def idle(states: NodeStates, mig_units: FloatArray) -> FloatArray:
    """Each row's idle GPUs: free whole GPUs, the free portions of its shared GPUs, free MIG instances."""
    return kernels.idle(states.matrix(), states.mig, mig_units)


def mix_arrays(
    requests: list[PodRequest], weights: list[float], access: list[BoolArray], table: NodeTable, mig: IntArray
) -> MixArrays:
    """The classes of the mix (their requests, weights, and the nodes each may run on) as arrays, in
    MixArrays' order of classes."""
    shared = [k for k, r in enumerate(requests) if r.is_shared_gpu and not r.mig_instances]
    whole = [k for k, r in enumerate(requests) if not r.is_shared_gpu and not r.mig_instances]
    migs = [k for k, r in enumerate(requests) if r.mig_instances]
    order = shared + whole + migs
    requests = [requests[k] for k in order]
    portion = np.full((table.size, len(order)), _NO_PORTION)
    devices = np.zeros(len(order))
    demand = np.zeros((table.size, len(order)))
    for i, (k, request) in enumerate(zip(order, requests, strict=True)):
        if request.mig_instances:
            demand[:, i] = sum(mig_gpu_units(name) * amount for name, amount in request.mig_instances)
        elif request.is_shared_gpu:
            share = table.portion_for(request)
            # (above 0: `per_portion` stays finite, which `kernels._usable_row` relies on)
            usable = np.isfinite(share) & (share > 0.0) & (share <= 1.0 + _SLACK)
            portion[usable, i] = share[usable]
            devices[i] = request.gpu_devices
            demand[usable, i] = share[usable] * request.gpu_devices
        else:
            portion[:, i] = 1.0
            devices[i] = request.whole_gpus
            demand[:, i] = request.whole_gpus
        demand[~access[k], i] = 0.0
    position = {int(column): s for s, column in enumerate(mig.tolist())}
    per_mig = np.zeros((len(migs), mig.size))
    unasked = np.full((len(migs), mig.size), _UNBOUNDED)
    for i, request in enumerate(requests[len(shared) + len(whole) :]):
        for name, amount in request.mig_instances:
            s = position.get(table.scalar_index.get(name, -1))
            if s is None:
                unasked[i, :] = 0.0  # a profile no node has: this class fits nowhere
            else:
                per_mig[i, s] = 1.0 / amount
                unasked[i, s] = 0.0
    several = np.array([not r.is_shared_gpu and r.whole_gpus >= 2 for r in requests], dtype=np.bool_)
    weight = np.array([weights[k] for k in order], dtype=np.float64)
    return MixArrays(
        weight=weight,
        shared=len(shared),
        gpu=len(shared) + len(whole),
        per_cpu=_per([r.cpu for r in requests]),
        per_memory=_per([r.memory for r in requests]),
        per_device=_per(devices.tolist()),
        per_portion=1.0 / portion[:, : len(shared)],
        whole_portions=np.floor(1.0 / portion + _SLACK),
        per_mig=per_mig,
        mig_unasked=unasked,
        demand=demand,
        several=several,
        several_weight=np.where(several, weight, 0.0),
        any_several=bool(several.any()),
        pressure=np.zeros(table.size),
        capacity=np.zeros(table.size),
    )


def scarcity_weighted(mix: MixArrays, table: NodeTable, mig: IntArray, mig_units: FloatArray) -> MixArrays:
    """The mix with each class's weight divided by the share of the cluster's GPUs on nodes that could
    hold one of its pods when empty: a class only some nodes can take arrives at those nodes that much
    more often; and counted over one pod (the classes of several GPUs), divided by that share again.
    Also each node's pressure and GPUs (see the module)."""
    everything = np.arange(table.size)
    empty = NodeStates(
        nodes=everything,
        cpu=table.cap_cpu.astype(np.float64),
        memory=table.cap_memory.astype(np.float64),
        whole=table.cap_gpus.astype(np.float64),
        shared=np.zeros((table.size, 1)),
        mig=table.cap_scalars[:, mig].astype(np.float64),
    )
    gpus = idle(empty, mig_units)
    holds = usable(mix, empty) > 0
    share = _in_order_sum(gpus[:, None] * holds, axis=0) / max(float(_in_order_sum(gpus, axis=0)), _SLACK)
    weight = np.where(share > 0, mix.weight / np.maximum(share, _SLACK), 0.0)
    weight /= max(float(_in_order_sum(weight, axis=0)), _SLACK)
    scarcity = np.where(share > 0, 1.0 / np.maximum(share, _SLACK), 0.0)
    # Counted over one pod, a node whole is weighed as the share of its class's room it is: breaking one
    # of the few nodes a class fits costs that class more than breaking one of many. (A share of all
    # the GPUs may come out a rounding above 1.)
    return replace(
        mix,
        weight=weight,
        several_weight=np.where(mix.several, weight * scarcity, 0.0),
        pressure=_in_order_sum(holds * (weight * (1.0 - np.minimum(share, 1.0))), axis=1),
        capacity=gpus,
    )


def _in_order_sum(values: FloatArray, axis: int) -> FloatArray:
    """The sums along `axis`, added first to last: a running sum's order is fixed, so its bits are the same
    on every machine (a BLAS product's and numpy's pairwise sums depend on the machine's vector width and
    threads, and the weights feed every node's score)."""
    if values.shape[axis] == 0:
        return np.zeros(values.shape[:axis] + values.shape[axis + 1 :])
    result: FloatArray = np.add.accumulate(values, axis=axis, dtype=np.float64).take(-1, axis=axis)
    return result


def _per(amounts: list[float]) -> FloatArray:
    values = np.array(amounts, dtype=np.float64)
    return np.where(values > 0, 1.0 / np.maximum(values, _SLACK), _UNBOUNDED)
