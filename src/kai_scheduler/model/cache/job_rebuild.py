"""The cluster cache's jobs and tasks, made again from the current objects when they are dirty.

A dirty job is made from scratch (`model.builder`: its PodGroup, or its first pod for a job without one,
and a task per pod), and its tasks replace the old ones: what they hold is accounted (`accounting`), and
the indexes a snapshot hands on (tasks with host ports or pod affinity, jobs with a topology constraint,
running jobs) follow. A pod whose runtime facts alone changed changes its task in place
(`update_in_place`). Jobs and tasks stay in creation order (`rank_order`).
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from kai_scheduler.api import constants as c
from kai_scheduler.model.admission import AdmissionFacts
from kai_scheduler.model.builder import (
    implicit_job,
    implicit_pod_group_name,
    is_gated,
    job_from_pod_group,
    make_task,
    queue_problem,
    task_status,
    waiting_reason,
)
from kai_scheduler.model.cache.accounting import Hold, NodeAccounting
from kai_scheduler.model.cache.admission_facts import note_gated
from kai_scheduler.model.cache.asks import PodAsks
from kai_scheduler.model.cache.changes import Changes
from kai_scheduler.model.cache.gang_jobs import GangJobs, check_gang_job
from kai_scheduler.model.cache.inputs import ClusterInputs
from kai_scheduler.model.cache.job_times import JobTimesBook, stamp
from kai_scheduler.model.cache.lone_jobs import LoneJobs
from kai_scheduler.model.cache.nominations import Nominations
from kai_scheduler.model.cache.pods import FINISHED_PHASES, PodIndex
from kai_scheduler.model.cache.rank_order import BEFORE_ALL, placed, rank_of_last, sort_tail
from kai_scheduler.model.job_changes import JobChangeLog
from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.releasing import StuckReleases
from kai_scheduler.model.snapshot import PodState

_OCCUPYING = (TaskStatus.RUNNING, TaskStatus.RELEASING, TaskStatus.STUCK_IN_RELEASING)
_TERMINAL = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
# Looked up once: Python 3.11 finds an enum's member through the hook `EnumType.__getattr__` puts on every
# lookup (~10x a global's cost), and these are asked of every task a first cycle makes.
_RUNNING, _RELEASING = TaskStatus.RUNNING, TaskStatus.RELEASING
_rank = attrgetter("rank")


class JobRebuild:
    def __init__(
        self,
        changes: Changes,
        pods: PodIndex,
        inputs: ClusterInputs,
        accounting: NodeAccounting,
        asks: PodAsks,
        nominations: Nominations,
        times: JobTimesBook,
        stuck_releases: StuckReleases,
        lone_jobs: LoneJobs,
        gang_jobs: GangJobs,
    ) -> None:
        self._changes = changes
        self._pods = pods
        self._inputs = inputs
        self._accounting = accounting
        self._asks = asks
        self._nominations = nominations
        self._times = times
        self._stuck = stuck_releases
        self._lone = lone_jobs
        self._gangs = gang_jobs
        self.jobs: dict[str, JobInfo] = {}
        self.tasks: dict[str, TaskInfo] = {}
        self.host_port_tasks: set[str] = set()
        self.pod_affinity_tasks: set[str] = set()
        # Our tasks that ask for GPU memory, and those nominated to a node (whatever their status): usually
        # few, and a session would otherwise look at every task for them.
        self.gpu_memory_tasks: set[str] = set()
        self.nominated_tasks: set[str] = set()
        # Jobs with a pod that meets queue admission gating (`JobInfo.admission`): none, or a few, of a large
        # cluster's jobs, which the `ungate` action would otherwise find by looking at every job each cycle.
        self.admission_jobs: set[str] = set()
        self.running_counts: dict[str, int] = {}  # job key -> its tasks that are RUNNING (none: absent)
        # Reasons a plugin may overwrite during a session (topology problems): restored after it. Holds
        # exactly the jobs that have a topology constraint.
        self.base_reasons: dict[str, str | None] = {}
        # Every job made again, removed or changed in place, in turn (what a snapshot's reader may need to
        # work out again: `model.job_changes`).
        self.log = JobChangeLog()
        # Entries added or re-ranked since the last `sort` may be out of place, and all of them (old and new
        # ranks) rank at or after these (None: all in place).
        self._jobs_out_of_place: float | None = None
        self._tasks_out_of_place: float | None = None
        # `queue_problem` of each queue asked, for the queue tree it was asked of (the inputs replace the
        # tree when the queues change): a first cycle asks it of every job, of a few dozen queues.
        self._problems_of: object = None
        self._problems: dict[str, str | None] = {}

    def reset(self) -> None:
        """Nothing made: every job is to be made again (on a new node table)."""
        self.jobs, self.tasks = {}, {}
        self.host_port_tasks.clear()
        self.pod_affinity_tasks.clear()
        self.gpu_memory_tasks.clear()
        self.nominated_tasks.clear()
        self.admission_jobs.clear()
        self.running_counts.clear()
        self.base_reasons.clear()
        self._jobs_out_of_place = self._tasks_out_of_place = None  # nothing is out of place in nothing
        self.log.note_everything()

    def sort(self) -> None:
        """Jobs and tasks in creation order again, as a build from scratch lists them."""
        if self._jobs_out_of_place is not None:
            sort_tail(self.jobs, self._jobs_out_of_place)
            self._jobs_out_of_place = None
        if self._tasks_out_of_place is not None:
            sort_tail(self.tasks, self._tasks_out_of_place)
            self._tasks_out_of_place = None

    def by_rank(self, keys: Iterable[str]) -> list[TaskInfo]:
        tasks = self.tasks
        return sorted((tasks[key] for key in keys), key=lambda task: task.rank)

    def jobs_by_rank(self, keys: Iterable[str]) -> list[JobInfo]:
        jobs = self.jobs
        return sorted((jobs[key] for key in keys), key=lambda job: job.rank)

    # --- making jobs ------------------------------------------------------------------------------

    def rebuild(self, key: str) -> None:
        self.log.note(key)
        old = self.jobs.get(key)
        if old is None:
            ours = self._pods.ours_by_job.get(key)
            if ours is not None and len(ours) == 1 and key not in self._pods.groups:
                (pod_key,) = ours
                if pod_key not in self.tasks:
                    lone = self._make_lone(key, pod_key, self._pods.pods[pod_key])
                    if lone is not None:
                        # Held for no job that is not in `jobs` (`_rebuild`, `reset`): as a new job's.
                        self.running_counts.pop(key, None)
                        self.base_reasons.pop(key, None)
                        self.admission_jobs.discard(key)
                        self._add_new(key, lone)
                        return
        self._rebuild(key, old)

    def rebuild_all(self) -> None:
        """Every job, after `reset`: as `rebuild` of each, but that none is in the log (`reset` noted
        everything, and no reader can hold a stamp taken since) and none is old, nor any of their tasks
        (each pod is one job's): the loop of a first cycle, over every job, its look-ups made once and each
        job added as new. The PodGroups' jobs are added first, in the order the PodGroups came, then the
        others in the order their first pods came (`PodIndex.ours_by_job`), their tasks then in the order
        their pods came, so both are nearly in creation order (a first cycle's PodGroups come before its
        bare pods, whose pods came between theirs: tasks added job by job were all to sort again)."""
        pods = self._pods
        ours_by_job, groups, states = pods.ours_by_job, pods.groups, pods.pods
        make_job, add_job, jobs = self._make_job, self._add_new_job, self.jobs
        last_rank = BEFORE_ALL  # (of the job added last: `reset` left none)
        for key in groups:
            job = make_job(key)
            if job is not None:
                last_rank = add_job(key, job, last_rank)
        # The plain jobs made as their pods arrived, taken at once (`LoneJobs.take_current`), are finished
        # here; any other bare pod's plain job is made now (`_make_lone`).
        arrived = self._lone.take_current(states)
        make_lone, finish_lone = self._make_lone, self._finish_lone
        for key, ours in ours_by_job.items():
            if key in groups:
                continue
            job = None
            if len(ours) == 1:
                (pod_key,) = ours
                job = arrived.get(pod_key)
                if job is None:
                    job = make_lone(key, pod_key, states[pod_key])
                else:
                    finish_lone(key, job)
            if job is None:
                job = make_job(key)
            if job is not None:
                last_rank = add_job(key, job, last_rank)
        add_tasks = self._add_new_tasks
        last_rank = BEFORE_ALL
        for key in ours_by_job:  # (every job with a task has a pod of ours)
            made = jobs.get(key)
            if made is not None:
                last_rank = add_tasks(key, made, last_rank)

    def _rebuild(self, key: str, old: JobInfo | None) -> None:
        job = self._make_job(key)
        if old is not None:
            kept = {task.key for task in job.tasks} if job is not None else set()
            for task in old.tasks:
                if task.key not in kept:
                    self._drop_task(task)
        if job is None:
            if old is not None:
                del self.jobs[key]
            self.running_counts.pop(key, None)
            self.base_reasons.pop(key, None)
            self.admission_jobs.discard(key)
            return
        self._jobs_out_of_place = placed(self.jobs, old, job, self._jobs_out_of_place)
        self.jobs[key] = job
        running = 0
        for task in job.tasks:  # loops, not generators: most jobs are one pod's
            self._add_task(task)
            if task.status is _RUNNING:
                running += 1
        if running:
            self.running_counts[key] = running
        else:
            self.running_counts.pop(key, None)
        if job.has_topology():
            self.base_reasons[key] = job.invalid_reason
        else:
            self.base_reasons.pop(key, None)
        _index(self.admission_jobs, key, job.admission is not None)

    def _make_job(self, key: str) -> JobInfo | None:
        """The job `key` from the current objects (None when it has neither a PodGroup nor a pod): a
        PodGroup's job drafted as it arrived (`GangJobs.take`) finished with what this cycle's inputs say
        of it (its queue's problem, its times, why it waits), else made now."""
        drafted = self._gangs.take(key, self._pods.groups.get(key))
        if drafted is None:
            return self._build_job(key)
        reason = self._queue_problem(drafted.queue)
        times = self._times.by_job.get(key)
        if times is not None:
            stamp(drafted, times)
        drafted.invalid_reason = reason if reason is not None else waiting_reason(drafted, 0)
        if self._gangs.verify:
            check_gang_job(drafted, self._build_job(key))
        return drafted

    def _build_job(self, key: str) -> JobInfo | None:
        """The job `key` made from the current objects."""
        index = self._pods
        pods = index.pods
        priorities = self._inputs.priorities
        ours = [pods[k] for k in index.ours_by_job.get(key, ())]
        if len(ours) > 1:  # most jobs of a large cluster are one bare pod's
            ours.sort(key=_rank)
        group = index.groups.get(key)
        if group is not None:
            named = (pods[k] for k in index.named_by_group.get(key, ()))
            first = min(named, key=lambda p: p.rank, default=None)
            job = job_from_pod_group(group, first.pod if first else None, priorities)
        elif ours:
            first_pod = ours[0].pod
            if c.POD_GROUP_ANNOTATION in first_pod.metadata.annotations:
                job = implicit_job(ours[0], key.split("/", 1)[1], priorities)
                job.invalid_reason = f"PodGroup {key} does not exist"
            else:
                job = implicit_job(ours[0], implicit_pod_group_name(first_pod), priorities)
                if first_pod.metadata.annotations.get(c.SKIP_PODGROUPER_ANNOTATION) == "true":
                    # No pod grouper makes it a PodGroup, and it names none (KAI never schedules it).
                    skip, group_key = c.SKIP_PODGROUPER_ANNOTATION, c.POD_GROUP_ANNOTATION
                    job.invalid_reason = (
                        f'the pod has {skip}: "true" and no {group_key}: no PodGroup is made for it'
                    )
        else:
            return None
        if job.invalid_reason is None:
            job.invalid_reason = self._queue_problem(job.queue)
        times = self._times.by_job.get(key)
        if times is not None:
            stamp(job, times)
        gated = 0
        node_index = self._accounting.table.index
        nominations, asks, stuck = self._nominations, self._asks, self._stuck
        admission: AdmissionFacts | None = None  # made for the few jobs with gated or admitted pods
        for state in ours:
            if is_gated(state):
                gated += 1  # KAI's status of that name: alive, but not for the scheduler until ungated
                if admission is None:
                    admission = AdmissionFacts()
                note_gated(admission, state, asks)
                continue
            if state.admitted is not None and state.node_name is None:
                if admission is None:
                    admission = AdmissionFacts()
                admission.admitted[state.pod.key] = state.admitted
            state = nominations.of(state)
            task = make_task(state, job, asks.of(state.pod), node_index, stuck=_is_stuck(stuck, state))
            if task is not None:
                job.tasks.append(task)
                task.podset.tasks.append(task)
        if job.invalid_reason is None:
            job.invalid_reason = waiting_reason(job, gated)
        job.gated = gated
        job.admission = admission or None
        return job

    def _add_new(self, key: str, job: JobInfo) -> None:
        """`_rebuild`'s bookkeeping for a job new to the cache whose tasks are new to it too: no old job's
        tasks to drop, no index holding their keys or the job's yet (a bare pod's plain job, usually:
        without topology or admission facts)."""
        self._add_new_job(key, job, rank_of_last(self.jobs))
        self._add_new_tasks(key, job, rank_of_last(self.tasks))

    def _add_new_job(self, key: str, job: JobInfo, last_rank: float) -> float:
        """`_add_new` of the job alone (its tasks: `_add_new_tasks`), `last_rank` that of the last of `jobs`
        (the callers know it: asking `jobs` for its last entry makes an iterator, and a first cycle adds
        some 15,000 jobs at 5,000 nodes); returns the job's rank, the last one now."""
        jobs = self.jobs
        rank = job.rank
        if rank < last_rank:
            self._jobs_out_of_place = placed(jobs, None, job, self._jobs_out_of_place)
        jobs[key] = job
        if job.lone_task is None:  # (a plain job has neither: `LoneJobs.make`)
            if job.has_topology():
                self.base_reasons[key] = job.invalid_reason
            if job.admission is not None:
                self.admission_jobs.add(key)
        return rank

    def _add_new_tasks(self, key: str, job: JobInfo, last_rank: float) -> float:
        """`_add_new` of the tasks of the job `key`, added, `last_rank` that of the last of `tasks` (as
        `_add_new_job`); returns the rank of the last of them now."""
        tasks = self.tasks
        running = 0
        for task in job.tasks:
            task_key = task.key
            rank = task.rank
            if rank < last_rank:
                self._tasks_out_of_place = placed(tasks, None, task, self._tasks_out_of_place)
            last_rank = rank
            tasks[task_key] = task
            if task.host_ports:
                self.host_port_tasks.add(task_key)
            if task.placement.has_pod_affinity:
                self.pod_affinity_tasks.add(task_key)
            if task.request.gpu_memory_mib:
                self.gpu_memory_tasks.add(task_key)
            if task.nominated_node >= 0:
                self.nominated_tasks.add(task_key)
            status = task.status
            if task.node >= 0 and status in _OCCUPYING:
                releasing = status is _RELEASING
                self._accounting.hold(
                    task_key, Hold(task.node, task.request, releasing, task.gpu_groups, ours=True)
                )
            if status is _RUNNING:
                running += 1
        if running:
            self.running_counts[key] = running
        return last_rank

    def _make_lone(self, key: str, pod_key: str, state: PodState) -> JobInfo | None:
        """The job of a bare pod of ours that no PodGroup names and no other pod shares (most jobs of a
        large cluster), as `_make_job` makes it: its plain job (`LoneJobs.of`, usually made as the pod
        arrived) finished (`_finish_lone`); None when the pod needs more than the plain case."""
        job = self._lone.of(pod_key, state)
        if job is not None:
            self._finish_lone(key, job)
        return job

    def _finish_lone(self, key: str, job: JobInfo) -> None:
        """What this cycle's inputs say of the plain job `key` (`LoneJobs.make`): its queue's problem and its
        times. Hot: a first cycle finishes ~15,400 at 5,000 nodes, so the queue's problem is looked up in
        `_problems` before it is asked."""
        queue = job.queue
        problems = self._problems
        if self._inputs.queue_tree is self._problems_of and queue in problems:
            reason = problems[queue]
        else:
            reason = self._queue_problem(queue)
        times = self._times.by_job
        if times and key in times:  # (a first cycle's jobs have none)
            stamp(job, times[key])
        if reason is None and job.tasks[0].status in _TERMINAL:
            reason = waiting_reason(job, 0)
        job.invalid_reason = reason

    def _queue_problem(self, queue: str) -> str | None:
        """`queue_problem` of `queue` in the inputs' queue tree, asked once a queue and tree."""
        tree = self._inputs.queue_tree
        if tree is not self._problems_of:
            self._problems_of, self._problems = tree, {}
        problems = self._problems
        if queue in problems:
            return problems[queue]
        problem = problems[queue] = queue_problem(queue, tree)
        return problem

    def _add_task(self, task: TaskInfo) -> None:
        old = self.tasks.get(task.key)
        self._tasks_out_of_place = placed(self.tasks, old, task, self._tasks_out_of_place)
        self.tasks[task.key] = task
        if task.host_ports:
            self.host_port_tasks.add(task.key)
        else:
            self.host_port_tasks.discard(task.key)
        if task.placement.has_pod_affinity:
            self.pod_affinity_tasks.add(task.key)
        else:
            self.pod_affinity_tasks.discard(task.key)
        _index(self.gpu_memory_tasks, task.key, bool(task.request.gpu_memory_mib))
        _index(self.nominated_tasks, task.key, task.nominated_node >= 0)
        self._account_task(task)

    def _drop_task(self, task: TaskInfo) -> None:
        if self.tasks.get(task.key) is not task:
            return  # the pod moved to another job, already made again
        del self.tasks[task.key]
        self.host_port_tasks.discard(task.key)
        self.pod_affinity_tasks.discard(task.key)
        self.gpu_memory_tasks.discard(task.key)
        self.nominated_tasks.discard(task.key)
        self._accounting.release(task.key, ours=True)

    def _account_task(self, task: TaskInfo) -> None:
        """Hold what the task holds on its node (or nothing)."""
        if task.node >= 0 and task.status in _OCCUPYING:
            releasing = task.status is _RELEASING
            self._accounting.hold(
                task.key, Hold(task.node, task.request, releasing, task.gpu_groups, ours=True)
            )
        else:
            self._accounting.release(task.key, ours=True)

    def _count_running(self, job: str, change: int) -> None:
        count = self.running_counts.get(job, 0) + change
        if count > 0:
            self.running_counts[job] = count
        else:
            self.running_counts.pop(job, None)

    # --- changing tasks in place ------------------------------------------------------------------

    def update_in_place(self, key: str, previous: PodState, state: PodState) -> bool:
        """A pod (`key`) whose runtime facts changed (bound, evicted, moved) changes its task in place when
        nothing its job is made of depends on the change: the same pod object and rank, not gated before
        or after, a task before and after, finished neither before nor after (the job's live-pod count),
        its node known. Otherwise (False) the job is made again."""
        task = self.tasks.get(key)
        if task is None or previous.pod is not state.pod or previous.rank != state.rank:
            return False
        node_name = state.node_name
        # The same pod object, so the same gates: gated before or after is gated and unbound then.
        if (state.pod.spec.scheduling_gates and (previous.node_name is None or node_name is None)) or (
            previous.phase in FINISHED_PHASES
        ) != (state.phase in FINISHED_PHASES):
            return False
        if self._pods.is_dirty(key):
            return False
        status = task_status(state, stuck=_is_stuck(self._stuck, state))
        node = self._accounting.table.index.get(node_name, -1) if node_name else -1
        if status is None or (node_name is not None and node < 0):
            return False
        was_running = task.status is _RUNNING
        task.status, task.node, task.gpu_groups = status, node, state.gpu_groups
        job = task.job
        job.version += 1
        job_key = job.key
        self.log.note(job_key)
        self._account_task(task)
        self._count_running(job_key, int(status is _RUNNING) - int(was_running))
        return True

    def restore(self, keys: Iterable[str]) -> int:
        """A session committed a decision on each of our pods `keys`: its task's status, node and shared
        GPUs go back to what the pod says (or its job is made again). Returns how many keys there were
        (a first cycle's ~20,000 at 5,000 nodes: one loop, its look-ups made once)."""
        tasks, states, stuck = self.tasks, self._pods.pods, self._stuck
        node_index = self._accounting.table.index
        # `PodIndex.is_dirty` without a call per pod: the changed jobs are a live set (a pod whose job is
        # marked below makes its job's other pods dirty too), and nothing here makes everything change.
        job_of_pod, changes = self._pods.job_of_pod, self._changes
        everything, changed = changes.everything, changes.jobs
        noted: list[str] = []  # the log's notes, made at once (the log keeps no order within a batch)
        note = noted.append
        count = 0
        for key in keys:
            count += 1
            task = tasks.get(key)
            state = states.get(key)
            job_key = job_of_pod.get(key)
            if task is None or state is None or everything or job_key is None or job_key in changed:
                if job_key is not None:
                    changed.add(job_key)  # `_mark_job_of`
                continue
            status = task_status(state, stuck=_is_stuck(stuck, state))
            if status is None:
                changed.add(job_key)
                continue
            node_name = state.node_name
            task.status, task.gpu_groups = status, state.gpu_groups
            task.node = node_index.get(node_name, -1) if node_name else -1
            job = task.job
            job.version += 1
            note(job.key)
        self.log.note_all(noted)
        return count

    def restore_reasons(self) -> None:
        """Jobs whose invalid reason a plugin overwrote during a session are made again."""
        jobs = self.jobs
        for key, reason in self.base_reasons.items():
            job = jobs.get(key)
            if job is not None and job.invalid_reason != reason:
                self._changes.jobs.add(key)

    def nominate(self, key: str) -> None:
        """Our pod `key`'s nomination changed (`Nominations`): its task follows."""
        task = self.tasks.get(key)
        if task is None or self._pods.is_dirty(key):
            self._mark_job_of(key)
            return
        node, groups = self._nominations.by_pod.get(key, (None, ()))
        task.nominated_node = self._accounting.table.index.get(node, -1) if node else -1
        task.nominated_groups = groups
        _index(self.nominated_tasks, key, task.nominated_node >= 0)
        task.job.version += 1  # what the scheduler keeps per job reads them (`gang.next_signature`)
        self.log.note(task.job.key)

    def _mark_job_of(self, key: str) -> None:
        job = self._pods.job_of_pod.get(key)
        if job is not None:
            self._changes.jobs.add(job)


def _is_stuck(stuck: StuckReleases, state: PodState) -> bool:
    """Whether the pod is stuck in releasing, for `task_status`, which reads it of a bound, terminating
    pod only: most pods then need no key made."""
    return state.terminating and state.node_name is not None and stuck.is_stuck(state.pod.key)


def _index(keys: set[str], key: str, member: bool) -> None:
    if member:
        keys.add(key)
    else:
        keys.discard(key)
