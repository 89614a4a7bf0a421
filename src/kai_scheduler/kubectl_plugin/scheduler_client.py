"""Reading the scheduler's plugin server (`k8s/scheduler/plugin_server.py`): what its last cycle used, for
`kubectl kai fairshare` and `kubectl kai usage`. The server listens on the scheduler pod's localhost only,
as KAI's does, so the user reaches it with `kubectl port-forward` (the default address is where that
forward puts it); every failure is a `PluginError` of one line that says how to get there."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Final

from kai_scheduler.kubectl_plugin.api_client import NOT_FOUND, UNREACHABLE, PluginError

DEFAULT_SCHEDULER: Final = "http://localhost:8081"
FORWARD_HINT: Final = "kubectl -n kai-scheduler port-forward deploy/kai-scheduler-scheduler 8081"
TIMEOUT_SECONDS: Final = 30.0


def get_json(scheduler: str, path: str, **query: str) -> Any:
    """GET `path` of the plugin server at `scheduler` (a URL or host:port) as JSON."""
    base = scheduler if "://" in scheduler else f"http://{scheduler}"
    url = f"{base.rstrip('/')}{path}?{urllib.parse.urlencode(query)}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as answer:
            body = answer.read()
    except urllib.error.HTTPError as error:
        said = error.read().decode(errors="replace").strip().splitlines()
        line = said[0] if said else error.reason
        if error.code == 404 and line.startswith("not found"):
            raise PluginError(
                f"the scheduler at {base} does not serve {path}: its configuration has no `snapshot` plugin",
                UNREACHABLE,
            ) from None
        raise PluginError(
            f"the scheduler at {base}: {line}", NOT_FOUND if error.code == 404 else UNREACHABLE
        ) from None
    except (urllib.error.URLError, OSError, TimeoutError) as error:
        reason = getattr(error, "reason", None) or error
        raise PluginError(
            f"cannot reach the scheduler's plugin server at {base}: {reason} (first: {FORWARD_HINT})",
            UNREACHABLE,
        ) from None
    try:
        return json.loads(body)
    except ValueError:
        raise PluginError(f"the scheduler at {base} answered {path} with no JSON", UNREACHABLE) from None


__all__ = ["DEFAULT_SCHEDULER", "get_json"]
