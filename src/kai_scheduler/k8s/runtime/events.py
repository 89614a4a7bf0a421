"""Kubernetes Events about an object, best effort: a lost event must never stop a component."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from kai_scheduler.api.timestamps import format_rfc3339
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import EVENTS, ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.objects import metadata_of

log = logging.getLogger(__name__)

# core/v1 Events in the object's namespace (`default` for a cluster-scoped one): any namespace.
ACCESS = access(EVENTS, "create")

MAX_MESSAGE = 1024  # the API server's limit on an event message


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
    """Create the event; False (and a debug line) when the API server would not take it."""
    when = stamp or format_rfc3339(datetime.now(UTC))
    event = event_for(obj, type=type, reason=reason, message=message, component=component, stamp=when)
    try:
        await client.create(EVENTS, event)
    except (ApiStatusError, ConnectionError, OSError) as error:
        meta = metadata_of(obj)
        log.debug("event on %s/%s not recorded: %s", meta.get("namespace"), meta.get("name"), error)
        return False
    return True
