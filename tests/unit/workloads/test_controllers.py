"""Each workload kind expands into the pods its controller makes, grouped as the live pod grouper groups
them, and the controllers act in simulated time."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai_scheduler.api.constants import NODE_POOL_LABEL
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.objects import Pod, PodGroup
from kai_scheduler.controlplane.podgrouper import plan_pod_group, pod_group_manifest
from kai_scheduler.framework.config import parse_config
from kai_scheduler.framework.decisions import Decision
from kai_scheduler.sim.engine import Simulation, SimulationOptions
from kai_scheduler.sim.in_memory_cluster import build_cluster
from kai_scheduler.sim.loader import load_manifests
from kai_scheduler.workloads.cron import parse_schedule
from kai_scheduler.workloads.runtime import Runtime

START = datetime(2026, 1, 1, tzinfo=UTC)
CLUSTER = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  resources:
    gpu: {quota: 16, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}}
"""


def template(gpu: int = 1, duration: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": dict(labels)}
    if duration:
        meta["annotations"] = {"simulation.kai.scheduler/duration": duration}
    return {
        "metadata": meta,
        "spec": {
            "schedulerName": "kai-scheduler",
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpu)}}}
            ],
        },
    }


def workload(api_version: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "default", "labels": {"kai.scheduler/queue": "team-a"}},
        "spec": spec,
    }


RAY_SPEC = {
    "headGroupSpec": {"template": template(0)},
    "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 1, "template": template(1)}],
}

# kind -> (manifest, the pod names, minMember of each PodGroup by name prefix, sub-groups)
CASES: dict[str, tuple[dict[str, Any], list[str], int | None, list[str]]] = {
    "Job": (
        workload("batch/v1", "Job", "train", {"parallelism": 2, "completions": 3, "template": template()}),
        [r"train-[b-z2-9]{5}", r"train-[b-z2-9]{5}"],
        1,
        [],
    ),
    "IndexedJob": (
        workload(
            "batch/v1",
            "Job",
            "idx",
            {"parallelism": 3, "completions": 3, "completionMode": "Indexed", "template": template()},
        ),
        [r"idx-0-[b-z2-9]{5}", r"idx-1-[b-z2-9]{5}", r"idx-2-[b-z2-9]{5}"],
        1,
        [],
    ),
    "Deployment": (
        workload(
            "apps/v1",
            "Deployment",
            "web",
            {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template(app="web")},
        ),
        [r"web-[b-z2-9]{1,10}-[b-z2-9]{5}"] * 2,
        1,
        [],
    ),
    "ReplicaSet": (
        workload("apps/v1", "ReplicaSet", "rs", {"replicas": 2, "template": template()}),
        [r"rs-[b-z2-9]{5}"] * 2,
        1,
        [],
    ),
    "StatefulSet": (
        workload(
            "apps/v1",
            "StatefulSet",
            "db",
            {"replicas": 3, "podManagementPolicy": "Parallel", "template": template()},
        ),
        ["db-0", "db-1", "db-2"],
        1,
        [],
    ),
    "PyTorchJob": (
        workload(
            "kubeflow.org/v1",
            "PyTorchJob",
            "pt",
            {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": template()},
                    "Worker": {"replicas": 2, "template": template()},
                }
            },
        ),
        ["pt-master-0", "pt-worker-0", "pt-worker-1"],
        3,
        ["master", "worker"],
    ),
    "TFJob": (
        workload(
            "kubeflow.org/v1",
            "TFJob",
            "tf",
            {
                "tfReplicaSpecs": {
                    "PS": {"replicas": 1, "template": template(0)},
                    "Worker": {"replicas": 2, "template": template()},
                }
            },
        ),
        ["tf-ps-0", "tf-worker-0", "tf-worker-1"],
        3,
        ["ps", "worker"],
    ),
    "XGBoostJob": (
        workload(
            "kubeflow.org/v1",
            "XGBoostJob",
            "xgb",
            {
                "xgbReplicaSpecs": {
                    "Master": {"replicas": 1, "template": template()},
                    "Worker": {"replicas": 1, "template": template()},
                }
            },
        ),
        ["xgb-master-0", "xgb-worker-0"],
        2,
        ["master", "worker"],
    ),
    "JAXJob": (
        workload(
            "kubeflow.org/v1",
            "JAXJob",
            "jax",
            {"jaxReplicaSpecs": {"Worker": {"replicas": 2, "template": template()}}},
        ),
        ["jax-worker-0", "jax-worker-1"],
        2,
        ["worker"],
    ),
    "MPIJob": (
        workload(
            "kubeflow.org/v2beta1",
            "MPIJob",
            "mpi",
            {
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": template(0)},
                    "Worker": {"replicas": 2, "template": template()},
                }
            },
        ),
        [r"mpi-launcher-[b-z2-9]{5}", "mpi-worker-0", "mpi-worker-1"],
        3,
        ["launcher", "worker"],
    ),
    "RayCluster": (
        workload("ray.io/v1", "RayCluster", "rc", copy.deepcopy(RAY_SPEC)),
        [r"rc-head-[b-z2-9]{5}", r"rc-gpu-worker-[b-z2-9]{5}", r"rc-gpu-worker-[b-z2-9]{5}"],
        2,
        ["headgroup", "gpu"],
    ),
    "RayJob": (
        workload(
            "ray.io/v1",
            "RayJob",
            "rj",
            {"entrypoint": "python x.py", "rayClusterSpec": copy.deepcopy(RAY_SPEC)},
        ),
        [
            r"rj-raycluster-[b-z2-9]{5}-head-[b-z2-9]{5}",
            r"rj-raycluster-[b-z2-9]{5}-gpu-worker-[b-z2-9]{5}",
            r"rj-raycluster-[b-z2-9]{5}-gpu-worker-[b-z2-9]{5}",
        ],
        2,
        ["headgroup", "gpu", "submitter"],
    ),
    "JobSet": (
        workload(
            "jobset.x-k8s.io/v1alpha2",
            "JobSet",
            "js",
            {
                "replicatedJobs": [
                    {
                        "name": "workers",
                        "replicas": 2,
                        "template": {
                            "spec": {
                                "parallelism": 2,
                                "completions": 2,
                                "completionMode": "Indexed",
                                "template": template(),
                            }
                        },
                    }
                ]
            },
        ),
        [
            r"js-workers-0-0-[b-z2-9]{5}",
            r"js-workers-0-1-[b-z2-9]{5}",
            r"js-workers-1-0-[b-z2-9]{5}",
            r"js-workers-1-1-[b-z2-9]{5}",
        ],
        None,  # KAI v0.16+: minSubGroup 1 (one replicated job), a parent with a leaf per replica
        ["workers", "workers-replica-0", "workers-replica-1"],
    ),
    "LeaderWorkerSet": (
        workload(
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            "lws",
            {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": template()}},
        ),
        ["lws-0", "lws-1", "lws-0-1", "lws-0-2", "lws-1-1", "lws-1-2"],
        3,
        ["leader", "workers"],
    ),
}


