"""One grouper per workload kind: each reads its kind's own fields for name, gang size and sub-groups.

The per-kind rules, and the choices made where KAI's reference is silent, are listed in
docs/podgrouper.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from kai_scheduler.api import constants as c
from kai_scheduler.controlplane.podgrouper._common import (
    BUILD,
    INFERENCE,
    PRIORITY_LABEL,
    TRAIN,
    Context,
    Segments,
    SegmentSources,
    Workload,
    build_plan,
    fill_in_order,
    pg_name,
    pod_label,
    pod_label_int,
    read_segments,
    segment_of,
    segment_sub_groups,
)
from kai_scheduler.controlplane.podgrouper._fields import Node, int_text
from kai_scheduler.controlplane.podgrouper.errors import GroupingError
from kai_scheduler.controlplane.podgrouper.owner_chain import KObject
from kai_scheduler.controlplane.podgrouper.plan import PodGroupPlan, SubGroupPlan, TopologyConstraintPlan

Grouper = Callable[[Context], PodGroupPlan]

# Built-in priority class of the kinds whose default is not `train`.
KIND_PRIORITY: Mapping[tuple[str, str], str] = {
    ("apps", "Deployment"): INFERENCE,
    ("serving.knative.dev", "Service"): INFERENCE,
    ("serving.knative.dev", "Configuration"): INFERENCE,
    ("serving.knative.dev", "Revision"): INFERENCE,
    ("machinelearning.seldon.io", "SeldonDeployment"): INFERENCE,
    ("kubeflow.org", "Notebook"): BUILD,
    ("workspace.devfile.io", "DevWorkspace"): BUILD,
}

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def _default_priority(ctx: Context) -> str:
    return KIND_PRIORITY.get(ctx.top.group_kind, TRAIN)


# --- default: StatefulSet, ReplicaSet, Notebook, Seldon, KubeVirt, Tekton, ..., unknown kinds -----


def group_default(ctx: Context) -> PodGroupPlan:
    """`pg-<owner>-<ownerUID>`, minMember 1, owned by the top owner."""
    top = ctx.top
    return build_plan(
        ctx,
        owner=top,
        workload=Workload.of(top),
        min_member=1,
        default_priority=_default_priority(ctx),
        owners=ctx.chain[1 : ctx.chain.index(top) + 1],
    )


# --- bare pods and Spark ---------------------------------------------------------------------------

SPARK_SELECTOR_LABEL = "spark-app-selector"


def group_pod(ctx: Context) -> PodGroupPlan:
    """A pod without a controller (or whose controller is a pod, like Spark executors under their driver):
    one PodGroup per top pod; Spark pods are grouped by their `spark-app-selector` label instead."""
    top = ctx.top
    selector_node = pod_label(ctx, SPARK_SELECTOR_LABEL)
    if selector_node.missing:
        selector_node = Node(top.labels().get(SPARK_SELECTOR_LABEL), top.ref, selector_node.path)
    selector = selector_node.opt_str()
    if selector is not None and not _DNS_SUBDOMAIN.fullmatch(selector):
        raise selector_node.error(f"{selector!r} cannot name a PodGroup (not a DNS subdomain)")
    return build_plan(
        ctx, name=selector, owner=top, workload=Workload.of(top), min_member=1, default_priority=TRAIN
    )


# --- batch Job, CronJob, Deployment ----------------------------------------------------------------


BATCH_MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"


def batch_min_member(workload: Workload) -> int | None:
    """The `kai.scheduler/batch-min-member` annotation (KAI v0.15+, `MinMemberOverrideKey`), if set."""
    node = workload.annotation_node(BATCH_MIN_MEMBER_ANNOTATION)
    text = node.opt_str()
    return None if text is None else int_text(text, node, minimum=1)


def _group_job(ctx: Context, job: KObject, workload: Workload, min_member: int) -> PodGroupPlan:
    return build_plan(
        ctx,
        owner=job,
        workload=workload,
        min_member=min_member,
        default_priority=TRAIN,
    )


def group_job(ctx: Context) -> PodGroupPlan:
    """One PodGroup per Job, `pg-<job>-<jobUID>`, owned by the Job; minMember from the Job's
    `kai.scheduler/batch-min-member` annotation, else 1 (KAI v0.15+, `job_grouper.go`)."""
    workload = Workload.of(ctx.top)
    return _group_job(ctx, ctx.top, workload, batch_min_member(workload) or 1)


def group_cronjob(ctx: Context) -> PodGroupPlan:
    """As the Job the CronJob made; labels and annotations of the Job win over the CronJob's."""
    job = ctx.below(ctx.top)
    if job is None or job.group_kind != ("batch", "Job"):
        raise GroupingError("the pod is not under a batch Job of this CronJob", object_ref=ctx.top.ref)
    cron, own = Workload.of(ctx.top), Workload.of(job)
    merged = Workload(job, {**cron.labels, **own.labels}, {**cron.annotations, **own.annotations})
    # KAI's CronJob grouper hands the Job to its default grouper: no batch-min-member there.
    return _group_job(ctx, job, merged, 1)


