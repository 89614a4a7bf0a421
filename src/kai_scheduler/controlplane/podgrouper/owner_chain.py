"""Following a pod's controller owner references up to the object the pod grouper groups by.

The caller hands over the pod and the owners it fetched (in any order; unrelated objects are ignored).
From the pod, each step follows the one owner reference with `controller: true` to the owner with that
uid, until an object has no controller. Non-controller owner references are not followed: Kubernetes
uses them for garbage collection only.

Objects read from list calls carry no `apiVersion`/`kind`; an owner without them takes them from the
owner reference that points at it. A pod without them is `v1`/`Pod`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kai_scheduler.controlplane.podgrouper._fields import Node
from kai_scheduler.controlplane.podgrouper.errors import GroupingError

# Kinds whose own object is not grouped: the object just below them is (KAI's "skip top owner").
# A TrainJob runs as a JobSet; an Argo Workflow's pods are grouped one by one; a Dynamo graph
# deployment's parts (LeaderWorkerSets, Deployments, ...) are grouped each on its own. A Kubeflow
# Pipelines ScheduledWorkflow (KAI's reference table is silent on it) starts Argo Workflows, so it is
# skipped too: its pods are grouped one by one, as the Workflow's. Skipping repeats while the object
# reached is itself of a skipped kind (ScheduledWorkflow -> Workflow -> the pod).
SKIP_TOP_OWNER_KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("trainer.kubeflow.org", "TrainJob"),
        ("argoproj.io", "Workflow"),
        ("kubeflow.org", "ScheduledWorkflow"),
        ("nvidia.com", "DynamoGraphDeployment"),
    }
)


def split_api_version(api_version: str) -> tuple[str, str]:
    """`apps/v1` -> (`apps`, `v1`); `v1` -> (``, `v1`)."""
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass(frozen=True)
class KObject:
    """A pod or an owner, with the identity fields checked."""

    raw: Mapping[str, Any]
    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str | None

    @property
    def group(self) -> str:
        return split_api_version(self.api_version)[0]

    @property
    def version(self) -> str:
        return split_api_version(self.api_version)[1]

    @property
    def group_kind(self) -> tuple[str, str]:
        return self.group, self.kind

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def node(self, *keys: str) -> Node:
        return Node(self.raw, self.ref).at(*keys)

    def labels(self) -> dict[str, str]:
        return self.node("metadata", "labels").string_map()

    def annotations(self) -> dict[str, str]:
        return self.node("metadata", "annotations").string_map()

    def required_uid(self) -> str:
        if self.uid is None:
            raise GroupingError("is missing", object_ref=self.ref, field="metadata.uid")
        return self.uid

    def owner_reference(self) -> dict[str, Any]:
        """An owner reference to this object, as the controller of what it owns."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.required_uid(),
            "controller": True,
        }

    def as_mapping(self) -> Mapping[str, Any]:
        """The object as given, with `apiVersion` and `kind` filled in when they were missing."""
        if self.raw.get("apiVersion") == self.api_version and self.raw.get("kind") == self.kind:
            return self.raw
        return {**self.raw, "apiVersion": self.api_version, "kind": self.kind}


def _describe(raw: Any, fallback: str) -> str:
    if isinstance(raw, Mapping):
        meta = raw.get("metadata")
        kind = raw.get("kind") if isinstance(raw.get("kind"), str) else fallback
        if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
            namespace = meta.get("namespace")
            if isinstance(namespace, str) and namespace:
                return f"{kind} {namespace}/{meta['name']}"
            return f"{kind} {meta['name']}"
    return fallback