def load(tmp_path: Path, *docs: dict[str, Any]) -> list[Any]:
    path = tmp_path / "input.yaml"
    path.write_text(CLUSTER + "".join("---\n" + yaml.safe_dump(doc) for doc in docs))
    return [loaded.obj for loaded in load_manifests([str(path)])]


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_kind_expands_as_its_controller_and_groups_as_the_live_grouper(
    tmp_path: Path, case: str
) -> None:
    manifest, names, min_member, sub_groups = CASES[case]
    cluster = build_cluster(load(tmp_path, manifest), START)
    pods = [p.pod for p in cluster.pods]
    assert len(pods) == len(names)
    for pattern in names:
        assert any(re.fullmatch(pattern, pod.metadata.name) for pod in pods), (
            pattern,
            [p.metadata.name for p in pods],
        )
    groups = {pg.metadata.name: pg for pg, _, _ in cluster.pod_groups}
    runtime = cluster.workloads.runtime if cluster.workloads else None
    assert runtime is not None
    for pod in pods:
        # The live pod grouper, called directly on the pod and its owners as the controllers made them.
        made = runtime.find("Pod", "default", pod.metadata.name)
        assert made is not None
        plan = plan_pod_group(made, runtime.owners(made))
        expected = pod_group_manifest(plan)
        group = groups[plan.name]
        assert pod.metadata.annotations["pod-group-name"] == plan.name
        assert group.spec.min_member == expected["spec"].get("minMember") == min_member
        assert group.spec.min_sub_group == expected["spec"].get("minSubGroup")
        assert group.spec.queue == expected["spec"]["queue"] == "team-a"
        assert group.spec.priority_class_name == expected["spec"]["priorityClassName"]
        assert [g.name for g in group.spec.sub_groups] == [
            g["name"] for g in expected["spec"].get("subGroups", [])
        ]
        assert [g.name for g in group.spec.sub_groups] == sub_groups
        # ownerReferences: the pod's controller, as the real controller sets it.
        (owner,) = [r for r in pod.metadata.owner_references if r.controller]
        assert runtime.objects[owner.uid]["metadata"]["name"] == owner.name