def group_deployment(ctx: Context) -> PodGroupPlan:
    """One PodGroup per pod, `pg-<pod>-<podUID>`, owned by the pod; `inference` by default."""
    pod = ctx.pod
    return build_plan(
        ctx,
        owner=pod,
        workload=Workload.of(ctx.top),
        min_member=1,
        default_priority=INFERENCE,
    )


# --- Kubeflow training operators -------------------------------------------------------------------

# Roles other than workers come first when a gang size smaller than the job is shared among them.
_ROLE_ORDER = ("Master", "Chief", "Launcher", "PS", "Evaluator")
REPLICA_TYPE_LABELS = ("training.kubeflow.org/replica-type", "training.kubeflow.org/job-role")
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
_MPI_LAUNCHER_POLICIES = ("AtStartup", "WaitForWorkersReady")


def _role_rank(replica_type: str, launcher_last: bool) -> tuple[int, str]:
    if replica_type == "Launcher" and launcher_last:
        return (len(_ROLE_ORDER) + 2, replica_type)
    if replica_type == "Worker":
        return (len(_ROLE_ORDER) + 1, replica_type)
    if replica_type in _ROLE_ORDER:
        return (_ROLE_ORDER.index(replica_type), replica_type)
    return (len(_ROLE_ORDER), replica_type)


def _kubeflow_min_member(ctx: Context, total: int, delayed: int) -> int:
    top = ctx.top
    node = top.node("spec", "runPolicy", "schedulingPolicy", "minAvailable")
    found = node.opt_int()
    if found is None and top.kind == "PyTorchJob":
        node = top.node("spec", "elasticPolicy", "minReplicas")
        found = node.opt_int()
    if found is None:
        return total - delayed
    if found > total:
        raise node.error(f"{found} is more than the {total} pods of the job")
    return max(found, 1)


