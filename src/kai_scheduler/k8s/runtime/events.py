"""Kubernetes Events about an object, best effort: a lost event must never stop a component.

Events are aggregated as client-go's recorder (`tools/record`, which KAI's components use) does: an
event identical to one this client wrote before (same object, type, reason, message and source) is not a
new Event but one more occurrence of the one written, a merge patch of its `count` and `lastTimestamp`
(`firstTimestamp` and the name stay). What is remembered is the last `MAX_SERIES` distinct events (the
size of client-go's cache), per client, so per component; an Event the API server no longer has (events
expire there) is created again with a count of 1.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime

from kai_scheduler.api.timestamps import format_rfc3339
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import EVENTS, ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.objects import metadata_of

log = logging.getLogger(__name__)

# core/v1 Events in the object's namespace (`default` for a cluster-scoped one): any namespace. A repeat
# patches the Event it repeats.
ACCESS = access(EVENTS, "create", "patch")

MAX_MESSAGE = 1024  # the API server's limit on an event message
MAX_SERIES = 4096  # distinct events remembered per client, the least recently seen forgotten first

# What makes two events the same occurrence (client-go's getEventKey, less the fields never set here).
SeriesKey = tuple[str, ...]


def event_for(
    obj: JsonObject, *, type: str, reason: str, message: str, component: str, stamp: str
) -> JsonObject:
    """A core/v1 Event whose involvedObject is `obj` (apiVersion and kind taken from it, Pod if absent)."""
    meta = metadata_of(obj)
    namespace = str(meta.get("namespace") or "default")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion") or "v1",
            "kind": obj.get("kind") or "Pod",
            "name": meta.get("name", ""),
            "namespace": namespace,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "type": type,
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def series_key(event: JsonObject) -> SeriesKey:
    """The identity of an event's series: its object (not the object's resourceVersion, which every
    write changes), type, reason, message and source."""
    involved = event["involvedObject"]
    return (
        str(event["source"]["component"]),
        str(involved["apiVersion"]),
        str(involved["kind"]),
        str(involved["namespace"]),
        str(involved["name"]),
        str(involved["uid"]),
        str(event["type"]),
        str(event["reason"]),
        str(event["message"]),
    )


@dataclass(slots=True)
class _Series:
    name: str  # the Event's name, as the API server made it from generateName
    namespace: str
    count: int


class EventRecorder:
    """Writes events through `client`, a repeat as one more occurrence of the Event it repeats."""

    def __init__(self, client: KubeClient, max_series: int = MAX_SERIES) -> None:
        self.client = client
        self.max_series = max_series
        self._series: OrderedDict[SeriesKey, _Series] = OrderedDict()

    async def record(self, event: JsonObject) -> bool:
        """Create `event`, or count it into its series; False (and a debug line) when the API server
        would not take it."""
        key = series_key(event)
        series = self._series.get(key)
        try:
            if series is not None and await self._repeat(series, str(event["lastTimestamp"])):
                self._series.move_to_end(key)
                return True
            created = await self.client.create(EVENTS, event)
        except (ApiStatusError, ConnectionError, OSError) as error:
            involved = event["involvedObject"]
            log.debug("event on %s/%s not recorded: %s", involved["namespace"], involved["name"], error)
            return False
        meta = metadata_of(created)
        name = meta.get("name")
        if name:  # a server that answers without the name leaves nothing to count into
            self._series[key] = _Series(str(name), str(meta.get("namespace") or ""), 1)
            self._series.move_to_end(key)
            while len(self._series) > self.max_series:
                self._series.popitem(last=False)
        return True

    async def _repeat(self, series: _Series, stamp: str) -> bool:
        """Count one more occurrence into the written Event; False when the API server has it no more."""
        count = series.count + 1
        try:
            await self.client.patch(
                EVENTS, series.name, {"count": count, "lastTimestamp": stamp}, series.namespace
            )
        except ApiStatusError as error:
            if error.code != 404:
                raise
            return False
        series.count = count
        return True


# One recorder per client: each component has its own client, as each of KAI's has its own recorder.
_recorders: weakref.WeakKeyDictionary[KubeClient, EventRecorder] = weakref.WeakKeyDictionary()


def recorder_for(client: KubeClient) -> EventRecorder:
    recorder = _recorders.get(client)
    if recorder is None:
        recorder = _recorders[client] = EventRecorder(client)
    return recorder


async def record_event(
    client: KubeClient,
    obj: JsonObject,
    *,
    type: str,
    reason: str,
    message: str,
    component: str,
    stamp: str | None = None,
) -> bool:
    """Record the event (a new Event, or one more occurrence of the same one); False (and a debug line)
    when the API server would not take it."""
    when = stamp or format_rfc3339(datetime.now(UTC))
    event = event_for(obj, type=type, reason=reason, message=message, component=component, stamp=when)
    return await recorder_for(client).record(event)