def run(tmp_path: Path, *docs: dict[str, Any], until: float) -> Simulation:
    simulation = Simulation(
        load(tmp_path, *docs), parse_config(None), SimulationOptions(start=START, until=until)
    )
    simulation.run()
    return simulation


def test_job_makes_its_next_pod_when_one_succeeds(tmp_path: Path) -> None:
    job = workload(
        "batch/v1", "Job", "train", {"parallelism": 1, "completions": 3, "template": template(8, "10m")}
    )
    sim = run(tmp_path, job, until=3600)
    pods = sorted(sim.cluster.pods, key=lambda p: p.scheduled_at or 0)
    assert [p.phase for p in pods] == ["Succeeded"] * 3
    assert [p.scheduled_at for p in pods] == [0.0, 600.0, 1200.0]
    runtime = sim.cluster.workloads.runtime  # type: ignore[union-attr]
    status = runtime.find("Job", "default", "train")["status"]  # type: ignore[index]
    assert status["succeeded"] == 3 and status["conditions"][0]["type"] == "Complete"


def test_deployment_replaces_an_evicted_pod_with_a_new_one(tmp_path: Path) -> None:
    deployment = workload(
        "apps/v1",
        "Deployment",
        "web",
        {"replicas": 1, "selector": {"matchLabels": {}}, "template": template(1)},
    )
    cluster = build_cluster(load(tmp_path, deployment), START)
    cluster.admit_arrivals()
    (pod,) = cluster.pods
    cluster.apply([Decision("allocate", "bind", pod.key, "n1", (), "")])
    cluster.apply([Decision("reclaim", "evict", pod.key, "n1", (), "")])
    cluster.now = 30.0
    cluster.run_controllers()
    cluster.admit_arrivals()
    old, new = cluster.pods
    assert old.phase == "Failed" and old.evictions == 1
    assert new.phase == "Pending" and new.arrival == 30.0 and new.key != old.key
    assert new.pod.metadata.name.startswith(old.pod.metadata.name.rsplit("-", 1)[0] + "-")
    assert new.key in {state.pod.key for state in cluster.cache.state().pods}


def test_statefulset_pod_comes_back_under_its_name(tmp_path: Path) -> None:
    sts = workload("apps/v1", "StatefulSet", "db", {"replicas": 1, "template": template(1)})
    cluster = build_cluster(load(tmp_path, sts), START)
    cluster.admit_arrivals()
    (pod,) = cluster.pods
    cluster.apply([Decision("allocate", "bind", pod.key, "n1", (), "")])
    cluster.apply([Decision("reclaim", "evict", pod.key, "n1", (), "")])
    cluster.run_controllers()
    assert [(p.pod.metadata.name, p.phase) for p in cluster.pods] == [("db-0", "Pending")]


def test_cronjob_fires_on_its_schedule(tmp_path: Path) -> None:
    cron = workload(
        "batch/v1",
        "CronJob",
        "nightly",
        {"schedule": "*/30 * * * *", "jobTemplate": {"spec": {"template": template(1, "5m")}}},
    )
    sim = run(tmp_path, cron, until=3600 + 60)
    pods = sorted(sim.cluster.pods, key=lambda p: p.arrival)
    assert [p.arrival for p in pods] == [1800.0, 3600.0]
    minutes = int(START.timestamp()) // 60
    assert [p.pod.metadata.name.rsplit("-", 1)[0] for p in pods] == [
        f"nightly-{minutes + 30}",
        f"nightly-{minutes + 60}",
    ]
    assert pods[0].phase == "Succeeded" and pods[1].phase == "Running"


def test_cronjob_forbid_skips_while_a_job_runs(tmp_path: Path) -> None:
    cron = workload(
        "batch/v1",
        "CronJob",
        "c",
        {
            "schedule": "*/10 * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {"template": template(1, "25m")}},
        },
    )
    sim = run(tmp_path, cron, until=3600)
    assert sorted(p.arrival for p in sim.cluster.pods) == [600.0, 2400.0]


