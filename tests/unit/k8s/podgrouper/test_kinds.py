"""Each supported workload kind, from realistic manifests to the PodGroup KAI's pod grouper makes."""

from __future__ import annotations

from typing import Any

import pytest
from pg_objects import (
    NS,
    batch_job,
    jobset,
    jobset_pod,
    knative,
    kubeflow_pod,
    lws,
    lws_pods,
    mpijob,
    obj,
    pod,
    pod_template,
    pytorchjob,
    ray_cluster_spec,
    ray_pod,
    replica,
)

from kai_scheduler.api.objects import PodGroup
from kai_scheduler.controlplane.podgrouper import (
    GrouperDefaults,
    GroupingError,
    PodGroupPlan,
    SubGroupPlan,
    TopologyConstraintPlan,
    plan_pod_group,
    pod_group_manifest,
)


def groups(plan: PodGroupPlan) -> dict[str, tuple[int, str | None]]:
    return {g.name: (g.min_member, g.parent) for g in plan.sub_groups}


def check_manifest(plan: PodGroupPlan) -> dict[str, Any]:
    """The manifest loads as the project's own PodGroup model and matches the plan."""
    manifest = pod_group_manifest(plan)
    model = PodGroup.model_validate(manifest)
    assert model.metadata.name == plan.name
    assert model.spec.min_member == plan.min_member
    assert [g.name for g in model.spec.sub_groups] == [g.name for g in plan.sub_groups]
    return manifest


# --- bare pods and Spark ---------------------------------------------------------------------------


def test_bare_pod_gets_its_own_group() -> None:
    p = pod("sleeper", "uid-p1", labels={"kai.scheduler/queue": "team-a"})
    plan = plan_pod_group(p, [])
    assert plan.name == "pg-sleeper-uid-p1"
    assert plan.namespace == NS
    assert plan.min_member == 1
    assert plan.queue == "team-a"
    assert plan.priority_class_name == "train"
    assert plan.preemptibility is None
    assert plan.sub_groups == ()
    assert plan.pod_subgroup is None
    assert plan.owner_reference == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "sleeper",
        "uid": "uid-p1",
        "controller": True,
    }
    assert plan.pod_patch() == {"metadata": {"annotations": {"pod-group-name": "pg-sleeper-uid-p1"}}}
    check_manifest(plan)


def test_spark_driver_and_executors_share_the_app_selector_group() -> None:
    spark = {
        "spark-app-selector": "spark-4b1c9e2f",
        "spark-app-name": "pi",
        "kai.scheduler/queue": "analytics",
    }
    driver = pod("pi-driver", "uid-drv", labels={**spark, "spark-role": "driver"})
    executors = [
        pod(f"pi-exec-{i}", f"uid-exec-{i}", owner=driver, labels={**spark, "spark-role": "executor"})
        for i in (1, 2)
    ]
    plans = [plan_pod_group(driver, []), *(plan_pod_group(e, [driver]) for e in executors)]
    assert {p.name for p in plans} == {"spark-4b1c9e2f"}
    assert {p.queue for p in plans} == {"analytics"}
    # Executors are owned by the driver pod; the PodGroup goes with the driver.
    assert {p.owner_reference["uid"] for p in plans} == {"uid-drv"}
    assert all(p.min_member == 1 for p in plans)


def test_spark_selector_that_cannot_be_a_name_is_an_error() -> None:
    driver = pod("pi-driver", "uid-drv", labels={"spark-app-selector": "Spark_App!"})
    with pytest.raises(GroupingError, match=r'Pod team-a/pi-driver: metadata.labels\["spark-app-selector"\]'):
        plan_pod_group(driver, [])


# --- batch Job, CronJob ----------------------------------------------------------------------------


def test_job_pods_share_one_pod_group() -> None:
    # KAI v0.17 job_grouper_test.go TestGetPodGroupMetadata_MultiPodJobSharesPodGroup (#1443): one
    # PodGroup per Job, `pg-<job>-<uid>`, minMember 1 without the annotation.
    job = batch_job(labels={"kai.scheduler/queue": "research"})
    pods = [pod(f"eval-{i}", f"uid-eval-{i}", owner=job, labels={"job-name": "eval"}) for i in range(3)]
    plans = [plan_pod_group(p, [job]) for p in pods]
    assert [p.name for p in plans] == ["pg-eval-uid-job"] * 3
    assert all(p.min_member == 1 and p.queue == "research" for p in plans)
    assert all(p.owner_reference["kind"] == "Job" and p.owner_reference["uid"] == "uid-job" for p in plans)
    assert plans[0].labels == {"kai.scheduler/queue": "research"}
    check_manifest(plans[0])


def test_batch_min_member_sets_the_job_gang_size() -> None:
    # KAI v0.17 job_grouper_test.go TestGetPodGroupMetadata_MinMemberOverride (#1308).
    job = batch_job()
    job["metadata"]["annotations"] = {"kai.scheduler/batch-min-member": "3"}
    plan = plan_pod_group(pod("eval-0", "uid-eval-0", owner=job), [job])
    assert (plan.name, plan.min_member) == ("pg-eval-uid-job", 3)
    assert check_manifest(plan)["spec"]["minMember"] == 3