def group_kubeflow(ctx: Context) -> PodGroupPlan:
    """One gang per job, a sub-group per replica type, workers split into segments when asked."""
    top = ctx.top
    specs_node = top.node("spec", c.KUBEFLOW_REPLICA_SPECS[top.kind])
    specs = specs_node.required_mapping()
    if not specs:
        raise specs_node.error("has no replica types")
    counts: dict[str, int] = {}
    for replica_type in specs:
        spec_node = specs_node.at(str(replica_type))
        spec_node.required_mapping()
        counts[str(replica_type)] = spec_node.at("replicas").int_or(1)
    total = sum(counts.values())
    if total < 1:
        raise specs_node.error("has no replicas")

    delayed = 0
    if top.kind == "MPIJob":
        policy_node = top.node("spec", "launcherCreationPolicy")
        policy = policy_node.opt_str() or "AtStartup"
        if policy not in _MPI_LAUNCHER_POLICIES:
            raise policy_node.error(f"must be one of {', '.join(_MPI_LAUNCHER_POLICIES)}, got {policy!r}")
        if policy == "WaitForWorkersReady":
            delayed = counts.get("Launcher", 0)
    min_member = _kubeflow_min_member(ctx, total, delayed)

    order = sorted(counts, key=lambda t: _role_rank(t, launcher_last=delayed > 0))
    shares = dict(fill_in_order(min_member, [(t, counts[t]) for t in order]))
    sub_groups = [SubGroupPlan(t.lower(), shares[t]) for t in order]
    # Where KAI v0.17's PyTorchJob grouper reads them: the pod, then the Worker template (where its docs
    # put them, so that every pod of the job, the master too, sees them); the topology name also on the
    # job itself, the segment keys never.
    pod, template = ctx.pod.node("metadata", "annotations"), specs_node.at("Worker", "template", "metadata")
    own = top.node("metadata", "annotations")
    sources = SegmentSources(
        size=(pod, template.at("annotations")),
        placement=(pod, template.at("annotations")),
        topology=(pod, template.at("annotations"), own),
        unread=own,
        unread_as="the Worker pod template or the pod",
    )
    segments, dropped = read_segments(sources)
    if segments is not None and "Worker" in counts:
        sub_groups += segment_sub_groups("worker", counts["Worker"], shares["Worker"], segments)

    return build_plan(
        ctx,
        owner=top,
        workload=Workload.of(top),
        min_member=min_member,
        default_priority=TRAIN,
        sub_groups=sub_groups,
        pod_subgroup=_kubeflow_pod_subgroup(ctx, counts, segments),
        dropped=dropped,
    )


def _kubeflow_pod_subgroup(ctx: Context, counts: Mapping[str, int], segments: Segments | None) -> str | None:
    node = next((n for n in (pod_label(ctx, k) for k in REPLICA_TYPE_LABELS) if not n.missing), None)
    if node is None:
        return None
    by_name = {t.lower(): t for t in counts}
    value = node.required_str().lower()
    if value not in by_name:
        raise node.error(f"replica type {value!r} is not one of the job's ({', '.join(sorted(by_name))})")
    if value == "worker" and segments is not None:
        index_node = pod_label(ctx, REPLICA_INDEX_LABEL)
        index = int_text(index_node.required_str(), index_node)
        return segment_of("worker", index, counts[by_name[value]], segments, index_node)
    return value


# --- Ray -------------------------------------------------------------------------------------------

RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAY_GROUP_LABEL = "ray.io/group"
RAY_HEAD_GROUP = "headgroup"
RAY_SUBMITTER = "submitter"


def _ray_cluster_spec(ctx: Context) -> tuple[Node, KObject | None]:
    top = ctx.top
    if top.kind == "RayCluster":
        return top.node("spec"), top
    cluster = ctx.find("ray.io", "RayCluster")
    if cluster is not None:
        return cluster.node("spec"), cluster
    field = "rayClusterSpec" if top.kind == "RayJob" else "rayClusterConfig"
    return top.node("spec", field), None


def group_ray(ctx: Context) -> PodGroupPlan:
    """Head plus the minimum of each worker group, one sub-group each; a RayJob's submitter rides along."""
    top = ctx.top
    workload = Workload.of(top)
    priority_labels = (PRIORITY_LABEL, RAY_PRIORITY_LABEL)
    spec, cluster = _ray_cluster_spec(ctx)
    if spec.missing and top.kind == "RayJob":
        # A RayJob that runs on an existing cluster (clusterSelector): only its submitter is its own.
        return build_plan(
            ctx,
            owner=top,
            workload=workload,
            min_member=1,
            default_priority=TRAIN,
            priority_labels=priority_labels,
        )
    spec.required_mapping()
    spec.at("headGroupSpec").required_mapping()
    sub_groups = [SubGroupPlan(RAY_HEAD_GROUP, 1)]
    for item in spec.at("workerGroupSpecs").items():
        item.required_mapping()
        group = item.at("groupName").required_str()
        minimum = item.at("minReplicas").opt_int()
        if minimum is None:
            minimum = item.at("replicas").int_or(0)
        hosts = item.at("numOfHosts").int_or(1, minimum=1)
        sub_groups.append(SubGroupPlan(group, minimum * hosts))
    min_member = sum(group.min_member for group in sub_groups)

    submitter = False
    if top.kind == "RayJob":
        mode = top.node("spec", "submissionMode").opt_str() or "K8sJobMode"
        submitter = mode == "K8sJobMode"
        if submitter:
            sub_groups.append(SubGroupPlan(RAY_SUBMITTER, 0))

    # A RayService replaces its cluster on upgrades: each cluster gets its own gang, owned by it.
    owner = cluster if top.kind == "RayService" and cluster is not None else top
    return build_plan(
        ctx,
        owner=owner,
        workload=workload,
        min_member=min_member,
        default_priority=TRAIN,
        sub_groups=sub_groups,
        pod_subgroup=_ray_pod_subgroup(ctx, sub_groups, submitter),
        priority_labels=priority_labels,
    )