def test_mpi_launcher_waits_for_workers_when_asked(tmp_path: Path) -> None:
    mpi = copy.deepcopy(CASES["MPIJob"][0])
    mpi["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    sim = run(tmp_path, mpi, until=60)
    launcher = [p for p in sim.cluster.pods if "launcher" in p.pod.metadata.name]
    assert len(launcher) == 1 and launcher[0].arrival > 0


def test_a_workload_error_is_one_located_line(tmp_path: Path) -> None:
    bad = workload("batch/v1", "Job", "bad", {"parallelism": "two", "template": template()})
    with pytest.raises(ManifestError) as caught:
        load(tmp_path, bad)
    message = str(caught.value)
    assert "input.yaml" in message and "Job default/bad" in message and "spec.parallelism" in message
    assert "\n" not in message


def test_runtime_is_deterministic() -> None:
    job = CASES["Job"][0]
    names = [[p["metadata"]["name"] for p in Runtime().apply(job, START).pods_created()] for _ in range(2)]
    assert names[0] == names[1]


@pytest.mark.parametrize(
    ("text", "after", "expected"),
    [
        ("*/15 * * * *", datetime(2026, 1, 1, 0, 7, tzinfo=UTC), datetime(2026, 1, 1, 0, 15, tzinfo=UTC)),
        ("0 3 * * mon", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 5, 3, 0, tzinfo=UTC)),
        ("@monthly", datetime(2026, 1, 31, 12, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)),
        ("0 0 13 * 5", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)),
        ("30 1 1-7/3 jan-mar *", datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 4, 1, 30, tzinfo=UTC)),
    ],
)
def test_cron_next_time(text: str, after: datetime, expected: datetime) -> None:
    assert parse_schedule(text).next_after(after) == expected


def test_pods_and_groups_are_api_objects(tmp_path: Path) -> None:
    cluster = build_cluster(load(tmp_path, CASES["PyTorchJob"][0]), START)
    assert all(isinstance(p.pod, Pod) for p in cluster.pods)
    assert all(isinstance(g, PodGroup) for g, _, _ in cluster.pod_groups)


def test_the_workloads_example_runs_as_its_comments_say() -> None:
    example = Path(__file__).parents[3] / "examples" / "workloads.yaml"
    objects = [loaded.obj for loaded in load_manifests([str(example)])]
    sim = Simulation(objects, parse_config(None), SimulationOptions(start=START))
    result = sim.run()
    assert result.steady
    pods = sim.cluster.pods
    sweep = sorted(p.scheduled_at or 0 for p in pods if p.pod.metadata.name.startswith("sweep-"))
    assert sweep == [0.0, 0.0, 600.0, 600.0]
    llm = [p for p in pods if p.pod.metadata.name.startswith("llm-")]
    assert len(llm) == 4 and all(p.scheduled_at == 0.0 and p.phase == "Succeeded" for p in llm)
    (gang,) = {p.job_key for p in llm}
    assert sim.cluster.cache.snapshot().jobs[gang].min_member == 4
    chat = [p for p in pods if p.pod.metadata.name.startswith("chat-")]
    assert len(chat) == 2 and all(p.phase == "Running" for p in chat)


def arrivals(sim: Simulation) -> dict[str, float]:
    return {p.pod.metadata.name: p.arrival for p in sim.cluster.pods}


def test_statefulset_ordered_ready_makes_each_pod_once_the_one_before_runs(tmp_path: Path) -> None:
    sts = workload("apps/v1", "StatefulSet", "db", {"replicas": 3, "template": template(1)})
    sim = run(tmp_path, sts, until=10)
    times = arrivals(sim)
    assert sorted(times) == ["db-0", "db-1", "db-2"]
    assert times["db-0"] < times["db-1"] < times["db-2"]
    assert all(p.phase == "Running" for p in sim.cluster.pods)


