"""KAI's `snapshot` and `reflectjoborder` plugins. Their effect is an HTTP endpoint, not a policy: a
scheduling session gets nothing from them, so their session hooks do nothing (and in `simulate` they do
nothing at all). Listing them in the configuration is what turns the endpoints on: live mode's scheduler
(`kai-scheduler run`) then serves them on its localhost-only plugin server (`k8s/plugin_server.py`,
`--plugin-server-port`, default 8081)."""

from __future__ import annotations

from typing import Any

from kai_scheduler.framework.session import Session


class _EndpointPlugin:
    name = ""

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, session: Session) -> None:
        return None

    def on_session_close(self, session: Session) -> None:
        return None


class SnapshotPlugin(_EndpointPlugin):
    """`GET /get-snapshot`: the state the last cycle scheduled, as manifests that `kai-scheduler simulate`
    loads, with the command that replays that cycle. Does nothing in a session."""

    name = "snapshot"


class ReflectJobOrderPlugin(_EndpointPlugin):
    """`GET /get-job-order`: the pending jobs of the last cycle's state, in the order the allocate action
    takes them up (`Scheduler.job_order`). Does nothing in a session."""

    name = "reflectjoborder"


ENDPOINT_PLUGINS = (SnapshotPlugin.name, ReflectJobOrderPlugin.name)

__all__ = ["ENDPOINT_PLUGINS", "ReflectJobOrderPlugin", "SnapshotPlugin"]