def _ray_pod_subgroup(ctx: Context, sub_groups: list[SubGroupPlan], submitter: bool) -> str | None:
    node_type = pod_label(ctx, RAY_NODE_TYPE_LABEL)
    kind = node_type.opt_str()
    if kind == "head":
        return RAY_HEAD_GROUP
    if kind == "worker":
        group_node = pod_label(ctx, RAY_GROUP_LABEL)
        group = group_node.required_str()
        workers = {g.name for g in sub_groups if g.name not in (RAY_HEAD_GROUP, RAY_SUBMITTER)}
        if group not in workers:
            raise group_node.error(f"worker group {group!r} is not in the cluster spec")
        return group
    if kind is not None:
        raise node_type.error(f"expected head or worker, got {kind!r}")
    if submitter and any(obj.group_kind == ("batch", "Job") for obj in ctx.chain[1:]):
        return RAY_SUBMITTER
    return None


# --- JobSet ----------------------------------------------------------------------------------------

JOBSET_REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
_JOBSET_ORDERS = ("AnyOrder", "InOrder")


def group_jobset(ctx: Context) -> PodGroupPlan:
    """One PodGroup for the whole JobSet, as KAI v0.16+ groups it (`jobset_grouper.go`, #1617): a parent
    sub-group per replicated job needing all its replicas, a leaf `<replicated job>-replica-<index>` per
    replica whose minMember is the job's parallelism, or the `kai.scheduler/batch-min-member` of the
    replicated job's template. The PodGroup needs `minSubGroup` replicated jobs: the JobSet's own
    batch-min-member (at most their number), else 1 with `startupPolicyOrder: InOrder` (the JobSet
    controller starts them one after the other) and all of them otherwise."""
    top = ctx.top
    jobs_node = top.node("spec", "replicatedJobs")
    items = jobs_node.items()
    if not items:
        raise jobs_node.error("has no replicated jobs")
    sub_groups: list[SubGroupPlan] = []
    for item in items:
        item.required_mapping()
        name = item.at("name").required_str()
        replicas = item.at("replicas").int_or(1)
        template = item.at("template")
        template_annotations = Workload(top, {}, template.at("metadata", "annotations").string_map())
        own = batch_min_member(template_annotations)
        leaf_min = template.at("spec", "parallelism").int_or(1) if own is None else own
        leaf_topology = _replica_topology(template_annotations)
        sub_groups.append(SubGroupPlan(name, 0, min_sub_group=replicas))
        replica_names = [f"{name}-replica-{index}" for index in range(replicas)]
        sub_groups += [SubGroupPlan(replica, leaf_min, name, leaf_topology) for replica in replica_names]
    order_node = top.node("spec", "startupPolicy", "startupPolicyOrder")
    order = order_node.opt_str() or "AnyOrder"
    if order not in _JOBSET_ORDERS:
        raise order_node.error(f"must be one of {', '.join(_JOBSET_ORDERS)}, got {order!r}")
    override = batch_min_member(Workload.of(top))
    if override is not None:
        min_sub_group = min(override, len(items))
    else:
        min_sub_group = 1 if order == "InOrder" else len(items)
    job_node = pod_label(ctx, JOBSET_REPLICATED_JOB_LABEL)
    index_node = pod_label(ctx, JOBSET_JOB_INDEX_LABEL)
    pod_subgroup = f"{job_node.required_str()}-replica-{index_node.required_str()}"
    if pod_subgroup not in {group.name for group in sub_groups}:
        raise index_node.error(f"the JobSet has no replica {pod_subgroup!r}")
    return build_plan(
        ctx,
        owner=top,
        workload=Workload.of(top),
        min_member=0,
        min_sub_group=min_sub_group,
        default_priority=TRAIN,
        sub_groups=sub_groups,
        pod_subgroup=pod_subgroup,
    )