@pytest.mark.parametrize(("value", "message"), [("invalid", "expected an integer"), ("0", "at least 1")])
def test_batch_min_member_that_is_no_gang_size_is_an_error(value: str, message: str) -> None:
    # KAI v0.17 job_grouper_test.go TestGetPodGroupMetadata_MinMemberOverrideInvalid: no PodGroup, an error
    # (KAI's API server refuses a minMember below 1 as well).
    job = batch_job()
    job["metadata"]["annotations"] = {"kai.scheduler/batch-min-member": value}
    with pytest.raises(GroupingError, match=message) as caught:
        plan_pod_group(pod("eval-0", "uid-eval-0", owner=job), [job])
    assert "kai.scheduler/batch-min-member" in str(caught.value)


def test_cronjob_groups_through_its_job() -> None:
    cron = obj(
        "batch/v1",
        "CronJob",
        "nightly-eval",
        "uid-cron",
        labels={"kai.scheduler/queue": "nightly", "team": "eval", "priorityClassName": "build-preemptible"},
        annotations={"kai.scheduler/topology": "dc"},
        spec={"schedule": "0 2 * * *", "jobTemplate": {"spec": {"template": pod_template()}}},
    )
    job = batch_job(owner=cron, labels={"team": "eval-nightly"})
    p = pod("nightly-eval-28901234-x7k2p", "uid-cp", owner=job)
    plan = plan_pod_group(p, [cron, job])
    assert plan.name == "pg-nightly-eval-28901234-uid-job"
    assert plan.owner_reference["kind"] == "Job"
    assert plan.owner_reference["name"] == "nightly-eval-28901234"
    # The CronJob's labels fill in what the Job does not say.
    assert plan.queue == "nightly"
    assert plan.priority_class_name == "build-preemptible"
    assert plan.labels["team"] == "eval-nightly"
    assert plan.topology_constraint == TopologyConstraintPlan("dc")


# --- Deployment, StatefulSet, ReplicaSet, Notebook -------------------------------------------------


def test_deployment_pods_each_get_an_inference_group_owned_by_the_pod() -> None:
    deploy = obj(
        "apps/v1",
        "Deployment",
        "llm-server",
        "uid-dep",
        labels={"app": "llm", "kai.scheduler/queue": "serving"},
        spec={"replicas": 2, "template": pod_template({"app": "llm"})},
    )
    rs = obj("apps/v1", "ReplicaSet", "llm-server-6d4cf56db6", "uid-rs", owner=deploy, spec={"replicas": 2})
    p = pod("llm-server-6d4cf56db6-abcde", "uid-dp", owner=rs, labels={"app": "llm"})
    plan = plan_pod_group(p, [rs, deploy])
    assert plan.name == "pg-llm-server-6d4cf56db6-abcde-uid-dp"
    assert plan.priority_class_name == "inference"
    assert plan.queue == "serving"
    assert plan.owner_reference["kind"] == "Pod"
    assert plan.owner_reference["uid"] == "uid-dp"
    assert plan.labels == {"app": "llm", "kai.scheduler/queue": "serving"}


def test_statefulset_and_replicaset_use_the_default_grouping() -> None:
    sts = obj("apps/v1", "StatefulSet", "etcd", "uid-sts", spec={"replicas": 3, "serviceName": "etcd"})
    plan = plan_pod_group(pod("etcd-0", "uid-e0", owner=sts), [sts])
    assert (plan.name, plan.min_member, plan.priority_class_name) == ("pg-etcd-uid-sts", 1, "train")
    assert plan.owner_reference["kind"] == "StatefulSet"
    rs = obj("apps/v1", "ReplicaSet", "workers", "uid-rs2", spec={"replicas": 3})
    plan = plan_pod_group(pod("workers-abc", "uid-w", owner=rs), [rs])
    assert (plan.name, plan.min_member) == ("pg-workers-uid-rs2", 1)


def test_notebook_gets_build_priority() -> None:
    nb = obj(
        "kubeflow.org/v1beta1",
        "Notebook",
        "alice-nb",
        "uid-nb",
        labels={"kai.scheduler/queue": "alice"},
        spec={"template": pod_template()},
    )
    sts = obj("apps/v1", "StatefulSet", "alice-nb", "uid-nbsts", owner=nb, spec={"replicas": 1})
    plan = plan_pod_group(pod("alice-nb-0", "uid-nb0", owner=sts), [sts, nb])
    assert plan.name == "pg-alice-nb-uid-nb"
    assert plan.priority_class_name == "build"
    assert plan.queue == "alice"
    assert plan.preemptibility is None  # build (100) is non-preemptible by its value