def test_rayjob_submits_once_its_cluster_runs_and_deletes_the_cluster_after(tmp_path: Path) -> None:
    ray_job = workload(
        "ray.io/v1",
        "RayJob",
        "rj",
        {
            "entrypoint": "python x.py",
            "rayClusterSpec": copy.deepcopy(RAY_SPEC),
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": 600,
        },
    )
    ray_job["metadata"]["annotations"] = {"simulation.kai.scheduler/duration": "5m"}
    # The submitter starts once the cluster runs (second 1), ends 5 minutes later, and the cluster goes
    # 10 minutes after that.
    before = run(tmp_path, ray_job, until=800)
    assert sorted(p.phase for p in before.cluster.pods) == ["Running", "Running", "Running", "Succeeded"]
    sim = run(tmp_path, ray_job, until=1000)
    ended = [p for p in sim.cluster.pods if p.phase == "Failed"]  # the cluster's, deleted with it
    assert len(ended) == 3 and all(p.pod.metadata.labels["ray.io/cluster"].startswith("rj-") for p in ended)
    (submitter,) = [p for p in sim.cluster.pods if p.phase != "Failed"]
    assert submitter.pod.metadata.name.startswith("rj-") and submitter.arrival == 1.0
    assert submitter.phase == "Succeeded"
    assert submitter.pod.metadata.labels["kai.scheduler/subgroup-name"] == "submitter"
    runtime = sim.cluster.workloads.runtime  # type: ignore[union-attr]
    assert not [o for o in runtime.objects.values() if o["kind"] == "RayCluster"]
    assert runtime.find("RayJob", "default", "rj")["status"]["jobDeploymentStatus"] == "Complete"  # type: ignore[index]


def test_rayjob_keeps_its_cluster_by_default(tmp_path: Path) -> None:
    ray_job = workload(
        "ray.io/v1", "RayJob", "rj", {"entrypoint": "x", "rayClusterSpec": copy.deepcopy(RAY_SPEC)}
    )
    ray_job["metadata"]["annotations"] = {"simulation.kai.scheduler/duration": "5m"}
    sim = run(tmp_path, ray_job, until=3600)
    phases = sorted(p.phase for p in sim.cluster.pods)
    assert phases == ["Running", "Running", "Running", "Succeeded"]


def test_jobset_in_order_starts_a_replicated_job_once_the_one_before_runs(tmp_path: Path) -> None:
    def replicated(name: str, parallelism: int) -> dict[str, Any]:
        return {
            "name": name,
            "replicas": 1,
            "template": {"spec": {"parallelism": parallelism, "template": template()}},
        }

    job_set = workload(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "js",
        {
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "replicatedJobs": [replicated("driver", 1), replicated("workers", 2)],
        },
    )
    sim = run(tmp_path, job_set, until=10)
    times = arrivals(sim)
    driver = [t for name, t in times.items() if name.startswith("js-driver-0-")]
    workers = [t for name, t in times.items() if name.startswith("js-workers-0-")]
    assert driver == [0.0] and len(workers) == 2 and min(workers) > 0
    groups = {p.job_key for p in sim.cluster.pods}
    assert len(groups) == 1  # KAI v0.16+: one PodGroup, InOrder needing one replicated job at a time


def test_leaderworkerset_leader_ready_starts_workers_after_the_leader(tmp_path: Path) -> None:
    lws = workload(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "lws",
        {
            "replicas": 1,
            "startupPolicy": "LeaderReady",
            "leaderWorkerTemplate": {"size": 3, "workerTemplate": template()},
        },
    )
    sim = run(tmp_path, lws, until=10)
    times = arrivals(sim)
    assert times["lws-0"] == 0.0 and times["lws-0-1"] > 0 and times["lws-0-2"] > 0
    labels = {p.pod.metadata.name: p.pod.metadata.labels for p in sim.cluster.pods}
    assert labels["lws-0-2"]["leaderworkerset.sigs.k8s.io/worker-index"] == "2"
    assert labels["lws-0"]["leaderworkerset.sigs.k8s.io/group-index"] == "0"


def test_job_gives_up_after_backoff_limit_failures(tmp_path: Path) -> None:
    job = workload("batch/v1", "Job", "j", {"backoffLimit": 1, "template": template(1)})
    cluster = build_cluster(load(tmp_path, job), START)
    for _ in range(2):
        cluster.admit_arrivals()
        (pod,) = [p for p in cluster.pods if p.phase == "Pending"]
        cluster.apply([Decision("allocate", "bind", pod.key, "n1", (), "")])
        cluster.apply([Decision("reclaim", "evict", pod.key, "n1", (), "")])
        cluster.run_controllers()
    assert [p.phase for p in cluster.pods] == ["Failed", "Failed"]
    runtime = cluster.workloads.runtime  # type: ignore[union-attr]
    status = runtime.find("Job", "default", "j")["status"]  # type: ignore[index]
    assert status["failed"] == 2 and status["conditions"][0]["type"] == "Failed"