def _replica_topology(template: Workload) -> TopologyConstraintPlan | None:
    """A replica's constraint from its template's topology annotations; KAI passes over a topology name
    without a level, and a level without a name."""
    topology = template.annotation_node(c.TOPOLOGY_ANNOTATION).opt_str()
    required = template.annotation_node(c.TOPOLOGY_REQUIRED_ANNOTATION).opt_str()
    preferred = template.annotation_node(c.TOPOLOGY_PREFERRED_ANNOTATION).opt_str()
    if not topology or not (required or preferred):
        return None
    return TopologyConstraintPlan(topology, required or None, preferred or None)


# --- LeaderWorkerSet -------------------------------------------------------------------------------

LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_LEADER = "leader"
LWS_WORKERS = "workers"
_LWS_POLICIES = ("LeaderCreated", "LeaderReady")


def group_leaderworkerset(ctx: Context) -> PodGroupPlan:
    """One gang per group index: leader and workers (`LeaderCreated`), or the leader alone (`LeaderReady`,
    whose workers are created only once the leader is ready)."""
    top = ctx.top
    size = top.node("spec", "leaderWorkerTemplate", "size").int_or(1, minimum=1)
    policy_node = top.node("spec", "startupPolicy")
    policy = policy_node.opt_str() or "LeaderCreated"
    if policy not in _LWS_POLICIES:
        raise policy_node.error(f"must be one of {', '.join(_LWS_POLICIES)}, got {policy!r}")
    group_index = pod_label_int(ctx, LWS_GROUP_INDEX_LABEL)
    min_member = size if policy == "LeaderCreated" else 1

    # Where KAI v0.17's LeaderWorkerSet grouper reads them: the size in the LeaderWorkerSet's own
    # subGroupPolicy.subGroupSize, then its annotation, then the worker template's; the placements on the
    # pod, then the worker template (not on the LeaderWorkerSet); the topology name on all three.
    pod = ctx.pod.node("metadata", "annotations")
    template = top.node("spec", "leaderWorkerTemplate", "workerTemplate", "metadata", "annotations")
    own = top.node("metadata", "annotations")
    size_at = top.node("spec", "leaderWorkerTemplate", "subGroupPolicy", "subGroupSize")
    sources = SegmentSources(
        size=(own, template),
        placement=(pod, template),
        topology=(pod, template, own),
        unread=own,
        unread_as="the worker template or the pod",
    )
    segments, dropped = read_segments(sources, size=size_at.opt_int(minimum=None), size_at=size_at)
    if segments is not None:
        _check_lws_segment_size(segments, size)
    sub_groups: list[SubGroupPlan] = []
    pod_subgroup = None
    if size > 1:
        workers = size - 1
        shares = dict(fill_in_order(min_member, [(LWS_LEADER, 1), (LWS_WORKERS, workers)]))
        sub_groups = [
            SubGroupPlan(LWS_LEADER, shares[LWS_LEADER]),
            SubGroupPlan(LWS_WORKERS, shares[LWS_WORKERS]),
        ]
        index_node = pod_label(ctx, LWS_WORKER_INDEX_LABEL)
        worker_index = int_text(index_node.required_str(), index_node)
        segment_policy = _lws_segment_policy(top) if segments is not None else None
        if worker_index >= size:
            raise index_node.error(f"worker index {worker_index} is beyond the group size {size}")
        if segments is None:
            pod_subgroup = LWS_LEADER if worker_index == 0 else LWS_WORKERS
        elif segment_policy == "LeaderWorker":
            sub_groups, pod_subgroup = _leader_in_first_segment(size, min_member, worker_index, segments)
        else:
            _check_leader_excluded(top, size, segments)
            sub_groups, pod_subgroup = _leader_excluded(size, min_member, worker_index, segments)
    return build_plan(
        ctx,
        name=pg_name(top.name, top.required_uid(), "group", str(group_index)),
        owner=top,
        workload=Workload.of(top),
        min_member=min_member,
        default_priority=TRAIN,
        sub_groups=sub_groups,
        pod_subgroup=pod_subgroup,
        dropped=dropped,
    )