def test_unknown_kind_uses_the_default_grouping() -> None:
    owner = obj("example.com/v1", "Widget", "w1", "uid-w1", spec={"size": 3})
    plan = plan_pod_group(pod("w1-0", "uid-w10", owner=owner), [owner])
    assert plan.name == "pg-w1-uid-w1"
    assert plan.min_member == 1
    assert plan.priority_class_name == "train"
    assert plan.queue == "default-queue"
    assert plan.owner_reference == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "name": "w1",
        "uid": "uid-w1",
        "controller": True,
    }


# --- Kubeflow --------------------------------------------------------------------------------------


def test_pytorchjob_master_and_workers() -> None:
    job = pytorchjob(labels={"kai.scheduler/queue": "team-a"})
    master = kubeflow_pod(job, "master", 0)
    worker = kubeflow_pod(job, "worker", 2)
    plan = plan_pod_group(master, [job])
    assert plan.name == "pg-mnist-uid-ptj"
    assert plan.min_member == 5
    assert groups(plan) == {"master": (1, None), "worker": (4, None)}
    assert plan.pod_subgroup == "master"
    assert plan.pod_patch()["metadata"]["labels"] == {"kai.scheduler/subgroup-name": "master"}
    worker_plan = plan_pod_group(worker, [job])
    assert worker_plan.pod_subgroup == "worker"
    assert {**worker_plan.__dict__, "pod_subgroup": None} == {**plan.__dict__, "pod_subgroup": None}
    manifest = check_manifest(plan)
    assert manifest["spec"]["subGroups"] == [
        {"name": "master", "minMember": 1},
        {"name": "worker", "minMember": 4},
    ]


def test_pytorchjob_min_available_wins() -> None:
    job = pytorchjob(
        workers=8,
        runPolicy={"schedulingPolicy": {"minAvailable": 5}},
        elasticPolicy={"minReplicas": 3, "maxReplicas": 9},
    )
    plan = plan_pod_group(kubeflow_pod(job, "worker", 0), [job])
    assert plan.min_member == 5
    assert groups(plan) == {"master": (1, None), "worker": (4, None)}


def test_elastic_pytorchjob_uses_min_replicas() -> None:
    job = pytorchjob(
        "elastic",
        "uid-el",
        master=None,
        workers=6,
        elasticPolicy={"rdzvBackend": "c10d", "minReplicas": 2, "maxReplicas": 8, "maxRestarts": 3},
    )
    plan = plan_pod_group(kubeflow_pod(job, "worker", 5), [job])
    assert plan.min_member == 2
    assert groups(plan) == {"worker": (2, None)}
    assert plan.pod_subgroup == "worker"


def test_kubeflow_replicas_default_to_one() -> None:
    job = obj(
        "kubeflow.org/v1",
        "TFJob",
        "tf",
        "uid-tf",
        spec={"tfReplicaSpecs": {"Chief": replica(None), "PS": replica(2), "Worker": replica(3)}},
    )
    plan = plan_pod_group(kubeflow_pod(job, "ps", 1), [job])
    assert plan.min_member == 6
    assert groups(plan) == {"chief": (1, None), "ps": (2, None), "worker": (3, None)}
    assert plan.pod_subgroup == "ps"


def test_tfjob_small_min_available_comes_off_the_workers() -> None:
    job = obj(
        "kubeflow.org/v1",
        "TFJob",
        "tf",
        "uid-tf",
        spec={
            "runPolicy": {"schedulingPolicy": {"minAvailable": 3}},
            "tfReplicaSpecs": {"Worker": replica(4), "PS": replica(2)},
        },
    )
    plan = plan_pod_group(kubeflow_pod(job, "worker", 0), [job])
    assert plan.min_member == 3
    assert [(g.name, g.min_member) for g in plan.sub_groups] == [("ps", 2), ("worker", 1)]


@pytest.mark.parametrize(
    ("kind", "key"),
    [("XGBoostJob", "xgbReplicaSpecs"), ("JAXJob", "jaxReplicaSpecs"), ("PaddleJob", "paddleReplicaSpecs")],
)
def test_other_kubeflow_kinds(kind: str, key: str) -> None:
    specs = {"Worker": replica(3)} if kind == "JAXJob" else {"Master": replica(1), "Worker": replica(2)}
    job = obj("kubeflow.org/v1", kind, "j", "uid-j", spec={key: specs})
    plan = plan_pod_group(kubeflow_pod(job, "worker", 1), [job])
    assert plan.min_member == 3
    assert plan.pod_subgroup == "worker"
    assert plan.priority_class_name == "train"


@pytest.mark.parametrize("version", ["v1", "v2beta1"])
def test_mpijob_gangs_launcher_and_workers(version: str) -> None:
    job = mpijob(version)
    launcher = pod(
        "allreduce-launcher",
        "uid-l",
        owner=job,
        labels={"training.kubeflow.org/job-role": "launcher", "training.kubeflow.org/job-name": "allreduce"},
    )
    plan = plan_pod_group(launcher, [job])
    assert plan.min_member == 5
    assert [(g.name, g.min_member) for g in plan.sub_groups] == [("launcher", 1), ("worker", 4)]
    assert plan.pod_subgroup == "launcher"


