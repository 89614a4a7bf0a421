"""The pods and PodGroups the cluster cache holds, and whose each pod is.

A pod is ours when this cache schedules it (`schedules`: our scheduler's name, in our partition, its
PodGroup not backed off): it is a task of its job, and the job is made again when it changes. Any other
pod is another scheduler's to this cache: it only holds the node it is bound to (`accounting.Hold`).
Which it is can change with its PodGroup (pool label, backoff), so the pods that name a PodGroup are
indexed by it.
"""

from __future__ import annotations

from collections.abc import Iterable

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import Pod, namespace_of
from kai_scheduler.model.builder import job_key_in
from kai_scheduler.model.cache.accounting import Hold, NodeAccounting
from kai_scheduler.model.cache.asks import PodAsks
from kai_scheduler.model.cache.changes import Changes
from kai_scheduler.model.cache.indexes import discard
from kai_scheduler.model.cache.lone_jobs import LoneJobs
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.releasing import StuckReleases
from kai_scheduler.model.scheduling_backoff import is_backed_off
from kai_scheduler.model.snapshot import PodGroupState, PodState

FINISHED_PHASES = ("Succeeded", "Failed")


class PodIndex:
    def __init__(
        self,
        partition: Partition | None,
        changes: Changes,
        asks: PodAsks,
        accounting: NodeAccounting,
        stuck_releases: StuckReleases,
        lone_jobs: LoneJobs,
    ) -> None:
        self._partition = partition
        self._changes = changes
        self._asks = asks
        self._accounting = accounting
        self._stuck = stuck_releases
        self._lone = lone_jobs
        self.pods: dict[str, PodState] = {}
        self.groups: dict[str, PodGroupState] = {}  # the PodGroups this cache schedules
        # PodGroups backed off on their pool (`model.scheduling_backoff`): not scheduled, their pods not ours.
        self.backed_off: dict[str, PodGroupState] = {}
        # Partitioned: each PodGroup's pool label (None: absent), for the pods that name it.
        self._group_pools: dict[str, str | None] = {}
        self.ours_by_job: dict[str, set[str]] = {}  # job key -> our pods' keys
        self.job_of_pod: dict[str, str] = {}  # our pod's key -> job key
        self.named_by_group: dict[str, set[str]] = {}  # PodGroup key -> keys of pods that name it
        self.foreign: dict[str, int] = {}  # other schedulers' pods that hold a node -> node index

    # --- pods ---------------------------------------------------------------------------------------

    def put(self, key: str, previous: PodState | None, state: PodState) -> None:
        """A pod added or changed in a way its job must be made again for."""
        if previous is not None:
            if previous.pod is not state.pod:
                self._asks.derivations.forget(previous.pod)
            self._unindex(key, previous)
        self.pods[key] = state
        self._index(key, state)

    def remove(self, key: str) -> bool:
        """Whether the pod was held."""
        previous = self.pods.pop(key, None)
        if previous is None:
            return False
        self._asks.derivations.forget(previous.pod)
        self._unindex(key, previous)
        return True

    def is_dirty(self, key: str) -> bool:
        """Whether the job of our pod `key` will be made again anyway (True for another scheduler's)."""
        job = self.job_of_pod.get(key)
        return self._changes.everything or job is None or job in self._changes.jobs

    def asks_changed(self, keys: Iterable[str]) -> None:
        """What these pods ask for changed (their claims did): ours are made again, others held anew."""
        for key in keys:
            job = self.job_of_pod.get(key)
            if job is not None:
                self._changes.jobs.add(job)
                continue
            state = self.pods.get(key)
            if state is not None:
                self._unindex(key, state)
                self._index(key, state)

    def release_changed(self, key: str) -> None:
        """A pod turned stuck in releasing, or back: its task's status or its hold changes."""
        job = self.job_of_pod.get(key)
        if job is not None:
            self._changes.jobs.add(job)
        node = self.foreign.get(key)
        state = self.pods.get(key)
        if node is not None and state is not None:
            self._hold_foreign(key, state, node)

    def hold_foreign_pods(self) -> None:
        """Hold every other scheduler's pod on a new node table's nodes (ours are held by their tasks)."""
        index = self._accounting.table.index
        self.foreign = {}
        for key, state in self.pods.items():
            if key in self.job_of_pod:
                continue
            node = index.get(state.node_name) if state.node_name else None
            if node is not None and state.phase not in FINISHED_PHASES:
                self._hold_foreign(key, state, node)

    def _hold_foreign(self, key: str, state: PodState, node: int) -> None:
        self.foreign[key] = node
        request = self._asks.of(state.pod)[0]
        self._accounting.hold(key, Hold(node, request, self._stuck.releasing(key, state), (), ours=False))

    def _index(self, key: str, state: PodState) -> None:
        pod = state.pod
        metadata = pod.metadata  # (read once: see `job_key_in`)
        changes = self._changes
        self._asks.dra.track(key, pod)
        named = metadata.annotations.get(c.POD_GROUP_ANNOTATION)
        if named is not None:
            group_key = f"{namespace_of(metadata)}/{named}"
            self.named_by_group.setdefault(group_key, set()).add(key)
            changes.jobs.add(group_key)  # its first pod may speak for it
        if pod.spec.scheduler_name == c.SCHEDULER_NAME and (
            (self._partition is None and not self.backed_off) or self._in_partition(pod)
        ):
            job = job_key_in(metadata)
            self.job_of_pod[key] = job
            self.ours_by_job.setdefault(job, set()).add(key)
            changes.jobs.add(job)
            # What it asks for, worked out as it arrives (its task reads it by the pod object when its job
            # is made), as another scheduler's pod's is for its hold: a cycle after thousands of arrivals
            # does not work out each (20,000 in a first cycle at 5,000 nodes).
            self._asks.derivations.of(pod)
            # And a bare pod's plain job, when nothing that can change before its cycle decides it.
            self._lone.arrived(key, state)
            return
        node = self._accounting.table.index.get(state.node_name) if state.node_name else None
        if node is not None and state.phase not in FINISHED_PHASES:
            self._hold_foreign(key, state, node)
        changes.foreign = True

    def _unindex(self, key: str, state: PodState) -> None:
        pod = state.pod
        changes = self._changes
        self._asks.dra.untrack(key)
        named = pod.metadata.annotations.get(c.POD_GROUP_ANNOTATION)
        if named is not None:
            group_key = f"{pod.namespace}/{named}"
            discard(self.named_by_group, group_key, key)
            changes.jobs.add(group_key)
        job = self.job_of_pod.pop(key, None)
        if job is not None:
            self._lone.left(key)
            discard(self.ours_by_job, job, key)
            changes.jobs.add(job)
            return
        if self.foreign.pop(key, None) is not None:
            self._accounting.release(key, ours=False)
        changes.foreign = True

    # --- PodGroups and whose a pod is ---------------------------------------------------------------

    def put_group(self, state: PodGroupState, label_key: str) -> None:
        """A PodGroup added or changed; `label_key` names its pool (`ClusterCache.pool_label_key`)."""
        key = state.pod_group.key
        partition = self._partition
        labels = state.pod_group.metadata.labels
        ours = partition is None or partition.holds_value(labels.get(label_key))
        if ours and is_backed_off(state.pod_group, state.condition_pool, label_key):
            # KAI's cache leaves it out of the session: neither tried nor counted in its queue.
            self.backed_off[key] = state
            if self.groups.pop(key, None) is not None:
                self._changes.jobs.add(key)
            self._group_pools.pop(key, None)
            self._pods_follow_group(key)
            return
        was_backed_off = self.backed_off.pop(key, None) is not None
        if partition is not None:
            pool = labels.get(partition.label_key)
            moved = was_backed_off or key not in self._group_pools or self._group_pools[key] != pool
            self._group_pools[key] = pool
            if not partition.holds_value(pool):  # another shard's: its pods are not ours either
                if self.groups.pop(key, None) is not None:
                    self._changes.jobs.add(key)
                if moved:
                    self._pods_follow_group(key)
                return
            if moved:
                self._pods_follow_group(key)
        self.groups[key] = state
        self._changes.jobs.add(key)
        if was_backed_off and partition is None:
            self._pods_follow_group(key)  # its pods are ours again

    def remove_group(self, key: str) -> None:
        if self.groups.pop(key, None) is not None:
            self._changes.jobs.add(key)
        if self.backed_off.pop(key, None) is not None:
            self._pods_follow_group(key)
        if key in self._group_pools:
            del self._group_pools[key]
            self._pods_follow_group(key)

    def _pods_follow_group(self, group_key: str) -> None:
        """The pods that name a PodGroup whose pool changed (or that arrived or left) are ours or another
        scheduler's as it now says."""
        for key in list(self.named_by_group.get(group_key, ())):
            state = self.pods[key]
            if (key in self.job_of_pod) != self.schedules(state.pod):
                self._unindex(key, state)
                self._index(key, state)

    def schedules(self, pod: Pod) -> bool:
        """Whether this cache schedules `pod` (a pod of this scheduler, in its partition)."""
        return pod.spec.scheduler_name == c.SCHEDULER_NAME and self._in_partition(pod)

    def _in_partition(self, pod: Pod) -> bool:
        """A pod's pool is its PodGroup's; a pod whose PodGroup is not known speaks for itself. A pod whose
        PodGroup is backed off is in no one's."""
        partition = self._partition
        named = pod.metadata.annotations.get(c.POD_GROUP_ANNOTATION)
        if named is not None and self.backed_off and f"{pod.namespace}/{named}" in self.backed_off:
            return False  # its PodGroup is backed off: held like another scheduler's pod
        if partition is None:
            return True
        if named is not None:
            group_key = f"{pod.namespace}/{named}"
            if group_key in self._group_pools:
                return partition.holds_value(self._group_pools[group_key])
        return partition.holds(pod.metadata.labels)
