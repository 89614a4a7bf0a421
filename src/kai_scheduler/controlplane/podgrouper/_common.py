"""The decisions every kind shares: name, queue, priority class, preemptibility, topology, segments,
inherited labels and annotations."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kai_scheduler.api import constants as c
from kai_scheduler.api.durations import parse_go_duration
from kai_scheduler.controlplane.podgrouper._fields import Node, int_text
from kai_scheduler.controlplane.podgrouper.errors import GroupingError
from kai_scheduler.controlplane.podgrouper.owner_chain import KObject
from kai_scheduler.controlplane.podgrouper.plan import (
    PREEMPTIBILITY_VALUES,
    DroppedInput,
    GrouperDefaults,
    PodGroupPlan,
    SubGroupPlan,
    TopologyConstraintPlan,
)

PRIORITY_LABEL = "priorityClassName"
PROJECT_LABEL = "project"
TOP_OWNER_METADATA_ANNOTATION = "kai.scheduler/top-owner-metadata"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
SEGMENT_SIZE_ANNOTATION = "kai.scheduler/segment-size"
SEGMENT_REQUIRED_ANNOTATION = "kai.scheduler/segment-topology-required-placement"
SEGMENT_PREFERRED_ANNOTATION = "kai.scheduler/segment-topology-preferred-placement"
STALENESS_GRACE_PERIOD_ANNOTATION = "kai.scheduler/staleness-grace-period"

TRAIN = "train"
BUILD = "build"
INFERENCE = "inference"

MAX_NAME_LENGTH = 253


@dataclass(frozen=True)
class Context:
    """One grouping: the pod, its owner chain (pod first), and the object it is grouped by."""

    pod: KObject
    chain: tuple[KObject, ...]
    top: KObject
    queue_label_key: str
    defaults: GrouperDefaults

    def below(self, obj: KObject) -> KObject | None:
        """The object in the chain that `obj` is the controller of."""
        for lower, upper in zip(self.chain, self.chain[1:], strict=False):
            if upper is obj:
                return lower
        return None

    def find(self, group: str, kind: str) -> KObject | None:
        """The object of that kind in the chain below the top, nearest to the top."""
        index = self.chain.index(self.top)
        for obj in reversed(self.chain[:index]):
            if obj.group_kind == (group, kind):
                return obj
        return None


@dataclass(frozen=True)
class Workload:
    """Where the PodGroup's labels, annotations, queue, priority and topology are read from."""

    obj: KObject
    labels: dict[str, str]
    annotations: dict[str, str]

    @classmethod
    def of(cls, obj: KObject) -> Workload:
        return cls(obj, obj.labels(), obj.annotations())

    def label_node(self, key: str) -> Node:
        return Node(self.labels.get(key), self.obj.ref, f'metadata.labels["{key}"]')

    def annotation_node(self, key: str) -> Node:
        return Node(self.annotations.get(key), self.obj.ref, f'metadata.annotations["{key}"]')


def pg_name(owner_name: str, uid: str, *suffix: str) -> str:
    """`pg-<name>-<uid>[-<suffix>...]`; an over-long name part is cut so the result fits 253 characters."""
    tail = "-".join([uid, *suffix])
    name = f"pg-{owner_name}-{tail}"
    if len(name) > MAX_NAME_LENGTH:
        keep = max(MAX_NAME_LENGTH - len(f"pg--{tail}"), 1)
        name = f"pg-{owner_name[:keep].rstrip('-.')}-{tail}"
    return name


def resolve_queue(ctx: Context, workload: Workload) -> str:
    """The queue label on the workload, then on the pod; then the legacy `project` label (workload, then
    pod), suffixed with `-<node pool>` when the pod carries the node-pool label; else the default queue.
    Empty label values count as absent."""
    pod_labels = ctx.pod.labels()
    for labels in (workload.labels, pod_labels):
        if labels.get(ctx.queue_label_key):
            return labels[ctx.queue_label_key]
    project = workload.labels.get(PROJECT_LABEL) or pod_labels.get(PROJECT_LABEL)
    if project:
        pool = pod_labels.get(ctx.defaults.node_pool_label_key)
        return f"{project}-{pool}" if pool else project
    return ctx.defaults.default_queue


