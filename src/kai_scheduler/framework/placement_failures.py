"""Allocate's attempts whose first pod found no node, carried to the next cycle (issue #23, point 1: a
cycle after one change costs what changed).

Every cycle allocate tries the first waiting job of each shape, and on a full cluster nearly every such
attempt finds no node: a few hundred attempts a cycle at 5,000 nodes, each reading every node. Whether a
pod has a candidate node depends, for the plain node filters (`ROW_FILTERS`), on each node alone: its row
of the node table (usage and capacity), its static facts (labels, taints, cordon, readiness), and the
cluster's storage objects, which are the same object until they change. So a pod that had no candidate
when the last session tried it has none now unless one of the rows that may differ since is a
candidate: the rows the last session changed from where it last found the pod's shape had none on, the
rows where its node table as it was left and this session's differ (`NodeTable.rows_differing`), and the
rows this session changed since. Those few rows are asked one by one (`Session.any_candidate`: a row a
node flag refuses, a cordoned node, is a candidate for no pod, and the others' static answers are read
without any placement's masks over every node while older ones answer for them, `static_masks`); when
none is a candidate,
the attempt's outcome is written as the attempt would write it (its first pod does not fit, nothing
placed, with the explanation worked out now) without making it.

Only jobs whose candidates read nothing else are carried: no topology constraint (the first pod of an
attempt is then the first one tried), no nomination, nothing of a pod read by the filters beyond its
request and placement
(`Session.reads_other_pods`, `ExtensionPoints.signature_reads`), in a session whose filters are all
named in `ROW_FILTERS`, that holds no capacity (reservation) and places nothing by queue. With `verify`
(`KAI_SCHEDULER_VERIFY_REUSE=1`) each carried failure is attempted as well, and a difference raises
`CarriedMismatch` (`actions.allocate`).

The same rows bring up to date the explanations of the pods that found no node (`no_fit_counts`): kept
per pod shape from one session's allocate to the next, and within it, each is counted again over the rows
that may differ since it was counted (`Session.explain_no_fit`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kai_scheduler.framework.no_fit_counts import NoFitCounts, NoFitWords
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.nodes import NodeTable
from kai_scheduler.model.resources import PodRequest
from kai_scheduler.model.storage import Storage

if TYPE_CHECKING:
    from kai_scheduler.framework.session import Session

# The node filters whose answer for a node reads only that node's row and static facts, the pod's
# request and placement, and the storage objects: the static ones of the predicates plugin, its GPU kind
# filter, and pod affinity for a pod no inter-pod rule is about (`Session.reads_other_pods`).
ROW_FILTERS = frozenset(
    {"unschedulable", "notready", "nodeaffinity", "taints", "volumebinding", "gpukind", "podaffinity"}
)
# More rows to ask one by one than this share of the nodes (and than a few): the attempt is made instead.
_MOST_ROWS_SHARE = 8
_FEW_ROWS = 16


@dataclass(frozen=True, slots=True)
class _LastSession:
    """What the last session's allocate left: its node table (as the session left it), where that
    table's log of changes stood when allocate started, the storage and the node filters it read, the pod
    shapes (request, placement key) an attempt's first pod of which had no candidate node, each with where
    that table's log stood when it was last known to have none, and the explanations it counted (by what
    they depend on, `Session.explain_no_fit`)."""

    nodes: NodeTable
    allocate_started: int
    storage: Storage
    filters: tuple[str, ...]
    no_room: dict[tuple[PodRequest, str], int]
    no_fit: dict[Hashable, NoFitCounts]


class PlacementFailures:
    """Carried from one session to the next (`JobMemos`); `start` hands allocate this cycle's part."""

    __slots__ = ("_last", "_part", "words")

    def __init__(self) -> None:
        self._last: _LastSession | None = None
        self._part: SessionFailures | None = None
        # The explanations' words by what they read, for every session (`Session.explain_no_fit`).
        self.words = NoFitWords()

    def start(self, session: Session) -> SessionFailures | None:
        """This session's part, or None when its filters read more than rows (nothing carried, nothing
        kept for the next session)."""
        last, self._last = self._last, None
        if not _rows_decide(session):
            return None
        if last is not None and (
            last.storage is not session.snapshot.storage or last.filters != _filter_names(session)
        ):
            last = None
        self._part = SessionFailures(self, session, last)
        return self._part

    def part_of(self, session: Session) -> SessionFailures | None:
        """`session`'s part while its allocate runs (None: none runs, or its rows do not decide)."""
        part = self._part
        return part if part is not None and part.session is session else None

    def keep(self, last: _LastSession) -> None:
        self._last = last
        self._part = None


