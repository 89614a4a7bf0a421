"""With a pod grouper running, the live state builder reads a new pod that waits for its PodGroup once the
grouper has annotated it (issue #23, the live row: every pod was parsed ungrouped first, to be left out);
a pod that still waits after `WAIT` seconds is read then, and what is wrong with it is said."""

from __future__ import annotations

from typing import Any, cast

from helpers import pod_manifest
from kai_scheduler.api import constants as c
from kai_scheduler.k8s.runtime.client import KubeClient, WatchEvent
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.k8s.scheduler.state import StateBuilder
from kai_scheduler.k8s.scheduler.ungrouped import WAIT


def made(name: str, version: int, **given: Any) -> dict[str, Any]:
    pod = pod_manifest(name, **given)
    pod["metadata"] |= {
        "namespace": "default",
        "uid": f"uid-{name}",
        "resourceVersion": str(version),
        "creationTimestamp": "2026-12-05T19:00:00Z",
    }
    return pod


def builder_reading() -> tuple[StateBuilder, InformerSet, list[str]]:
    """A builder whose pod group waits are on, over informers fed by hand, and the pods it parses."""
    informers = InformerSet(cast(KubeClient, None))
    for informer in informers:
        informer.apply_event(WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "1"}}))
    builder = StateBuilder(informers, SessionClock(), require_pod_groups=True)
    parsed: list[str] = []
    parse = builder._our_pods.parse

    def counted(obj: dict[str, Any], key: str) -> Any:
        parsed.append(key)
        return parse(obj, key)

    builder._our_pods.parse = counted
    return builder, informers, parsed


def test_a_new_pod_is_read_once_grouped() -> None:
    builder, informers, parsed = builder_reading()
    informers.pods.apply_event(WatchEvent("ADDED", made("p", 2)))
    builder.build()
    assert parsed == [] and builder.cache.pod("default/p") is None
    informers.pods.apply_event(WatchEvent("MODIFIED", made("p", 3, group="g")))
    builder.build()
    state = builder.cache.pod("default/p")
    assert parsed == ["default/p"] and state is not None
    assert state.pod.metadata.annotations[c.POD_GROUP_ANNOTATION] == "g"


def test_a_pod_still_ungrouped_is_read_once_it_has_waited() -> None:
    builder, informers, parsed = builder_reading()
    now = [100.0]
    builder._ungrouped.clock = lambda: now[0]
    informers.pods.apply_event(WatchEvent("ADDED", made("bad", 2, annotations={"gpu-fraction": "abc"})))
    assert builder.build().rejected == {}
    now[0] += WAIT - 1
    informers.pods.apply_event(WatchEvent("MODIFIED", made("bad", 3, annotations={"gpu-fraction": "abc"})))
    assert builder.build().rejected == {} and parsed == []  # a new version, still ungrouped: still waits
    now[0] += 1
    rejected = builder.build().rejected["default/bad"]
    assert parsed == ["default/bad"]
    assert (rejected.reason, rejected.message.split(":")[0]) == (
        "InvalidPod",
        "metadata.annotations.gpu-fraction",
    )
    builder.build()
    assert parsed == ["default/bad"]  # read once: the version is the same
