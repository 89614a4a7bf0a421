"""The pod grouper's decision: which PodGroup a pod belongs to. Pure: no API calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.k8s.podgrouper._common import Context
from kai_scheduler.k8s.podgrouper._kinds import grouper_for
from kai_scheduler.k8s.podgrouper.owners import grouping_index, owner_chain
from kai_scheduler.k8s.podgrouper.plan import GrouperDefaults, PodGroupPlan

DEFAULT_GROUPER_DEFAULTS = GrouperDefaults()


def plan_pod_group(
    pod: Mapping[str, Any],
    owners: Sequence[Mapping[str, Any]],
    *,
    queue_label_key: str = c.QUEUE_LABEL,
    defaults: GrouperDefaults = DEFAULT_GROUPER_DEFAULTS,
) -> PodGroupPlan:
    """The PodGroup KAI's pod grouper would create for `pod`, given the objects up its owner chain.

    `owners` are the pod's controller, its controller's controller, ... as the API returns them, in any
    order (see `owners.owner_chain`). The pod is grouped by its top owner (`owners.top_owner`), except
    that an object of a "skip top owner" kind at the top (`owners.SKIP_TOP_OWNER_KINDS`) is passed over
    for the object below it, repeatedly, down to the pod itself at most:
    - trainer.kubeflow.org TrainJob: grouped as the JobSet it runs as;
    - argoproj.io Workflow: each pod on its own (as a bare pod);
    - kubeflow.org ScheduledWorkflow (KAI's reference table is silent; chosen here): it starts Argo
      Workflows, which are skipped in turn, so its pods are grouped one by one;
    - nvidia.com DynamoGraphDeployment: each of its parts (LeaderWorkerSet, Deployment, ...) by its kind.
    The skipped objects' labels are not used: queue, priority and the rest come from the object grouped
    by and the pod. Raises `GroupingError`, one line naming the object and field, for anything missing or
    malformed.

    Shared by every kind:
    - queue: the `kai.scheduler/queue` label (`queue_label_key`) on the top owner, then on the pod; then
      the legacy `project` label (top owner, then pod) with `-<node pool>` appended when the pod has the
      node-pool label; else `default-queue`. Empty values count as absent.
    - priority class: the top owner's `priorityClassName` label (for Ray also `ray.io/priority-class-name`),
      then the pod's `spec.priorityClassName`, then the pod's `priorityClassName` label, then the defaults
      config map's class for the top owner's kind, then the kind's default: `inference` for Deployments,
      Knative and Seldon, `build` for Notebooks and DevWorkspaces, `train` for everything else.
    - preemptibility: the `kai.scheduler/preemptibility` label on the top owner, then on the pod, then the
      defaults config map; else unset (the priority decides). Other values than `preemptible` /
      `non-preemptible` are an error.
    - topology: the top owner's `kai.scheduler/topology`, `-required-placement`, `-preferred-placement`
      annotations; a placement without a topology name is an error.
    - labels and annotations: the top owner's, except `kubectl.kubernetes.io/last-applied-configuration`,
      plus `kai.scheduler/top-owner-metadata` (JSON: name, uid, group, version, kind of the top owner).
    - owner reference: the top owner as controller, unless a kind says otherwise below.
    - namespace: the pod's (`default` when the pod has none).
    - names are `pg-<name>-<uid>[-<suffix>]`, the name part cut when the whole would pass 253 characters.

    Per kind (group/kind of the top owner; any version):
    - v1 Pod (no controller, or a Spark executor under its driver pod): `pg-<pod>-<podUID>`, minMember 1;
      a pod with a `spark-app-selector` label (or whose driver has one) is grouped under the selector's
      value, so the driver and its executors share one PodGroup.
    - batch/Job: one PodGroup per pod, `pg-<pod>-<jobUID>`, minMember 1, owned by the Job.
    - batch/CronJob: as the Job below it (named after and owned by the Job); the Job's labels and
      annotations win over the CronJob's, the CronJob's fill in the rest.
    - apps/Deployment: one PodGroup per pod, `pg-<pod>-<podUID>`, owned by the pod (so it goes away with
      the pod), labels from the Deployment, `inference` by default.
    - the default, `pg-<owner>-<ownerUID>`, minMember 1, owned by the top owner: apps/StatefulSet,
      apps/ReplicaSet, machinelearning.seldon.io SeldonDeployment (`inference`), kubeflow.org Notebook and
      workspace.devfile.io DevWorkspace (`build`), kubevirt.io VirtualMachineInstance (one PodGroup per
      VMI; a VMI started by a VirtualMachine is grouped by the VirtualMachine, its top owner), tekton.dev
      PipelineRun and TaskRun (one PodGroup per run: a PipelineRun's TaskRuns share the PipelineRun's),
      and every unknown kind (`train`). Grove's PodGangSet / PodCliqueSet fall here too: their gangs
      (sub-groups from the PodGang objects) are not built.
    - kubeflow.org PyTorchJob / TFJob / XGBoostJob / JAXJob / PaddleJob / MPIJob: minMember =
      `spec.runPolicy.schedulingPolicy.minAvailable`, else (PyTorchJob) `spec.elasticPolicy.minReplicas`,
      else the sum of the replicas (a missing `replicas` is 1). A minimum above the job's pods is an error;
      0 counts as 1. One sub-group per replica type (lower-cased: `master`, `worker`, `launcher`, `ps`,
      ...); the gang size is shared out in role order (master, chief, launcher, ps, evaluator, others,
      worker last), so a smaller elastic minimum comes off the workers. The pod joins the sub-group of its
      `training.kubeflow.org/replica-type` (or `job-role`) label; a pod without it gets no sub-group.
      MPIJob `launcherCreationPolicy: WaitForWorkersReady` (v2beta1): the launcher is created only once
      the workers run, so by default it is left out of minMember, and it is shared last.
    - ray.io RayCluster / RayJob / RayService: sub-group `headgroup` (1) and one per worker group named
      after it, `minReplicas` (else `replicas`, else 0) × `numOfHosts`; minMember is their sum. The pod
      joins the sub-group of its `ray.io/group` label. The cluster spec is the RayCluster's in the chain,
      else the RayJob's `rayClusterSpec` / RayService's `rayClusterConfig`. A RayJob in `K8sJobMode` adds
      a `submitter` sub-group of minMember 0 for its submitter pod (created after the cluster is up); a
      RayJob without a cluster spec (it uses an existing cluster) is a plain minMember-1 group. A
      RayService is grouped per RayCluster (named after and owned by the cluster), because it replaces
      its cluster on upgrades. `ray.io/priority-class-name` is read after `priorityClassName`.
    - jobset.x-k8s.io JobSet: one PodGroup, minMember = Σ replicas × min(parallelism, completions); with
      `startupPolicy.startupPolicyOrder: InOrder`, one per replicated job, `pg-<jobset>-<uid>-<job name>`,
      picked by the pod's `jobset.sigs.k8s.io/replicatedjob-name` label. No sub-groups.
    - leaderworkerset.x-k8s.io LeaderWorkerSet: one PodGroup per group, `pg-<lws>-<uid>-group-<index>`
      from the pod's `leaderworkerset.sigs.k8s.io/group-index` label; minMember = `leaderWorkerTemplate.size`
      with `startupPolicy: LeaderCreated` (the default), 1 with `LeaderReady` (workers come after the
      leader is ready). With size > 1, sub-groups `leader` (1) and `workers`; the pod's
      `leaderworkerset.sigs.k8s.io/worker-index` label (0 is the leader) picks its sub-group.
    - serving.knative.dev Service / Configuration / Revision: one PodGroup per Revision (named after and
      owned by it), minMember = the revision's `autoscaling.knative.dev/min-scale` (or `minScale`; else
      the pod's; else 1; 0 counts as 1), labels from the top owner, `inference` by default.

    Segments (`kai.scheduler/segment-size` on the top owner; kubeflow workers and LWS workers): the worker
    sub-group (`worker` / `workers`) becomes the parent of `<parent>-segment-<i>` sub-groups of that many
    consecutive workers (by `training.kubeflow.org/replica-index`, or LWS worker index − 1), the last one
    shorter when the count does not divide. The parent's minimum fills the segments in order. Each
    segment carries `kai.scheduler/segment-topology-required-placement` / `-preferred-placement` under the
    top owner's `kai.scheduler/topology`; a segment placement without a size or a topology is an error.
    """
    chain = owner_chain(pod, owners)
    top = chain[grouping_index(chain)]
    ctx = Context(pod=chain[0], chain=chain, top=top, queue_label_key=queue_label_key, defaults=defaults)
    return grouper_for(top)(ctx)