def make_object(
    raw: Any, *, default_api_version: str, default_kind: str, what: str, referenced: bool
) -> KObject:
    """Check a pod's or an owner's identity; `default_*` fill a missing `apiVersion`/`kind`, and when the
    object was `referenced` by an owner reference (which gave the defaults), its group and kind must match.
    """
    ref = _describe(raw, what)
    if not isinstance(raw, Mapping):
        raise GroupingError(f"expected an object, got {type(raw).__name__}", object_ref=ref)
    top = Node(raw, ref)
    api_version = top.at("apiVersion").opt_str() or default_api_version
    kind = top.at("kind").opt_str() or default_kind
    if referenced:
        # The versions may differ (an owner fetched at another version); the group and kind may not.
        pointed = (split_api_version(default_api_version)[0], default_kind)
        if (split_api_version(api_version)[0], kind) != pointed:
            raise GroupingError(
                f"the owner reference points at a {default_api_version} {default_kind}, "
                f"but the object is a {api_version} {kind}",
                object_ref=ref,
            )
    name = top.at("metadata", "name").required_str()
    namespace = top.at("metadata", "namespace").opt_str() or ""
    uid = top.at("metadata", "uid").opt_str()
    obj = KObject(raw, api_version, kind, name, namespace, uid)
    # Read them once here, so that a malformed map fails early and names this object.
    obj.labels()
    obj.annotations()
    return obj


def _controller_reference(obj: KObject) -> tuple[Node, Mapping[str, Any]] | None:
    found: list[tuple[Node, Mapping[str, Any]]] = []
    for item in obj.node("metadata", "ownerReferences").items():
        ref = item.mapping()
        controller = item.at("controller").value
        if controller is not None and not isinstance(controller, bool):
            raise item.at("controller").error(f"expected a boolean, got {controller!r}")
        if controller:
            found.append((item, ref))
    if len(found) > 1:
        raise found[1][0].error("more than one owner reference has controller: true")
    return found[0] if found else None


def owner_chain(pod: Mapping[str, Any], owners: Sequence[Mapping[str, Any]]) -> tuple[KObject, ...]:
    """The pod, then its controller, then that one's controller, ..., up to the topmost owner."""
    current = make_object(pod, default_api_version="v1", default_kind="Pod", what="pod", referenced=False)
    if current.group_kind != ("", "Pod"):
        raise GroupingError(
            f"expected a v1 Pod, got {current.api_version} {current.kind}", object_ref=current.ref
        )
    by_uid: dict[str, Mapping[str, Any]] = {}
    for i, owner in enumerate(owners):
        if not isinstance(owner, Mapping):
            raise GroupingError(f"expected an object, got {type(owner).__name__}", object_ref=f"owners[{i}]")
        meta = owner.get("metadata")
        uid = meta.get("uid") if isinstance(meta, Mapping) else None
        if isinstance(uid, str) and uid:
            by_uid[uid] = owner
    chain = [current]
    seen = {current.uid} if current.uid else set()
    while (found := _controller_reference(current)) is not None:
        item, _ = found
        api_version = item.at("apiVersion").required_str()
        kind = item.at("kind").required_str()
        item.at("name").required_str()
        uid = item.at("uid").required_str()
        if uid in seen:
            raise item.at("uid").error("owner references form a cycle")
        raw = by_uid.get(uid)
        if raw is None:
            name = item.at("name").value
            raise item.error(f"the owner {kind} {name} (uid {uid}) was not provided")
        current = make_object(
            raw, default_api_version=api_version, default_kind=kind, what=f"{kind} {uid}", referenced=True
        )
        seen.add(uid)
        chain.append(current)
    return tuple(chain)


def grouping_index(chain: Sequence[KObject]) -> int:
    """Index in `chain` (pod first) of the object the pod is grouped by: the topmost, stepping down past
    every object of a kind in `SKIP_TOP_OWNER_KINDS` at the top; the pod itself is never skipped. A skipped
    kind below an object that is not skipped is grouped under that object as usual."""
    index = len(chain) - 1
    while index > 0 and chain[index].group_kind in SKIP_TOP_OWNER_KINDS:
        index -= 1
    return index


def top_owner(pod: Mapping[str, Any], owners: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The object KAI's pod grouper groups `pod` by: its topmost controller owner (or the pod itself when
    it has none), except that a TrainJob, an Argo Workflow, a Kubeflow ScheduledWorkflow or a
    DynamoGraphDeployment at the top is skipped for the object just below it (for a Workflow, that is
    the pod itself), again and again while that object is of a skipped kind too.

    The result is the given mapping, with `apiVersion`/`kind` filled in from the owner reference when the
    object lacked them.
    """
    chain = owner_chain(pod, owners)
    return chain[grouping_index(chain)].as_mapping()