def test_mpijob_delayed_launcher_is_left_out_of_the_gang() -> None:
    job = mpijob("v2beta1", "WaitForWorkersReady", runLauncherAsWorker=False)
    plan = plan_pod_group(kubeflow_pod(job, "worker", 3), [job])
    assert plan.min_member == 4
    assert [(g.name, g.min_member) for g in plan.sub_groups] == [("worker", 4), ("launcher", 0)]
    check_manifest(plan)


def with_worker_annotations(job: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    """The segment keys on the Worker template, where KAI v0.17's PyTorchJob grouper reads them."""
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] = annotations
    return job


def test_pytorchjob_worker_segments() -> None:
    job = with_worker_annotations(
        pytorchjob(
            workers=10,
            annotations={
                "kai.scheduler/topology": "gb200",
                "kai.scheduler/topology-required-placement": "zone",
            },
        ),
        {
            "kai.scheduler/segment-size": "4",
            "kai.scheduler/segment-topology-required-placement": "nvlink-domain",
            "kai.scheduler/segment-topology-preferred-placement": "kubernetes.io/hostname",
        },
    )
    plan = plan_pod_group(kubeflow_pod(job, "worker", 9), [job])
    assert plan.topology_constraint == TopologyConstraintPlan("gb200", "zone", None)
    segment_tc = TopologyConstraintPlan("gb200", "nvlink-domain", "kubernetes.io/hostname")
    assert plan.sub_groups == (
        SubGroupPlan("master", 1),
        SubGroupPlan("worker", 10),
        SubGroupPlan("worker-segment-0", 4, "worker", segment_tc),
        SubGroupPlan("worker-segment-1", 4, "worker", segment_tc),
        SubGroupPlan("worker-segment-2", 2, "worker", segment_tc),
    )
    assert plan.pod_subgroup == "worker-segment-2"
    assert plan_pod_group(kubeflow_pod(job, "worker", 4), [job]).pod_subgroup == "worker-segment-1"
    assert plan_pod_group(kubeflow_pod(job, "master", 0), [job]).pod_subgroup == "master"
    manifest = check_manifest(plan)
    assert manifest["spec"]["subGroups"][2] == {
        "name": "worker-segment-0",
        "minMember": 4,
        "parent": "worker",
        "topologyConstraint": {
            "topology": "gb200",
            "requiredTopologyLevel": "nvlink-domain",
            "preferredTopologyLevel": "kubernetes.io/hostname",
        },
    }


def test_elastic_segments_are_whole_gangs_or_optional() -> None:
    # KAI v0.17's buildWorkerSubGroups: the segments holding the minimum's pods need all theirs (5 rounds
    # up to two whole segments of 4), the rest none.
    job = with_worker_annotations(
        pytorchjob(master=None, workers=8, elasticPolicy={"minReplicas": 5, "maxReplicas": 8}),
        {"kai.scheduler/segment-size": "4"},
    )
    plan = plan_pod_group(kubeflow_pod(job, "worker", 0), [job])
    assert groups(plan) == {
        "worker": (5, None),
        "worker-segment-0": (4, "worker"),
        "worker-segment-1": (4, "worker"),
    }
    # Segments without a placement carry no constraint of their own.
    assert all(g.topology_constraint is None for g in plan.sub_groups)


# --- Ray -------------------------------------------------------------------------------------------


def test_raycluster_head_and_two_worker_groups() -> None:
    rc = obj(
        "ray.io/v1",
        "RayCluster",
        "rc",
        "uid-rc",
        labels={"ray.io/priority-class-name": "build-preemptible", "kai.scheduler/queue": "ml"},
        spec=ray_cluster_spec(),
    )
    head = ray_pod(rc, "head", "headgroup", 0)
    plan = plan_pod_group(head, [rc])
    assert plan.name == "pg-rc-uid-rc"
    # head 1 + gpu-small minReplicas 2 + gpu-tpu-like replicas 2 × numOfHosts 2
    assert plan.min_member == 7
    assert groups(plan) == {"headgroup": (1, None), "gpu-small": (2, None), "gpu-tpu-like": (4, None)}
    assert plan.pod_subgroup == "headgroup"
    assert plan.priority_class_name == "build-preemptible"
    assert plan.queue == "ml"
    assert plan_pod_group(ray_pod(rc, "worker", "gpu-tpu-like", 3), [rc]).pod_subgroup == "gpu-tpu-like"
    check_manifest(plan)