class SessionFailures:
    """One session's allocate: answers whether an attempt is known to find no node, and notes the
    attempts that found none, for the next session."""

    def __init__(self, carried: PlacementFailures, session: Session, last: _LastSession | None) -> None:
        self._carried = carried
        self.session = session
        self.words = carried.words
        self._last = last
        nodes = session.snapshot.nodes
        self._nodes = nodes
        self._started = nodes.change_position()
        # Per pod shape found to have no candidate node, where this table's log stood when it was last
        # found so (`_differing_rows_since` reads the next session's rows to ask from there).
        self._no_room: dict[tuple[PodRequest, str], int] = {}
        self._no_fit: dict[Hashable, NoFitCounts] = {}
        # Per pod shape (request, placement key), the rows list (`_differing_rows`) none of which is a
        # candidate for it (`_none_a_candidate`).
        self._none_among: dict[tuple[PodRequest, str], list[int]] = {}
        # Those rows less the ones a node flag refuses (a cordoned node: a candidate for no pod), worked
        # out once per rows list.
        self._open: tuple[list[int] | None, list[int]] = (None, [])
        # The rows that may differ from the last session's as it tried its pods, as of `_seen` in this
        # table's log: worked out when first needed (`_rows_known`); None: any row may differ.
        self._rows_known = False
        self._rows: list[int] | None = None
        self._seen = 0
        self._few: list[int] | None = None  # `_rows` when no more than `_most_rows`, as of `_seen`
        # Of `_rows`, those where the two tables differ and those this session changed (not those the
        # last session changed), and by a position of the last table's log later than where its allocate
        # started, the rows that may differ since it (`_differing_rows_since`), as of `_seen`.
        self._across: list[int] = []
        self._since: dict[int, list[int]] = {}

    @staticmethod
    def first_pod(session: Session, job: JobInfo, tasks: list[TaskInfo]) -> TaskInfo | None:
        """The first pod an attempt of `tasks` tries, when the candidates of its pods depend on node rows
        alone (see the module doc)."""
        if not tasks or job.has_topology():
            return None
        for task in tasks:
            if task.nominated_node >= 0 or session.reads_other_pods(task):
                return None
        return tasks[0]

    def may_know_some(self) -> bool:
        """Whether an attempt may be known to find no node (`fails_again`): the last session noted pod
        shapes that found none."""
        last = self._last
        return last is not None and bool(last.no_room)

    def fails_again(self, task: TaskInfo) -> bool:
        """Whether an attempt whose first pod is `task` (`first_pod`) is known to find no node for it: a
        pod of its shape found none in the last session and none may now by its rows (`none_by_rows`),
        or else a pre-predicate refuses the pod now."""
        known = self.none_by_rows(task)
        return known is not None and (known or self.session.refused_everywhere(task))

    def none_by_rows(self, task: TaskInfo) -> bool | None:
        """Whether no node is a candidate for a pod of `task`'s shape (request and placement: all its
        candidates read of it, `first_pod`), pre-predicates aside: a pod of its shape found none in the
        last session, and no row that may differ since it found none is a candidate; then noted for the
        next session. None when not known (no pod of its shape was noted, or too many rows may differ).
        The same for every pod of one shape."""
        last = self._last
        if last is None:
            return None
        shape = (task.request, task.placement.key)
        found_none_at = last.no_room.get(shape)
        if found_none_at is None:
            return None
        rows = self._differing_rows_since(found_none_at)
        if rows is None:
            return None
        if rows and not self._none_a_candidate(task, shape, rows):
            return False
        self._no_room[shape] = self._nodes.change_position()
        return True

    def _none_a_candidate(self, task: TaskInfo, shape: tuple[PodRequest, str], rows: list[int]) -> bool:
        """Whether no row of `rows` (`_differing_rows`, as it stands) is a candidate for `task` (of
        `shape`), which no pre-predicate refuses: asked once per pod shape while the rows stay the same
        list (they are a new one once this session changes a row), since the answer reads of the pod only
        its request and placement (`first_pod`)."""
        if self._none_among.get(shape) is rows:
            return True
        if self._open[0] is not rows:
            refused = self.session.refused_by_node_flags
            self._open = (rows, [row for row in rows if not refused(row)])
        if self.session.any_candidate(task, self._open[1]):
            return False
        self._none_among[shape] = rows
        return True

    def found_no_node(self, tasks: list[TaskInfo]) -> None:
        """An attempt of `tasks` (`first_pod` not None) was made and its first pod found no node
        (`first_pod_found_none`): its shape noted for the next session when its rows decided it (a
        pre-predicate did not refuse it)."""
        task = tasks[0]
        if not self.session.refused_everywhere(task):
            self._no_room[task.request, task.placement.key] = self._nodes.change_position()

    def end(self) -> None:
        """Allocate is done: what it noted is the next session's to read."""
        session = self.session
        self._carried.keep(
            _LastSession(
                self._nodes,
                self._started,
                session.snapshot.storage,
                _filter_names(session),
                self._no_room,
                self._no_fit,
            )
        )

    def kept_counts(self, key: Hashable) -> tuple[NoFitCounts, list[int]] | None:
        """The explanation counted for `key` in this session, or else in the last one from its allocate
        on, with the rows that may differ since (unique, in index order); None when none was counted or
        too many rows may differ. It is this session's to count again and `keep_counts`."""
        counts = self._no_fit.get(key)
        if counts is not None:
            changed = self._nodes.changed_since(counts.position)
            if changed is None:
                return None
            rows = sorted(set(changed)) if changed else []
            return (counts, rows) if len(rows) <= self._most_rows() else None
        last = self._last
        if last is None:
            return None
        counts = last.no_fit.pop(key, None)
        if counts is None or counts.position < last.allocate_started:
            return None
        differing = self._differing_rows_since(counts.position)
        return None if differing is None else (counts, differing)

    def text_counted_at(self, key: Hashable, position: int) -> str | None:
        """The words of the explanation counted for `key` in this session when the node table's log of
        changes stood at `position` (None: none is): `kept_counts` would give it with no row to count
        again, and it reads as it did. Why: most explanations of a backlog's tail come with no node
        changed since the last of their shape, and the way through `kept_counts` costs several calls."""
        counts = self._no_fit.get(key)
        return counts.text if counts is not None and counts.position == position else None

    def keep_counts(self, key: Hashable, counts: NoFitCounts) -> None:
        self._no_fit[key] = counts

    def _differing_rows(self) -> list[int] | None:
        """The rows of this session's node table that may differ from the last session's as it tried its
        pods (None: too many, or not known)."""
        nodes = self._nodes
        if self._rows_known and self._seen == nodes.change_position():
            return self._few  # asked twice an attempt, of rows that seldom move within a session
        last = self._last
        assert last is not None
        if not self._rows_known:
            self._rows_known = True
            since_started = last.nodes.changed_since(last.allocate_started)
            differing = last.nodes.rows_differing(nodes)
            if since_started is not None and differing is not None:
                self._across = differing.tolist()
                self._rows = sorted({*since_started, *self._across})
                self._seen = nodes.change_position()
        if self._rows is not None:
            changed = nodes.changed_since(self._seen)
            if changed is None:
                self._rows = None
            elif changed:  # this session's changes so far, folded in once
                self._rows = sorted({*self._rows, *changed})
                self._across = sorted({*self._across, *changed})
                self._since = {}
        self._seen = nodes.change_position()
        rows = self._rows
        self._few = rows if rows is not None and len(rows) <= self._most_rows() else None
        return self._few

    def _differing_rows_since(self, position: int) -> list[int] | None:
        """`_differing_rows` for what the last session worked out at `position` of its table's log (at or
        after where its allocate started): the rows it changed since `position`, not since its allocate
        started. Why: an explanation counted again after the last session placed a pod (the rest of a
        walk after a completion) is not counted again at that pod's node in the next session, for each of
        a backlog's some 400 pod shapes; nor is a pod shape found then to have no node asked about it."""
        rows = self._differing_rows()
        last = self._last
        assert last is not None
        if rows is None or position == last.allocate_started:
            return rows
        since = self._since.get(position)
        if since is None:
            changed = last.nodes.changed_since(position)
            if changed is None:
                return rows
            since = self._since[position] = sorted({*changed, *self._across})
        return since

    def _most_rows(self) -> int:
        return max(self._nodes.size // _MOST_ROWS_SHARE, _FEW_ROWS)


def first_pod_found_none(session: Session, tasks: list[TaskInfo]) -> bool:
    """Whether an attempt of `tasks` (`SessionFailures.first_pod` not None) that was made and failed
    failed at its first pod: a pre-predicate refuses it, or no node is a candidate (a single pod's
    attempt fails only so; a gang's may at a later pod)."""
    task = tasks[0]
    return len(tasks) == 1 or session.refused_everywhere(task) or not session.candidate_nodes(task).any()


def _rows_decide(session: Session) -> bool:
    """Whether every node filter of the session reads only rows (see the module doc)."""
    points = session.points
    return (
        points.holds is None
        and not points.queue_bound_placement
        and not points.signature_reads
        and session.allowed is None
        and all(name in ROW_FILTERS for name in _filter_names(session))
    )


def _filter_names(session: Session) -> tuple[str, ...]:
    """The session's node filters by name, static ones first, in order."""
    points = session.points
    return (
        *(name for name, _, _ in points.static_predicates),
        *(predicate.name for predicate in points.task_predicates),
    )
