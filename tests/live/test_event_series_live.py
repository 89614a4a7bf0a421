"""A repeated event on the API server, as each component's ServiceAccount writes it under the chart's
RBAC: one Event whose count and last time grow (a merge patch), not an Event per occurrence."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from live_support import run

from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.runtime.events import record_event
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

# The components that record events (the status controllers record none, as KAI's: their account may not).
COMPONENTS = ("scheduler", "binder", "podgrouper")


@pytest.mark.parametrize("component", COMPONENTS)
def test_a_repeated_event_is_one_event_with_a_count(
    server: FakeApiServer, make_client: Callable[..., LightkubeClient], component: str
) -> None:
    pod = server.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "x"}]},
        }
    )

    async def body() -> list[bool]:
        async with make_client(component) as client:
            return [
                await record_event(
                    client,
                    pod,
                    type="Warning",
                    reason="Unschedulable",
                    message="no room",
                    component=component,
                    stamp=stamp,
                )
                for stamp in ("2026-01-02T03:00:00Z", "2026-01-02T03:00:05Z", "2026-01-02T03:00:09Z")
            ]

    assert run(body()) == [True, True, True]
    [event] = server.store.list("events", "default")
    assert event["count"] == 3
    assert (event["firstTimestamp"], event["lastTimestamp"]) == (
        "2026-01-02T03:00:00Z",
        "2026-01-02T03:00:09Z",
    )
    assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]