def test_a_workload_defined_twice_is_an_error(tmp_path: Path) -> None:
    job = CASES["Job"][0]
    with pytest.raises(ManifestError, match="duplicate Job default/train"):
        load(tmp_path, job, job)


def test_input_without_workloads_has_no_controllers(tmp_path: Path) -> None:
    cluster = build_cluster(load(tmp_path), START)
    assert cluster.workloads is None


def test_an_error_in_what_a_cronjob_makes_later_is_reported_at_load(tmp_path: Path) -> None:
    bad_template = template(1)
    bad_template["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "lots"
    cron = workload(
        "batch/v1",
        "CronJob",
        "c",
        {"schedule": "@hourly", "jobTemplate": {"spec": {"template": bad_template}}},
    )
    with pytest.raises(ManifestError) as caught:
        load(tmp_path, cron)
    assert "CronJob default/c" in str(caught.value) and "\n" not in str(caught.value)


def test_an_error_in_what_lws_workers_would_be_is_reported_at_load(tmp_path: Path) -> None:
    lws = workload(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "lws",
        {
            "replicas": 1,
            "startupPolicy": "LeaderReady",
            "leaderWorkerTemplate": {"size": 2, "workerTemplate": template()},
        },
    )
    lws["metadata"]["labels"]["kai.scheduler/preemptibility"] = "sometimes"
    with pytest.raises(ManifestError, match="preemptibility"):
        load(tmp_path, lws)


def test_job_fails_at_its_active_deadline(tmp_path: Path) -> None:
    job = workload(
        "batch/v1",
        "Job",
        "j",
        {"activeDeadlineSeconds": 300, "completions": 2, "template": template(1, "10m")},
    )
    sim = run(tmp_path, job, until=3600)
    (pod,) = sim.cluster.pods  # deleted at the deadline, and no second one
    assert pod.phase == "Failed" and pod.scheduled_at == 0.0
    assert pod.key not in {
        state.pod.key for state in sim.cluster.cache.state().pods if state.phase != "Failed"
    }
    runtime = sim.cluster.workloads.runtime  # type: ignore[union-attr]
    status = runtime.find("Job", "default", "j")["status"]  # type: ignore[index]
    assert status["conditions"][0]["type"] == "Failed"
    assert not [p for p in sim.cluster.pods if p.phase == "Running"]


def test_reclaimed_deployment_pods_are_replaced_and_wait(tmp_path: Path) -> None:
    """End to end: team-b reclaims its quota from team-c's Deployment (over its quota); the ReplicaSet
    replaces each evicted pod with a new pending one, as on a cluster."""
    queues = [
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {
                "resources": {
                    "gpu": {"quota": 8, "limit": -1, "overQuotaWeight": 1},
                    "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                    "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                }
            },
        }
        for name in ("team-b", "team-c")
    ]
    deployment = workload(
        "apps/v1",
        "Deployment",
        "web",
        {"replicas": 16, "selector": {"matchLabels": {}}, "template": template(1)},
    )
    deployment["metadata"]["labels"]["kai.scheduler/preemptibility"] = "preemptible"
    deployment["metadata"]["labels"]["kai.scheduler/queue"] = "team-c"
    job = workload(
        "batch/v1", "Job", "train", {"parallelism": 8, "completions": 8, "template": template(1, "1h")}
    )
    job["metadata"]["labels"]["kai.scheduler/queue"] = "team-b"
    job["metadata"]["annotations"] = {"simulation.kai.scheduler/arrival": "60s"}
    sim = run(tmp_path, *queues, deployment, job, until=300)
    web = [p for p in sim.cluster.pods if p.pod.metadata.name.startswith("web-")]
    evicted = [p for p in web if p.evictions]
    assert len(evicted) == 8 and all(p.phase == "Failed" for p in evicted)
    replacements = [p for p in web if p.arrival > 0]
    assert len(replacements) == 8 and all(p.phase == "Pending" for p in replacements)
    assert sum(p.phase == "Running" for p in web) == 8
    train = [p for p in sim.cluster.pods if p.pod.metadata.name.startswith("train-")]
    assert len(train) == 8 and all(p.phase == "Running" for p in train)


