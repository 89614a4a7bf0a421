"""The Session: one scheduling cycle's state, and the extension points plugins register on.

Plugins never call each other; they register callbacks here when the session opens (orders, predicates,
node scores, capacity checks, event handlers), and actions drive the session through those callbacks. A
session is pure: it reads a snapshot and produces decisions, with no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import numpy as np

from kai_scheduler.api.reasons import WaitReason
from kai_scheduler.framework import alike_nodes, ranked_nodes
from kai_scheduler.framework.admission_checks import AdmissionCheck
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.decisions import ActionCounts, Decision, SessionResult, Ungating
from kai_scheduler.framework.holds import CapacityHolds
from kai_scheduler.framework.no_fit_counts import (
    Filter,
    LeadingFlags,
    NoFitCounts,
    NoFitWords,
    Refusals,
    RequestRefusals,
    StaticRefusals,
    first_refusals,
)
from kai_scheduler.framework.placement_failures import PlacementFailures, SessionFailures
from kai_scheduler.framework.queue_order_memo import CarriedQueueOrder
from kai_scheduler.framework.queue_sums import CarriedQueueSums
from kai_scheduler.framework.quiet_walk import QuietLeaves
from kai_scheduler.framework.ranked_nodes import RanksBy, SparseOn, add_score
from kai_scheduler.framework.statement import Statement
from kai_scheduler.framework.static_masks import Masks, NodeFlags, OlderMasks, passing_rows
from kai_scheduler.framework.walk_facts import WalkFacts
from kai_scheduler.model.admission import PodAsk
from kai_scheduler.model.fair_share_record import FairShareRecord
from kai_scheduler.model.jobs import JobInfo, Placement, PodSet, SubGroupSet, TaskInfo, TaskStatus
from kai_scheduler.model.nodes import (
    ALL_ROWS,
    BoolArray,
    FloatArray,
    GpuGroup,
    IntArray,
    NodeTable,
    PipelineTake,
    Rows,
)
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.reservations import Reservation
from kai_scheduler.model.resources import EPSILON, PodRequest, Resources
from kai_scheduler.model.snapshot import ClusterSnapshot

# Looked up once: Python 3.11 finds an enum's member through the hook `EnumType.__getattr__` puts on every
# lookup of the class's attributes (~10x a global's cost), and these are asked of every pod placed.
_PENDING: Final = TaskStatus.PENDING
_PIPELINED: Final = TaskStatus.PIPELINED
_RELEASING: Final = TaskStatus.RELEASING


class Plugin(Protocol):
    name: str

    def on_session_open(self, session: Session) -> None: ...

    def on_session_close(self, session: Session) -> None: ...


class Action(Protocol):
    name: str

    def execute(self, session: Session) -> None: ...


@dataclass(frozen=True, slots=True)
class NamedPredicate:
    """A node filter with the words a person reads when it rejects nodes ("had untolerated taint").

    `depends_on` names what of the pod, beyond its request and placement constraints (host ports and
    the pod's own inter-pod rules are part of those), the answer reads at the moment (its labels while
    other pods' inter-pod rules are in play), so that pods alike in all of it are explained once; None:
    nothing."""

    name: str
    rejection: str
    nodes_passing: Callable[[TaskInfo], BoolArray]
    depends_on: Callable[[TaskInfo], Hashable] | None = None
    # What `depends_on` reads of the session besides the pod, as a value (None: not said): its answer for
    # one pod is the same while the value is (`Session.pod_answers_key`).
    depends_on_reads: Callable[[], Hashable] | None = None
    # Whether the answer reads of the pod only its request and placement constraints, and of the session
    # only what stays while it is open (no placement changes it): then it is the same for every pod of one
    # request and placement in a session (`Session.shape_rest_masks`).
    reads_shape_alone: bool = False


StaticPredicate = Callable[[Placement, NodeTable], BoolArray]
# (a name for what is read, the reader): see `ExtensionPoints.signature_reads`.
SignatureRead = tuple[Hashable, Callable[[TaskInfo], Hashable]]
# Scores for the candidate nodes only (their indices, in index order; each passes the predicates and fits
# the pod now or soon): one per candidate, or one number for all of them.
NodeScorer = Callable[[TaskInfo, IntArray], FloatArray | float]
JobCapacityCheck = Callable[[JobInfo, Resources], str | None]
QueueOrderKey = Callable[[QueueInfo, JobInfo | None], tuple[Any, ...]]
MovedQueueOrderKey = Callable[[QueueInfo, JobInfo | None, tuple[float, float, float]], tuple[Any, ...]]
# Chooses the shared GPUs for a pod on a node: existing groups, or None for "open a new one".
GpuChooser = Callable[[NodeTable, int, float, int, bool], list[GpuGroup | None]]
TaskHandler = Callable[[TaskInfo], None]
# Why a pod cannot be scheduled at all, whatever the node (None: it may be): KAI's PrePredicate.
PrePredicate = Callable[[TaskInfo], str | None]


@dataclass(frozen=True, slots=True)
class NodeSubsets:
    """Where the pods of a job (or of one of its sub-groups) may go together: node masks, in the order
    to try them; `failure` says why when none of them holds the pods."""

    masks: list[BoolArray]
    failure: str


# The node subsets for the pods of a job (group None) or of one of its sub-groups (a leaf's pod set or a
# non-leaf sub-group, whose pods are its descendants'); None when unconstrained.
SubsetProvider = Callable[[JobInfo, PodSet | SubGroupSet | None, Sequence[TaskInfo]], NodeSubsets | None]


@dataclass(slots=True)
class ExtensionPoints:
    job_order: list[Callable[[JobInfo], Any]] = field(default_factory=list)
    # The same order for a victim job with only some of its active pods left (the int): KAI ranks what a
    # job has left after some of its pods were taken, so whoever registers a job order that depends on
    # the job's pods registers this too.
    victim_job_order: list[Callable[[JobInfo, int], Any]] = field(default_factory=list)
    task_order: list[Callable[[TaskInfo], Any]] = field(default_factory=list)
    # Orders the members of a sub-group (pod sets and non-leaf sub-groups); ties keep their order.
    podset_order: list[Callable[[PodSet | SubGroupSet], Any]] = field(default_factory=list)
    queue_order: QueueOrderKey | None = None
    # What `queue_order` reads of a job, as a value (None: not said). Said, a queue's order key depends
    # only on it, the queue's allocation (`QueueInfo.allocated`) and what is fixed for the session: the job
    # queue keeps each queue's ranks by it while the allocation stays (`actions.job_queue`).
    queue_order_reads: Callable[[JobInfo], Hashable] | None = None
    # Whether `queue_order` ranks these sibling queues by a strict weak ordering whatever jobs they hand out
    # (None: not said). The job queue picks the first child with the smallest key by a scan with `<`; a
    # merge by heap (`actions.quiet_order`) picks the same child only under such an ordering.
    queue_order_weak: Callable[[Sequence[QueueInfo]], bool] | None = None
    # `queue_order` of a queue whose allocation, given as (GPU, CPU, memory), moved since the caller last
    # ranked it (None: not said): the job queue, which keeps the allocation it ranked each queue at, asks it
    # so that the order need not check the allocation again.
    queue_order_moved: MovedQueueOrderKey | None = None
    # (name, the words of a refusal, the predicate): each reads of a pod only its placement constraints,
    # and of the cluster only the nodes' specs and the storage objects (`static_masks` keeps their answers
    # from one session to the next while those stay).
    static_predicates: list[tuple[str, str, StaticPredicate]] = field(default_factory=list)
    pre_predicates: list[PrePredicate] = field(default_factory=list)
    # What a pre-predicate reads of the session besides the pod, as a value, by pre-predicate: its answer
    # for one pod is the same while the value is (`Session.pod_answers_key`).
    pre_predicate_reads: dict[PrePredicate, Callable[[], Hashable]] = field(default_factory=dict)
    # The pre-predicates whose answer, whether they refuse a pod (not the words why), reads of the pod only
    # its request and placement constraints, and of the session only what stays while it is open: while
    # every pre-predicate is one, `Session.refused_everywhere` answers alike for the pods of one request
    # and placement (`Session.refusal_reads_shape`).
    shape_pre_predicates: set[PrePredicate] = field(default_factory=set)
    # The pre-predicates no eviction can change the answer of (KAI v0.17's victim-invariant ones: volume
    # binding, ConfigMaps, the largest node of the pool): reclaim, preempt and consolidation pass over a
    # job one of its pods fails, without searching victims.
    victim_invariant_pre_predicates: list[PrePredicate] = field(default_factory=list)
    task_predicates: list[NamedPredicate] = field(default_factory=list)
    node_scorers: list[NodeScorer] = field(default_factory=list)
    # The scorers of `node_scorers` (by position) that score empty nodes of one capacity alike, with the
    # pods they do it for (`alike_nodes.add_scorer`); one not listed may tell any nodes apart.
    scorers_alike: dict[int, Callable[[TaskInfo], bool]] = field(default_factory=dict)
    # The scorers (by position) that give every candidate one score for the pods they say yes to, those
    # that rank the candidates by a value for some pods, and those that score only a few nodes for some
    # pods (`ranked_nodes`). What they say reads of a pod only its request, placement constraints and
    # nominated node, and of the session only whether anything is being released (kept per pod shape).
    scorers_constant: dict[int, Callable[[TaskInfo], bool]] = field(default_factory=dict)
    scorers_ranking: dict[int, RanksBy] = field(default_factory=dict)
    scorers_sparse: dict[int, SparseOn] = field(default_factory=dict)
    # Whether a queue can take a job's request: limits and the non-preemptible quota (every placement),
    # and the non-preemptible quota alone (what preempt checks before it looks for victims).
    job_capacity_checks: list[JobCapacityCheck] = field(default_factory=list)
    # What a job capacity check reads of the session besides the job and the request, as a value, by
    # check, given the job's queue (one value for every job of a queue): a check listed answers alike for
    # one job version, request and value, so allocate may give its answer again in a later cycle
    # (`actions.queue_admission.admissible`), and knows it for a whole queue at once (`actions.walk_replay`);
    # while any check is not listed, none is.
    job_capacity_inputs: dict[JobCapacityCheck, Callable[[str], Hashable]] = field(default_factory=dict)
    # The GPUs stranded on these nodes as the session's state leaves them once their releases end (lower
    # is better): lets the victim solver prefer, among victims of one rank, the outcome that strands the
    # fewest (not KAI's: gpufragmentation registers it).
    outcome_stranded: Callable[[list[int]], float] | None = None
    quota_checks: list[JobCapacityCheck] = field(default_factory=list)
    gpu_chooser: GpuChooser | None = None
    # Reclaim: may the job take resources from other queues, and is a scenario (victims evicted,
    # preemptor placed) fair? Both see the session state with the scenario applied.
    reclaim_eligibility: list[JobCapacityCheck] = field(default_factory=list)
    reclaim_validators: list[Callable[[JobInfo, Resources, Sequence[TaskInfo]], bool]] = field(
        default_factory=list
    )
    # Reclaim: called before the victims for one reclaimer are searched (KAI's OnJobSolutionStart), so
    # that the validators can judge every scenario against the allocations from before it.
    on_solution_start: list[Callable[[], None]] = field(default_factory=list)
    # Victim order: a queue's queue-order key as KAI ranks it in a victim queue, given its allocation
    # before any victim was taken and what remains once its victims so far and its next one are gone
    # (no job asks for anything). The victim queue hands out the queue that ranks last.
    victim_queue_order: Callable[[QueueInfo, Resources, Resources], tuple[Any, ...]] | None = None
    # The victim search's scenario generators (named as in `framework.search_budgets`), in plugin order,
    # added by sg-nodelocalgreedy and sg-multinodegang; none: reclaim, preempt and consolidation find
    # nothing.
    scenario_generators: list[str] = field(default_factory=list)
    # Reclaim: may jobs of this queue be victims of that reclaimer at all (before any scenario is run)?
    reclaim_victim_filters: list[Callable[[JobInfo, Resources, str], bool]] = field(default_factory=list)
    # Per action ("reclaim", "preempt"): is a victim job protected for now (minimum runtime)? A
    # protected job may only lose the pods it runs above its minMember.
    victim_protection: dict[str, list[Callable[[JobInfo, JobInfo], bool]]] = field(default_factory=dict)
    # Job key -> new stale-since time (None clears it), for the edge to remember across cycles.
    stale_updates: dict[str, float | None] = field(default_factory=dict)
    on_allocate: list[TaskHandler] = field(default_factory=list)
    # Capacity checks that judge gated pods themselves at queue admission (the ungate action), beyond what
    # `job_capacity_checks` judge of a request: the accounted-resource limits.
    admission_checks: list[AdmissionCheck] = field(default_factory=list)
    # Whether a pod evicted on a statement and placed back on its own node (the int) would hold there what
    # it holds now (the numa plugin: the same NUMA zones); any False, and it moves instead of staying.
    stays_put: list[Callable[[TaskInfo, int], bool]] = field(default_factory=list)
    on_deallocate: list[TaskHandler] = field(default_factory=list)
    # Topology: the node subsets an allocation attempt must keep within (the first provider that
    # constrains the pods decides).
    node_subsets: list[SubsetProvider] = field(default_factory=list)
    # Whether the nodes a pod may use depend on its job's queue (a task predicate reads the queue's
    # usage: the accounted-resource limits), so that pods alike of different queues may fare differently.
    queue_bound_placement: bool = False
    # What node filters read of a pod beyond its request and placement (a counted annotation, the queue of
    # a gpu-memory pod), each with a name for what it reads: part of each scheduling signature, so that
    # attempts alike in all but these are not taken for one another (`gang.scheduling_signature`).
    signature_reads: list[SignatureRead] = field(default_factory=list)
    # Reservation and backfill: told what allocate places and fails to place, may hold capacity for jobs
    # that cannot start now (`framework.holds`); None: nothing is held (KAI's allocate).
    holds: CapacityHolds | None = None


class SessionState:
    """Applies placements and evictions to the snapshot and tells the event handlers, so that every
    plugin's view (queue allocations, node usage) moves in step."""

    def __init__(self, snapshot: ClusterSnapshot, points: ExtensionPoints) -> None:
        self._snapshot = snapshot
        self._points = points
        # What each pipelined pod took from releasing resources, newest last (a pod pipelined earlier in
        # the cycle may be evicted and pipelined again).
        self._pipelined: dict[str, list[PipelineTake]] = {}
        self._reserved: set[str] = set()
        # Pods evicted on a statement not committed yet (see `Statement`), with their status before.
        self.virtually_evicted: dict[str, TaskStatus] = {}
        # How many times a pod was placed, evicted or put back so far (0: every pod's status is the
        # snapshot's, so a job waits as it did when the session opened).
        self.moves = 0

    def detach(self) -> None:
        """Tell no handler any more (the session is closing)."""
        self._points = ExtensionPoints()

    # --- reservations: pods pipelined in an earlier cycle hold their nominated node's resources ----

    def reserve_nominated(self) -> None:
        """A pod pipelined in an earlier cycle was promised the resources it waited for; until it is
        placed again, nobody else may take them (as kube-scheduler honours nominated pods)."""
        snapshot = self._snapshot
        nodes, nominated = snapshot.nodes, snapshot.nominated_tasks
        for task in snapshot.tasks.values() if nominated is None else nominated:
            if task.status is not _PENDING or task.nominated_node < 0:
                continue
            if task.request.is_shared_gpu and len(task.nominated_groups) != task.request.gpu_devices:
                continue
            if nodes.fit(task.request, soon=True)[task.nominated_node]:
                self._hold(task, task.nominated_node, task.nominated_groups)
                self._reserved.add(task.key)

    def release_reservation(self, task: TaskInfo) -> bool:
        """Give a nominated pod's reserved resources back, just before it is placed; True if it had some."""
        if task.key not in self._reserved:
            return False
        self._reserved.discard(task.key)
        self._unhold(task, task.nominated_node, task.nominated_groups)
        return True

    def holds_reservation(self, task: TaskInfo) -> bool:
        """Whether a nominated pod holds reserved resources (`release_reservation` would give them back)."""
        return task.key in self._reserved

    def restore_reservation(self, task: TaskInfo) -> None:
        """Reserve again for a nominated pod whose placement attempt failed."""
        if task.status is _PENDING and task.key not in self._reserved:
            self._hold(task, task.nominated_node, task.nominated_groups)
            self._reserved.add(task.key)

    def _hold(self, task: TaskInfo, node: int, gpu_groups: tuple[str, ...]) -> None:
        nodes = self._snapshot.nodes
        nodes.hold(node, task.request, releasing=False)
        nodes.share_gpus(node, task.request, task.key, gpu_groups, releasing=False)

    def _unhold(self, task: TaskInfo, node: int, gpu_groups: tuple[str, ...]) -> None:
        nodes = self._snapshot.nodes
        nodes.unhold(node, task.request, releasing=False)
        nodes.unshare_gpus(task.key, gpu_groups, releasing=False)

    def place(self, task: TaskInfo, node: int, gpu_groups: tuple[str, ...], status: TaskStatus) -> None:
        nodes = self._snapshot.nodes
        if status is _PIPELINED:
            self._pipelined.setdefault(task.key, []).append(nodes.hold_pipelined(node, task.request))
        else:
            nodes.hold(node, task.request, releasing=False)
        if gpu_groups:  # (none: nothing to share)
            nodes.share_gpus(node, task.request, task.key, gpu_groups, releasing=False)
        task.status, task.node, task.gpu_groups = status, node, gpu_groups
        task.job.version += 1
        self.moves += 1
        for handler in self._points.on_allocate:
            handler(task)

    def unplace(self, task: TaskInfo, status: TaskStatus, node: int, gpu_groups: tuple[str, ...]) -> None:
        for handler in self._points.on_deallocate:
            handler(task)
        nodes = self._snapshot.nodes
        takes = self._pipelined.get(task.key)
        take = takes.pop() if takes and task.status is _PIPELINED else None
        if takes is not None and not takes:
            del self._pipelined[task.key]
        if take is not None:
            nodes.unhold_pipelined(task.node, task.request, take)
        else:
            nodes.unhold(task.node, task.request, releasing=False)
        nodes.unshare_gpus(task.key, task.gpu_groups, releasing=False)
        task.status, task.node, task.gpu_groups = status, node, gpu_groups
        task.job.version += 1
        self.moves += 1

    def release(self, task: TaskInfo) -> None:
        for handler in self._points.on_deallocate:
            handler(task)
        self._snapshot.nodes.mark_releasing(task.node, task.request, task.key, task.gpu_groups)
        task.status = _RELEASING
        task.job.version += 1
        self.moves += 1

    def unrelease(self, task: TaskInfo, status: TaskStatus) -> None:
        self._snapshot.nodes.unmark_releasing(task.node, task.request, task.key, task.gpu_groups)
        task.status = status
        task.job.version += 1
        self.moves += 1
        for handler in self._points.on_allocate:
            handler(task)


@dataclass(slots=True)
class Placed:
    """Where `choose_node` puts a pod. (Not frozen: a frozen dataclass's making sets each field through
    `object.__setattr__`, and one is made for every pod placed.)"""

    node: int
    gpu_groups: tuple[str, ...]
    now: bool  # fits the idle resources (bind) rather than only idle + releasing (pipeline)


class Session:
    def __init__(
        self,
        snapshot: ClusterSnapshot,
        config: SchedulerConfig,
        *,
        cycle: int,
        now: float,
        record_fair_share: bool = False,
    ) -> None:
        if not config.full_hierarchy_fairness:
            # KAI re-parents every leaf queue to one synthetic root: fairness is decided among leaves.
            snapshot.queues = snapshot.queues.flattened()
        self.snapshot = snapshot
        self.config = config
        self.cycle = cycle
        self.now = now
        self.points = ExtensionPoints()
        self.state = SessionState(snapshot, self.points)
        self.state.reserve_nominated()
        self.decisions: list[Decision] = []
        self.ungates: list[Ungating] = []  # the `ungate` action's decisions
        self.unschedulable: dict[str, str] = {}
        # Per-cycle state that several plugins share (e.g. the inter-pod affinity index), by name.
        self.scratch: dict[str, Any] = {}
        self._static_masks: dict[str, Masks] = {}
        # Masks kept from an earlier node table for placements not yet asked in this session, and each
        # row's first refusal among the node flags that come first, by row (`static_refusal_at`).
        self._older_static: dict[str, OlderMasks] = {}
        self._flag_refusals: dict[int, int | None] = {}
        # `static_refusal_at` by placement and row: a cycle's pod shapes that found no node ask it of the
        # same few changed rows, in their explanations and whether a row is a candidate, many of one
        # placement (the static facts stay the session's).
        self._static_refusal_rows: dict[tuple[str, int], int] = {}
        # The names of the filters explained one row at a time, by whether the request asks for GPUs
        # (`_first_refusals_at`: the session's filters are fixed once its plugins open).
        self._refusal_names: dict[bool, tuple[str, ...]] = {}
        # The nodes passing a placement's static predicates, by placement, when they are few
        # (`_few_candidates`; None: too many).
        self._static_rows: dict[str, IntArray | None] = {}
        # The nodes passing a placement's static predicates found without its masks over every node (a
        # node selector's few rows, `static_masks.passing_rows`), by placement; None: not so found.
        self._passing_rows: dict[str, IntArray | None] = {}
        # `usable_nodes` by the placements asked about, in the order first asked: the static masks stay
        # the session's, and the victim actions ask again for every search (read-only, being shared).
        self._usable: dict[tuple[str, ...], BoolArray] = {}
        self._wake_at: float | None = None
        # What each action tried (pod groups taken up, eviction scenarios), for metrics.
        self.counts: defaultdict[str, ActionCounts] = defaultdict(ActionCounts)
        # Why pods did not fit, by what the answer depends on (`explain_no_fit`).
        self._explanations: dict[tuple[object, ...], str] = {}
        # The first refusals among a placement's static filters, by placement (`_count_no_fit`), and the
        # node flags the static predicates start with, counted once (`StaticRefusals.of_selected_rows`).
        self._static_refusals: dict[str, StaticRefusals] = {}
        self._leading_flags: LeadingFlags | None = None
        # Past the static filters, the first refusal of every node by request (`_refusals_by_request`),
        # and where the node table's log stood when each request was last explained.
        self._request_refusals: dict[PodRequest, RequestRefusals] = {}
        self._request_explained_at: dict[PodRequest, int] = {}
        # `_no_fit_text`'s words before the counts, by request: a cordon words anew most shapes' counts.
        self._no_fit_heads: dict[PodRequest, str] = {}
        self._readers: list[Callable[[TaskInfo], Hashable]] | None = None
        self._per_pod_predicates: list[NamedPredicate] | None = None
        # While an attempt is confined to a node subset (`confined_to`), the nodes it may use.
        self.allowed: BoolArray | None = None
        # `gang.tasks_to_allocate` per job, with the job's version it was chosen at.
        self.next_tasks: dict[JobInfo, tuple[int, list[TaskInfo]]] = {}
        # `gang.next_request` per job, with the job's version and the smallest GPU memory it was worked
        # out at.
        self.next_requests: dict[JobInfo, tuple[int, float, Resources]] = {}
        # What one pod's request takes of its queue, by the request and the GPU memory it is converted
        # with (`gang.shared_request`: most attempts are one pod, of a few shapes); one object for the
        # pods alike, read only.
        self.pod_requests: dict[tuple[PodRequest, float], Resources] = {}
        # `gang.next_signature` per job, with its queue and without, with the job's version.
        self.signatures: dict[JobInfo, tuple[int, tuple[Any, ...]]] = {}
        self.shapes: dict[JobInfo, tuple[int, tuple[Any, ...]]] = {}
        # `job_order_key` per job, with the job's version it was worked out at. All of these are carried
        # from one cycle's session to the next (`job_memos`).
        self.job_keys: dict[JobInfo, tuple[int, tuple[Any, ...]]] = {}
        # `actions.queue_admission.admissible`'s answer per job (None: admissible, else why not), with the
        # job's version, the cluster's largest GPU memory and the job's capacity inputs it was worked out at;
        # carried from one cycle to the next too, and with `verify_carried` worked out again when given.
        self.admissions: dict[JobInfo, tuple[tuple[Hashable, ...], str | None]] = {}
        # The part of that answer the job alone decides (whether its gang may be tried: `allocate`'s
        # `_gang_refusal`), with the job's version: asked again whenever the queues' allocations move,
        # and carried too.
        self.gang_refusals: dict[JobInfo, tuple[int, str | None]] = {}
        # What the capacity checks read, by value, each value one object from one session to the next
        # (`job_capacity_inputs`): carried too, so that a kept answer's inputs compare at a glance.
        self.capacity_inputs: dict[Hashable, Hashable] = {}
        self._inputs_seen: dict[int, tuple[Hashable, Hashable]] = {}  # id(value) -> (value, its object)
        # Per-pod predicates' read-only masks found to pass every node, by id (`_narrowing`).
        self._everywhere_masks: dict[int, BoolArray] = {}
        self._capacity_readers: list[Callable[[str], Hashable]] | None = None
        self._capacity_readers_known = False
        # Allocate's attempts whose first pod found no node in the last cycle (`placement_failures`;
        # None: every attempt is made).
        self.placement_failures: PlacementFailures | None = None
        # What allocate's walk reads of each job that the job alone decides (`walk_facts`; None: the walk
        # keeps its own); carried from one cycle to the next too.
        self.walk_facts: WalkFacts | None = None
        # What allocate's walk found of each leaf queue's jobs, for a walk written without walking
        # (`quiet_walk`; None: every walk is made); carried too.
        self.quiet_leaves: QuietLeaves | None = None
        self.verify_carried = False
        # The queue sums of the last cycle, for the proportion plugin to bring up to date as it opens (None:
        # it sums every job); carried from one cycle to the next too.
        self.queue_sums: CarriedQueueSums | None = None
        # The queue order keys of the last cycle that this one may give again (`queue_order_memo`; None:
        # every key is worked out); carried from one cycle to the next too.
        self.queue_orders: CarriedQueueOrder | None = None
        # Per resource, per parent queue, the inputs and shares of the last cycle's fair-share division of
        # that level (`proportion.division.LevelShares`), and the whole division's under "<resource> tree"
        # (None: every level is divided); carried too.
        self.fair_share_levels: dict[str, dict[str | None, tuple[Hashable, dict[str, float]]]] | None = None
        # With `record_fair_share`, the proportion plugin leaves the division's steps here (for `kubectl kai
        # fairshare` and `simulate --explain-fairshare`); without, it records nothing.
        self.record_fair_share = record_fair_share
        self.fair_share_record: FairShareRecord | None = None
        # Reservation and backfill's results (`SessionResult.reservations`, `.backfilled`), left by the
        # reservation plugin when it closes.
        self.reservation_updates: dict[str, Reservation | None] = {}
        self.backfilled: list[str] = []

    # --- orders ----------------------------------------------------------------------------------

    def job_order_key(self, job: JobInfo) -> tuple[Any, ...]:
        """The job's place in job order; kept per job until one of its pods changes status (`version`):
        every action orders the pending jobs, and the victim actions the running ones for each attempt."""
        cached = self.job_keys.get(job)
        if cached is None or cached[0] != job.version:
            cached = (job.version, self.fresh_job_order_key(job))
            self.job_keys[job] = cached
        return cached[1]

    def fresh_job_order_key(self, job: JobInfo) -> tuple[Any, ...]:
        """`job_order_key` worked out now, whatever is kept."""
        keys = self.points.job_order
        if len(keys) == 2:
            # The default plugins' two (priority, then elastic rank), called one after the other: a
            # generator's frame a key cost more than the keys (a first cycle keys every job it hands out).
            first, second = keys
            return (first(job), second(job), job.rank, job.key)
        return (*[key(job) for key in keys], job.rank, job.key)

    def victim_order_key(self, job: JobInfo, left: int) -> tuple[Any, ...]:
        """The job order key of a victim job with `left` of its active pods left."""
        return (*(key(job, left) for key in self.points.victim_job_order), job.rank, job.key)

    def task_order_key(self, task: TaskInfo) -> tuple[Any, ...]:
        return (*(key(task) for key in self.points.task_order), task.rank, task.key)

    def podset_order_key(self, member: PodSet | SubGroupSet) -> tuple[Any, ...]:
        return tuple(key(member) for key in self.points.podset_order)

    def queue_order_key(self, queue: QueueInfo, job: JobInfo | None) -> tuple[Any, ...]:
        if self.points.queue_order is None:
            return (queue.rank,)
        return self.points.queue_order(queue, job)

    # --- capacity --------------------------------------------------------------------------------

    def check_job_capacity(self, job: JobInfo, request: Resources) -> str | None:
        """The first reason the job's queue cannot take `request` more (limits, non-preemptible quota)."""
        for check in self.points.job_capacity_checks:
            reason = check(job, request)
            if reason is not None:
                return reason
        return None

    def job_capacity_inputs(self, job: JobInfo) -> tuple[Hashable, ...] | None:
        """What `check_job_capacity` reads of the session for `job` besides its request, as a value; None
        when a check does not say (`ExtensionPoints.job_capacity_inputs`): `queue_capacity_inputs` of its
        queue."""
        return self.queue_capacity_inputs(job.queue)

    def queue_capacity_inputs(self, queue: str) -> tuple[Hashable, ...] | None:
        """What `check_job_capacity` reads of the session for any job of `queue` besides its request, as a
        value; None when a check does not say (`ExtensionPoints.job_capacity_inputs`). Each check's reader
        is asked once (checks may share one), and each value it gives is handed out as the object that
        first held it in this session or an earlier one (`capacity_inputs`): a value carried from the last
        cycle is then told equal by identity rather than element by element (issue #23, point 1)."""
        if not self._capacity_readers_known:
            self._capacity_readers_known = True
            inputs = self.points.job_capacity_inputs
            reads = [inputs.get(check) for check in self.points.job_capacity_checks]
            known = [read for read in reads if read is not None]
            self._capacity_readers = list(dict.fromkeys(known)) if len(known) == len(reads) else None
        readers = self._capacity_readers
        if readers is None:
            return None
        if len(readers) == 1:  # the checks share one reader (proportion's two do)
            return (self._one_object(readers[0](queue)),)
        return tuple(self._one_object(read(queue)) for read in readers)

    def _one_object(self, value: Hashable) -> Hashable:
        """The object that first held a value equal to `value` (`job_capacity_inputs`); a reader hands out
        one object for a value while it stays, so it is looked up by identity first."""
        seen = self._inputs_seen.get(id(value))
        if seen is not None and seen[0] is value:
            return seen[1]
        held = self.capacity_inputs
        if len(held) > _MOST_INPUTS_HELD:
            held.clear()
        if len(self._inputs_seen) > _MOST_INPUTS_HELD:
            self._inputs_seen.clear()
        same = held.setdefault(value, value)
        self._inputs_seen[id(value)] = (value, same)
        return same

    def check_quota(self, job: JobInfo, request: Resources) -> str | None:
        """Why a non-preemptible job would take its queue above its quota (None: it would not)."""
        for check in self.points.quota_checks:
            reason = check(job, request)
            if reason is not None:
                return reason
        return None

    # --- placement -------------------------------------------------------------------------------

    def _static(self, placement: Placement) -> Masks:
        """Nodes passing every static predicate for a placement, computed once per distinct placement (and
        kept for the next session while the predicates read the same, `static_masks`)."""
        cached = self._static_masks.get(placement.key)
        if cached is None:
            cached = self._static_masks[placement.key] = self.static_masks_of(placement)
        return cached

    def static_passing_count(self, placement: Placement) -> int:
        """How many nodes pass every static predicate for `placement` (`_passing`)."""
        found = self._passing(placement)
        return int(np.count_nonzero(found)) if found.dtype == np.bool_ else int(found.size)

    def _passing(self, placement: Placement) -> BoolArray | IntArray:
        """The nodes passing every static predicate for `placement`: its masks' when worked out, else the
        rows a node selector names (`_rows_passing`) when it names them, else its masks worked out."""
        if placement.key not in self._static_masks:
            rows = self._rows_passing(placement)
            if rows is not None:
                return rows
        return self._static(placement)[0]

    def _rows_passing(self, placement: Placement) -> IntArray | None:
        """The nodes passing every static predicate for `placement`, in order, found without its masks over
        every node (`static_masks.passing_rows`; None: not so found); with `verify_carried` compared with
        those masks, a difference raising `CarriedMismatch`."""
        key = placement.key
        if key in self._passing_rows:
            return self._passing_rows[key]
        rows = self._passing_rows[key] = passing_rows(
            self.points.static_predicates, placement, self.snapshot.nodes
        )
        if rows is not None and self.verify_carried:
            fresh = np.flatnonzero(self.static_masks_of(placement)[0])
            if not np.array_equal(rows, fresh):
                from kai_scheduler.framework.job_memos import CarriedMismatch

                raise CarriedMismatch(
                    f"the nodes passing the static predicates of placement {key!r}, found from the rows its "
                    "node selector names, differ from those its masks give"
                )
        return rows

    def static_masks_of(self, placement: Placement) -> Masks:
        """`_static` worked out now, whatever is kept."""
        nodes = self.snapshot.nodes
        ok = np.ones(nodes.size, dtype=np.bool_)
        parts = []
        for _, rejection, predicate in self.points.static_predicates:
            passing = predicate(placement, nodes)
            parts.append((rejection, passing))
            ok &= passing
        return ok, parts

    def use_static_masks(
        self, masks: dict[str, Masks], rows: dict[str, IntArray | None], older: dict[str, OlderMasks]
    ) -> None:
        """Start from the masks and few candidate rows kept by placement from an earlier session whose
        static predicates answer alike, and the older masks right but at a few rows (`static_masks`), and
        add to them."""
        self._static_masks, self._static_rows, self._older_static = masks, rows, older
        self._usable.clear()
        self._static_refusal_rows.clear()

    def static_refusal_at(self, placement: Placement, row: int) -> int:
        """The index of the first static predicate that refuses `row` for `placement` (-1: none does),
        without the placement's masks over every node when they are not worked out yet and older masks
        answer for the row (its facts are the same since) or a node flag refuses it (`static_masks`);
        with `verify_carried` those answers are worked out again, and a difference raises
        `CarriedMismatch`. Why: a cordon makes every placement's masks stale, while a cycle's pods that
        found no node ask only of the few rows that changed."""
        key = (placement.key, row)
        answer = self._static_refusal_rows.get(key)
        if answer is None:
            answer = self._static_refusal_rows[key] = self._static_refusal_now(placement, row)
        return answer

    def _static_refusal_now(self, placement: Placement, row: int) -> int:
        """`static_refusal_at` worked out (kept by the caller)."""
        masks = self._static_masks.get(placement.key)
        if masks is None:
            older = self._older_static.get(placement.key)
            answer = (
                _first_static_refusal(older[0][1], row)
                if older is not None and row not in older[1]
                else self._flag_refusal(row)
            )
            if answer is not None:
                if self.verify_carried:
                    self._check_static_refusal(placement, row, answer)
                return answer
            masks = self._static(placement)
        return _first_static_refusal(masks[1], row)

    def refused_by_node_flags(self, row: int) -> bool:
        """Whether a static predicate that reads no placement (`NodeFlags`) refuses `row`, and so do those
        before it: then the row is a candidate for no pod, and the first refusal of every pod there."""
        return self._flag_refusal(row) is not None

    def _flag_refusal(self, row: int) -> int | None:
        """The index of the first static predicate refusing `row` when it is a node flag and so are those
        before it (they read no placement: `NodeFlags`); None when not known without a placement."""
        if row in self._flag_refusals:
            return self._flag_refusals[row]
        refusal = None
        for index, (_, _, predicate) in enumerate(self.points.static_predicates):
            if not isinstance(predicate, NodeFlags):
                break
            if not predicate.mask.item(row):
                refusal = index
                break
        self._flag_refusals[row] = refusal
        return refusal

    def _check_static_refusal(self, placement: Placement, row: int, answer: int) -> None:
        fresh = _first_static_refusal(self.static_masks_of(placement)[1], row)
        if fresh != answer:
            from kai_scheduler.framework.job_memos import CarriedMismatch

            raise CarriedMismatch(
                f"placement {placement.key!r} at row {row}: the first static predicate refusing it, read "
                f"without its masks ({answer}), is not the one worked out again ({fresh})"
            )

    def usable_nodes(self, tasks: Sequence[PodAsk]) -> BoolArray:
        """Nodes that pass the static predicates (selector, affinity, taints, cordon) of any of the tasks:
        freeing resources anywhere else cannot help them. Kept by placements for the session (read-only);
        with `verify_carried` worked out again, and a difference raises `CarriedMismatch`."""
        placements = {task.placement.key: task.placement for task in tasks}
        key = tuple(placements)
        usable = self._usable.get(key)
        if usable is None:
            usable = self._usable[key] = self._usable_of(placements.values(), self._passing)
        elif self.verify_carried and not np.array_equal(
            usable, self._usable_of(placements.values(), lambda p: self.static_masks_of(p)[0])
        ):
            from kai_scheduler.framework.job_memos import CarriedMismatch

            raise CarriedMismatch(
                f"the nodes usable by placements {key!r}, kept, differ from those worked out"
            )
        return usable

    def _usable_of(
        self, placements: Iterable[Placement], passing: Callable[[Placement], BoolArray | IntArray]
    ) -> BoolArray:
        usable = np.zeros(self.snapshot.nodes.size, dtype=np.bool_)
        for placement in placements:
            usable[passing(placement)] = True  # (a mask or rows)
        usable.flags.writeable = False
        return usable

    def node_subsets(
        self, job: JobInfo, group: PodSet | SubGroupSet | None, tasks: Sequence[TaskInfo]
    ) -> NodeSubsets | None:
        """Where `tasks` (of `group`, None: of the whole job) must go together (topology), within the
        current confinement; None: anywhere."""
        for provider in self.points.node_subsets:
            subsets = provider(job, group, tasks)
            if subsets is not None:
                return subsets
        return None

    @contextmanager
    def confined_to(self, mask: BoolArray) -> Iterator[None]:
        """Placements in the block use only nodes of `mask` (and of any enclosing confinement)."""
        outer = self.allowed
        self.allowed = mask if outer is None else outer & mask
        try:
            yield
        finally:
            self.allowed = outer

    def candidate_nodes(self, task: TaskInfo) -> BoolArray:
        """Nodes where the task could run now or once releasing pods are gone."""
        if self.points.pre_predicates and self._pre_predicate_failure(task) is not None:
            return np.zeros(self.snapshot.nodes.size, dtype=np.bool_)
        # Resources first: they are kept per request across pods and rule out most nodes of a busy
        # cluster, so the per-pod predicates (pod affinity, host ports) often need not run at all.
        ok = self._static(task.placement)[0] & self.snapshot.nodes.fit(task.request, soon=True)
        if self.allowed is not None:
            ok &= self.allowed
        if not np.count_nonzero(ok):  # the cheapest emptiness test; an empty mask stays empty
            return ok
        for predicate in self.points.task_predicates:
            ok &= predicate.nodes_passing(task)
        return ok

    def _few_candidates(self, task: TaskInfo) -> IntArray | None:
        """`candidate_nodes`'s nodes in index order, found among the nodes passing the pod's static
        predicates (a node selector naming a rack, say) when they are no more than `alike_nodes` scores
        all of and an eighth of the cluster; None when they are more. Why: the whole cluster's masks,
        and a fit mask kept for a request few pods ask (brought up to date over every node changed since
        it was last asked), cost a selector's pod more with every node, its few nodes do not
        (`fit_rows` answers as `fit` does)."""
        key = task.placement.key
        if key not in self._static_rows:
            # (Masks worked out, kept from the last session, answer at once.)
            found = self._rows_passing(task.placement) if key not in self._static_masks else None
            if found is None:
                static = self._static(task.placement)[0]
                few = _few(int(np.count_nonzero(static)), static.size)
                self._static_rows[key] = static.nonzero()[0] if few else None
            else:
                self._static_rows[key] = found if _few(found.size, self.snapshot.nodes.size) else None
        rows = self._static_rows[key]
        if rows is None:
            return None
        if rows.size == 0 or (self.points.pre_predicates and self._pre_predicate_failure(task) is not None):
            return rows[:0]
        rows = rows[self.snapshot.nodes.fit_rows(task.request, rows, soon=True)]
        if self.allowed is not None:
            rows = rows[self.allowed[rows]]
        everywhere = self._everywhere_masks
        for predicate in self.points.task_predicates:
            if rows.size == 0:
                break
            mask = predicate.nodes_passing(task)
            if everywhere.get(id(mask)) is not mask:  # (a mask known to pass every node leaves the rows)
                rows = rows[mask[rows]]
        return rows

    def pre_predicate_failure(self, task: TaskInfo) -> str | None:
        """Why a pre-predicate refuses the pod (None: none does), as `explain_no_fit` says it."""
        return self._pre_predicate_failure(task) if self.points.pre_predicates else None

    def pod_answers_key(self) -> tuple[Hashable, ...] | None:
        """What `pre_predicate_failure` and `reads_other_pods` read of the session besides the pod, as a
        value: while it stays, so do their answers for one pod (at one version of its job); None when a
        pre-predicate or a task predicate's `depends_on` does not say what it reads
        (`ExtensionPoints.pre_predicate_reads`, `NamedPredicate.depends_on_reads`)."""
        points, values = self.points, []
        for check in points.pre_predicates:
            read = points.pre_predicate_reads.get(check)
            if read is None:
                return None
            values.append(read())
        for predicate in points.task_predicates:
            if predicate.depends_on is not None:
                if predicate.depends_on_reads is None:
                    return None
                values.append(predicate.depends_on_reads())
        return tuple(values)

    def refused_everywhere(self, task: TaskInfo) -> bool:
        """Whether a pre-predicate refuses the pod, so that no node is a candidate (`candidate_tests` is
        None), without working out anything of the nodes."""
        return bool(self.points.pre_predicates) and self._pre_predicate_failure(task) is not None

    def refusal_reads_shape(self) -> bool:
        """Whether `refused_everywhere` reads of a pod only its request and placement constraints, and of the
        session only what stays while it is open (every pre-predicate says so,
        `ExtensionPoints.shape_pre_predicates`): it then answers alike for the pods of one request and
        placement."""
        points = self.points
        return all(check in points.shape_pre_predicates for check in points.pre_predicates)

    def candidate_tests(self, task: TaskInfo) -> tuple[Callable[[int], bool], Callable[[int], bool]] | None:
        """`candidate_nodes` asked of one node at a time, with the same answer at every node (`node_fits`
        answers as `fit` does), in two parts: whether a node passes the pod's static predicates and holds
        its request soon (an answer that reads only the pod's request and placement, and of the node only
        what changes with its usage, `NodeTable.changed_since`), and whether a node that does passes the
        rest (the confinement and the per-pod predicates); None when a pre-predicate refuses the pod
        (`refused_everywhere`)."""
        if self.refused_everywhere(task):
            return None
        rest = self.rest_test(task)

        def holds(node: int) -> bool:
            return self._holds_at(task, node)

        return holds, (_passes if rest is None else rest)

    def any_candidate(self, task: TaskInfo, rows: Iterable[int]) -> bool:
        """Whether any of `rows` is a candidate for `task`, which no pre-predicate refuses: `candidate_tests`
        asked of each, the rest worked out only once a row passes the first part (seldom: the rows asked
        are those that changed, for a pod that found no node)."""
        rest: Callable[[int], bool] | None = None
        for row in rows:
            if not self._holds_at(task, row):
                continue
            if rest is None:
                rest = self.rest_test(task) or _passes
            if rest(row):
                return True
        return False

    def _holds_at(self, task: TaskInfo, node: int) -> bool:
        """`candidate_tests`'s first part."""
        return self.static_refusal_at(task.placement, node) < 0 and self.snapshot.nodes.node_fits(
            task.request, node, soon=True
        )

    def static_passing(self, placement: Placement) -> BoolArray:
        """The nodes passing every static predicate for `placement` (`_static`)."""
        return self._static(placement)[0]

    def rest_test(self, task: TaskInfo) -> Callable[[int], bool] | None:
        """`candidate_tests`'s second part: whether a node passes the confinement and the per-pod
        predicates; None when there are none (every node passes)."""
        allowed, task_predicates = self.allowed, self.points.task_predicates
        if allowed is None and not task_predicates:
            return None
        # The per-pod predicates are asked once a node passes the first part, as `candidate_nodes` asks
        # them once the resources leave any node.
        masks: list[BoolArray] | None = None

        def passes_rest(node: int) -> bool:
            nonlocal masks
            if allowed is not None and not allowed.item(node):
                return False
            if masks is None:
                masks = self._narrowing([predicate.nodes_passing(task) for predicate in task_predicates])
            return not masks or all(mask.item(node) for mask in masks)

        return passes_rest

    def rest_masks(self, task: TaskInfo, shape_masks: list[BoolArray] | None = None) -> list[BoolArray]:
        """`rest_test` worked out at once: the masks a node passing `candidate_tests`'s first part must
        pass besides (the confinement, the per-pod predicates' masks that may narrow); none when every
        node passes. For a caller that finds a candidate for nearly every pod it asks about
        (`ranked_nodes`): most pods then have no mask, and nothing is asked of their nodes. `shape_masks`:
        `shape_rest_masks` kept from a pod of the same request and placement in this session, the
        predicates that read a pod's shape alone then not asked again (with `verify_carried`, asked, and
        a difference raises `CarriedMismatch`)."""
        masks: list[BoolArray] = []
        everywhere = self._everywhere_masks
        predicates = self.points.task_predicates if shape_masks is None else self._pod_predicates()
        for predicate in predicates:
            mask = predicate.nodes_passing(task)
            # (`_narrowing`'s first test, without a call: most pods' masks are all known to pass everywhere.)
            if everywhere.get(id(mask)) is not mask:
                masks.append(mask)
        if masks:
            masks = self._narrowing(masks)
        if shape_masks:
            masks = [*shape_masks, *masks]
        if shape_masks is not None and self.verify_carried:
            self._check_shape_masks(task, shape_masks)
        return masks if self.allowed is None else [self.allowed, *masks]

    def shape_rest_masks(self, task: TaskInfo) -> list[BoolArray]:
        """`rest_masks`'s masks of the per-pod predicates that read a pod's shape alone
        (`NamedPredicate.reads_shape_alone`; those that may narrow), the confinement left out: the same
        for every pod of the pod's request and placement in this session. Why: a caller that keeps them
        per shape (`ranked_nodes`) asks each pod only the predicates that read more."""
        masks = [p.nodes_passing(task) for p in self.points.task_predicates if p.reads_shape_alone]
        return self._narrowing(masks)

    def _pod_predicates(self) -> list[NamedPredicate]:
        """The per-pod predicates that read more of a pod than its shape (fixed once the session is open)."""
        if self._per_pod_predicates is None:
            self._per_pod_predicates = [p for p in self.points.task_predicates if not p.reads_shape_alone]
        return self._per_pod_predicates

    def _check_shape_masks(self, task: TaskInfo, kept: list[BoolArray]) -> None:
        """`shape_rest_masks` kept for the pod's shape compared with the pod's own, by the nodes they pass
        together (`CarriedMismatch` when they differ)."""
        size = self.snapshot.nodes.size
        if not np.array_equal(_passing_every(kept, size), _passing_every(self.shape_rest_masks(task), size)):
            from kai_scheduler.framework.job_memos import CarriedMismatch

            raise CarriedMismatch(
                f"the masks of the predicates said to read pod {task.key}'s request and placement alone, "
                "kept for its shape, differ from its own"
            )

    def _narrowing(self, masks: list[BoolArray]) -> list[BoolArray]:
        """`masks` without those that pass every node and cannot change: read-only arrays that own their
        data, known by identity once found so. Why: a per-pod predicate hands most pods one such array
        (no limit concerns them), and each node a pod's walk asks read it."""
        everywhere = self._everywhere_masks
        narrowing = []
        for mask in masks:
            if everywhere.get(id(mask)) is mask:
                continue
            if mask.base is None and not mask.flags.writeable and mask.all():
                everywhere[id(mask)] = mask  # kept: its id is not handed to another array meanwhile
                continue
            narrowing.append(mask)
        return narrowing

    def choose_node(self, task: TaskInfo) -> Placed | None:
        """The best-scored feasible node (ties: node name) and the shared GPUs the task would take there."""
        nodes = self.snapshot.nodes
        node = ranked_nodes.best_node(self, task)
        if node is None:
            return None
        if isinstance(node, ranked_nodes.Undecided):
            rows = self._few_candidates(task)
            if rows is None:
                rows = alike_nodes.rows_to_score(self, task, self.candidate_nodes(task))
            if rows.size == 0:
                return None
            node = ranked_nodes.best_of_rows(self, task, rows)
            if isinstance(node, ranked_nodes.Undecided):
                scores = self._scores(task, rows)
                # The first best: ties go to the lowest index, i.e. name (all tied when no score is per node).
                node = int(rows[0]) if isinstance(scores, float) else int(rows[scores.argmax()])
        # A candidate fits soon; whether it fits now is asked of that one node (`node_fits` answers as
        # `fit` does), and is the same question when nothing is being released.
        request = task.request
        now = not nodes.anything_releasing() or nodes.node_fits(request, node, soon=False)
        return Placed(
            node, self._choose_gpu_groups(task, node, soon=not now) if request.is_shared_gpu else (), now
        )

    def _scores(self, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        """The candidates' (`rows`) summed scores, in scorer order as one array would be; scores common to
        every candidate stay a plain float until the first per-node score (0.0 + a + b is the same sum,
        elementwise)."""
        scores: FloatArray | float = 0.0
        for scorer in self.points.node_scorers:
            scores = add_score(scores, scorer(task, rows))
        return scores

    def _choose_gpu_groups(self, task: TaskInfo, node: int, *, soon: bool) -> tuple[str, ...]:
        """The shared GPUs a shared-GPU pod takes on `node`."""
        nodes = self.snapshot.nodes
        portion = nodes.portion_on(task.request, node)
        chooser = self.points.gpu_chooser or pack_gpus
        chosen = chooser(nodes, node, portion, task.request.gpu_devices, soon)
        # A pod pipelined onto a new shared GPU keeps that GPU's id when it binds there.
        reusable = (
            [g for g in task.nominated_groups if g not in nodes.group_by_id]
            if node == task.nominated_node
            else []
        )
        ids = []
        for group in chosen:
            if group is not None:
                ids.append(group.group_id)
            elif reusable:
                ids.append(reusable.pop(0))
            else:
                ids.append(self.new_gpu_group_id(node, ids))
        return tuple(ids)

    def new_gpu_group_id(self, node: int, chosen: Sequence[str] = ()) -> str:
        """A GPU group id unique in the cluster, stable for a given input (simulations are reproducible):
        the node's name, the cycle, and the lowest number no group on the cluster now and no committed
        placement has taken (nor one of `chosen`, handed out to the same pod). A function of the cluster
        as it is, so a scenario undone and tried again hands out the same ids (the victim solver replays
        scenarios)."""
        name = self.snapshot.nodes.names[node]
        live = self.snapshot.nodes.group_by_id
        taken = self.snapshot.existing_gpu_groups
        number = 0
        while True:
            number += 1
            candidate = f"{name}-gpu-c{self.cycle}-{number}"
            if candidate not in live and candidate not in taken and candidate not in chosen:
                return candidate

    def explain_no_fit(self, task: TaskInfo, *, pre_predicates_pass: bool = False) -> str:
        """Kubernetes-style: how many nodes each filter rejected (each counts only the nodes that every
        filter before it let through). Pods that fail alike are explained once while the nodes' usage
        stays the same: the answer depends on the usage, the request, the placement constraints, and
        what the task predicates read of the pod (`NamedPredicate.depends_on`). While allocate's node
        filters read rows alone (`placement_failures`), an explanation is kept from one session to the
        next and counted again over the rows that may differ since (`no_fit_counts`).
        `pre_predicates_pass`: the caller asked the pre-predicates of `task` already, and none refused."""
        nodes = self.snapshot.nodes
        if (
            not pre_predicates_pass
            and self.points.pre_predicates
            and (failure := self._pre_predicate_failure(task)) is not None
        ):
            return failure
        if self.allowed is not None:
            return self._explain_no_fit(task)
        part = self.placement_failures.part_of(self) if self.placement_failures is not None else None
        if part is not None and not self.reads_other_pods(task):
            return self._explain_by_rows(task, part)
        reads = [read(task) for read in self._pod_readers()]
        key = (nodes.version, task.request, task.placement.key, *reads)
        explained = self._explanations.get(key)
        if explained is None:
            if len(self._explanations) > 10_000:
                self._explanations.clear()
            explained = self._explanations[key] = self._explain_no_fit(task)
        return explained

    def _explain_by_rows(self, task: TaskInfo, part: SessionFailures) -> str:
        """`explain_no_fit` from the counts kept for the pod's request and placement, counted again over
        the rows that may differ since (all rows when none are kept or too many differ); with
        `verify_carried` counted over every row as well, and a difference raises `CarriedMismatch`."""
        nodes = self.snapshot.nodes
        key = (task.request, task.placement.key)
        position = nodes.change_position()
        if not self.verify_carried and (text := part.text_counted_at(key, position)) is not None:
            return text  # (asked again with no node changed since: most pods a backlog's tail explains)
        kept = part.kept_counts(key)
        counts: NoFitCounts | None = None
        if kept is not None:
            counts, rows = kept
            if rows:
                names, refusals = self._first_refusals_at(task, rows)
                if names == counts.names:
                    counts.recount(rows, refusals, position)
                else:
                    counts = None
            else:
                counts.position = position
        if counts is None:
            counts = self._count_no_fit(task, position)
        elif self.verify_carried:
            self._check_no_fit(task, counts, "kept and counted again over the rows that may differ")
        if counts.text is None:
            counts.text = self._no_fit_words(task, counts, part.words)
        part.keep_counts(key, counts)
        return counts.text

    def _no_fit_words(self, task: TaskInfo, counts: NoFitCounts, words: NoFitWords) -> str:
        """`_no_fit_text` of `counts`, given again for counts alike of an equal request (`NoFitWords`);
        with `verify_carried` worded again, and a difference raises `CarriedMismatch`."""
        text = words.of(
            (self.snapshot.nodes.size, task.request), counts, lambda: self._no_fit_text(task, counts.detail())
        )
        if self.verify_carried and text != (fresh := self._no_fit_text(task, counts.detail())):
            from kai_scheduler.framework.job_memos import CarriedMismatch

            raise CarriedMismatch(f"pod {task.name}: why it does not fit, kept as {text!r}, reads {fresh!r}")
        return text

    def _first_refusals_at(
        self, task: TaskInfo, rows: list[int], *, passing_static: bool = False
    ) -> tuple[tuple[str, ...], list[int]]:
        """The names of `_no_fit_filters` (no confinement), and the index of the first of them each of
        `rows` does not pass: a few rows asked one at a time in plain Python (far cheaper than numpy for
        a handful), the resources as `resource_shortfalls` works them out, to the last bit; many rows by
        `_no_fit_filters` (`passing_static`: as there)."""
        if len(rows) > _FEW_ROWS:
            filters = self._no_fit_filters(
                task, np.asarray(rows, dtype=np.intp), passing_static=passing_static
            )
            return tuple(name for name, _ in filters), first_refusals(filters).tolist()
        static = self.points.static_predicates
        predicates = self.points.task_predicates
        request, placement = task.request, task.placement
        names = self._filter_names(request)
        # The static filters first, row by row: a row they turn away (most rows, for a pod a selector
        # confines to a rack) needs neither the per-pod predicates nor its resources worked out.
        refusals = (
            [-1] * len(rows) if passing_static else [self.static_refusal_at(placement, row) for row in rows]
        )
        if -1 in refusals:
            nodes = self.snapshot.nodes
            masks = [predicate.nodes_passing(task) for predicate in predicates]
            past_static = len(static)
            past_masks = past_static + len(masks)
            shared = request.is_shared_gpu
            for at, row in enumerate(rows):
                if refusals[at] >= 0:
                    continue
                refusal = next((index for index, mask in enumerate(masks) if not mask.item(row)), None)
                if refusal is not None:
                    refusals[at] = past_static + refusal
                    continue
                portion = (
                    nodes.portion_for(request, np.asarray([row], dtype=np.intp)).item(0) if shared else 0.0
                )
                resources = _resources_at(nodes, request, row, portion)
                refusals[at] = past_masks + next(
                    (i for i, ok in enumerate(resources) if not ok), len(resources)
                )
        return names, refusals

    def _filter_names(self, request: PodRequest) -> tuple[str, ...]:
        """The names of `_no_fit_filters` for a pod of `request` (no confinement)."""
        names = self._refusal_names.get(request.uses_gpu)
        if names is None:
            names = self._refusal_names[request.uses_gpu] = (
                *(rejection for _, rejection, _ in self.points.static_predicates),
                *(predicate.rejection for predicate in self.points.task_predicates),
                *_shortfall_names(request),
            )
        return names

    def _pre_predicate_failure(self, task: TaskInfo) -> str | None:
        for check in self.points.pre_predicates:
            failure = check(task)
            if failure is not None:
                return failure
        return None

    def reads_other_pods(self, task: TaskInfo) -> bool:
        """Whether the nodes the task may use depend on more of it than its request and placement
        constraints (inter-pod rules in play: then they depend on where other pods are). (A plain loop:
        asked of every pod placed, where a generator and the builtin `any` cost some 1,500 instructions.)"""
        for read in self._pod_readers():  # noqa: SIM110 - a loop: the builtin and a generator cost more
            if read(task) is not None:
                return True
        return False

    def _pod_readers(self) -> list[Callable[[TaskInfo], Hashable]]:
        """The `depends_on` of the task predicates that have one (fixed once the session is open)."""
        if self._readers is None:
            self._readers = [p.depends_on for p in self.points.task_predicates if p.depends_on is not None]
        return self._readers

    def _explain_no_fit(self, task: TaskInfo) -> str:
        return self._no_fit_text(task, self._count_no_fit(task, 0).detail())

    def _count_no_fit(self, task: TaskInfo, position: int) -> NoFitCounts:
        """The counts of `_no_fit_filters` over every node, as of `position`: the nodes a static filter
        turns away counted once per placement (`StaticRefusals`), the few others asked about the rest (at
        once: numpy's per-call cost beats asking a rack's 20 nodes one by one; every node counted when
        they are many, or the attempt is confined); with `verify_carried` counted over every node as
        well, and a difference raises `CarriedMismatch`."""
        if self.allowed is not None:
            return NoFitCounts.of(self._no_fit_filters(task, ALL_ROWS), position)
        static = self._static_refusals.get(task.placement.key)
        if static is None:
            static = self._static_refusals[task.placement.key] = self._static_refusals_of(task.placement)
        many = _PAST_STATIC_SHARE * static.passing.size > self.snapshot.nodes.size
        by_request = self._refusals_by_request(task, every_node=many)
        if by_request is not None:
            names = self._filter_names(task.request)
            counts = NoFitCounts.past_static_read(names, static, by_request[static.passing], position)
        elif many:
            return NoFitCounts.of(self._no_fit_filters(task, ALL_ROWS), position)
        elif static.passing.size > _ONE_BY_ONE:
            filters = self._no_fit_filters(task, static.passing, passing_static=True)
            # The static filters let every one of these rows through: each row's first refusal is among
            # the filters after them (and a row none refuses, past them all, is counted so either way).
            past = len(self.points.static_predicates)
            names = tuple(name for name, _ in filters)
            refusals = (first_refusals(filters[past:]) + past).tolist()
            counts = NoFitCounts.past_static(names, static, refusals, position)
        else:
            names, refusals = self._first_refusals_at(task, static.passing.tolist(), passing_static=True)
            counts = NoFitCounts.past_static(names, static, refusals, position)
        if self.verify_carried:
            self._check_no_fit(task, counts, "counted past the static filters' counts")
        return counts

    def _refusals_by_request(self, task: TaskInfo, *, every_node: bool) -> Refusals | None:
        """Every node's first refusal past the static filters for `task`'s request (`RequestRefusals`,
        read-only to the caller), as the nodes are now: kept per request and worked out again at the few
        rows changed since; else worked out over every node when the caller would ask `every_node`
        anyway, or when the request was explained a few changes ago (a second shape of it: a backlog's
        tail explains some 11 shapes a request, bound to racks and zones, no node changing between
        them). None otherwise (the caller asks its rows alone), or when a task predicate's mask may
        change in place (a writeable array: nothing proves a kept column still reads it as it is), or
        the pod's own facts are read (`reads_other_pods`: its masks are its own)."""
        if self.reads_other_pods(task):
            return None
        masks = tuple(predicate.nodes_passing(task) for predicate in self.points.task_predicates)
        if any(mask.flags.writeable for mask in masks):
            return None
        nodes = self.snapshot.nodes
        request = task.request
        position = nodes.change_position()
        explained_at = self._request_explained_at.get(request)
        self._request_explained_at[request] = position
        kept = self._request_refusals.get(request)
        if kept is not None and kept.read_from(masks):
            changed = nodes.changed_since(kept.position)
            if changed is not None and len(changed) <= _FEW_CHANGES_CAUGHT_UP:
                if changed:
                    rows = sorted(set(changed))
                    kept.update(rows, self._first_refusals_at(task, rows, passing_static=True)[1], position)
                return kept.column
        if not every_node and (explained_at is None or position - explained_at > _FEW_CHANGES_CAUGHT_UP):
            return None
        predicates = self.points.task_predicates
        filters = [(predicate.rejection, mask) for predicate, mask in zip(predicates, masks, strict=True)]
        filters.extend(resource_shortfalls(nodes, task))
        column = first_refusals(filters)
        column += len(self.points.static_predicates)
        self._request_refusals[request] = RequestRefusals(column, masks, position)
        return column

    def _static_refusals_of(self, placement: Placement) -> StaticRefusals:
        """`StaticRefusals` of `placement`: from the rows its node selector names while its masks are not
        worked out (`StaticRefusals.of_selected_rows`), else from its masks."""
        if placement.key not in self._static_masks:
            if self._leading_flags is None:
                self._leading_flags = LeadingFlags(self.points.static_predicates)
            found = StaticRefusals.of_selected_rows(
                self.points.static_predicates, placement, self.snapshot.nodes, self._leading_flags
            )
            if found is not None:
                return found
        return StaticRefusals.of_masks(self._static(placement))

    def _check_no_fit(self, task: TaskInfo, counts: NoFitCounts, how: str) -> None:
        fresh = NoFitCounts.of(self._no_fit_filters(task, ALL_ROWS), counts.position)
        if not fresh.same_as(counts):
            from kai_scheduler.framework.job_memos import CarriedMismatch

            raise CarriedMismatch(
                f"pod {task.name}: why it does not fit, {how} ({counts.detail()!r}), differs from counting "
                f"every node ({fresh.detail()!r})"
            )

    def _no_fit_text(self, task: TaskInfo, detail: str) -> str:
        head = self._no_fit_heads.get(task.request)
        if head is None:
            head = self._no_fit_heads[task.request] = (
                f"0/{self.snapshot.nodes.size} nodes are available for {task.request.describe()}: "
            )
        return head + detail

    def _no_fit_filters(self, task: TaskInfo, rows: Rows, *, passing_static: bool = False) -> list[Filter]:
        """The node filters in the order they are explained, each answering for `rows` (`passing_static`:
        rows none of the pod's static filters refuses, each passing them without its masks)."""
        filters: list[Filter] = []
        if self.allowed is not None:
            filters.append(("outside the job's topology domain", self.allowed[rows]))
        if passing_static:
            every = np.ones(self.snapshot.nodes.row_count(rows), dtype=np.bool_)
            filters.extend((rejection, every) for _, rejection, _ in self.points.static_predicates)
        else:
            filters.extend(
                (rejection, passing[rows]) for rejection, passing in self._static(task.placement)[1]
            )
        for predicate in self.points.task_predicates:
            filters.append((predicate.rejection, predicate.nodes_passing(task)[rows]))
        filters.extend(resource_shortfalls(self.snapshot.nodes, task, rows))
        return filters

    # --- decisions -------------------------------------------------------------------------------

    def statement(self, action: str, for_job: str = "") -> Statement:
        return Statement(self, action, for_job)

    def record(self, decisions: Sequence[Decision]) -> None:
        self.decisions.extend(decisions)

    def add_reason(self, job_key: str, reason: str) -> None:
        """Add why a later action could not help either to the reason a job waits."""
        earlier = self.unschedulable.get(job_key)
        if not earlier:
            self.unschedulable[job_key] = reason
        elif isinstance(earlier, WaitReason):
            self.unschedulable[job_key] = earlier.joined(reason)  # the first reason's code stays
        else:
            self.unschedulable[job_key] = f"{earlier}; {reason}"

    def wake_at(self, time: float) -> None:
        """Note that the outcome may change by itself at `time` (see `SessionResult.wake_at`)."""
        if time > self.now and (self._wake_at is None or time < self._wake_at):
            self._wake_at = time

    def is_protected(self, action: str, preemptor: JobInfo, victim: JobInfo) -> bool:
        return any(check(preemptor, victim) for check in self.points.victim_protection.get(action, ()))

    def close(self) -> None:
        """Let go of the plugins: their handlers and scratch refer back to the session, and without this
        the session and everything it cached would wait for the cyclic garbage collector (a large
        cluster's session is tens of thousands of objects, every cycle)."""
        self.points = ExtensionPoints()
        self.state.detach()
        self.scratch.clear()
        self._readers = None
        self._per_pod_predicates = None

    def result(self) -> SessionResult:
        queues = self.snapshot.queues
        fair_share = {q.name: q.fair_share.values() for q in queues}
        fair_share.update({name: parent.fair_share.values() for name, (parent, _) in queues.detached.items()})
        return SessionResult(
            list(self.decisions),
            dict(self.unschedulable),
            fair_share,
            dict(self.points.stale_updates),
            self._wake_at,
            fair_share_record=self.fair_share_record,
            ungates=list(self.ungates),
            reservations=dict(self.reservation_updates),
            backfilled=list(self.backfilled),
        )


def _first_static_refusal(parts: list[tuple[str, BoolArray]], row: int) -> int:
    """The index of the first of a placement's static masks (`Masks`) that `row` does not pass (-1:
    none). (A loop, not a generator: asked of each changed row for every pod shape explained.)"""
    for index, (_, passing) in enumerate(parts):
        if not passing.item(row):
            return index
    return -1


def _passing_every(masks: list[BoolArray], size: int) -> BoolArray:
    """The nodes passing every one of `masks` (all `size` nodes when there are none)."""
    return np.logical_and.reduce(masks) if masks else np.ones(size, dtype=np.bool_)


def _few(count: int, nodes: int) -> bool:
    """Whether `count` nodes passing a placement's static predicates, of `nodes`, are few enough to be asked
    one by one (`Session._few_candidates`)."""
    return count <= alike_nodes.FEW_CANDIDATES and 8 * count <= nodes


def _passes(node: int) -> bool:
    """Every node passes (`Session.rest_test` with nothing to ask)."""
    return True


def resource_shortfalls(nodes: NodeTable, task: TaskInfo, rows: Rows = ALL_ROWS) -> list[Filter]:
    """Per resource, which nodes (of `rows`) have enough of it (idle + releasing), for messages."""
    request = task.request
    # Read at `rows` from the columns kept for every node (elementwise, the same doubles as working them
    # out at the rows alone). Why: a deep backlog's tail explains some 800 pods, each confined to a rack
    # or a zone, no node changing between most of them, and working each column out at the rows took
    # three gathers and two sums, each a call into numpy.
    free_cpu, free_memory, free_pods = nodes.free_soon()
    if not isinstance(rows, slice):
        free_cpu, free_memory, free_pods = free_cpu[rows], free_memory[rows], free_pods[rows]
    cpu_ok = free_cpu >= request.cpu - EPSILON
    memory_ok = free_memory >= request.memory - EPSILON
    one_slot = free_pods >= 1 - EPSILON
    pods_ok = one_slot
    if request.is_shared_gpu:
        # Opening a new shared GPU also needs a slot for its reservation pod.
        joins = nodes.shared_free_soon[rows] >= nodes.portion_for(request, rows) - EPSILON
        pods_ok = np.asarray(free_pods >= np.where(joins, 1.0, 2.0) - EPSILON, dtype=np.bool_)
    parts = [cpu_ok, memory_ok, pods_ok]
    if request.uses_gpu:
        # Nodes that would fit the pod if it asked for no GPU: there GPUs are the missing piece
        # (`fit_rows` answers as `fit` does).
        # (The mask kept per request, read at `rows`: brought up to date at the nodes changed since it
        # was last asked, seldom any in a backlog's tail, whose pods ask a few dozen requests.)
        fits = nodes.fit(request, soon=True)[rows]
        gpu_blind_fit = cpu_ok & memory_ok & one_slot
        parts.append(fits | ~gpu_blind_fit)
    return list(zip(_shortfall_names(request), parts, strict=True))


def _resources_at(nodes: NodeTable, request: PodRequest, row: int, portion: float) -> list[bool]:
    """`resource_shortfalls` at one row (`portion`: `NodeTable.portion_for` there), in plain Python: the
    same IEEE doubles in the same order."""
    free_pods = nodes.cap_pods.item(row) - nodes.used_pods.item(row) + nodes.rel_pods.item(row)
    cpu_ok = (
        nodes.cap_cpu.item(row) - nodes.used_cpu.item(row) + nodes.rel_cpu.item(row) >= request.cpu - EPSILON
    )
    memory_ok = (
        nodes.cap_memory.item(row) - nodes.used_memory.item(row) + nodes.rel_memory.item(row)
        >= request.memory - EPSILON
    )
    one_slot = free_pods >= 1 - EPSILON
    pods_ok = one_slot
    if request.is_shared_gpu:
        joins = nodes.shared_free_soon.item(row) >= portion - EPSILON
        pods_ok = free_pods >= (1.0 if joins else 2.0) - EPSILON
    parts = [cpu_ok, memory_ok, pods_ok]
    if request.uses_gpu:
        # (`node_fits` answers as `fit` does.)
        parts.append(nodes.node_fits(request, row, soon=True) or not (cpu_ok and memory_ok and one_slot))
    return parts


def _shortfall_names(request: PodRequest) -> tuple[str, ...]:
    return _GPU_SHORTFALLS if request.uses_gpu else _SHORTFALLS


# More values than this held (`Session.capacity_inputs`), and they are let go: a first cycle's placements
# move the queues' allocations between most checks, each move a value no later cycle asks again.
_MOST_INPUTS_HELD = 4096
_SHORTFALLS = ("Insufficient cpu", "Insufficient memory", "Too many pods")
_GPU_SHORTFALLS = (*_SHORTFALLS, "Insufficient GPUs")
# At most this many rows are asked one at a time (`Session._first_refusals_at`).
_FEW_ROWS = 32
# More nodes passing a placement's static filters than this share of the cluster: a pod that found no node is
# explained by counting every node (`Session._count_no_fit`: the subset costs more than it saves).
_PAST_STATIC_SHARE = 8
# More nodes passing them than this: they are asked at once (`Session._count_no_fit`).
_ONE_BY_ONE = 4
# No more usage changes than this since a request's column was worked out, or since it was last explained
# (`Session._refusals_by_request`): its column is brought up to date at their rows, or worked out, to be
# read at the rows of the request's shapes (a row asked in plain Python costs some tenth of a column over
# 5,000 nodes).
_FEW_CHANGES_CAUGHT_UP = 8


def pack_gpus(nodes: NodeTable, node: int, portion: float, devices: int, soon: bool) -> list[GpuGroup | None]:
    """gpupack: the most-used shared GPUs that still fit first, then new ones."""
    candidates = sorted(
        nodes.shared_candidates(node, portion, soon=soon), key=lambda g: (-g.used, g.group_id)
    )
    chosen: list[GpuGroup | None] = list(candidates[:devices])
    chosen.extend([None] * (devices - len(chosen)))
    return chosen
