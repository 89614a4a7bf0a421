"""apps/v1 Deployment, ReplicaSet and StatefulSet, as Kubernetes' controllers run them.

Deployment: one ReplicaSet `<deployment>-<pod-template-hash>` with the Deployment's replicas and the
template labelled `pod-template-hash` (rollouts are not simulated: the template never changes).
ReplicaSet: `replicas` active pods `<replicaset>-<random>`; a pod that fails, is evicted or deleted is
replaced by a new one; extra pods are deleted, newest first.
StatefulSet: pods `<statefulset>-<ordinal>` (from `spec.ordinals.start`), recreated under the same name;
`podManagementPolicy: OrderedReady` (the default) makes each pod only when the ones before it run,
`Parallel` all at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kai_scheduler.workloads.objects import (
    Reconciled,
    View,
    at,
    child_object,
    integer,
    is_active,
    is_running,
    mapping,
    name_of,
    pod_from_template,
    template_hash,
    template_of,
    text,
    with_labels,
)

POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_HASH_LABEL = "controller-revision-hash"
STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def reconcile_deployment(deployment: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    template = template_of(deployment, "spec", "template")
    replicas = integer(deployment, "spec", "replicas", default=1)
    collisions = integer(deployment, "status", "collisionCount", default=0)
    digest = template_hash({"template": template, "collisionCount": collisions})
    name = f"{name_of(deployment)}-{digest}"
    out = Reconciled()
    if any(name_of(rs) == name for rs in view.owned(deployment)):
        return out
    labels = {**((template.get("metadata") or {}).get("labels") or {}), POD_TEMPLATE_HASH_LABEL: digest}
    spec = dict(mapping(deployment, "spec"))
    spec.pop("strategy", None)
    spec.pop("progressDeadlineSeconds", None)
    spec.pop("revisionHistoryLimit", None)
    spec["replicas"] = replicas
    spec["template"] = with_labels(template, {POD_TEMPLATE_HASH_LABEL: digest})
    selector = dict(mapping(deployment, "spec", "selector"))
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH_LABEL: digest}
    spec["selector"] = selector
    out.create.append(
        child_object(
            deployment,
            "apps/v1",
            "ReplicaSet",
            spec,
            name=name,
            labels=labels,
            annotations={"deployment.kubernetes.io/desired-replicas": str(replicas)},
        )
    )
    return out


def reconcile_replica_set(replica_set: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    template = template_of(replica_set, "spec", "template")
    replicas = integer(replica_set, "spec", "replicas", default=1)
    active = [pod for pod in view.owned(replica_set) if is_active(pod)]
    out = Reconciled(status={"replicas": min(len(active), replicas)})
    if len(active) < replicas:
        out.create = [
            pod_from_template(replica_set, template, generate_name=f"{name_of(replica_set)}-")
            for _ in range(replicas - len(active))
        ]
        out.status = {"replicas": replicas}
    elif len(active) > replicas:
        # Kubernetes deletes pending pods before running ones, and younger before older.
        ranked = sorted(enumerate(active), key=lambda item: (is_running(item[1]), -item[0]))
        out.delete = [pod for _, pod in ranked[: len(active) - replicas]]
    return out


def reconcile_stateful_set(stateful_set: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    template = template_of(stateful_set, "spec", "template")
    replicas = integer(stateful_set, "spec", "replicas", default=1)
    start = integer(stateful_set, "spec", "ordinals", "start", default=0)
    policy = text(
        stateful_set,
        "spec",
        "podManagementPolicy",
        default="OrderedReady",
        choices=("OrderedReady", "Parallel"),
    )
    name = name_of(stateful_set)
    revision = f"{name}-{template_hash(template)}"
    owned = list(view.owned(stateful_set))
    pods = {name_of(pod): pod for pod in owned if is_active(pod)}
    service = at(stateful_set, "spec", "serviceName")
    # A pod that ended (failed, or completed) is deleted and made again under its name.
    out = Reconciled(delete=[pod for pod in owned if not is_active(pod)])
    for ordinal in range(start, start + replicas):
        pod_name = f"{name}-{ordinal}"
        pod = pods.get(pod_name)
        if pod is not None:
            if policy == "OrderedReady" and not is_running(pod):
                break  # the next ordinal waits until this one runs
            continue
        spec: dict[str, Any] = {"hostname": pod_name}
        if service:
            spec["subdomain"] = service
        out.create.append(
            pod_from_template(
                stateful_set,
                template,
                name=pod_name,
                labels={
                    REVISION_HASH_LABEL: revision,
                    STATEFULSET_POD_NAME_LABEL: pod_name,
                    POD_INDEX_LABEL: str(ordinal),
                },
                spec=spec,
            )
        )
        if policy == "OrderedReady":
            break
    wanted = {f"{name}-{ordinal}" for ordinal in range(start, start + replicas)}
    surplus = [pod for pod_name, pod in pods.items() if pod_name not in wanted]
    out.delete += surplus
    out.status = {"replicas": len(pods) + len(out.create) - len(surplus)}
    return out