def _check_lws_segment_size(segments: Segments, size: int) -> None:
    """KAI v0.17's getSegmentSize (lws_grouper.go): a segment of one pod, or of more than the group, is
    refused with its message."""
    if segments.size <= 1:
        raise segments.size_at.error(f"segmentSize {segments.size} is not valid. It must be greater than 1")
    if segments.size > size:
        raise segments.size_at.error(f"segmentSize {segments.size} is greater than replicasSize {size}")


def _check_leader_excluded(top: KObject, size: int, segments: Segments) -> None:
    """KAI v0.17's addExcludedLeaderSegments: LeaderExcluded only when the workers (the group but its
    leader) divide evenly into segments; KAI's message speaks of the group size."""
    if (size - 1) % segments.size:
        raise top.node("spec", "leaderWorkerTemplate", "subGroupPolicy", "subGroupPolicyType").error(
            f"replicasSize {size} is not divisible by segmentSize {segments.size} (its {size - 1} workers "
            "are not). LeaderExcluded policy is only supported when replicasSize is divisible by segmentSize."
        )


_LWS_SEGMENT_POLICIES = ("LeaderWorker", "LeaderExcluded")


def _lws_segment_policy(top: KObject) -> str:
    """`subGroupPolicy.subGroupPolicyType`: KAI's default, `LeaderWorker`, puts the leader in the first
    segment; `LeaderExcluded` keeps it in a sub-group of its own."""
    node = top.node("spec", "leaderWorkerTemplate", "subGroupPolicy", "subGroupPolicyType")
    policy = node.opt_str() or "LeaderWorker"
    if policy not in _LWS_SEGMENT_POLICIES:
        raise node.error(f"must be one of {', '.join(_LWS_SEGMENT_POLICIES)}, got {policy!r}")
    return policy


def _leader_in_first_segment(
    size: int, min_member: int, index: int, segments: Segments
) -> tuple[list[SubGroupPlan], str]:
    """KAI v0.17's LeaderWorker segmentation (lws_grouper.go): the group's pods by worker index (the
    leader is 0) in consecutive segments `segment-<i>`, each under the segment placement; the leader
    counts as an extra pod of the first segment when the workers divide evenly, as its first pod
    otherwise. The first segment holds the sub-groups `leader` and `workers`. Returns the sub-groups and
    the pod's."""
    segments.check_count(_lws_segment(size - 1, size, segments.size) + 1)
    counts: dict[int, int] = {}
    for i in range(size):
        k = _lws_segment(i, size, segments.size)
        counts[k] = counts.get(k, 0) + 1
    names = [f"segment-{k}" for k in counts]
    shares = dict(fill_in_order(min_member, [(name, counts[k]) for k, name in enumerate(names)]))
    leader = min(shares[names[0]], 1)
    groups = [
        SubGroupPlan(names[0], 0, None, segments.constraint, min_sub_group=2),
        SubGroupPlan(LWS_LEADER, leader, names[0]),
        SubGroupPlan(LWS_WORKERS, shares[names[0]] - leader, names[0]),
        *(SubGroupPlan(name, shares[name], None, segments.constraint) for name in names[1:]),
    ]
    if index == 0:
        return groups, LWS_LEADER
    k = _lws_segment(index, size, segments.size)
    return groups, LWS_WORKERS if k == 0 else names[k]


