"""Workload controllers: how Kubernetes and operators turn a Job, Deployment, PyTorchJob, RayJob, ... into
pods, as pure reconcile functions over manifests.

`controller_for(obj).reconcile(obj, view, now)` returns what the kind's controller would do now, given the
objects it owns (`View`): objects to create, to delete, and the object's new status. Whoever drives it (the
simulator in simulated time, the fake API server) stores the created objects (completing
`generateName`, assigning uids), applies `admit_pod` to new pods, and reconciles again when the owned
objects change. Nothing here does I/O or keeps state.
"""

from kai_scheduler.workloads.errors import WorkloadError
from kai_scheduler.workloads.objects import (
    NAME_ALPHABET,
    Manifest,
    Reconciled,
    View,
    owner_reference,
)
from kai_scheduler.workloads.registry import (
    CONTROLLERS,
    Controller,
    admit_pod,
    controller_for,
    is_workload,
    next_time,
)

__all__ = [
    "CONTROLLERS",
    "NAME_ALPHABET",
    "Controller",
    "Manifest",
    "Reconciled",
    "View",
    "WorkloadError",
    "admit_pod",
    "controller_for",
    "is_workload",
    "next_time",
    "owner_reference",
]
