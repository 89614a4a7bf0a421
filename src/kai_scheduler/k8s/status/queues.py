"""The queue status controller (KAI's `queuecontroller`): each Queue's `status.allocated`,
`allocatedNonPreemptible`, `requested` and `childQueues`, summed bottom-up through the queue tree from the
PodGroups' statuses, and the queue metrics (`metrics.py`).

`QueueStatusController` writes each Queue's

    status: {allocated, allocatedNonPreemptible, requested, childQueues}

bottom-up through the queue tree: a queue's own PodGroups (`spec.queue`) summed from their
`status.resourcesStatus` (what the PodGroup controller wrote, as in KAI, where the two are separate
binaries), plus the totals of its child queues (`spec.parentQueue`); `childQueues` lists the children by
name. A pass over the tree is one reconcile of one key (`TREE`), at most one a `period` (1 s); a queue's
status is written only when it changed, and on a pace (`runtime.write_pace`, `write_period` 30 s): at once
after a quiet period, once it holds still for 2 s, else once a period while it keeps changing (a busy
cluster's queues cost the API server a write each per period, not one per pod); a held write is made by
the pass its wait ends in. With `metrics` (a `QueueMetrics`), the queue gauges are set after every
pass, held writes or not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import Queue
from kai_scheduler.controlplane.status import Numbers, queue_numbers
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.backoff import RETRY_BACKOFF, Backoff
from kai_scheduler.k8s.runtime.client import (
    QUEUES,
    JsonObject,
    KubeClient,
)
from kai_scheduler.k8s.runtime.informer import Informer
from kai_scheduler.k8s.runtime.informers import InformerSet, queue_of_pod_group
from kai_scheduler.k8s.runtime.objects import labels_of, metadata_of, object_key, resource_version
from kai_scheduler.k8s.runtime.reconciler import Result, TemporaryError
from kai_scheduler.k8s.runtime.write_pace import QUEUE_STATUS_PERIOD, WritePace
from kai_scheduler.k8s.status.metrics import QueueMetrics
from kai_scheduler.k8s.status.shared import (
    RESOURCE_LISTS,
    ZERO,
    StatusReconciler,
    Usage,
    merge_resource_list,
    normalized_resource_list,
)

log = logging.getLogger(__name__)

ACCESS = (access(QUEUES, "patch", subresource="status"),)

TREE = "queues"
"""The queue controller's one key: a queue's totals depend on the whole tree, so a reconcile is of
every queue."""


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """A queue's (or a PodGroup's) three resource lists."""

    allocated: Usage = ZERO
    allocated_non_preemptible: Usage = ZERO
    requested: Usage = ZERO

    def numbers(self) -> Numbers:
        return Numbers(
            self.allocated.resources(),
            self.allocated_non_preemptible.resources(),
            self.requested.resources(),
            requested_gpu_memory_mib=self.requested.gpu_memory,
        )

    @classmethod
    def of(cls, numbers: Numbers) -> QueueUsage:
        return cls(
            Usage.of(numbers.allocated),
            Usage.of(numbers.allocated_non_preemptible),
            Usage.of(numbers.requested, numbers.requested_gpu_memory_mib),
        )

    @classmethod
    def of_pod_group(cls, group: Mapping[str, Any]) -> QueueUsage:
        resources = (group.get("status") or {}).get("resourcesStatus") or {}
        return cls(
            Usage.of_resource_list(resources.get("allocated")),
            Usage.of_resource_list(resources.get("allocatedNonPreemptible")),
            Usage.of_resource_list(resources.get("requested")),
        )


class _OwnUsage:
    """Each queue's own PodGroups' usage (`QueueUsage.of_pod_group`), kept per changed PodGroup: a pass
    reads its sums instead of walking every PodGroup. The sums are exact fractions of the amounts, so that
    taking a PodGroup's old amounts away when it changes leaves no rounding behind."""

    def __init__(self) -> None:
        self._groups: dict[str, tuple[list[str], QueueUsage]] = {}  # PodGroup key -> (its queue, usage)
        self._sums: dict[str, list[Fraction]] = {}  # queue -> the twelve amounts of its PodGroups
        self._counts: dict[str, int] = {}  # queue -> how many PodGroups name it

    def clear(self) -> None:
        self._groups.clear()
        self._sums.clear()
        self._counts.clear()

    def update(self, key: str, group: JsonObject | None) -> None:
        """The PodGroup `key` is now `group` (None: gone)."""
        old = self._groups.pop(key, None)
        if old is not None:
            self._add(*old, sign=-1)
        if group is not None:
            entry = (queue_of_pod_group(group), QueueUsage.of_pod_group(group))
            self._groups[key] = entry
            self._add(*entry, sign=1)

    def _add(self, queues: list[str], usage: QueueUsage, *, sign: int) -> None:
        # Zero amounts (most of them: nothing non-preemptible, no GPU memory) are not made fractions.
        amounts = [
            (Fraction(amount) if sign > 0 else -Fraction(amount)) if amount else 0
            for part in (usage.allocated, usage.allocated_non_preemptible, usage.requested)
            for amount in (part.cpu, part.memory, part.gpu, part.gpu_memory)
        ]
        for queue in queues:
            count = self._counts.get(queue, 0) + sign
            if count == 0:
                del self._counts[queue], self._sums[queue]
                continue
            self._counts[queue] = count
            sums = self._sums.setdefault(queue, [Fraction(0)] * len(amounts))
            for index, amount in enumerate(amounts):
                if amount:
                    sums[index] += amount

    def of(self, queue: str) -> Numbers | None:
        """The queue's own PodGroups' numbers; None when no PodGroup names it."""
        sums = self._sums.get(queue)
        if sums is None:
            return None
        amounts = [float(x) for x in sums]
        usage = QueueUsage(Usage(*amounts[0:4]), Usage(*amounts[4:8]), Usage(*amounts[8:12]))
        return usage.numbers()


