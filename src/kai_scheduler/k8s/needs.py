"""What each component of `kai-scheduler run` asks of the API server (`runtime/access.py`): the kinds its
informers watch and the calls its modules declare, for the settings it runs with. The chart grants exactly
this to each component's ServiceAccount (tests/unit/k8s/test_chart.py checks its RBAC against `needs`),
and `run_components` holds each component to it (`AccessGuard`).

Part of the composition root with `components.py`: the one other module that sees every component.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from kai_scheduler.k8s.admission.self_signed import SelfSignedTLS, certificate_access
from kai_scheduler.k8s.binder import binder
from kai_scheduler.k8s.binder.reservation_app import reservation_app_access
from kai_scheduler.k8s.binder.reservations import GpuReservation, reservation_access
from kai_scheduler.k8s.podgrouper import controller as podgrouper
from kai_scheduler.k8s.runtime.access import Access, watching
from kai_scheduler.k8s.runtime.client import QUEUES, ResourceKind
from kai_scheduler.k8s.runtime.informers import BINDER_KINDS, PODGROUPER_KINDS, SCHEDULER_KINDS, STATUS_KINDS
from kai_scheduler.k8s.runtime.leader import lease_access
from kai_scheduler.k8s.scaleadjuster.controller import scale_adjuster_access
from kai_scheduler.k8s.scheduler import binds, loop, shard_objects, start_times
from kai_scheduler.k8s.status import podgroups, queues

if TYPE_CHECKING:
    from kai_scheduler.k8s.components import RunOptions

# The kinds each component's informers watch (the scale adjuster keeps a set of its own; the admission
# webhooks have none).
INFORMER_KINDS: Final[Mapping[str, tuple[ResourceKind, ...]]] = {
    "scheduler": SCHEDULER_KINDS,
    "binder": BINDER_KINDS,
    "podgrouper": PODGROUPER_KINDS,
    "status-controllers": STATUS_KINDS,
}


def _with_lease(accesses: Iterable[Access], lease_namespace: str | None) -> frozenset[Access]:
    """`lease_namespace`: where the component's Lease is, under leader election (None: none)."""
    return frozenset((*accesses, *([lease_access(lease_namespace)] if lease_namespace is not None else [])))


def scheduler_needs(
    *, lease_namespace: str | None = None, pool_labels: bool = False, estimates: bool = False
) -> frozenset[Access]:
    """`pool_labels`: the scheduler of a node pool (a partition value) labels the pods it binds;
    `estimates`: it annotates PodGroups with start-time estimates. Every scheduler watches its
    SchedulingShard and kai-config (`shard_objects.py`)."""
    accesses = [*loop.ACCESS, *shard_objects.ACCESS]
    if pool_labels:
        accesses += binds.POOL_LABEL_ACCESS
    if estimates:
        accesses += start_times.ACCESS
    return _with_lease(accesses, lease_namespace)


def binder_needs(
    *, reservation: GpuReservation | None, lease_namespace: str | None = None
) -> frozenset[Access]:
    """`reservation`: the GPU reservation pods' settings (None: none)."""
    reserving = reservation_access(reservation) if reservation is not None else ()
    return _with_lease((*binder.ACCESS, *reserving), lease_namespace)


def reservation_app_needs(namespace: str) -> frozenset[Access]:
    """`kai-scheduler reserve` in a reservation pod of `namespace`."""
    return frozenset(reservation_app_access(namespace))


def podgrouper_needs(*, lease_namespace: str | None = None) -> frozenset[Access]:
    return _with_lease(podgrouper.ACCESS, lease_namespace)


def status_needs(*, lease_namespace: str | None = None) -> frozenset[Access]:
    return _with_lease((*watching(STATUS_KINDS), *podgroups.ACCESS, *queues.ACCESS), lease_namespace)


def admission_needs(
    self_signed: SelfSignedTLS | None, queue_admission_gating: bool = False
) -> frozenset[Access]:
    """The webhooks answer from what a review holds; only their own certificate is kept in the API, and
    with queue admission gating the Queues are watched (which of them opt in)."""
    certificate = certificate_access(self_signed) if self_signed is not None else ()
    queues = watching((QUEUES,)) if queue_admission_gating else ()
    return frozenset((*certificate, *queues))


def scale_adjuster_needs(*, lease_namespace: str | None = None) -> frozenset[Access]:
    return _with_lease(scale_adjuster_access(), lease_namespace)


def needs(component: str, options: RunOptions) -> frozenset[Access]:
    """What `component` calls when `kai-scheduler run` starts it with `options`."""
    lease = options.lease_namespace if options.leader_elect else None
    if component == "scheduler":
        # A shard only its SchedulingShard defines may be a node pool's.
        pool = options.partition is not None and options.partition.value is not None
        pool = pool or not options.shard_configured
        return scheduler_needs(
            lease_namespace=lease, pool_labels=pool, estimates=options.estimator is not None
        )
    if component == "binder":
        return binder_needs(reservation=options.reservation, lease_namespace=lease)
    if component == "podgrouper":
        return podgrouper_needs(lease_namespace=lease)
    if component == "status-controllers":
        return status_needs(lease_namespace=lease)
    if component == "admission":
        return admission_needs(options.self_signed, options.queue_admission_gating)
    if component == "scale-adjuster":
        return scale_adjuster_needs(lease_namespace=lease)
    raise ValueError(f"unknown component {component!r}")


__all__ = [
    "INFORMER_KINDS",
    "admission_needs",
    "binder_needs",
    "needs",
    "podgrouper_needs",
    "reservation_app_needs",
    "scale_adjuster_needs",
    "scheduler_needs",
    "status_needs",
]