def test_rayjob_with_its_cluster_and_submitter() -> None:
    rj = obj(
        "ray.io/v1",
        "RayJob",
        "train-rl",
        "uid-rj",
        labels={"kai.scheduler/queue": "rl"},
        spec={"entrypoint": "python train.py", "rayClusterSpec": ray_cluster_spec()},
    )
    rc = obj(
        "ray.io/v1", "RayCluster", "train-rl-raycluster-x2v", "uid-rjc", owner=rj, spec=ray_cluster_spec()
    )
    submitter_job = obj("batch/v1", "Job", "train-rl", "uid-rjj", owner=rj, spec={"template": pod_template()})
    head = ray_pod(rc, "head", "headgroup", 0)
    submitter = pod("train-rl-abcde", "uid-sub", owner=submitter_job, labels={"job-name": "train-rl"})
    plan = plan_pod_group(head, [rc, rj])
    assert plan.name == "pg-train-rl-uid-rj"
    assert plan.min_member == 7
    assert groups(plan)["submitter"] == (0, None)
    sub_plan = plan_pod_group(submitter, [submitter_job, rj])
    assert sub_plan.name == plan.name
    assert sub_plan.sub_groups == plan.sub_groups
    assert sub_plan.pod_subgroup == "submitter"
    assert sub_plan.queue == "rl"


def test_rayjob_on_an_existing_cluster_groups_the_submitter_alone() -> None:
    rj = obj(
        "ray.io/v1",
        "RayJob",
        "quick",
        "uid-rq",
        spec={"entrypoint": "python x.py", "clusterSelector": {"ray.io/cluster": "shared"}},
    )
    job = obj("batch/v1", "Job", "quick", "uid-rqj", owner=rj)
    plan = plan_pod_group(pod("quick-xyz", "uid-q", owner=job), [job, rj])
    assert (plan.name, plan.min_member, plan.sub_groups) == ("pg-quick-uid-rq", 1, ())


def test_rayservice_groups_per_cluster() -> None:
    svc = obj(
        "ray.io/v1",
        "RayService",
        "summarize",
        "uid-rs",
        labels={"kai.scheduler/queue": "serving"},
        spec={"rayClusterConfig": ray_cluster_spec(), "serveConfigV2": "applications: []"},
    )
    old = obj(
        "ray.io/v1", "RayCluster", "summarize-raycluster-aaaaa", "uid-c1", owner=svc, spec=ray_cluster_spec()
    )
    new = obj(
        "ray.io/v1", "RayCluster", "summarize-raycluster-bbbbb", "uid-c2", owner=svc, spec=ray_cluster_spec()
    )
    p_old = plan_pod_group(ray_pod(old, "worker", "gpu-small", 0), [old, new, svc])
    p_new = plan_pod_group(ray_pod(new, "head", "headgroup", 0), [old, new, svc])
    assert p_old.name == "pg-summarize-raycluster-aaaaa-uid-c1"
    assert p_new.name == "pg-summarize-raycluster-bbbbb-uid-c2"
    assert p_new.owner_reference["kind"] == "RayCluster"
    assert p_new.queue == "serving"
    assert p_new.min_member == 7


def test_ray_worker_of_unknown_group_is_an_error() -> None:
    rc = obj("ray.io/v1", "RayCluster", "rc", "uid-rc", spec=ray_cluster_spec())
    with pytest.raises(GroupingError, match=r"Pod team-a/rc-gone-0: metadata.labels\[\"ray.io/group\"\]"):
        plan_pod_group(ray_pod(rc, "worker", "gone", 0), [rc])


# --- TrainJob (JobSets: test_jobset_sub_groups.py) ---------------------------------------------------


def test_trainjob_is_skipped_for_its_jobset() -> None:
    tj = obj(
        "trainer.kubeflow.org/v1alpha1",
        "TrainJob",
        "llama",
        "uid-tj",
        labels={"kai.scheduler/queue": "from-trainjob"},
        spec={"runtimeRef": {"name": "torch-distributed"}},
    )
    js = jobset(owner=tj)
    js["metadata"]["labels"] = {"kai.scheduler/queue": "team-a"}
    p, job = jobset_pod(js, "workers", 0, 0)
    plan = plan_pod_group(p, [job, js, tj])
    assert plan.name == "pg-llama-uid-js"
    assert plan.owner_reference["kind"] == "JobSet"
    assert plan.queue == "team-a"
    assert plan.min_sub_group == 2


# --- LeaderWorkerSet -------------------------------------------------------------------------------


def test_lws_one_gang_per_group_leader_created() -> None:
    ws = lws()
    p, owners = lws_pods(ws, 1, 2)
    plan = plan_pod_group(p, owners)
    assert plan.name == "pg-vllm-uid-lws-group-1"
    assert plan.min_member == 4
    assert groups(plan) == {"leader": (1, None), "workers": (3, None)}
    assert plan.pod_subgroup == "workers"
    assert plan.owner_reference["kind"] == "LeaderWorkerSet"
    leader, owners = lws_pods(ws, 0, 0)
    leader_plan = plan_pod_group(leader, owners)
    assert (leader_plan.name, leader_plan.pod_subgroup) == ("pg-vllm-uid-lws-group-0", "leader")


def test_lws_leader_ready_gangs_only_the_leader() -> None:
    p, owners = lws_pods(lws("LeaderReady"), 0, 3)
    plan = plan_pod_group(p, owners)
    assert plan.min_member == 1
    assert groups(plan) == {"leader": (1, None), "workers": (0, None)}