def _leader_excluded(
    size: int, min_member: int, index: int, segments: Segments
) -> tuple[list[SubGroupPlan], str]:
    """KAI v0.17's LeaderExcluded segmentation (addExcludedLeaderSegments): the leader in a sub-group of
    its own, the workers (which divide evenly) in consecutive segments `segment-<i>` beside it, each under
    the segment placement. Returns the sub-groups and the pod's."""
    count = (size - 1) // segments.size
    segments.check_count(count)
    names = [f"segment-{k}" for k in range(count)]
    shares = dict(fill_in_order(min_member, [(LWS_LEADER, 1), *((name, segments.size) for name in names)]))
    groups = [
        SubGroupPlan(LWS_LEADER, shares[LWS_LEADER]),
        *(SubGroupPlan(name, shares[name], None, segments.constraint) for name in names),
    ]
    return groups, LWS_LEADER if index == 0 else names[(index - 1) // segments.size]


def _lws_segment(index: int, size: int, segment_size: int) -> int:
    """KAI's getSegmentIndex: the segment of the pod at worker `index` (the leader is 0, always in the
    first); when the workers divide evenly the leader is an extra pod of the first segment."""
    if index == 0:
        return 0
    if (size - 1) % segment_size == 0:
        return (index - 1) // segment_size
    return index // segment_size


# --- Knative ---------------------------------------------------------------------------------------

KNATIVE_MIN_SCALE_ANNOTATIONS = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale")


def group_knative(ctx: Context) -> PodGroupPlan:
    """One gang per Revision (owned by it), minMember from the revision's min-scale, `inference`."""
    top = ctx.top
    revision = top if top.kind == "Revision" else ctx.find("serving.knative.dev", "Revision")
    if revision is None:
        raise GroupingError("the pod is not under a Knative Revision of this object", object_ref=top.ref)
    min_scale = 1
    for obj in (revision, ctx.pod):
        annotations = obj.annotations()
        key = next((k for k in KNATIVE_MIN_SCALE_ANNOTATIONS if annotations.get(k)), None)
        if key is not None:
            node = Node(annotations[key], obj.ref, f'metadata.annotations["{key}"]')
            min_scale = int_text(annotations[key], node)
            break
    return build_plan(
        ctx,
        owner=revision,
        workload=Workload.of(top),
        min_member=max(min_scale, 1),
        default_priority=INFERENCE,
    )


# --- dispatch --------------------------------------------------------------------------------------

# Kinds in KAI's plugin table whose grouping is the default one (one PodGroup per top owner, minMember 1),
# listed so that they are known by name; their priority class comes from `KIND_PRIORITY`.
DEFAULT_GROUPED_KINDS: tuple[tuple[str, str], ...] = (
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("machinelearning.seldon.io", "SeldonDeployment"),  # inference
    ("kubeflow.org", "Notebook"),  # build
    ("workspace.devfile.io", "DevWorkspace"),  # build
    ("kubevirt.io", "VirtualMachineInstance"),  # one PodGroup per VMI
    ("tekton.dev", "PipelineRun"),  # one PodGroup per run
    ("tekton.dev", "TaskRun"),  # one PodGroup per run (a TaskRun of a PipelineRun: the PipelineRun's)
)

GROUPERS: Mapping[tuple[str, str], Grouper] = {
    **dict.fromkeys(DEFAULT_GROUPED_KINDS, group_default),
    ("", "Pod"): group_pod,
    ("batch", "Job"): group_job,
    ("batch", "CronJob"): group_cronjob,
    ("apps", "Deployment"): group_deployment,
    **{("kubeflow.org", kind): group_kubeflow for kind in c.KUBEFLOW_REPLICA_SPECS},
    ("ray.io", "RayCluster"): group_ray,
    ("ray.io", "RayJob"): group_ray,
    ("ray.io", "RayService"): group_ray,
    ("jobset.x-k8s.io", "JobSet"): group_jobset,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): group_leaderworkerset,
    ("serving.knative.dev", "Service"): group_knative,
    ("serving.knative.dev", "Configuration"): group_knative,
    ("serving.knative.dev", "Revision"): group_knative,
}


def grouper_for(top: KObject) -> Grouper:
    return GROUPERS.get(top.group_kind, group_default)
