"""`kai-scheduler run --all` as a user runs it: a separate process against the fake API server, with
kubectl as the client that submits the work (issue #4's acceptance walk-through)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from child_process import running
from identities import ADMIN, ALL_IN_ONE, kubeconfig_as, refusals, strict_server
from ports import free_port

from kai_fakeapi import Store

WORKLOAD = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  resources:
    gpu: {quota: 16, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  parentQueue: research
  resources:
    gpu: {quota: 16, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist, namespace: default, labels: {kai.scheduler/queue: team-a}}
spec:
  pytorchReplicaSpecs:
    Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: trainer}]}}}
    Worker: {replicas: 3, template: {spec: {containers: [{name: pytorch, image: trainer}]}}}
"""


def _pod(name: str, replica_type: str, owner_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kai.scheduler/queue": "team-a", "training.kubeflow.org/replica-type": replica_type},
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "name": "mnist",
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [
                {
                    "name": "pytorch",
                    "image": "trainer",
                    "resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}},
                }
            ],
        },
    }


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


@pytest.mark.skipif(
    not Path("/usr/bin/kubectl").exists() and not Path("/usr/local/bin/kubectl").exists(),
    reason="kubectl is not installed",
)
def test_run_all_schedules_a_pytorchjob_submitted_with_kubectl(tmp_path: Path) -> None:
    store = Store(kubelet=True)
    for i in range(2):
        store.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i}", "labels": {"nvidia.com/gpu.memory": "81920"}},
                "status": {
                    "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
                },
            }
        )
    with strict_server(store=store) as server:
        kubeconfig = kubeconfig_as(server, tmp_path / "kubeconfig", ADMIN)  # the user's, for kubectl
        run_kubeconfig = kubeconfig_as(server, tmp_path / "run.kubeconfig", ALL_IN_ONE)
        _kubectl(kubeconfig, "apply", "-f", "-", stdin=WORKLOAD)
        owner_uid = store.get("pytorchjobs", "mnist", "default")["metadata"]["uid"]
        pods = [_pod("mnist-master-0", "master", owner_uid)]
        pods += [_pod(f"mnist-worker-{i}", "worker", owner_uid) for i in range(3)]
        _kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(pods))

        metrics_port = free_port()
        command = [sys.executable, "-m", "kai_scheduler", "run", "--all", "--skip", "admission"]
        command += ["--kubeconfig", str(run_kubeconfig), "--metrics-port", str(metrics_port)]
        command += ["--plugin-server-port", "0"]
        # A failure below (a time-out included) shows run's output; run is stopped with SIGTERM at the end.
        with running(command) as child:

            def bound() -> bool:
                listed = json.loads(_kubectl(kubeconfig, "get", "pods", "-o", "json"))["items"]
                return len(listed) == 4 and all(p["spec"].get("nodeName") for p in listed)

            _wait(bound, 90, "every pod bound")
            assert _get(f"http://127.0.0.1:{metrics_port}/readyz")[0] == 200
            status, metrics = _get(f"http://127.0.0.1:{metrics_port}/metrics")
            assert status == 200 and "kai_e2e_scheduling_latency_milliseconds" in metrics

            groups = json.loads(_kubectl(kubeconfig, "get", "pg", "-o", "json"))["items"]
            assert len(groups) == 1 and groups[0]["spec"]["minMember"] == 4

            def statuses_filled() -> bool:
                group = json.loads(_kubectl(kubeconfig, "get", "pg", "-o", "json"))["items"][0]
                queue = json.loads(_kubectl(kubeconfig, "get", "queues", "team-a", "-o", "json"))
                allocated = (queue.get("status") or {}).get("allocated") or {}
                return group.get("status", {}).get("running") == 4 and allocated.get("nvidia.com/gpu") == "8"

            _wait(statuses_filled, 60, "PodGroup and Queue status")
        assert child.returncode == 0 and not child.killed, child.output()
        assert refusals(server) == []
        # Every pod was bound exactly once.
        assert sorted(b.name for b in store.binds) == sorted(p["metadata"]["name"] for p in pods)
