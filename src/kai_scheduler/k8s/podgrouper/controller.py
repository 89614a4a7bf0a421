"""The pod grouper as a controller: gives every pod of this scheduler its PodGroup (KAI's `podgrouper`).

For each pod with `spec.schedulerName` = ours that is not finished, not terminating and not yet grouped
(no `pod-group-name` annotation, or one naming a PodGroup that does not exist), `reconcile_pod`:

1. reads the pod's owner chain through the API (`owner_reader.py`): each controller owner reference of a kind
   the grouper knows is fetched with a GET at the reference's apiVersion (the plural from its table of
   those kinds, which its role may read). An owner of another kind is not read: a stub made from the
   reference (name, uid, kind) stands in for it, and the grouper groups the pod by it as an unknown kind
   (`pg-<owner>-<uid>`, minMember 1). A 404 means the owner is gone (the pod will be garbage-collected):
   the pod is left alone. Owners are remembered for `owner_cache_ttl` seconds, so that the pods of one job,
   which arrive together, do not each read the whole chain; but only for pods seen before the read started,
   so that a pod never meets its owner as it was before the pod existed (a job scaled up, then its new
   pod);
2. plans the PodGroup with `plan_pod_group` (pure); a `GroupingError` becomes a Warning Event on the pod
   (reason `PodGrouperWarning`, once per message and pod) and a log line, never a crash; input that KAI's
   grouper passes over without a word (a segment placement it cannot use) is passed over here too, but
   said: a Warning Event on the pod (reason `PodGrouperDroppedInput`) and a log line once per PodGroup;
3. creates the PodGroup (`pod_group_manifest`); if it exists already (in the informer cache, or the
   create answers 409 AlreadyExists) and its spec differs from the plan (minMember, queue, priority
   class, preemptibility, sub-groups, topology), merge-patches the spec to the plan;
4. merge-patches the pod with the `pod-group-name` annotation and the sub-group label, if they differ.

Everything is idempotent: a restart finds annotated pods with existing PodGroups and does nothing; a crash
between the create and the pod patch is finished by the next run (the create then answers 409). A bare
pod that carries a `pod-group-name` annotation of the user's own (not the name the grouper would give it)
is left to the user, as KAI does; so is a pod that has `kai.scheduler/skip-podgrouper: "true"`, or one
of whose owners has it (its owners are read to know): it joins the external PodGroup its
`pod-group-name` names, made by the user or another controller.

The controller is a `runtime.reconciler.Reconciler` keyed by pod: work comes from the pods informer's
handlers (new and changed pods), from the PodGroups informer (a deleted PodGroup re-groups its pods), and
from the reconciler's periodic resync over every cached pod that needs grouping; failures to reach the API
are `TemporaryError`s, retried with the reconciler's backoff. Under leader election `run` runs during each
term (`runtime.leader.lead`).

    grouper = PodGrouperController(client, informers)
    await grouper.run(stop)            # until `stop` (an asyncio.Event) is set
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.controlplane.podgrouper import (
    DEFAULT_GROUPER_DEFAULTS,
    GrouperDefaults,
    GroupingError,
    PodGroupPlan,
    plan_pod_group,
    pod_group_manifest,
    skips_pod_grouper,
)
from kai_scheduler.k8s.podgrouper.owner_reader import ACCESS as OWNER_ACCESS
from kai_scheduler.k8s.podgrouper.owner_reader import OwnerGone, OwnerReader, Owners, controller_reference
from kai_scheduler.k8s.runtime.access import Access, access, watching
from kai_scheduler.k8s.runtime.backoff import RETRY_BACKOFF, Backoff
from kai_scheduler.k8s.runtime.client import (
    POD_GROUPS,
    PODS,
    ApiStatusError,
    JsonObject,
    KubeClient,
)
from kai_scheduler.k8s.runtime.events import ACCESS as EVENT_ACCESS
from kai_scheduler.k8s.runtime.events import record_event
from kai_scheduler.k8s.runtime.informer import Informer
from kai_scheduler.k8s.runtime.informers import POD_GROUP_INDEX, PODGROUPER_KINDS, InformerSet
from kai_scheduler.k8s.runtime.objects import metadata_of, object_key
from kai_scheduler.k8s.runtime.reconciler import Reconciler, ReconcileStats, Result, TemporaryError

log = logging.getLogger(__name__)

# PodGroups created, read back after a 409 and patched to the plan; pods annotated; owners read.
ACCESS: tuple[Access, ...] = (
    *watching(PODGROUPER_KINDS),
    access(POD_GROUPS, "create", "get", "patch"),
    access(PODS, "patch"),
    EVENT_ACCESS,
    *OWNER_ACCESS,
)

EVENT_REASON = "PodGrouperWarning"
"""The reason of the Warning Event recorded on a pod that cannot be grouped."""
DROPPED_REASON = "PodGrouperDroppedInput"
"""The reason of the Warning Event on a pod whose PodGroup was made without some of its input, as KAI's pod
grouper makes it (a segment placement without a segment size or a topology name), where KAI says nothing."""
# How many (PodGroup, dropped input) pairs are remembered as logged, so that a job's pods log it once.
_MAX_LOGGED_DROPS = 10_000

_SPEC_FIELDS = (
    "minMember",
    "minSubGroup",
    "queue",
    "priorityClassName",
    "preemptibility",
    "subGroups",
    "topologyConstraint",
    "stalenessGracePeriod",
    "preemptionDelay",
)


def is_finished(pod: Mapping[str, Any]) -> bool:
    return str((pod.get("status") or {}).get("phase") or "") in ("Succeeded", "Failed")


# --- the controller --------------------------------------------------------------------------------


class Outcome(enum.Enum):
    """What `reconcile_pod` did."""

    SKIPPED = "skipped"  # not ours, finished, already grouped, or grouped by the user
    GROUPED = "grouped"  # the PodGroup exists as planned and the pod is annotated
    FAILED = "failed"  # the pod cannot be grouped: an Event says why
    OWNER_GONE = "owner-gone"  # an owner was deleted: the pod goes with it


@dataclass(slots=True)
class GrouperStats:
    """What the controller did, for tests and diagnostics: `reconciled` counts the pods it set out to
    group; `retries` and `errors` are the reconciler's (`loop`)."""

    loop: ReconcileStats = field(repr=False)
    reconciled: int = 0
    created: int = 0
    updated: int = 0
    pods_patched: int = 0
    events: int = 0
    owner_reads: int = 0

    @property
    def retries(self) -> int:
        return self.loop.retried

    @property
    def errors(self) -> list[str]:
        return self.loop.errors


