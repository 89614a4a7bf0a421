"""External PodGroups in `simulate`, as KAI v0.15+ has them (#1552): a workload or pod with
`kai.scheduler/skip-podgrouper: "true"` is left alone by the pod grouper and joins the PodGroup its
`pod-group-name` names, whose `spec.queue` decides; a pod naming a sub-group that PodGroup does not have is
left out of it with KAI's message (`job_info_test.go` TestAddTaskInfoTracksInvalidSubGroupTask, ported by
name below); a skipped pod naming no PodGroup is never scheduled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from helpers import START, node, open_session, pod, pod_group, queue
from kai_scheduler.framework.config import parse_config
from kai_scheduler.sim.engine import Simulation, SimulationOptions
from kai_scheduler.sim.loader import load_manifests
from kai_scheduler.sim.results import result_document

SKIP = {"kai.scheduler/skip-podgrouper": "true"}


def queue_doc(name: str) -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}},
    }


def pod_spec() -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1"}
    return {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
    }


def document(tmp_path: Path, *docs: dict[str, Any]) -> dict[str, Any]:
    cluster = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}},
        },
        queue_doc("ext-queue"),
        queue_doc("job-queue"),
    ]
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all([*cluster, *docs]))
    objects = [loaded.obj for loaded in load_manifests([str(path)])]
    simulation = Simulation(objects, parse_config(None), SimulationOptions(start=START, until=30))
    return result_document(simulation.run())


EXTERNAL = {
    "apiVersion": "scheduling.run.ai/v2alpha2",
    "kind": "PodGroup",
    "metadata": {"name": "ext", "namespace": "default"},
    "spec": {"queue": "ext-queue", "subGroups": [{"name": "workers", "minMember": 2}]},
}


def test_a_skipped_job_joins_the_external_pod_group_whose_queue_decides(tmp_path: Path) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "default",
            "labels": {"kai.scheduler/queue": "job-queue"},
            "annotations": SKIP,
        },
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "metadata": {
                    "annotations": {"pod-group-name": "ext"},
                    "labels": {"kai.scheduler/subgroup-name": "workers"},
                },
                "spec": {**pod_spec(), "restartPolicy": "Never"},
            },
        },
    }
    stray = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "stray",
            "namespace": "default",
            "annotations": {"pod-group-name": "ext"},
            "labels": {"kai.scheduler/subgroup-name": "nope"},
        },
        "spec": pod_spec(),
    }
    result = document(tmp_path, EXTERNAL, job, stray)
    groups = {group["name"]: group for group in result["podGroups"]}
    assert list(groups) == ["ext"]  # no PodGroup of the pod grouper's
    assert groups["ext"]["queue"] == "ext-queue"
    pods = {p["name"]: p for p in result["pods"]}
    train = [p for name, p in pods.items() if name.startswith("train-")]
    assert len(train) == 2 and all(p["node"] == "n1" for p in train)
    assert pods["stray"]["node"] is None
    assert pods["stray"]["unschedulableReason"] == (
        'Pod references subgroup "nope", which does not exist in PodGroup default/ext'
    )


def test_a_skipped_pod_naming_no_pod_group_is_never_scheduled(tmp_path: Path) -> None:
    alone = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "alone",
            "namespace": "default",
            "annotations": SKIP,
            "labels": {"kai.scheduler/queue": "job-queue"},
        },
        "spec": pod_spec(),
    }
    result = document(tmp_path, alone)
    assert result["pods"][0]["node"] is None
    (group,) = result["podGroups"]
    assert "no PodGroup is made" in group["unschedulableReason"]


def test_add_task_info_tracks_invalid_sub_group_task() -> None:
    objects = [
        node("n0"),
        queue("queue-1"),
        pod_group("group-1", "queue-1", sub_groups=[{"name": "valid-subgroup", "minMember": 1}]),
        pod("pod-1", "queue-1", group="group-1", labels={"kai.scheduler/subgroup-name": "missing-subgroup"}),
    ]
    job = open_session(objects).snapshot.jobs["default/group-1"]
    assert job.tasks == []
    assert list(job.stray) == ["default/pod-1"]
    assert "missing-subgroup" in job.stray["default/pod-1"]


def test_a_pod_without_a_sub_group_in_a_pod_group_that_has_them_is_left_out_too() -> None:
    # KAI files it under the sub-group "default", which such a PodGroup does not have.
    objects = [
        node("n0"),
        queue("q"),
        pod_group("g", sub_groups=[{"name": "a", "minMember": 1}]),
        pod("p", group="g"),
    ]
    job = open_session(objects).snapshot.jobs["default/g"]
    assert job.stray == {
        "default/p": 'Pod references subgroup "default", which does not exist in PodGroup default/g'
    }
