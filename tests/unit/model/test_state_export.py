"""`model.state_export`: a ClusterState as manifests that `kai-scheduler simulate` loads, giving back the
same cluster: the round trip state -> manifests -> YAML file -> loader -> simulated cluster -> builder
yields the same nodes, queues, jobs and pods (node, status, shared GPUs, creation order, job times)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from helpers import node, objects_of, pod, pod_group, pod_manifest, priority_class, queue
from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import (
    ConfigMap,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Topology,
)
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.snapshot import ClusterSnapshot, ClusterState, JobTimes, PodGroupState, PodState
from kai_scheduler.model.state_export import (
    DEFAULT_PRIORITY_CLASS,
    export_state,
    manifest_list,
    rfc3339,
    session_instant,
)
from kai_scheduler.sim.in_memory_cluster import build_cluster
from kai_scheduler.sim.loader import load_manifests

ORIGIN = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)  # the session clock's second 0
NOW = 3600.25  # the cycle's time on that clock


def stamp(seconds: float) -> str:
    return rfc3339(ORIGIN + timedelta(seconds=seconds))


def with_labels(p: Pod, **labels: str) -> Pod:
    return p.model_copy(
        update={"metadata": p.metadata.model_copy(update={"labels": {**p.metadata.labels, **labels}})}
    )


def dying() -> Pod:
    manifest = pod_manifest("dying", "team-a", gpus=1, node_name="n2")
    deleted = ORIGIN + timedelta(seconds=NOW - 30)
    manifest["metadata"]["deletionTimestamp"] = deleted.strftime("%Y-%m-%dT%H:%M:%SZ")
    return Pod.model_validate(manifest)


def rich_state() -> ClusterState:
    """Everything the export must carry. Ranks deliberately disagree with the creation timestamps in
    places (the state's order wins), and some pods' facts differ from their manifests (as live mode's
    do: a pod bound by an outstanding BindRequest, a pod evicted but not yet shown terminating)."""
    topology = Topology.model_validate(
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "example.com/rack"}]},
        }
    )
    nodes = [
        node("n1", gpus=4, cpu="32", memory="256Gi", gpu_memory=40960, labels={"example.com/rack": "r1"}),
        node("n2", gpus=2, cpu="16500m", memory="64Gi", taints=[{"key": "k", "effect": "NoSchedule"}]),
        node("cpu-1", gpus=0, cpu="8", memory="32Gi", unschedulable=True),
    ]
    queues = [
        queue("dept", gpu=6, created=stamp(-500)),
        queue("team-b", gpu=2, parent="dept", created=stamp(-900)),  # older stamp, later rank
        queue("team-a", gpu=4, gpu_limit=5, parent="dept", priority=7),  # no stamp
    ]
    gang = pod_group("gang", "team-a", min_member=2, priority_class="mid", created=stamp(-300))
    gang = gang.model_copy(
        update={
            "metadata": gang.metadata.model_copy(
                update={
                    "annotations": {
                        c.SIM_ARRIVAL_ANNOTATION: "90s",  # dropped: everything in a state has arrived
                        c.LAST_START_TIMESTAMP_ANNOTATION: stamp(-9999),  # replaced by the state's times
                    }
                }
            )
        }
    )
    idle = pod_group("idle", "team-b", created=stamp(-250))
    entries: list[tuple[str, Any]] = [
        ("group", gang),
        (
            "pod",
            PodState(pod("gang-0", "team-a", group="gang", gpus=1, created=stamp(-299)), 0, "n1", "Running"),
        ),
        ("pod", PodState(pod("gang-1", "team-a", group="gang", gpus=1, created=stamp(-299)), 0)),
        # Bound by an outstanding BindRequest: the manifest has no nodeName, the state says n2.
        (
            "pod",
            PodState(pod("bound-by-request", "team-a", cpu="2", created=stamp(-200)), 0, "n2", "Running"),
        ),
        # Shared GPUs: two halves of one GPU, a stale label on a pending pod, two devices for one pod.
        (
            "pod",
            PodState(
                pod("half-a", "team-b", fraction=0.5, created=stamp(-100)), 0, "n1", "Running", ("n1-g1",)
            ),
        ),
        (
            "pod",
            PodState(
                pod("half-b", "team-b", fraction=0.5, created=stamp(-400)), 0, "n1", "Running", ("n1-g1",)
            ),
        ),
        (
            "pod",
            PodState(with_labels(pod("stale-label", "team-b", fraction=0.5), **{c.GPU_GROUP_LABEL: "x"}), 0),
        ),
        (
            "pod",
            PodState(
                pod("two-devices", "team-b", gpu_memory=8192, num_devices=2),
                0,
                "n1",
                "Running",
                ("n1-g2", "n1-g3"),
            ),
        ),
        # Terminating: one with its own deletionTimestamp (30 s before the cycle, so not yet stuck in
        # releasing), one evicted by this scheduler (none yet).
        ("pod", PodState(dying(), 0, "n2", "Running", (), True, deleted=NOW - 30)),
        ("pod", PodState(pod("evicted", "team-a", gpus=1, node_name="n2"), 0, "n2", "Running", (), True)),
        ("group", idle),
        ("pod", PodState(pod("idle-0", "team-b", group="idle", priority_class="custom"), 0)),
        ("pod", PodState(pod("done", "team-a", cpu="1", arrival="30s"), 0, None, "Succeeded")),
        # Other schedulers' pods: one running (it holds capacity), one pending (ignored).
        (
            "pod",
            PodState(
                pod("theirs", None, scheduler="default-scheduler", cpu="3", node_name="cpu-1"),
                0,
                "cpu-1",
                "Running",
            ),
        ),
        ("pod", PodState(pod("theirs-pending", None, scheduler="other-scheduler", cpu="1"), 0)),
    ]
    pods: list[PodState] = []
    groups: list[PodGroupState] = []
    for rank, (kind, entry) in enumerate(entries):
        if kind == "group":
            groups.append(PodGroupState(entry, rank * 10))
        else:
            p: PodState = entry
            pods.append(PodState(p.pod, rank * 10, p.node_name, p.phase, p.gpu_groups, p.terminating))
    classes = {**c.BUILTIN_PRIORITY_CLASSES, "mid": 60, "custom": 33, "train": 40}
    return ClusterState(
        nodes=nodes,
        pods=pods,
        pod_groups=groups,
        queues=queues,
        priority_classes=classes,
        default_priority=33,
        job_times={"default/gang": JobTimes(last_start=NOW - 120.5, stale_since=NOW - 10.0)},
        topologies=[topology],
    )


def reload(items: list[dict[str, Any]], tmp_path: Path) -> tuple[ClusterState, list[Any]]:
    """Through a YAML file and the simulator's loader, as `kai-scheduler simulate` reads it."""
    file = tmp_path / "snapshot.yaml"
    file.write_text(yaml.safe_dump(manifest_list(items), sort_keys=False))
    objects = [loaded.obj for loaded in load_manifests([str(file)])]
    return build_cluster(objects, session_instant(ORIGIN, NOW)).state(), objects


def summary(snapshot: ClusterSnapshot, now: float) -> dict[str, Any]:
    """What a cycle starts from, with times relative to `now` (the two clocks differ)."""
    nodes = snapshot.nodes

    def since(t: float | None) -> float | None:
        return None if t is None else round(now - t, 6)

    jobs = sorted(snapshot.jobs.values(), key=lambda j: j.rank)
    return {
        "nodes": nodes.names,
        "capacity": [nodes.cap_gpus.tolist(), nodes.cap_cpu.tolist(), nodes.cap_memory.tolist()],
        "usage": [
            nodes.free_gpus.tolist(),
            nodes.rel_gpus.tolist(),
            nodes.used_cpu.tolist(),
            nodes.rel_cpu.tolist(),
            nodes.used_memory.tolist(),
            nodes.shared_free_now.tolist(),
        ],
        "gpu_groups": {
            gid: (g.node, round(g.used, 6), round(g.releasing, 6), sorted(g.holders))
            for gid, g in nodes.group_by_id.items()
        },
        "cluster": snapshot.capacity.values(),
        "queues": [
            (q.name, q.parent, q.priority, q.deserved.values(), q.limit.values(), q.weight.values())
            for q in sorted(snapshot.queues, key=lambda q: q.rank)
        ],
        "jobs": [
            (
                j.key,
                j.queue,
                j.priority,
                j.preemptible,
                j.min_member,
                j.invalid_reason,
                since(j.last_start),
                since(j.stale_since),
                [
                    (t.key, t.status.value, t.node, t.gpu_groups)
                    for t in sorted(j.tasks, key=lambda t: t.rank)
                ],
            )
            for j in jobs
        ],
        "tasks_in_order": [t.key for t in sorted(snapshot.tasks.values(), key=lambda t: t.rank)],
    }


def test_round_trip_gives_back_the_same_cluster(tmp_path: Path) -> None:
    state = rich_state()
    items = export_state(state, origin=ORIGIN, now=NOW)
    again, _ = reload(items, tmp_path)
    before = summary(build_snapshot(state, NOW), NOW)
    after = summary(build_snapshot(again), 0.0)
    assert after == before
    # The state is not trivial: it has each kind of pod the export must carry.
    statuses = {task[1] for job in before["jobs"] for task in job[8]}
    assert {"Pending", "Running", "Releasing", "Succeeded"} <= statuses
    assert before["gpu_groups"]["n1-g1"][3] == ["default/half-a", "default/half-b"]
    # Job times keep their distance to the cycle; the stale annotation is read back too.
    gang = next(job for job in after["jobs"] if job[0] == "default/gang")
    assert gang[6:8] == (120.5, 10.0)
    # Ranks follow the state, not the original timestamps (half-b's stamp is older than half-a's).
    order = after["tasks_in_order"]
    assert order.index("default/half-a") < order.index("default/half-b")
    assert [q[0] for q in after["queues"]] == ["dept", "team-b", "team-a"]
    assert again.default_priority == 33 and again.priority_classes["train"] == 40


def test_pods_carry_their_runtime_facts() -> None:
    items = {
        (i["kind"], i["metadata"]["name"]): i for i in export_state(rich_state(), origin=ORIGIN, now=NOW)
    }
    at = rfc3339(session_instant(ORIGIN, NOW))
    bound = items["Pod", "bound-by-request"]
    assert bound["spec"]["nodeName"] == "n2" and bound["status"] == {"phase": "Running"}
    pending = items["Pod", "gang-1"]
    assert "nodeName" not in pending["spec"] and pending["status"] == {"phase": "Pending"}
    # Terminating: its own deletionTimestamp kept, else the snapshot's time; the others have none.
    assert items["Pod", "dying"]["metadata"]["deletionTimestamp"] == "2026-03-01T12:59:30Z"
    assert items["Pod", "evicted"]["metadata"]["deletionTimestamp"] == at
    assert "deletionTimestamp" not in items["Pod", "gang-0"]["metadata"]
    # Shared GPUs as the binder labels them; a pending pod's stale label goes.
    assert items["Pod", "half-a"]["metadata"]["labels"][c.GPU_GROUP_LABEL] == "n1-g1"
    assert {
        k: v for k, v in items["Pod", "two-devices"]["metadata"]["labels"].items() if "gpu-group" in k
    } == {
        "runai-gpu-group": "n1-g2",
        "runai-gpu-group/0": "n1-g2",
        "runai-gpu-group/1": "n1-g3",
    }
    assert c.GPU_GROUP_LABEL not in items["Pod", "stale-label"]["metadata"].get("labels", {})
    # Other schedulers' pods as they are; simulation arrivals dropped (durations would stay).
    theirs = items["Pod", "theirs"]
    assert "schedulerName" not in theirs["spec"]  # default-scheduler: the model's default, omitted
    assert items["Pod", "theirs-pending"]["spec"]["schedulerName"] == "other-scheduler"
    assert c.SIM_ARRIVAL_ANNOTATION not in items["Pod", "done"]["metadata"].get("annotations", {})
    assert items["Pod", "done"]["status"] == {"phase": "Succeeded"}
    # Quantities exactly as Kubernetes spells them.
    assert items["Node", "n2"]["status"]["allocatable"]["cpu"] == "16500m"
    assert items["Node", "n1"]["status"]["allocatable"]["memory"] == "256Gi"


def test_pod_groups_priority_classes_and_order() -> None:
    items = export_state(rich_state(), origin=ORIGIN, now=NOW)
    kinds = [i["kind"] for i in items]
    # Classes, topologies, queues, nodes, then pod groups and pods interleaved by rank.
    assert kinds[:7] == ["PriorityClass"] * 3 + ["Topology"] + ["Queue"] * 3
    pods_and_groups = [i["metadata"]["name"] for i in items if i["kind"] in ("Pod", "PodGroup")]
    assert pods_and_groups[:3] == ["gang", "gang-0", "gang-1"] and "idle" in pods_and_groups
    classes = {i["metadata"]["name"]: i for i in items if i["kind"] == "PriorityClass"}
    # Built-ins at their usual values are left to the simulator; train is redefined; custom is the default.
    assert sorted(classes) == ["custom", "mid", "train"]
    assert classes["custom"].get("globalDefault") is True and classes["train"]["value"] == 40
    gang = next(i for i in items if i["kind"] == "PodGroup" and i["metadata"]["name"] == "gang")
    assert gang["metadata"]["annotations"] == {
        c.LAST_START_TIMESTAMP_ANNOTATION: stamp(NOW - 120.5),
        c.STALE_PODGROUP_TIMESTAMP_ANNOTATION: stamp(NOW - 10.0),
    }
    # Creation timestamps never decrease along the order (the loader's rule: time, then input order).
    for kind in (("Queue",), ("Pod", "PodGroup")):
        stamps = [i["metadata"].get("creationTimestamp") for i in items if i["kind"] in kind]
        present = [datetime.fromisoformat(s.replace("Z", "+00:00")) for s in stamps if s]
        assert len(present) == len(stamps) and present == sorted(present)


def test_default_priority_without_a_class_of_that_value_gets_one() -> None:
    state = ClusterState(
        nodes=[],
        pods=[],
        pod_groups=[],
        queues=[],
        priority_classes=dict(c.BUILTIN_PRIORITY_CLASSES),
        default_priority=7,
    )
    [made] = export_state(state, origin=ORIGIN, now=0.0)
    assert made["metadata"]["name"] == DEFAULT_PRIORITY_CLASS
    assert made["value"] == 7 and made["globalDefault"] is True


def test_objects_without_timestamps_keep_the_input_order(tmp_path: Path) -> None:
    pods = [PodState(pod(f"p{i}", gpus=1), rank) for rank, i in enumerate([3, 1, 2])]
    state = ClusterState(
        nodes=[node("n1", gpus=1)],
        pods=pods,
        pod_groups=[],
        queues=[queue("q")],
        priority_classes=dict(c.BUILTIN_PRIORITY_CLASSES),
    )
    items = export_state(state, origin=ORIGIN, now=0.0)
    assert all("creationTimestamp" not in i["metadata"] for i in items)
    again, _ = reload(items, tmp_path)
    assert [p.pod.metadata.name for p in sorted(again.pods, key=lambda p: p.rank)] == ["p3", "p1", "p2"]


def test_priority_class_objects_round_trip(tmp_path: Path) -> None:
    # A class given as an object in the input is written back as one (value and globalDefault).
    pc = priority_class("urgent", 1000, global_default=True)
    state = ClusterState(
        nodes=[],
        pods=[],
        pod_groups=[],
        queues=[],
        priority_classes={**c.BUILTIN_PRIORITY_CLASSES, pc.metadata.name: pc.value},
        default_priority=pc.value,
    )
    again, objects = reload(export_state(state, origin=ORIGIN, now=0.0), tmp_path)
    assert objects == [pc]
    assert again.priority_classes == state.priority_classes and again.default_priority == 1000


def test_config_maps_and_storage_objects_round_trip(tmp_path: Path) -> None:
    state = rich_state()
    storage = objects_of(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "team"}},
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv"},
            "spec": {"capacity": {"storage": "10Gi"}, "storageClassName": "local", "claimRef": {"name": "c"}},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c"},
            "spec": {
                "storageClassName": "local",
                "volumeName": "pv",
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    state = replace(
        state,
        config_maps=[o for o in storage if isinstance(o, ConfigMap)],
        storage_classes=[o for o in storage if isinstance(o, StorageClass)],
        persistent_volumes=[o for o in storage if isinstance(o, PersistentVolume)],
        persistent_volume_claims=[o for o in storage if isinstance(o, PersistentVolumeClaim)],
    )
    again, _ = reload(export_state(state, origin=ORIGIN, now=NOW), tmp_path)
    assert list(again.config_maps) == list(state.config_maps)
    assert list(again.storage_classes) == list(state.storage_classes)
    assert list(again.persistent_volumes) == list(state.persistent_volumes)
    assert list(again.persistent_volume_claims) == list(state.persistent_volume_claims)
