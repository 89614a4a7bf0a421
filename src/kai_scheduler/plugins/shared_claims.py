"""Shared DRA ResourceClaims stay within one queue while accounted resources are configured (KAI's
AccountedResource design, "Shared DRA ResourceClaims" and "Validation And User Feedback"): a pod that
names a claim (not its own, made from a template) which a pod of another queue holds is refused before any
node, with `SharedResourceClaimAcrossQueues` naming the claim and both queues. A claim's devices charge
the queue of its first consumer once (`model.accounted_dra`), so a consumer from another queue would use
what that queue is charged for.

Opened with the accounted-resource limits (`plugins.accounted_limits`): the design states the rule for
accounted usage, and with no AccountedResource configured KAI's own rule (a shared GPU claim carries its
pods' queue label, `plugins.dynamicresources`) is the only one.
"""

from __future__ import annotations

from kai_scheduler.api.reasons import SHARED_CLAIM_ACROSS_QUEUES, WaitReason
from kai_scheduler.framework.session import Session
from kai_scheduler.model.dra import DraSnapshot
from kai_scheduler.model.jobs import ALLOCATED, TaskInfo


class SharedClaims:
    """Which pods hold each shared claim, kept as actions place and evict pods."""

    def __init__(self, session: Session, dra: DraSnapshot) -> None:
        self._dra = dra
        # claim key -> pod key -> (that pod's queue); pods that hold a node
        self._holders: dict[str, dict[str, str]] = {}
        for job in session.snapshot.jobs.values():
            for task in job.tasks:
                if task.status in ALLOCATED and task.node >= 0:
                    self._hold(task, True)

    def register(self, session: Session) -> None:
        points = session.points
        points.pre_predicates.append(self.refusal)
        points.on_allocate.append(lambda task: self._hold(task, True))
        points.on_deallocate.append(lambda task: self._hold(task, False))

    def refusal(self, task: TaskInfo) -> str | None:
        """Why the pod may not use a shared claim it names (None: it may)."""
        queue = task.job.queue
        for claim in self._shared(task):
            for other, other_queue in self._holders.get(claim, {}).items():
                if other_queue != queue and other != task.key:
                    return WaitReason(
                        f"{SHARED_CLAIM_ACROSS_QUEUES}: pod {task.key} of queue {queue} references "
                        f"ResourceClaim {claim}, which pod {other} of queue {other_queue} uses",
                        SHARED_CLAIM_ACROSS_QUEUES,
                    )
        return None

    def _shared(self, task: TaskInfo) -> list[str]:
        refs = self._dra.pod_claims.get(task.key, ())
        return [ref.claim for ref in refs if ref.claim is not None and not ref.from_template]

    def _hold(self, task: TaskInfo, held: bool) -> None:
        for claim in self._shared(task):
            holders = self._holders.setdefault(claim, {})
            if held:
                holders[task.key] = task.job.queue
            else:
                holders.pop(task.key, None)


def open_shared_claims(session: Session) -> SharedClaims | None:
    """The check on the session when some pod names a shared claim (None otherwise)."""
    dra = session.snapshot.dra
    if dra is None or not any(not ref.from_template for refs in dra.pod_claims.values() for ref in refs):
        return None
    claims = SharedClaims(session, dra)
    claims.register(session)
    return claims