def resolve_priority(
    ctx: Context, workload: Workload, builtin_default: str, owner_labels: Sequence[str] = (PRIORITY_LABEL,)
) -> str:
    """The workload's priority label(s), then the pod's `spec.priorityClassName`, then the pod's
    `priorityClassName` label, then the defaults config map's class for the top owner's kind, then the
    kind's built-in default. With `known_priority_classes` set, names not in it are passed over."""
    known = ctx.defaults.known_priority_classes
    candidates: list[str | None] = [workload.labels.get(key) for key in owner_labels]
    candidates.append(ctx.pod.node("spec", "priorityClassName").opt_str())
    candidates.append(ctx.pod.labels().get(PRIORITY_LABEL))
    kind_defaults = ctx.defaults.kinds.get(ctx.top.group_kind)
    if kind_defaults is not None:
        candidates.append(kind_defaults.priority_class_name)
    for name in candidates:
        if name and (known is None or name in known):
            return name
    return builtin_default


def _preemptibility(node: Node) -> str | None:
    value = node.opt_str()
    if value is not None and value not in PREEMPTIBILITY_VALUES:
        raise node.error(f"must be one of {', '.join(PREEMPTIBILITY_VALUES)}, got {value!r}")
    return value


def resolve_preemptibility(ctx: Context, workload: Workload) -> str | None:
    """The `kai.scheduler/preemptibility` label on the workload, then on the pod, then the defaults
    config map's value for the top owner's kind; `None` leaves it to the priority (< 100 preemptible)."""
    found = _preemptibility(workload.label_node(c.PREEMPTIBILITY_LABEL))
    if found is None:
        found = _preemptibility(_label(ctx.pod, c.PREEMPTIBILITY_LABEL))
    if found is None:
        kind_defaults = ctx.defaults.kinds.get(ctx.top.group_kind)
        found = kind_defaults.preemptibility if kind_defaults is not None else None
    return found


def duration_annotation(
    ctx: Context, owners: Sequence[Mapping[str, str]], key: str, *, minimum: float | None = None
) -> str | None:
    """A Go-duration annotation as KAI's default grouper reads it (`calcStalenessGracePeriod`): the
    owners' annotations in turn, then the pod's; the first valid value wins, and a value Go cannot parse
    (or below `minimum`) is passed over, as KAI logs and skips it."""
    for found in (*owners, ctx.pod.annotations()):
        text = found.get(key)
        if text is None:
            continue
        try:
            seconds = parse_go_duration(text)
        except ValueError:
            continue
        if minimum is None or seconds >= minimum:
            return text
    return None


def _label(obj: KObject, key: str) -> Node:
    return Node(obj.labels().get(key), obj.ref, f'metadata.labels["{key}"]')


def pod_label(ctx: Context, key: str) -> Node:
    """A label of the pod, located for error messages."""
    return _label(ctx.pod, key)


def pod_label_int(ctx: Context, key: str) -> int:
    """An integer label that the pod must carry (a replica or group index)."""
    node = pod_label(ctx, key)
    return int_text(node.required_str(), node)


def topology_constraint(workload: Workload) -> TopologyConstraintPlan | None:
    """From the workload's `kai.scheduler/topology`, `...-required-placement` and
    `...-preferred-placement` annotations. A level without a topology name is an error."""
    topology = workload.annotation_node(c.TOPOLOGY_ANNOTATION).opt_str()
    required = workload.annotation_node(c.TOPOLOGY_REQUIRED_ANNOTATION).opt_str()
    preferred = workload.annotation_node(c.TOPOLOGY_PREFERRED_ANNOTATION).opt_str()
    if topology is None:
        for key, level in (
            (c.TOPOLOGY_REQUIRED_ANNOTATION, required),
            (c.TOPOLOGY_PREFERRED_ANNOTATION, preferred),
        ):
            if level is not None:
                raise workload.annotation_node(key).error(
                    f"a placement level needs the topology name in the {c.TOPOLOGY_ANNOTATION} annotation"
                )
        return None
    return TopologyConstraintPlan(topology, required, preferred)


# KAI v0.17's groupers refuse to make more segment sub-groups than this (maxAllowedSegmentation).
MAX_SEGMENTS = 10000
_NO_SIZE = (
    f"dropped: a segment placement without {SEGMENT_SIZE_ANNOTATION} makes no segments "
    "(KAI's pod grouper passes over it)"
)
_NO_TOPOLOGY = (
    f"dropped: no {c.TOPOLOGY_ANNOTATION} names the topology of this segment placement, so the segments "
    "are made without one (KAI's pod grouper passes over it)"
)


