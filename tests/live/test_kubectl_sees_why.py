"""What a user sees with kubectl (issue #13), against the fake API server and `kai-scheduler run --all
--skip admission` (a cluster without the webhook): each pod with malformed KAI annotations ends with a
PodScheduled=False condition and an event that name its field, said once however many cycles pass; every
bound pod has a `Scheduled` event naming its node (and a shared GPU's group); a preempted pod's event names
the action and the preemptor, and its PodGroup's `Evict` event too."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from child_process import Child, running
from identities import ADMIN, ALL_IN_ONE, kubeconfig_as, refusals, strict_server
from ports import free_port

from kai_fakeapi.seed import try_it_seed

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

DEADLINE_SECONDS = 90.0
CYCLES_WATCHED = 4.0  # seconds of cycles (the default period is 1 s) after which nothing is said again

MALFORMED = {
    "fraction-abc": ({"gpu-fraction": "abc"}, "metadata.annotations.gpu-fraction", "'abc'"),
    "fraction-too-big": ({"gpu-fraction": "1.5"}, "metadata.annotations.gpu-fraction", "'1.5'"),
    "memory-negative": ({"gpu-memory": "-5"}, "metadata.annotations.gpu-memory", "'-5'"),
    "fraction-and-memory": (
        {"gpu-fraction": "0.5", "gpu-memory": "1024"},
        "metadata.annotations",
        "cannot both be set",
    ),
}


def pod(
    name: str, *, gpus: int = 0, annotations: dict[str, str] | None = None, priority: str = "train"
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "100m"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kai.scheduler/queue": "default-queue"},
            "annotations": annotations or {},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "priorityClassName": priority,
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path, manifests: Path) -> None:
        self.base = ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]
        self.manifests = manifests

    def __call__(self, *words: str) -> str:
        done = subprocess.run([*self.base, *words], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"kubectl {' '.join(words)}: {done.stderr}"
        return done.stdout

    def apply(self, *objects: dict[str, Any]) -> None:
        """`kubectl apply -f` of a file per object, as a user applies manifests."""
        folder = self.manifests / str(len(list(self.manifests.glob("*"))))
        folder.mkdir(parents=True)
        for obj in objects:
            (folder / f"{obj['metadata']['name']}.json").write_text(json.dumps(obj))
        self("apply", "-f", str(folder))

    def items(self, *words: str) -> list[dict[str, Any]]:
        return list(json.loads(self("get", *words, "-o", "json"))["items"])

    def events(self, name: str) -> list[dict[str, Any]]:
        return self.items("events", "--field-selector", f"involvedObject.name={name}")


def wait_for(what: str, predicate: Callable[[], bool], scheduler: Child) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not predicate():
        assert scheduler.returncode is None, "the scheduler stopped"
        assert time.monotonic() < deadline, f"not in time: {what}"
        time.sleep(0.2)


def pod_scheduled(obj: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((cond for cond in conditions if cond.get("type") == "PodScheduled"), None)


def test_kubectl_shows_why_pods_wait_where_they_went_and_who_preempted_them(tmp_path: Path) -> None:
    # What `kai-fakeapi` serves by default (its try-it seed, its kubelet), strict: kubectl is the user's
    # (an admin's), `run --all` the chart's all-in-one account.
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(strict_server(kubelet=True))
        server.store.load(try_it_seed())
        kubeconfig = kubeconfig_as(server, tmp_path / "kubeconfig", ADMIN)
        kubectl = Kubectl(kubeconfig, tmp_path / "kubectl-cache", tmp_path / "manifests")
        components = kubeconfig_as(server, tmp_path / "run.kubeconfig", ALL_IN_ONE)
        run = [sys.executable, "-m", "kai_scheduler", "run", "--all", "--skip", "admission"]
        run += ["--no-gpu-reservation", "--kubeconfig", str(components)]
        run += ["--metrics-port", str(free_port()), "--plugin-server-port", str(free_port())]
        scheduler = stack.enter_context(running(run))
        # The seed: two 8-GPU nodes. Two 7-GPU pods and a half GPU fill them but for one GPU and a half.
        kubectl.apply(
            *(pod(name, annotations=given) for name, (given, _, _) in MALFORMED.items()),
            pod("filler-1", gpus=7),
            pod("filler-2", gpus=7),
            pod("half", annotations={"gpu-fraction": "0.5"}),
        )
        fine = ("filler-1", "filler-2", "half")

        def settled() -> bool:
            pods = {p["metadata"]["name"]: p for p in kubectl.items("pods")}
            running_ = all(pods[name]["status"].get("phase") == "Running" for name in fine)
            return running_ and all(pod_scheduled(pods[name]) is not None for name in MALFORMED)

        wait_for("the fine pods run and the malformed ones say why", settled, scheduler)
        time.sleep(CYCLES_WATCHED)
        pods = {p["metadata"]["name"]: p for p in kubectl.items("pods")}
        for name, (_, field, value) in MALFORMED.items():
            condition = pod_scheduled(pods[name])
            assert condition is not None and condition["status"] == "False", name
            assert condition["reason"] == "InvalidPod", (name, condition)
            assert condition["message"].startswith(f"{field}: ") and value in condition["message"], condition
            [event] = kubectl.events(name)  # once, after several cycles
            assert (event["type"], event["reason"], event["message"]) == (
                "Warning",
                "InvalidPod",
                condition["message"],
            )
            assert event.get("count", 1) == 1
        described = kubectl("describe", "pod", "fraction-too-big")
        assert (
            "InvalidPod" in described
            and "metadata.annotations.gpu-fraction: must be between 0 and 1" in described
        )

        # The shared GPU's group is named (checked now: the preemption below may take the half too).
        [half] = [e for e in kubectl.events("half") if e["reason"] == "Scheduled"]
        group = pods["half"]["metadata"]["labels"]["runai-gpu-group"]
        assert half["message"].endswith(f"on shared GPU group {group} (0.50 of the GPU)"), half

        # A higher-priority pod that needs a whole node: preempt makes room on one.
        kubectl.apply(pod("urgent", gpus=8, priority="build-preemptible"))
        wait_for(
            "the urgent pod runs",
            lambda: (
                next(p for p in kubectl.items("pods") if p["metadata"]["name"] == "urgent")["status"].get(
                    "phase"
                )
                == "Running"
            ),
            scheduler,
        )
        pods = {p["metadata"]["name"]: p for p in kubectl.items("pods")}
        urgent_group = pods["urgent"]["metadata"]["annotations"]["pod-group-name"]
        events = kubectl.items("events")
        preempted = [e for e in events if e["reason"] == "Preempted"]
        assert preempted, [(e["reason"], e["message"]) for e in events]
        for event in preempted:
            assert event["involvedObject"]["name"] in ("filler-1", "filler-2", "half"), event
            assert event["message"].startswith(
                f"Preempted by preempt for default/{urgent_group} on gpu-node-"
            )
        evicted_groups = [
            e for e in events if e["reason"] == "Evict" and e["involvedObject"]["kind"] == "PodGroup"
        ]
        assert evicted_groups and all(
            f"preempt for default/{urgent_group}" in e["message"] for e in evicted_groups
        )

        # Every pod that is bound has its Scheduled event, naming its node (and the shared GPU's group).
        for name, obj in pods.items():
            node = obj["spec"].get("nodeName")
            if not node:
                continue
            scheduled = [e for e in kubectl.events(name) if e["reason"] == "Scheduled"]
            assert len(scheduled) == 1, (name, scheduled)
            assert scheduled[0]["message"].startswith(f"Successfully assigned default/{name} to {node}")
            assert scheduled[0]["source"]["component"] == "kai-scheduler"
        # The PodGroup the user follows: its start is its pods' Scheduled events and its status's counters
        # (as KAI, no Scheduled or Running event on the PodGroup).
        group_events = [e for e in kubectl.events(urgent_group) if e["involvedObject"]["kind"] == "PodGroup"]
        reasons = [e["reason"] for e in group_events]
        assert "Running" not in reasons and "Scheduled" not in reasons, group_events

        def counters() -> tuple[Any, Any]:
            [group] = [g for g in kubectl.items("podgroups") if g["metadata"]["name"] == urgent_group]
            status = group.get("status") or {}
            return status.get("running"), status.get("pending")

        wait_for("the urgent PodGroup's status says it runs", lambda: counters() == (1, 0), scheduler)
        assert "Successfully assigned" in kubectl("describe", "pod", "urgent")
        assert refusals(server) == []