def test_runtime_replaces_a_deleted_pod_and_deletes_what_an_object_controls() -> None:
    runtime = Runtime()
    made = runtime.apply(CASES["Deployment"][0], START)
    first, second = made.pods_created()
    replaced = runtime.delete([first["metadata"]["uid"]], START)
    assert [p["metadata"]["name"] for p in replaced.pods_deleted()] == [first["metadata"]["name"]]
    (new,) = replaced.pods_created()
    assert new["metadata"]["name"] != first["metadata"]["name"]
    assert new["metadata"]["ownerReferences"] == second["metadata"]["ownerReferences"]
    deployment = runtime.find("Deployment", "default", "web")
    assert deployment is not None
    gone = runtime.delete([deployment["metadata"]["uid"]], START)
    assert sorted(o["kind"] for o in gone.deleted) == ["Deployment", "Pod", "Pod", "ReplicaSet"]
    assert not runtime.objects


def test_a_statefulset_pod_that_completes_is_made_again_under_its_name(tmp_path: Path) -> None:
    sts = workload("apps/v1", "StatefulSet", "db", {"replicas": 1, "template": template(1, "10m")})
    sim = run(tmp_path, sts, until=1500)
    assert [(p.pod.metadata.name, p.phase, p.arrival) for p in sim.cluster.pods] == [
        ("db-0", "Running", 1200.0)
    ]


def test_a_failed_kubeflow_pod_is_made_again_under_its_name() -> None:
    runtime = Runtime()
    (_master, worker) = runtime.apply(CASES["XGBoostJob"][0], START).pods_created()
    again = runtime.set_pod_phase([(worker["metadata"]["uid"], "Failed")], START)
    assert [p["metadata"]["name"] for p in again.pods_deleted()] == ["xgb-worker-0"]
    assert [p["metadata"]["name"] for p in again.pods_created()] == ["xgb-worker-0"]


def test_a_workload_in_a_node_pool_is_scheduled_as_a_labelled_pod_would_be(tmp_path: Path) -> None:
    """A pool label on a pod template puts the pods (and, through the pod grouper, their PodGroups) in that
    pool's scheduling shard: with no such shard configured, they wait, as a bare pod so labelled does."""
    labelled = workload(
        "apps/v1",
        "Deployment",
        "web",
        {
            "replicas": 1,
            "selector": {"matchLabels": {}},
            "template": template(1, **{NODE_POOL_LABEL: "pool-a"}),
        },
    )
    bare = {"apiVersion": "v1", "kind": "Pod", **template(1, **{NODE_POOL_LABEL: "pool-a"})}
    bare["metadata"].update(name="bare", namespace="default")
    bare["metadata"]["labels"]["kai.scheduler/queue"] = "team-a"
    phases = [[p.phase for p in run(tmp_path, doc, until=10).cluster.pods] for doc in (labelled, bare)]
    assert phases == [["Pending"], ["Pending"]]
    unlabelled = workload(
        "apps/v1",
        "Deployment",
        "web",
        {"replicas": 1, "selector": {"matchLabels": {}}, "template": template(1)},
    )
    assert [p.phase for p in run(tmp_path, unlabelled, until=10).cluster.pods] == ["Running"]


def test_pods_made_later_get_claims_from_their_templates(tmp_path: Path) -> None:
    """DRA: the resourceclaim controller makes each pod's claims, for a Job's next pods as for its first."""
    dra = "resource.k8s.io/v1"
    device_class = {
        "apiVersion": dra,
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {},
    }
    devices = [{"name": f"gpu-{i}"} for i in range(2)]
    slice_ = {
        "apiVersion": dra,
        "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpus"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": "n1", "generation": 0},
            "nodeName": "n1",
            "devices": devices,
        },
    }
    claim_template = {
        "apiVersion": dra,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
            }
        },
    }
    pod_template = template(0, "10m")
    pod_template["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    job = workload("batch/v1", "Job", "dra", {"completions": 2, "template": pod_template})
    sim = run(tmp_path, device_class, slice_, claim_template, job, until=3600)
    pods = sorted(sim.cluster.pods, key=lambda p: p.arrival)
    assert [(p.phase, p.scheduled_at) for p in pods] == [("Succeeded", 0.0), ("Succeeded", 600.0)]
    claims = {c.metadata.name for c in sim.cluster.claims.claims.values()}
    assert {f"{p.pod.metadata.name}-gpu" for p in pods} <= claims
