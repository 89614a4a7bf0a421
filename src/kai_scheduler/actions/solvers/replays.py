"""What re-placing a victim set did before the preemptor's turn, remembered for the next preemptor.

A scenario's simulation (`victim_scenarios.simulate`) places the preemptor and the victim jobs again in queue
order. Up to the preemptor's turn it is a function of the cluster and the victim set alone: the same
victims, evicted from the same cluster, are handed out in the same order and placed on the same nodes,
whichever preemptor waits behind them. Reclaim tries the same victim sets for one pending job after
another (on a busy cluster nine scenarios in ten were simulated before, for another preemptor), and most
fail at the preemptor's turn, so that prefix is worth keeping:

* `Replays.record` keeps, per victim set, each victim job's placements and the rank its branch of the
  queue tree had when it was handed out, up to the preemptor's turn;
* `last_for` tells whether another preemptor would also come last: its branch (the root child
  holding its queue) holds no victim, so its rank stays the same while the victims are placed, and it ranks
  after every victim branch at the moment that branch was handed out;
* then the victims' placements can be replayed on the statement without searching nodes, and when every
  victim went back where it was the cluster is as before the eviction at the preemptor's turn, so one
  that fits nowhere now cannot fit then either;
* when some victims did not go back, the cluster at the preemptor's turn differs from today's only on the
  nodes they left (more room) and the nodes they moved to (less room). A preemptor that fits nowhere now,
  and whose nodes are chosen by their own resources and labels alone (no inter-pod rules or topology in
  play), can then only fit on a node they left: what each of those had free then is kept (`SoonRoom`),
  and a preemptor that does not fit any of them is known to fail without replaying anything.

What is kept is valid until the cluster changes (a commit, a reservation given up): the owner clears it.
Prefixes whose preemptor shared a branch with a victim are not kept (it could change the victims' order).
New shared-GPU ids in a replayed placement are those a fresh search would hand out: ids are a function
of the cluster as it is (`Session.new_gpu_group_id`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.nodes import SoonRoom
from kai_scheduler.model.resources import PodRequest

# A pod placed again: the pod, its node and its shared GPUs.
Placement = tuple[TaskInfo, int, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Step:
    """One victim job handed out before the preemptor: its branch's rank then, and where its pods went
    (nothing: it could not be placed again, and stays evicted)."""

    job: JobInfo
    rank: tuple[Any, ...]
    placed: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class Prefix:
    """Every victim job of a set, in the order they were handed out before the preemptor's turn."""

    steps: tuple[Step, ...]
    # The victims not placed back on their own node and GPUs (moved, or evicted for good); none: the
    # cluster is as it was before the eviction.
    left: tuple[TaskInfo, ...]
    # What each node they left had free at the preemptor's turn.
    rooms: tuple[SoonRoom, ...] = ()

    @property
    def all_home(self) -> bool:
        return not self.left

    def rules_out(self, request: PodRequest) -> bool:
        """Whether a pod asking for `request` fits none of the nodes the victims left (see the module's
        note for when that means it fits nowhere)."""
        return not any(room.may_hold(request) for room in self.rooms)


class Replays:
    def __init__(self) -> None:
        self._prefixes: dict[tuple[str, ...], Prefix] = {}

    def clear(self) -> None:
        self._prefixes.clear()

    def get(self, victims: tuple[str, ...]) -> Prefix | None:
        return self._prefixes.get(victims)

    def record(self, victims: tuple[str, ...], prefix: Prefix) -> None:
        self._prefixes[victims] = prefix


def branch_of(session: Session, queue: str) -> str:
    """The root queue whose subtree holds `queue` (asked for every scenario: kept per session)."""
    roots: dict[str, str] = session.scratch.setdefault("replays.roots", {})
    root = roots.get(queue)
    if root is None:
        root = roots[queue] = session.snapshot.queues.ancestry(queue)[-1].name
    return root


def alone_in_branch(session: Session, preemptor: JobInfo, victim_jobs: list[JobInfo]) -> bool:
    """Whether no victim job is in the preemptor's branch of the queue tree."""
    branch = branch_of(session, preemptor.queue)
    return all(branch_of(session, job.queue) != branch for job in victim_jobs)


def last_for(session: Session, preemptor: JobInfo, prefix: Prefix) -> bool:
    """Whether `preemptor` would be handed out after every victim of `prefix` (see the module's note)."""
    if not alone_in_branch(session, preemptor, [step.job for step in prefix.steps]):
        return False
    root = session.snapshot.queues[branch_of(session, preemptor.queue)]
    rank = session.queue_order_key(root, preemptor)
    # Ranks of distinct queues never tie (they end with the queue's own rank).
    return all(step.rank < rank for step in prefix.steps)