# What is retried: the API server refused for now or could not be reached.
_API_FAILURES = (ApiStatusError, ConnectionError, OSError, TimeoutError)


class PodGrouperController(Reconciler):
    """See the module doc. `informers` must include pods (PodGroups are used when present); the caller
    starts them. `queue_label_key` and `defaults` are the grouper's settings (`plan_pod_group`).

    `workers`: pods grouped at once; `resync_period`: seconds between scans of every cached pod;
    `owner_cache_ttl`: seconds an owner read from the API is reused; `backoff`: retry delays after API
    failures."""

    name = "podgrouper"
    controller = "pod"

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        scheduler_name: str = c.SCHEDULER_NAME,
        queue_label_key: str = c.QUEUE_LABEL,
        defaults: GrouperDefaults = DEFAULT_GROUPER_DEFAULTS,
        workers: int = 4,
        resync_period: float = 30.0,
        owner_cache_ttl: float = 2.0,
        backoff: Backoff = RETRY_BACKOFF,
        component: str = "pod-grouper",
    ) -> None:
        super().__init__(workers=workers, resync_period=resync_period, backoff=backoff)
        self.client = client
        self.informers = informers
        self.scheduler_name = scheduler_name
        self.queue_label_key = queue_label_key
        self.defaults = defaults
        self.owners = OwnerReader(client, owner_cache_ttl, on_read=self._count_owner_read)
        self.component = component
        self.stats = GrouperStats(self.reconcile_stats)
        self._confirmed: dict[str, tuple[Any, ...]] = {}  # PodGroup key -> spec known to be on the server
        self._group_locks: dict[str, tuple[asyncio.Lock, int]] = {}  # with their users
        self._reported: dict[str, str] = {}  # pod uid -> last message recorded as an Event
        self._logged_drops: set[str] = set()  # "<PodGroup key>: <dropped input>" already logged
        self._seen: dict[str, float] = {}  # pod key -> when it was queued (monotonic)
        self._handlers_added = False

    def _count_owner_read(self) -> None:
        self.stats.owner_reads += 1

    # --- reading the caches ------------------------------------------------------------------------

    @property
    def pods(self) -> Informer:
        return self.informers.pods

    @property
    def pod_groups(self) -> Informer | None:
        return self.informers.optional(POD_GROUPS)

    def is_ours(self, pod: Mapping[str, Any]) -> bool:
        """A pod this grouper looks after: our scheduler's, not finished, not being deleted."""
        spec = pod.get("spec") or {}
        meta = metadata_of(pod)
        return (
            str(spec.get("schedulerName") or "") == self.scheduler_name
            and not meta.get("deletionTimestamp")
            and not is_finished(pod)
        )

    def _group_known(self, namespace: str, name: str) -> bool:
        key = f"{namespace}/{name}"
        if key in self._confirmed:
            return True
        informer = self.pod_groups
        return informer is not None and informer.get(name, namespace) is not None

    def needs_grouping(self, pod: Mapping[str, Any]) -> bool:
        """Ours, and without a `pod-group-name` annotation naming an existing PodGroup."""
        if not self.is_ours(pod):
            return False
        meta = metadata_of(pod)
        group = (meta.get("annotations") or {}).get(c.POD_GROUP_ANNOTATION)
        if not group:
            return True
        return not self._group_known(str(meta.get("namespace") or "default"), str(group))

    # --- one pod -----------------------------------------------------------------------------------

    async def reconcile_pod(self, pod: JsonObject, *, seen_at: float | None = None) -> Outcome:
        """Group one pod (see the module doc). API failures (unreachable, 5xx, 429) are raised for the
        caller to retry; everything about the pod itself is handled here.

        `seen_at` (`time.monotonic()`) is when the pod was seen: owners read from the API before that are
        not reused for it (a job scaled up, then its new pod created, must not meet the job as it was).
        None: now."""
        if not self.needs_grouping(pod) or skips_pod_grouper(pod):
            return Outcome.SKIPPED
        self.stats.reconciled += 1
        meta = metadata_of(pod)
        namespace = str(meta.get("namespace") or "default")
        annotated = (meta.get("annotations") or {}).get(c.POD_GROUP_ANNOTATION)
        bare = controller_reference(pod) is None
        try:
            not_before = time.monotonic() if seen_at is None else seen_at
            owners = Owners([], []) if bare else await self.owners.chain(pod, namespace, not_before)
        except OwnerGone as gone:
            log.debug("pod %s/%s: %s; not grouped", namespace, meta.get("name"), gone)
            return Outcome.OWNER_GONE
        if any(skips_pod_grouper(owner) for owner in owners.objects):
            return Outcome.SKIPPED  # an owner's PodGroup is made by someone else (KAI's shouldSkipAnyOwner)
        try:
            plan = plan_pod_group(
                pod, owners.objects, queue_label_key=self.queue_label_key, defaults=self.defaults
            )
        except GroupingError as error:
            if bare and annotated:
                return Outcome.SKIPPED  # the user's own PodGroup: not ours to judge
            message = str(error)
            if owners.unreadable:
                message += f" (owners not readable: {'; '.join(owners.unreadable)})"
            await self._report(pod, message)
            return Outcome.FAILED
        if bare and annotated and annotated != plan.name:
            # A bare pod naming a PodGroup of its own: the user manages it (KAI skips such pods).
            log.debug("pod %s/%s names its own PodGroup %s", namespace, meta.get("name"), annotated)
            return Outcome.SKIPPED
        await self._ensure_pod_group(plan)
        await self._patch_pod(pod, plan)
        self._reported.pop(str(meta.get("uid") or ""), None)
        for dropped in plan.dropped:
            await self._report_dropped(pod, plan, str(dropped))
        return Outcome.GROUPED

    async def _ensure_pod_group(self, plan: PodGroupPlan) -> None:
        manifest = pod_group_manifest(plan)
        spec: dict[str, Any] = manifest["spec"]
        key = f"{plan.namespace}/{plan.name}"
        signature = _signature(spec)
        if self._confirmed.get(key) == signature:
            return
        lock, users = self._group_locks.get(key) or (asyncio.Lock(), 0)
        self._group_locks[key] = (lock, users + 1)
        try:
            async with lock:
                if self._confirmed.get(key) == signature:
                    return
                informer = self.pod_groups
                existing = informer.get(plan.name, plan.namespace) if informer is not None else None
                if existing is None:
                    existing = await self._create(manifest)
                if existing is not None and not await self._update(plan, spec, existing):
                    await self._create(manifest)  # the cached one was gone
                self._confirmed[key] = signature
        finally:
            lock, users = self._group_locks[key]
            if users <= 1:
                del self._group_locks[key]
            else:
                self._group_locks[key] = (lock, users - 1)

    async def _create(self, manifest: JsonObject) -> JsonObject | None:
        """Create; the existing object when there is one already (None when created)."""
        meta = manifest["metadata"]
        try:
            await self.client.create(POD_GROUPS, manifest)
        except ApiStatusError as error:
            if error.code != 409:
                raise
            return await self.client.get(POD_GROUPS, meta["name"], meta["namespace"])
        self.stats.created += 1
        log.debug("created PodGroup %s/%s", meta["namespace"], meta["name"])
        return None

    async def _update(self, plan: PodGroupPlan, spec: Mapping[str, Any], existing: JsonObject) -> bool:
        """Patch the existing PodGroup's spec to the plan if it differs; False when it is gone."""
        current = existing.get("spec") or {}
        diff = {name: spec.get(name) for name in _SPEC_FIELDS if current.get(name) != spec.get(name)}
        if not diff:
            return True
        try:
            await self.client.patch(POD_GROUPS, plan.name, {"spec": diff}, plan.namespace)
        except ApiStatusError as error:
            if error.code == 404:
                return False
            raise
        self.stats.updated += 1
        log.debug("updated PodGroup %s/%s: %s", plan.namespace, plan.name, ", ".join(sorted(diff)))
        return True

    async def _patch_pod(self, pod: JsonObject, plan: PodGroupPlan) -> None:
        meta = metadata_of(pod)
        annotations = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        if all(annotations.get(k) == v for k, v in plan.pod_annotations().items()) and all(
            labels.get(k) == v for k, v in plan.pod_labels().items()
        ):
            return
        try:
            await self.client.patch(PODS, str(meta.get("name")), plan.pod_patch(), plan.namespace)
        except ApiStatusError as error:
            if error.code == 404:
                return  # the pod is gone
            raise
        self.stats.pods_patched += 1

    async def _report(self, pod: JsonObject, message: str) -> None:
        """A Warning Event on the pod (once per message), and a log line."""
        meta = metadata_of(pod)
        namespace = str(meta.get("namespace") or "default")
        uid = str(meta.get("uid") or "")
        if self._reported.get(uid) == message:
            return
        log.warning("pod %s/%s cannot be grouped: %s", namespace, meta.get("name"), message)
        recorded = await record_event(
            self.client, pod, type="Warning", reason=EVENT_REASON, message=message, component=self.component
        )
        if recorded:
            self.stats.events += 1
        self._reported[uid] = message

    async def _report_dropped(self, pod: JsonObject, plan: PodGroupPlan, message: str) -> None:
        """Input the PodGroup was made without: a Warning Event on the pod, a log line once per PodGroup."""
        logged = f"{plan.namespace}/{plan.name}: {message}"
        if logged not in self._logged_drops:
            if len(self._logged_drops) >= _MAX_LOGGED_DROPS:
                self._logged_drops.clear()
            self._logged_drops.add(logged)
            log.warning(
                "PodGroup %s/%s made without some of its input: %s", plan.namespace, plan.name, message
            )
        recorded = await record_event(
            self.client, pod, type="Warning", reason=DROPPED_REASON, message=message, component=self.component
        )
        if recorded:
            self.stats.events += 1

    # --- running (the reconciler's parts) -----------------------------------------------------------

    def _seen_now(self, pod: JsonObject) -> str:
        key = object_key(pod)
        self._seen.setdefault(key, time.monotonic())
        return key

    def _on_pod(self, pod: JsonObject) -> None:
        if self.needs_grouping(pod):
            self.enqueue(self._seen_now(pod))

    def _on_pod_update(self, old: JsonObject, new: JsonObject) -> None:
        del old
        self._on_pod(new)

    def _on_pod_delete(self, pod: JsonObject) -> None:
        key = object_key(pod)
        self._seen.pop(key, None)
        self.forget(key)
        self._reported.pop(str(metadata_of(pod).get("uid") or ""), None)

    def _on_group_delete(self, group: JsonObject) -> None:
        key = object_key(group)
        self._confirmed.pop(key, None)
        for pod in self.pods.by_index(POD_GROUP_INDEX, key):
            self._on_pod(pod)

    def keys(self) -> Iterable[str]:
        """Every cached pod that needs grouping (the resync's keys)."""
        return [self._seen_now(pod) for pod in self.pods.objects() if self.needs_grouping(pod)]

    async def start(self, stop: asyncio.Event) -> bool:
        """Waits for the pods (and PodGroups) informers to sync, then follows their changes."""
        groups = self.pod_groups
        if not await self.informers_synced([self.pods] + ([groups] if groups is not None else []), stop):
            return False
        if not self._handlers_added:
            self._handlers_added = True
            self.pods.add_handler(self._on_pod, self._on_pod_update, self._on_pod_delete)
            if groups is not None:
                groups.add_handler(on_delete=self._on_group_delete)
        return True

    async def reconcile(self, key: str) -> Result | None:
        namespace, _, name = key.rpartition("/")
        pod = self.pods.get(name, namespace or None)
        seen_at = self._seen.pop(key, None)
        if pod is not None:
            try:
                await self.reconcile_pod(pod, seen_at=seen_at)
            except _API_FAILURES as error:
                raise TemporaryError(f"{type(error).__name__}: {error}") from error
        return None


def _signature(spec: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(repr(spec.get(name)) for name in _SPEC_FIELDS)


__all__ = [
    "DROPPED_REASON",
    "EVENT_REASON",
    "GrouperStats",
    "Outcome",
    "PodGrouperController",
]
