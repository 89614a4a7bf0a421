"""Live mode's run estimates for reservation and backfill (issue #24): what each cycle is handed is what the
one rule (`controlplane.run_times.run_estimates`) makes of the pods as they are then, though a pod's estimate
is worked out again only when it may have changed: its objects, the history (when it has no duration of its
own), or the clock passing its expected end. A running pod's run counts from its binding, else its
`startTime`, else from when the scheduler first saw it on a node, which stays put from cycle to cycle."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from helpers import pod_group_manifest, pod_manifest
from kai_scheduler.api.objects import Pod, PodGroup
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.k8s.scheduler.run_estimates import LiveRunEstimates, RunLog
from kai_scheduler.model.reservations import RunEstimates
from kai_scheduler.model.snapshot import PodGroupState, PodState

START = 1798761600.0  # 2027-01-01T00:00:00Z: the session clock's second 0
BEGUN = "2027-01-01T00:00:10Z"  # second 10


class Cluster:
    """Pods of ours as the state builder holds them: a pod that changes is a new object."""

    def __init__(self) -> None:
        self.states: dict[str, PodState] = {}
        self.raw: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, PodGroupState] = {}
        self.job_of_pod: dict[str, str] = {}

    def put(
        self,
        name: str,
        *,
        node: str | None = None,
        duration: str | None = None,
        phase: str = "Running",
        status: dict[str, Any] | None = None,
    ) -> None:
        manifest = pod_manifest(name, group=name, gpus=8, node_name=node, duration=duration)
        manifest["metadata"]["uid"] = f"uid-{name}"
        manifest["status"] = status if status is not None else {"phase": phase if node else "Pending"}
        pod = Pod.model_validate(manifest)
        key = pod.key
        self.states[key] = PodState(pod, float(len(self.states)), node, manifest["status"]["phase"])
        self.raw[key] = manifest
        group = PodGroup.model_validate(pod_group_manifest(name))
        self.groups.setdefault(group.key, PodGroupState(group, 0.0))
        self.job_of_pod[key] = group.key

    def live(self) -> Any:
        return SimpleNamespace(
            our_pods=dict(self.states), pods=dict(self.raw), bind_requests={}, job_of_pod=self.job_of_pod
        )


def fresh(cluster: Cluster, history: RunLog, now: float) -> RunEstimates:
    """What the rule makes of the cluster now, worked out from nothing (a new process with the history)."""
    return LiveRunEstimates(SessionClock(start=START), history).at(cluster.live(), cluster.groups, now)


def same(kept: RunEstimates, made: RunEstimates, *, but: str = "") -> None:
    ends = {key: end for key, end in made.ends.items() if key != but}
    assert {key: end for key, end in kept.ends.items() if key != but} == pytest.approx(ends)
    assert dict(kept.durations) == pytest.approx(dict(made.durations))


def test_each_cycle_gets_what_the_rule_makes_of_the_pods_then() -> None:
    cluster = Cluster()
    started = {"phase": "Running", "startTime": BEGUN}
    cluster.put("known", node="n1", duration="1h", status=started)  # ends at 10 + 3600
    cluster.put("guessed", node="n2", status=started)  # no duration: the history's, when it has one
    cluster.put("unseen", node="n3", duration="10m", status={"phase": "Running"})  # no start said
    cluster.put("next", duration="30m")  # waits: runs 30 minutes once placed
    cluster.put("unknown")  # waits, no duration: the history's
    history = RunLog()
    estimates = LiveRunEstimates(SessionClock(start=START), history)

    first = estimates.at(cluster.live(), cluster.groups, 100.0)
    assert dict(first.ends) == pytest.approx({"default/known": 3610.0, "default/unseen": 700.0})
    # Placed (again) now, each runs its whole duration.
    assert dict(first.durations) == {"default/known": 3600.0, "default/unseen": 600.0, "default/next": 1800.0}
    # Later, nothing changed: the same ends ("unseen" still counted from when it was first seen).
    same(estimates.at(cluster.live(), cluster.groups, 200.0), first)
    same(
        estimates.at(cluster.live(), cluster.groups, 200.0),
        fresh(cluster, history, 200.0),
        but="default/unseen",
    )

    # A pod of the same shape completes after 20 minutes: the ones without a duration get it.
    done = {
        "phase": "Succeeded",
        "startTime": "2026-12-31T23:00:00Z",
        "containerStatuses": [
            {"name": "main", "state": {"terminated": {"finishedAt": "2026-12-31T23:20:00Z"}}}
        ],
    }
    cluster.put("done", node="n4", status=done)
    after = estimates.at(cluster.live(), cluster.groups, 300.0)
    assert after.ends["default/guessed"] == pytest.approx(1210.0)
    assert after.durations["default/unknown"] == pytest.approx(1200.0)
    same(after, fresh(cluster, history, 300.0), but="default/unseen")

    # Past its guessed end, a pod's estimate was wrong: none any more; past a given one, it ends now.
    late = estimates.at(cluster.live(), cluster.groups, 5000.0)
    assert "default/guessed" not in late.ends and late.ends["default/known"] == pytest.approx(5000.0)
    same(late, fresh(cluster, history, 5000.0), but="default/unseen")

    # A pod that changes (its duration edited) is worked out again.
    cluster.put("known", node="n1", duration="2h", status=started)
    edited = estimates.at(cluster.live(), cluster.groups, 5001.0)
    assert edited.ends["default/known"] == pytest.approx(7210.0)
    assert edited.ends["default/unseen"] == pytest.approx(5001.0)  # past its given end: it ends now


def test_a_bound_pod_counts_from_its_binding_and_a_pod_first_seen_on_a_node_keeps_that_time() -> None:
    cluster = Cluster()
    bound = {
        "phase": "Running",
        "startTime": "2027-01-01T00:01:00Z",  # second 60: the kubelet's, after the binding
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": BEGUN}],
    }
    cluster.put("bound", node="n1", duration="1h", status=bound)
    cluster.put("quiet", node="n2", duration="1h", status={"phase": "Running"})
    estimates = LiveRunEstimates(SessionClock(start=START), RunLog())
    first = estimates.at(cast(Any, cluster.live()), cluster.groups, 50.0)
    assert first.ends["default/bound"] == pytest.approx(3610.0)
    assert first.ends["default/quiet"] == pytest.approx(3650.0)
    # Its status changes, still without a start: counted from when it was first seen, not from now.
    cluster.put("quiet", node="n2", duration="1h", status={"phase": "Running", "podIP": "10.0.0.1"})
    assert estimates.at(cast(Any, cluster.live()), cluster.groups, 80.0).ends[
        "default/quiet"
    ] == pytest.approx(3650.0)