@dataclass(frozen=True)
class Segments:
    """Workers split into consecutive segments of `size`, each a sub-group with `constraint`; `size_at`
    locates where the size was given, for errors about it."""

    size: int
    constraint: TopologyConstraintPlan | None
    size_at: Node = field(compare=False)

    def check_count(self, count: int) -> None:
        """KAI's cap on how many segments one sub-group is split into."""
        if count > MAX_SEGMENTS:
            raise self.size_at.error(
                f"number of subgroups created for the segmentation {count} is greater than max allowed "
                f"segmentation {MAX_SEGMENTS}"
            )


@dataclass(frozen=True)
class SegmentSources:
    """Where a grouper reads each segment key (annotation maps, nearest the pod first), as KAI v0.17's
    does; `unread`: a map where users put segment keys that the grouper does not read there (`unread_as`
    says where it does), each passed over with a word."""

    size: Sequence[Node]
    placement: Sequence[Node]
    topology: Sequence[Node]
    unread: Node | None = None
    unread_as: str = ""


def read_segments(
    sources: SegmentSources, *, size: int | None = None, size_at: Node | None = None
) -> tuple[Segments | None, tuple[DroppedInput, ...]]:
    """From `kai.scheduler/segment-size` and `kai.scheduler/segment-topology-*-placement`, each taken from
    the first of its `sources` that sets it; `size`, when given (a workload's own field for it, at
    `size_at`), comes before the annotation. As in KAI v0.17's PyTorchJob and LeaderWorkerSet groupers, a
    segment size that is not a positive integer is an error, while a placement without a segment size, or
    without the `kai.scheduler/topology` name, is passed over: returned as dropped input beside what is
    made without it, with the segment keys found where the grouper does not read them."""
    dropped = _unread(sources)
    levels = (
        _first_set(sources.placement, SEGMENT_REQUIRED_ANNOTATION),
        _first_set(sources.placement, SEGMENT_PREFERRED_ANNOTATION),
    )
    placed = [node for node in levels if not node.missing]
    if size is None or size_at is None:
        size_node = _first_set(sources.size, SEGMENT_SIZE_ANNOTATION)
        text = size_node.opt_str()
        if text is None:
            return None, (*dropped, *(DroppedInput(node.ref, node.path, _NO_SIZE) for node in placed))
        size, size_at = int_text(text, size_node, minimum=1), size_node
    if not placed:
        return Segments(size, None, size_at), dropped
    topology = _first_set(sources.topology, c.TOPOLOGY_ANNOTATION).opt_str()
    if topology is None:
        no_topology = (DroppedInput(n.ref, n.path, _NO_TOPOLOGY) for n in placed)
        return Segments(size, None, size_at), (*dropped, *no_topology)
    required, preferred = (node.opt_str() for node in levels)
    return Segments(size, TopologyConstraintPlan(topology, required, preferred), size_at), dropped


def _unread(sources: SegmentSources) -> tuple[DroppedInput, ...]:
    unread = sources.unread
    if unread is None:
        return ()
    keys = [SEGMENT_REQUIRED_ANNOTATION, SEGMENT_PREFERRED_ANNOTATION]
    if unread not in sources.size:
        keys.insert(0, SEGMENT_SIZE_ANNOTATION)
    found = unread.string_map()
    return tuple(
        DroppedInput(
            unread.ref,
            f'{unread.path}["{key}"]',
            f"dropped: KAI's pod grouper does not read it here, only on {sources.unread_as}",
        )
        for key in keys
        if found.get(key)
    )


def _first_set(sources: Sequence[Node], key: str) -> Node:
    """Annotation `key` of the first of `sources` that sets it (an empty value counts as unset, as in
    KAI); unset everywhere: missing, located in the last source. A value the next sources hold too (a
    pod's annotation copied from its template) is located at the last of them, where it was written."""
    found = Node(None, "", "")
    for source in sources:
        node = Node(source.string_map().get(key) or None, source.ref, f'{source.path}["{key}"]')
        if found.missing or node.value == found.value:
            found = node
        else:
            break
    return found


def segment_name(parent: str, index: int) -> str:
    return f"{parent}-segment-{index}"


def segment_sub_groups(parent: str, members: int, required: int, segments: Segments) -> list[SubGroupPlan]:
    """Split `members` pods of sub-group `parent` into consecutive segments. As in KAI v0.17's PyTorchJob
    grouper (buildWorkerSubGroups), a segment is a whole gang or optional: the first ones that hold the
    `required` pods need all their pods (an elastic job's minimum rounded up to whole segments), the rest
    (of an elastic job) none."""
    groups = []
    count = math.ceil(members / segments.size)
    segments.check_count(count)
    mandatory = math.ceil(required / segments.size)
    for index in range(count):
        length = min(segments.size, members - index * segments.size)
        need = length if index < mandatory else 0
        groups.append(SubGroupPlan(segment_name(parent, index), need, parent, segments.constraint))
    return groups


