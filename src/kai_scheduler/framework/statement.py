"""A Statement records a group of placements and evictions so they can be committed or undone together.

Gangs are all-or-nothing because allocate places a gang's pods on one statement and rolls it back when a
pod does not fit; reclaim tries a scenario the same way. Every operation updates the session's state at
once (so the next pod sees the node as it would be) and is undone in reverse order on rollback.

A pod evicted on a statement that is not committed yet is evicted only virtually (KAI's "virtual
status"): the victim solver places it again with the allocation routine, and `pipeline` then decides, as
KAI's statement does, whether it stays (back onto its own node and GPUs: the eviction is taken back) or
moves (an eviction and a pipeline elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from kai_scheduler.framework.decisions import Decision
from kai_scheduler.model.disruption import beyond_note
from kai_scheduler.model.jobs import TaskInfo, TaskStatus

# Looked up once: Python 3.11 finds an enum's member through the hook `EnumType.__getattr__` puts on every
# lookup of the class's attributes (~10x a global's cost), and these are asked of every pod placed.
_ALLOCATED: Final = TaskStatus.ALLOCATED
_PIPELINED: Final = TaskStatus.PIPELINED
_RELEASING: Final = TaskStatus.RELEASING

if TYPE_CHECKING:
    from kai_scheduler.framework.session import Session


# "keep" takes back an eviction made earlier on the same statement: the victim keeps running.
_OperationType = Literal["bind", "pipeline", "evict", "keep"]
# What a placement becomes once committed.
PlacementType = Literal["bind", "pipeline"]


@dataclass(slots=True)
class _Operation:
    type: _OperationType
    task: TaskInfo
    node: int
    gpu_groups: tuple[str, ...]
    previous_status: TaskStatus
    previous_node: int
    previous_groups: tuple[str, ...]
    reason: str


class Statement:
    def __init__(self, session: Session, action: str, for_job: str = "") -> None:
        self._session = session
        self._action = action
        self._for_job = for_job  # the pod group its decisions are taken for (see Decision.for_job)
        self._operations: list[_Operation] = []
        # Pods evicted on this statement: virtually, until it commits (their status before is in the
        # session state's `virtually_evicted`).
        self._evicted: dict[str, TaskInfo] = {}

    @property
    def operations(self) -> int:
        return len(self._operations)

    def allocate(self, task: TaskInfo, node: int, gpu_groups: tuple[str, ...], reason: str) -> None:
        self._place(task, node, gpu_groups, _ALLOCATED, reason)

    def pipeline(self, task: TaskInfo, node: int, gpu_groups: tuple[str, ...], reason: str) -> None:
        """Place a pod on resources that may still be releasing. A pod this statement evicted that is
        placed back where it was (its node, its GPUs if it shares some, and what a plugin places within
        the node: `ExtensionPoints.stays_put`) simply keeps running; placed anywhere else it moves there
        (a fractional pod onto another GPU of its own node moves too, and so does a pod whose NUMA zones
        went to another pod meanwhile)."""
        if self.evicted_virtually(task):
            stays = (
                node == task.node
                and (not task.request.is_shared_gpu or set(gpu_groups) == set(task.gpu_groups))
                and all(check(task, node) for check in self._session.points.stays_put)
            )
            if stays:
                self.keep(task)
                return
        self._place(task, node, gpu_groups, _PIPELINED, reason)

    def evict(self, task: TaskInfo, reason: str) -> None:
        """Mark a running (or just placed) pod as releasing: its resources stay held until it is gone,
        but others may be pipelined onto them. Until the statement commits, the eviction is virtual."""
        op = _Operation(
            "evict", task, task.node, task.gpu_groups, task.status, task.node, task.gpu_groups, reason
        )
        self._session.state.release(task)
        self._evicted[task.key] = task
        self._session.state.virtually_evicted[task.key] = op.previous_status
        self._operations.append(op)

    def keep(self, task: TaskInfo) -> None:
        """Take back this statement's eviction of `task` (it turned out not to be needed): it keeps
        running (or stays placed as it was), and neither the eviction nor the keep becomes a decision."""
        op = _Operation("keep", task, task.node, task.gpu_groups, task.status, task.node, task.gpu_groups, "")
        self._session.state.unrelease(task, self._session.state.virtually_evicted[task.key])
        self._operations.append(op)

    def _place(
        self, task: TaskInfo, node: int, gpu_groups: tuple[str, ...], status: TaskStatus, reason: str
    ) -> None:
        op_type: _OperationType = "bind" if status is _ALLOCATED else "pipeline"
        op = _Operation(op_type, task, node, gpu_groups, task.status, task.node, task.gpu_groups, reason)
        self._session.state.place(task, node, gpu_groups, status)
        self._operations.append(op)

    def convert_to_pipeline(self, since: int) -> None:
        """Pipeline every bind made since a checkpoint: a gang binds together or not at all."""
        for op in self._operations[since:]:
            if op.type == "bind":
                op.type = "pipeline"
                op.task.status = _PIPELINED
                op.task.job.version += 1
                op.reason += "; pipelined with the rest of its gang"

    def checkpoint(self) -> int:
        return len(self._operations)

    def placements_since(self, checkpoint: int) -> list[tuple[TaskInfo, int, tuple[str, ...]]]:
        """The pods placed since a checkpoint (a pod kept where it was counts: its own node and GPUs), with
        their nodes and shared GPUs, in the order they were placed."""
        return [
            (op.task, op.node, op.gpu_groups)
            for op in self._operations[checkpoint:]
            if op.type in ("bind", "pipeline", "keep")
        ]

    def rollback(self, checkpoint: int = 0) -> None:
        while len(self._operations) > checkpoint:
            op = self._operations.pop()
            if op.type == "evict":
                self._session.state.unrelease(op.task, op.previous_status)
                del self._evicted[op.task.key]
                del self._session.state.virtually_evicted[op.task.key]
            elif op.type == "keep":
                self._session.state.release(op.task)
            else:
                self._session.state.unplace(op.task, op.previous_status, op.previous_node, op.previous_groups)

    def discard(self) -> None:
        self.rollback(0)

    def commit(self) -> list[Decision]:
        """Hand the operations to the session as decisions; the state changes are already in place. An
        eviction that was taken back (kept) leaves no trace."""
        nodes = self._session.snapshot.nodes
        # (A pod is kept only while this statement's eviction of it stands: none without an eviction.)
        kept = {id(op.task) for op in self._operations if op.type == "keep"} if self._evicted else set()
        budgets = self._session.snapshot.disruption_budgets
        decisions = []
        for op in self._operations:
            if op.type == "keep" or (op.type == "evict" and id(op.task) in kept):
                continue
            if op.type != "evict":
                kind: PlacementType = "bind" if op.type == "bind" else "pipeline"
                decisions.append(
                    committed_placement(
                        self._session,
                        self._action,
                        kind,
                        op.task,
                        op.node,
                        op.gpu_groups,
                        op.reason,
                        self._for_job,
                    )
                )
                continue
            reason = op.reason
            if budgets is not None:
                reason += beyond_note(budgets.disrupt(op.task.key))
            decisions.append(
                Decision(
                    self._action,
                    "evict",
                    op.task.key,
                    nodes.names[op.node],
                    op.gpu_groups,
                    reason,
                    for_job=self._for_job,
                )
            )
        self._session.record(decisions)
        self._operations = []
        virtual = self._session.state.virtually_evicted
        for key, task in self._evicted.items():
            # Evicted for real now: no longer a pod the session may place again.
            del virtual[key]
            task.job.version += 1
        self._evicted = {}
        return decisions

    def evicted_virtually(self, task: TaskInfo) -> bool:
        """Whether `task` was evicted on this statement and has not been placed anywhere since."""
        return task.status is _RELEASING and task.key in self._evicted


def committed_placement(
    session: Session,
    action: str,
    kind: PlacementType,
    task: TaskInfo,
    node: int,
    gpu_groups: tuple[str, ...],
    reason: str,
    for_job: str = "",
) -> Decision:
    """The decision of a placement (`kind`) made for good (a statement's commit, or a lone pod's placement
    that needs none: allocate's `_place_lone_pod`), its shared GPUs handed out: not to another pod this
    cycle, even once this one leaves them (`Session.new_gpu_group_id`)."""
    snapshot = session.snapshot
    snapshot.existing_gpu_groups.update(gpu_groups)
    return Decision(action, kind, task.key, snapshot.nodes.names[node], gpu_groups, reason, for_job=for_job)