def lws_segmented(policy: str | None = None) -> dict[str, Any]:
    # KAI v0.17's LeaderWorkerSet grouper reads the size and the topology name on the LeaderWorkerSet, the
    # placement on the worker template (or the pod).
    ws = lws(size=9, annotations={"kai.scheduler/topology": "rack-topo", "kai.scheduler/segment-size": "4"})
    ws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
        "kai.scheduler/segment-topology-required-placement": "rack"
    }
    if policy is not None:
        ws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = {"subGroupPolicyType": policy}
    return ws


def test_lws_segments_leader_in_the_first_segment() -> None:
    # KAI v0.17's default LeaderWorker policy: 8 workers divide by 4, so the leader is an extra pod of
    # segment 0 (leader and workers 1-4), segment 1 holds workers 5-8.
    p, owners = lws_pods(lws_segmented(), 0, 5)
    plan = plan_pod_group(p, owners)
    tc = TopologyConstraintPlan("rack-topo", "rack")
    assert plan.sub_groups == (
        SubGroupPlan("segment-0", 0, None, tc, min_sub_group=2),
        SubGroupPlan("leader", 1, "segment-0"),
        SubGroupPlan("workers", 4, "segment-0"),
        SubGroupPlan("segment-1", 4, None, tc),
    )
    assert plan.pod_subgroup == "segment-1"
    assert plan.topology_constraint == TopologyConstraintPlan("rack-topo")
    check_manifest(plan)


def test_lws_segments_leader_excluded() -> None:
    p, owners = lws_pods(lws_segmented("LeaderExcluded"), 0, 5)
    plan = plan_pod_group(p, owners)
    tc = TopologyConstraintPlan("rack-topo", "rack")
    assert plan.sub_groups == (
        SubGroupPlan("leader", 1),
        SubGroupPlan("segment-0", 4, None, tc),
        SubGroupPlan("segment-1", 4, None, tc),
    )
    # worker index 5 is the 5th worker: the second segment
    assert plan.pod_subgroup == "segment-1"


def test_lws_of_size_one_has_no_sub_groups() -> None:
    p, owners = lws_pods(lws(size=1), 3, 0)
    plan = plan_pod_group(p, owners)
    assert (plan.min_member, plan.sub_groups, plan.pod_subgroup) == (1, (), None)


def test_dynamo_graph_deployment_is_skipped() -> None:
    dgd = obj("nvidia.com/v1alpha1", "DynamoGraphDeployment", "graph", "uid-dgd", spec={"services": {}})
    ws = lws()
    ws["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "DynamoGraphDeployment",
            "name": "graph",
            "uid": "uid-dgd",
            "controller": True,
        }
    ]
    p, owners = lws_pods(ws, 0, 1)
    plan = plan_pod_group(p, [*owners, dgd])
    assert plan.name == "pg-vllm-uid-lws-group-0"


# --- Knative ---------------------------------------------------------------------------------------


def test_knative_gang_per_revision_from_min_scale() -> None:
    p, owners = knative("3")
    plan = plan_pod_group(p, owners)
    assert plan.name == "pg-chat-00002-uid-krev"
    assert plan.min_member == 3
    assert plan.priority_class_name == "inference"
    assert plan.queue == "serving"
    assert plan.owner_reference["kind"] == "Revision"
    check_manifest(plan)


@pytest.mark.parametrize("min_scale", [None, "0"])
def test_knative_without_min_scale_is_one(min_scale: str | None) -> None:
    p, owners = knative(min_scale)
    assert plan_pod_group(p, owners).min_member == 1


def test_knative_bad_min_scale_is_an_error() -> None:
    p, owners = knative("three")
    with pytest.raises(GroupingError) as err:
        plan_pod_group(p, owners)
    assert str(err.value) == (
        'Revision team-a/chat-00002: metadata.annotations["autoscaling.knative.dev/min-scale"]: '
        "expected an integer, got 'three'"
    )


# --- Seldon, DevWorkspace, KubeVirt, Tekton: the default grouping, with the kind's priority -------