def segment_of(parent: str, position: int, members: int, segments: Segments, node: Node) -> str:
    """The segment sub-group of the worker at 0-based `position` among `members`."""
    if position >= members:
        raise node.error(f"index {position} is beyond the {members} pods of sub-group {parent!r}")
    return segment_name(parent, position // segments.size)


def fill_in_order(budget: int, counts: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """Share a gang size among sub-groups: each takes as many as it has, in order, until none are left."""
    shares = []
    for name, count in counts:
        take = max(0, min(count, budget))
        shares.append((name, take))
        budget -= take
    return shares


def inherited_labels(ctx: Context, workload: Workload) -> dict[str, str]:
    """The workload's labels, plus the pod's node-pool label when the workload has none (KAI's pod
    controller, `addNodePoolLabel`): the PodGroup then goes to the pod's scheduling shard."""
    labels = dict(workload.labels)
    key = ctx.defaults.node_pool_label_key
    pool = ctx.pod.labels().get(key)
    if key not in labels and pool is not None:
        labels[key] = pool
    return labels


def inherited_annotations(ctx: Context, workload: Workload) -> dict[str, str]:
    """The workload's annotations, without kubectl's `last-applied-configuration` (which describes the
    workload, not the PodGroup), plus `kai.scheduler/top-owner-metadata` describing the top owner."""
    annotations = {k: v for k, v in workload.annotations.items() if k != LAST_APPLIED_ANNOTATION}
    top = ctx.top
    annotations.setdefault(
        TOP_OWNER_METADATA_ANNOTATION,
        json.dumps(
            {
                "name": top.name,
                "uid": top.uid or "",
                "group": top.group,
                "version": top.version,
                "kind": top.kind,
            },
            separators=(",", ":"),
        ),
    )
    return annotations


def build_plan(
    ctx: Context,
    *,
    owner: KObject,
    workload: Workload,
    min_member: int,
    default_priority: str,
    sub_groups: Sequence[SubGroupPlan] = (),
    pod_subgroup: str | None = None,
    priority_labels: Sequence[str] = (PRIORITY_LABEL,),
    owners: Sequence[KObject] | None = None,
    min_sub_group: int | None = None,
    dropped: Sequence[DroppedInput] = (),
    name: str | None = None,
) -> PodGroupPlan:
    """Assemble the plan from the kind-specific parts and the shared decisions. The PodGroup is named
    after its owner (`pg-<owner>-<ownerUID>`, as KAI names it) unless `name` is given. `owners` are where
    the duration annotations are looked for before the pod (KAI's default grouper walks the whole owner
    chain, nearest first; every other grouper gives it the workload only). With `min_sub_group` the
    PodGroup states that instead of a minMember. `dropped`: the input the plan was made without, as KAI
    makes it."""
    if name is None:
        name = pg_name(owner.name, owner.required_uid())
    if min_sub_group is None and min_member < 1:
        raise GroupingError(
            f"the gang size works out to {min_member}; it must be at least 1", object_ref=owner.ref
        )
    names = [group.name for group in sub_groups]
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise GroupingError(f"two sub-groups would be named {duplicate!r}", object_ref=workload.obj.ref)
    owner_annotations = [workload.annotations] if owners is None else [obj.annotations() for obj in owners]
    return PodGroupPlan(
        name=name,
        namespace=ctx.pod.namespace or "default",
        min_member=min_member,
        queue=resolve_queue(ctx, workload),
        priority_class_name=resolve_priority(ctx, workload, default_priority, priority_labels),
        preemptibility=resolve_preemptibility(ctx, workload),
        sub_groups=tuple(sub_groups),
        topology_constraint=topology_constraint(workload),
        labels=inherited_labels(ctx, workload),
        annotations=inherited_annotations(ctx, workload),
        owner_reference=owner.owner_reference(),
        pod_subgroup=pod_subgroup,
        min_sub_group=min_sub_group,
        staleness_grace_period=duration_annotation(ctx, owner_annotations, STALENESS_GRACE_PERIOD_ANNOTATION),
        # KAI's calcPodGroupPreemptionDelay: as the grace period, but a negative delay is passed over too.
        preemption_delay=duration_annotation(
            ctx, owner_annotations, c.PREEMPTION_DELAY_ANNOTATION, minimum=0
        ),
        dropped=tuple(dropped),
    )