def _parent_of(queue: Mapping[str, Any]) -> str:
    return str((queue.get("spec") or {}).get("parentQueue") or "")


def _usage_view(group: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a PodGroup the queue totals read."""
    return (
        (group.get("spec") or {}).get("queue"),
        labels_of(group).get(c.QUEUE_LABEL),
        repr((group.get("status") or {}).get("resourcesStatus")),
    )


class QueueStatusController(StatusReconciler):
    """KAI's queuecontroller (see the module doc), with one key (`TREE`), its writes `concurrency` at
    once. `informers` must include queues and PodGroups."""

    kind = QUEUES
    name = "queue status"
    controller = "queue"

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        metrics: QueueMetrics | None = None,
        resync_period: float = 30.0,
        # A pass sums every PodGroup of every queue: while pods stream in, one pass a second rather than
        # five (issue #8: 0.8 queue writes per pod at 0.2 s). `period` makes it at most one: a pass that
        # ran longer than the debounce would otherwise be followed by the next at once.
        debounce: float = 1.0,
        period: float = 1.0,
        write_period: float = QUEUE_STATUS_PERIOD,
        concurrency: int = 8,
        backoff: Backoff = RETRY_BACKOFF,
    ) -> None:
        super().__init__(
            client,
            informers,
            workers=1,
            resync_period=resync_period,
            debounce=debounce,
            concurrency=concurrency,
            backoff=backoff,
            min_interval=period,
        )
        self.metrics = metrics
        self.pace = WritePace(write_period)
        self._own = _OwnUsage()
        # PodGroups changed since the sums were last brought up to date; all of them until the first time.
        self._changed_groups: set[str] = set()
        self._own_complete = False
        self._models: dict[str, tuple[str, Queue | None]] = {}  # for the metrics

    # --- computing ---

    def _catch_up(self) -> None:
        """Bring the per-queue sums up to date with the PodGroups that changed (the first time: all)."""
        cache = self.informers.pod_groups.cache
        if not self._own_complete:
            self._own.clear()
            for key, group in cache.items():
                self._own.update(key, group)
            self._own_complete = True
        else:
            for key in self._changed_groups:
                self._own.update(key, cache.get(key))
        self._changed_groups.clear()

    def _group_changed(self, key: str) -> None:
        self._changed_groups.add(key)
        self.mark(TREE)

    def totals(self) -> dict[str, tuple[QueueUsage, list[str]]]:
        """Every queue's usage (its PodGroups and all its descendants:
        `controlplane.status.queue_numbers`) and its children, by name. Before the handlers are added
        (`run`), the sums are those of the first call."""
        self._catch_up()
        queues = {str(metadata_of(q).get("name")): q for q in self.informers.queues.objects()}
        parents: dict[str, str | None] = {}
        children: dict[str, list[str]] = {name: [] for name in queues}
        for name, queue in queues.items():
            parent = _parent_of(queue)
            parents[name] = parent if parent in queues and parent != name else None
            if parents[name] is not None:
                children[parent].append(name)
        own = [(name, numbers) for name in queues if (numbers := self._own.of(name)) is not None]
        totals = queue_numbers(parents, own)
        return {name: (QueueUsage.of(totals[name]), sorted(children[name])) for name in queues}

    @staticmethod
    def queue_status(usage: QueueUsage, child_queues: list[str]) -> dict[str, Any]:
        return {
            "allocated": usage.allocated.resource_list(),
            "allocatedNonPreemptible": usage.allocated_non_preemptible.resource_list(),
            "requested": usage.requested.resource_list(),
            "childQueues": list(child_queues),
        }

    def _current(self, obj: JsonObject) -> Any:
        status = obj.get("status") or {}
        current: dict[str, Any] = {
            name: normalized_resource_list(status.get(name)) for name in RESOURCE_LISTS
        }
        children = status.get("childQueues")
        current["childQueues"] = [str(x) for x in children] if isinstance(children, list) else []
        return current

    def _patch(self, obj: JsonObject, desired: Any) -> JsonObject:
        status = obj.get("status") or {}
        patch: dict[str, Any] = {
            name: merge_resource_list(status.get(name), desired[name]) for name in RESOURCE_LISTS
        }
        patch["childQueues"] = desired["childQueues"]
        return {"status": patch}

    def _model(self, obj: JsonObject) -> Queue | None:
        key, version = object_key(obj), resource_version(obj)
        cached = self._models.get(key)
        if cached is not None and cached[0] == version and version:
            return cached[1]
        try:
            model: Queue | None = Queue.model_validate(obj)
        except (ValidationError, ValueError, TypeError) as error:
            log.warning("queue %s cannot be read for metrics: %s", key, error)
            model = None
        self._models[key] = (version, model)
        return model

    def keys(self) -> Iterable[str]:
        return (TREE,)

    async def reconcile(self, key: str) -> Result | None:
        """Every queue recomputed (its changed status written) from the per-queue sums, brought up to
        date with the PodGroups that changed."""
        del key
        informer = self.informers.queues
        totals = self.totals()
        writes: list[tuple[str, JsonObject, Any]] = []
        held: list[float] = []  # how long each changed queue's write waits for its pace
        for name, (usage, children) in totals.items():
            obj = informer.get(name)
            if obj is None:
                continue
            desired = self.queue_status(usage, children)
            self.stats.computed += 1
            if self._up_to_date(name, obj, desired):
                self.stats.unchanged += 1
                continue
            if (wait := self.pace.wait(name, desired)) > 0:
                held.append(wait)
                continue
            writes.append((name, obj, desired))
        for name in [k for k in self._written if k not in totals]:
            del self._written[name]
        self.pace.keep(set(totals))
        try:
            await self._write_all(writes)
        finally:
            if self.metrics is not None:
                self._observe(totals)
        return Result(requeue_after=min(held)) if held else None

    async def _write_all(self, writes: list[tuple[str, JsonObject, Any]]) -> None:
        """Every write attempted; the first failure raised after them (the next try writes only what is
        still not written)."""
        results = await asyncio.gather(
            *(self._paced_write(name, obj, desired) for name, obj, desired in writes), return_exceptions=True
        )
        failed = [error for error in results if isinstance(error, BaseException)]
        if failed:
            if not isinstance(failed[0], TemporaryError):
                raise failed[0]
            raise TemporaryError(f"{len(failed)} of {len(writes)} not written, first: {failed[0]}")

    async def _paced_write(self, name: str, obj: JsonObject, desired: Any) -> None:
        await self._write(name, obj, desired)
        self.pace.wrote(name)  # a failed write does not count: its retry may go at once

    def _observe(self, totals: Mapping[str, tuple[QueueUsage, list[str]]]) -> None:
        assert self.metrics is not None
        models = []
        for name in totals:
            obj = self.informers.queues.get(name)
            model = self._model(obj) if obj is not None else None
            if model is not None:
                models.append(model)
        for key in [k for k in self._models if k not in totals]:
            del self._models[key]
        self.metrics.observe_queues(
            models, {name: usage.allocated.per_metric() for name, (usage, _) in totals.items()}
        )

    # --- events ---

    def _informers_needed(self) -> list[Informer]:
        return [self.informers.queues, self.informers.pod_groups]

    def _add_handlers(self) -> None:
        def queue_changed(*_: JsonObject) -> None:
            self.mark(TREE)

        def group_changed(group: JsonObject) -> None:
            self._group_changed(object_key(group))

        def group_updated(old: JsonObject, new: JsonObject) -> None:
            if _usage_view(old) != _usage_view(new):
                self._group_changed(object_key(new))

        self.informers.queues.add_handler(queue_changed, queue_changed, queue_changed)
        self.informers.pod_groups.add_handler(group_changed, group_updated, group_changed)


__all__ = ["TREE", "QueueStatusController", "QueueUsage"]
