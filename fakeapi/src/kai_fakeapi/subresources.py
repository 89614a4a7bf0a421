"""The pod subresources a scheduler writes: `binding` (a pod gets its node, once) and `eviction` (a
delete through the eviction API, which PodDisruptionBudgets may refuse: `disruption.py`). Both answer a
`Status`, and both are recorded (`binds`, `evictions`) for tests to assert on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .disruption import DisruptionBudgets, can_ignore_budgets
from .errors import STALE, ApiError, bad_request, conflict, invalid, success_status
from .jsoncopy import clone
from .kubelet import Kubelet
from .meta import Obj, format_time, meta
from .resources import ResourceType
from .versioned import VersionedStore

DeletePod = Callable[[str, str, Obj, bool], Obj]
"""Delete a pod (namespace, name, DeleteOptions, dry run) with the API server's semantics."""


@dataclass(frozen=True)
class BindRecord:
    namespace: str
    name: str
    node: str
    resource_version: int


@dataclass(frozen=True)
class EvictionRecord:
    namespace: str
    name: str
    resource_version: int


class PodSubresources:
    def __init__(
        self,
        objects: VersionedStore,
        pods: ResourceType,
        kubelet: Kubelet,
        delete_pod: DeletePod,
        budgets: DisruptionBudgets,
        clock: Callable[[], float],
    ) -> None:
        self.objects = objects
        self.pods = pods
        self.kubelet = kubelet
        self.delete_pod = delete_pod
        self.budgets = budgets
        self.clock = clock
        self.binds: list[BindRecord] = []
        self.evictions: list[EvictionRecord] = []

    def bind(self, namespace: str, name: str, binding: Obj, *, dry_run: bool = False) -> Obj:
        """POST pods/binding: sets spec.nodeName once; a second bind is 409."""
        if not isinstance(binding, dict):
            raise bad_request("the body of the request must be a JSON object")
        binding_meta = binding.get("metadata") or {}
        if binding_meta.get("name") and binding_meta["name"] != name:
            raise bad_request("name in URL does not match name in Binding object")
        target = binding.get("target") or {}
        node = target.get("name")
        if not node:
            raise invalid("Binding", name, [("target.name", "Required value")], "pods")
        if target.get("kind") not in (None, "", "Node"):
            raise invalid("Binding", name, [("to.kind", 'Invalid value: must be empty or "Node"')], "pods")
        with self.objects.lock:
            pod = self.objects.require(self.pods, namespace, name)
            pod_meta = pod["metadata"]
            qualified = "pods/binding"
            if binding_meta.get("uid") and binding_meta["uid"] != pod_meta.get("uid"):
                raise conflict(
                    qualified,
                    name,
                    f"Precondition failed: UID in precondition: {binding_meta['uid']}, UID "
                    f"in object meta: {pod_meta.get('uid')}",
                )
            given_rv = binding_meta.get("resourceVersion")
            if given_rv and given_rv != pod_meta.get("resourceVersion"):
                raise conflict(qualified, name, STALE)
            if pod_meta.get("deletionTimestamp"):
                raise conflict(qualified, name, f"pod {name} is being deleted, cannot be assigned to a host")
            current = (pod.get("spec") or {}).get("nodeName")
            if current:
                raise conflict(qualified, name, f'pod {name} is already assigned to node "{current}"')
            if dry_run:
                return success_status(201)
            new = clone(pod)
            new["spec"]["nodeName"] = node
            if binding_meta.get("annotations"):
                # The API server copies a Binding's annotations onto the pod.
                meta(new).setdefault("annotations", {}).update(binding_meta["annotations"])
            status = new.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": format_time(self.clock()),
                }
            )
            status["conditions"] = conditions
            self.objects.commit(self.pods, "MODIFIED", new, pod)
            self.binds.append(BindRecord(namespace, name, str(node), self.objects.resource_version))
            self.kubelet.pod_bound(new)
            return success_status(201)

    def evict(self, namespace: str, name: str, eviction: Obj, *, dry_run: bool = False) -> Obj:
        """POST pods/eviction (policy/v1 Eviction): the pod's disruption budget checked (`DisruptionBudgets`),
        the pod marked with a DisruptionTarget condition and deleted. `dry_run`: the request's dryRun."""
        if not isinstance(eviction, dict):
            raise bad_request("the body of the request must be a JSON object")
        if (eviction.get("metadata") or {}).get("name") != name:
            raise bad_request("name in URL does not match name in Eviction object")
        if eviction.get("kind") not in (None, "Eviction"):
            raise bad_request(
                f"the object provided is unrecognized (must be of type Eviction): {eviction.get('kind')}"
            )
        options = _delete_options(eviction, dry_run)
        dry = bool(options.get("dryRun"))
        with self.objects.lock:
            pod = self.objects.require(self.pods, namespace, name)
            if not can_ignore_budgets(pod):
                self.budgets.admit_eviction(pod, dry_run=dry)
            if not dry:
                self._mark_disrupted(pod)
            self.delete_pod(namespace, name, options, dry)
            if not dry:
                self.evictions.append(EvictionRecord(namespace, name, self.objects.resource_version))
            return success_status(201)

    def _mark_disrupted(self, pod: Obj) -> None:
        """The DisruptionTarget condition the eviction handler writes before it deletes (Kubernetes 1.31+)."""
        new = clone(pod)
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        previous: Obj = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "DisruptionTarget"), {}
        )
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": previous.get("lastTransitionTime")
            if previous.get("status") == "True"
            else format_time(self.clock()),
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
        }
        status["conditions"] = [*conditions, condition]
        if new != pod:
            self.objects.commit(self.pods, "MODIFIED", new, pod)


def _delete_options(eviction: Obj, dry_run: bool) -> Obj:
    """The eviction's DeleteOptions with the request's dryRun pushed in (they must not disagree)."""
    options = dict(eviction.get("deleteOptions") or {})
    wanted = ["All"] if dry_run else []
    given = options.get("dryRun") or []
    if not given:
        if wanted:
            options["dryRun"] = wanted
    elif wanted and given != wanted:
        raise ApiError(
            500,
            f"Non-matching dry-run options in request and content: [{' '.join(wanted)}] and "
            f"[{' '.join(map(str, given))}]",
            reason="Unknown",
        )
    return options