def _deployment_chain(
    top: dict[str, Any], name: str, uid: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Deployment made by `top`, its ReplicaSet and one pod: (pod, owners)."""
    deploy = obj("apps/v1", "Deployment", name, f"{uid}-dep", owner=top, spec={"replicas": 2})
    rs = obj("apps/v1", "ReplicaSet", f"{name}-7f9c", f"{uid}-rs", owner=deploy, spec={"replicas": 2})
    return pod(f"{name}-7f9c-x2x4q", f"{uid}-pod", owner=rs), [rs, deploy, top]


@pytest.mark.parametrize("version", ["v1", "v1alpha2"])
def test_seldon_deployment_is_one_inference_group(version: str) -> None:
    sdep = obj(
        f"machinelearning.seldon.io/{version}",
        "SeldonDeployment",
        "iris",
        "uid-sdep",
        labels={"kai.scheduler/queue": "serving"},
        spec={"predictors": [{"name": "default", "replicas": 2, "graph": {"name": "classifier"}}]},
    )
    p, owners = _deployment_chain(sdep, "iris-default-0-classifier", "uid-sd")
    plan = plan_pod_group(p, owners)
    # Grouped by the SeldonDeployment (not per pod, as a bare Deployment would be).
    assert plan.name == "pg-iris-uid-sdep"
    assert plan.min_member == 1
    assert plan.priority_class_name == "inference"
    assert plan.preemptibility is None
    assert plan.queue == "serving"
    assert plan.sub_groups == ()
    assert plan.owner_reference == {
        "apiVersion": f"machinelearning.seldon.io/{version}",
        "kind": "SeldonDeployment",
        "name": "iris",
        "uid": "uid-sdep",
        "controller": True,
    }
    check_manifest(plan)


def test_seldon_priority_from_the_defaults_config_map_and_labels() -> None:
    sdep = obj("machinelearning.seldon.io/v1", "SeldonDeployment", "iris", "uid-sdep")
    p, owners = _deployment_chain(sdep, "iris-default-0-classifier", "uid-sd")
    defaults = GrouperDefaults.from_types_json(
        '[{"typeName": "SeldonDeployment", "group": "machinelearning.seldon.io",'
        ' "priorityName": "train", "preemptibility": "preemptible"}]'
    )
    plan = plan_pod_group(p, owners, defaults=defaults)
    assert (plan.priority_class_name, plan.preemptibility) == ("train", "preemptible")
    sdep["metadata"]["labels"] = {"priorityClassName": "build"}
    assert plan_pod_group(p, owners, defaults=defaults).priority_class_name == "build"


def test_devworkspace_gets_build_priority() -> None:
    ws = obj(
        "workspace.devfile.io/v1alpha2",
        "DevWorkspace",
        "bob-ide",
        "uid-dw",
        labels={"kai.scheduler/queue": "bob"},
        spec={"started": True, "template": {"components": [{"name": "tools"}]}},
    )
    p, owners = _deployment_chain(ws, "workspace0a1b2c3d", "uid-dw")
    plan = plan_pod_group(p, owners)
    assert plan.name == "pg-bob-ide-uid-dw"
    assert plan.min_member == 1
    assert plan.priority_class_name == "build"
    assert plan.preemptibility is None
    assert plan.queue == "bob"
    assert plan.owner_reference["kind"] == "DevWorkspace"
    assert plan.owner_reference["uid"] == "uid-dw"


def _vmi(owner: dict[str, Any] | None = None, uid: str = "uid-vmi") -> dict[str, Any]:
    return obj(
        "kubevirt.io/v1",
        "VirtualMachineInstance",
        "fedora",
        uid,
        owner=owner,
        labels={"kai.scheduler/queue": "vms"},
        spec={"domain": {"devices": {}, "resources": {"requests": {"memory": "2Gi"}}}},
    )


def test_virtual_machine_instance_is_one_group_per_vmi() -> None:
    first = _vmi()
    plan = plan_pod_group(pod("virt-launcher-fedora-abcde", "uid-vl", owner=first), [first])
    assert plan.name == "pg-fedora-uid-vmi"
    assert (plan.min_member, plan.priority_class_name, plan.queue) == (1, "train", "vms")
    assert plan.owner_reference["kind"] == "VirtualMachineInstance"
    # The same name started again is another VMI: another PodGroup.
    again = _vmi(uid="uid-vmi-2")
    plan2 = plan_pod_group(pod("virt-launcher-fedora-fghij", "uid-vl2", owner=again), [again])
    assert plan2.name == "pg-fedora-uid-vmi-2"


def test_vmi_of_a_virtual_machine_is_grouped_by_the_vm() -> None:
    vm = obj("kubevirt.io/v1", "VirtualMachine", "fedora", "uid-vm", spec={"runStrategy": "Always"})
    vmi = _vmi(owner=vm)
    plan = plan_pod_group(pod("virt-launcher-fedora-abcde", "uid-vl", owner=vmi), [vmi, vm])
    # The top owner decides: the VirtualMachine, an unknown kind (default grouping, no queue label).
    assert plan.name == "pg-fedora-uid-vm"
    assert plan.owner_reference["kind"] == "VirtualMachine"
    assert plan.queue == "default-queue"


def test_tekton_pipeline_run_is_one_group_for_all_its_task_runs() -> None:
    pr = obj(
        "tekton.dev/v1",
        "PipelineRun",
        "build-and-test-r8x",
        "uid-pr",
        labels={"kai.scheduler/queue": "ci"},
        spec={"pipelineRef": {"name": "build-and-test"}},
    )
    plans = []
    for i, task in enumerate(("build", "test")):
        tr = obj("tekton.dev/v1", "TaskRun", f"build-and-test-r8x-{task}", f"uid-tr{i}", owner=pr)
        p = pod(f"build-and-test-r8x-{task}-pod", f"uid-trp{i}", owner=tr)
        plans.append(plan_pod_group(p, [tr, pr]))
    assert {p.name for p in plans} == {"pg-build-and-test-r8x-uid-pr"}
    assert all(p.min_member == 1 and p.queue == "ci" and p.priority_class_name == "train" for p in plans)
    assert {p.owner_reference["kind"] for p in plans} == {"PipelineRun"}


def test_tekton_task_run_on_its_own_is_one_group() -> None:
    tr = obj("tekton.dev/v1beta1", "TaskRun", "lint-9k2", "uid-tr", spec={"taskRef": {"name": "lint"}})
    plan = plan_pod_group(pod("lint-9k2-pod", "uid-trp", owner=tr), [tr])
    assert (plan.name, plan.min_member) == ("pg-lint-9k2-uid-tr", 1)
    assert plan.owner_reference["kind"] == "TaskRun"


# --- kai.scheduler/staleness-grace-period ------------------------------------------------------------

GRACE = "kai.scheduler/staleness-grace-period"


def test_staleness_grace_period_goes_from_the_workload_to_the_pod_group_spec() -> None:
    job = batch_job()
    job["metadata"]["annotations"] = {GRACE: "30s"}
    plan = plan_pod_group(pod("eval-0", "uid-eval-0", owner=job, annotations={GRACE: "5s"}), [job])
    assert plan.staleness_grace_period == "30s"  # the owner's before the pod's, as KAI reads them
    assert check_manifest(plan)["spec"]["stalenessGracePeriod"] == "30s"


@pytest.mark.parametrize("value", ["-10s", "0", "1h30m"])
def test_staleness_grace_period_on_a_bare_pod_negative_and_zero_included(value: str) -> None:
    plan = plan_pod_group(pod("p", "uid-p", annotations={GRACE: value}), [])
    assert plan.staleness_grace_period == value
    assert PodGroup.model_validate(pod_group_manifest(plan)).spec.staleness_grace_period == value


def test_staleness_grace_period_that_go_cannot_read_is_passed_over() -> None:
    # KAI's calcStalenessGracePeriod logs an invalid value and tries the next: here the pod's.
    job = batch_job()
    job["metadata"]["annotations"] = {GRACE: "5 minutes"}
    plan = plan_pod_group(pod("eval-0", "uid-eval-0", owner=job, annotations={GRACE: "2m"}), [job])
    assert plan.staleness_grace_period == "2m"
    job["metadata"]["annotations"] = {GRACE: "1d"}
    plan = plan_pod_group(pod("eval-0", "uid-eval-0", owner=job), [job])
    assert plan.staleness_grace_period is None
    assert "stalenessGracePeriod" not in check_manifest(plan)["spec"]


def test_the_default_grouping_reads_the_staleness_grace_period_up_the_owner_chain() -> None:
    rs = obj("apps/v1", "ReplicaSet", "web-1", "uid-rs", annotations={GRACE: "45s"})
    p = pod("web-1-a", "uid-a", owner=rs)
    ss = obj("example.com/v1", "Widget", "w", "uid-w", annotations={GRACE: "90s"})
    rs_under = obj("apps/v1", "ReplicaSet", "w-1", "uid-rs2", owner=ss, annotations={GRACE: "15s"})
    q = pod("w-1-a", "uid-b", owner=rs_under)
    assert plan_pod_group(p, [rs]).staleness_grace_period == "45s"
    assert plan_pod_group(q, [rs_under, ss]).staleness_grace_period == "15s"  # nearest owner first


# --- kai.scheduler/preemption-delay (KAI v0.17's TestCalcPodGroupPreemptionDelay) ----------------------

DELAY = "kai.scheduler/preemption-delay"


@pytest.mark.parametrize(
    ("on_owner", "on_pod", "expected"),
    [
        ("5m", None, "5m"),  # valid delay from owner
        (None, "90s", "90s"),  # valid delay from pod
        ("1h", "5m", "1h"),  # owner overrides pod
        ("abc", "30s", "30s"),  # invalid owner value falls through to pod
        (None, "5", None),  # unit-less number is invalid
        (None, "-3m", None),  # negative duration is invalid
        (None, None, None),  # no annotations
    ],
)
def test_preemption_delay_goes_from_the_owners_then_the_pod_to_the_pod_group_spec(
    on_owner: str | None, on_pod: str | None, expected: str | None
) -> None:
    job = batch_job()
    job["metadata"]["annotations"] = {DELAY: on_owner} if on_owner is not None else {}
    annotations = {DELAY: on_pod} if on_pod is not None else None
    plan = plan_pod_group(pod("eval-0", "uid-eval-0", owner=job, annotations=annotations), [job])
    assert plan.preemption_delay == expected
    spec = check_manifest(plan)["spec"]
    assert spec.get("preemptionDelay") == expected
    if expected is not None:
        assert PodGroup.model_validate(pod_group_manifest(plan)).spec.preemption_delay is not None
