"""Which controller runs which kind, and what the API server's admission does to the pods they make."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kai_scheduler.api.constants import KUBEFLOW_REPLICA_SPECS
from kai_scheduler.workloads import apps, batch, kubeflow, ray, sets
from kai_scheduler.workloads.objects import Manifest, Reconcile, group_of

# When an object next has work by the clock alone, after `now` (None: not by the clock).
NextTime = Callable[[Mapping[str, Any], datetime], datetime | None]


@dataclass(frozen=True)
class Controller:
    """A kind's controller: `reconcile` (pure), and for timed kinds (CronJob) when it next has work."""

    reconcile: Reconcile
    replaces_by_name: bool  # a lost pod comes back under its own name (else a new pod replaces it)
    next_time: NextTime | None = None


CONTROLLERS: dict[tuple[str, str], Controller] = {
    ("batch", "Job"): Controller(batch.reconcile_job, False, batch.job_next_time),
    ("batch", "CronJob"): Controller(batch.reconcile_cron_job, False, batch.cron_job_next_time),
    ("apps", "Deployment"): Controller(apps.reconcile_deployment, replaces_by_name=False),
    ("apps", "ReplicaSet"): Controller(apps.reconcile_replica_set, replaces_by_name=False),
    ("apps", "StatefulSet"): Controller(apps.reconcile_stateful_set, replaces_by_name=True),
    **{
        ("kubeflow.org", kind): Controller(kubeflow.reconcile_kubeflow, True)
        for kind in KUBEFLOW_REPLICA_SPECS
    },
    ("ray.io", "RayCluster"): Controller(ray.reconcile_ray_cluster, replaces_by_name=False),
    ("ray.io", "RayJob"): Controller(ray.reconcile_ray_job, False, ray.ray_job_next_time),
    ("jobset.x-k8s.io", "JobSet"): Controller(sets.reconcile_job_set, replaces_by_name=False),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): Controller(sets.reconcile_leader_worker_set, True),
}


def controller_for(obj: Mapping[str, Any]) -> Controller | None:
    """The controller of `obj`'s kind (any version), or None for kinds nothing here runs."""
    return CONTROLLERS.get((group_of(obj), str(obj.get("kind") or "")))


def is_workload(obj: Mapping[str, Any]) -> bool:
    return controller_for(obj) is not None


def admit_pod(pod: Manifest) -> Manifest:
    """What admission webhooks of the workloads' operators do to a new pod (LWS labels its indexes)."""
    return sets.admit_lws_pod(pod)


def next_time(obj: Mapping[str, Any], now: datetime) -> datetime | None:
    controller = controller_for(obj)
    if controller is None or controller.next_time is None:
        return None
    return controller.next_time(obj, now)
