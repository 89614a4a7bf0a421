"""kubectl as a real client: discovery, apply (client- and server-side), get, delete, get -w."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

MANIFESTS = """\
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: team-a
spec:
  priority: 100
  resources:
    gpu: {quota: 4, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: train-1
spec:
  minMember: 2
  queue: team-a
---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: train-1
  labels: {kai.scheduler/queue: team-a}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          schedulerName: kai-scheduler
          containers: [{name: pytorch, image: "pytorch:2", resources: {limits: {nvidia.com/gpu: 1}}}]
    Worker:
      replicas: 1
      template:
        spec:
          schedulerName: kai-scheduler
          containers: [{name: pytorch, image: "pytorch:2", resources: {limits: {nvidia.com/gpu: 1}}}]
"""

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: train, kai.scheduler/queue: team-a}}
  annotations: {{pod-group-name: train-1}}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: busybox:1.36
    resources:
      limits: {{nvidia.com/gpu: "1"}}
"""


def test_apply_get_and_delete(kubectl: Any, server: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "workload.yaml"
    manifest.write_text(MANIFESTS + "---\n" + "---\n".join(POD.format(name=f"p{i}") for i in range(3)))
    out = kubectl("apply", "-f", str(manifest)).stdout  # with validation: no --validate=false needed
    assert "queue.scheduling.run.ai/team-a created" in out
    assert "podgroup.scheduling.run.ai/train-1 created" in out
    assert "pytorchjob.kubeflow.org/train-1 created" in out
    assert out.count("pod/p") == 3

    pods = json.loads(kubectl("get", "pods", "-o", "json").stdout)
    assert pods["kind"] == "List" and [p["metadata"]["name"] for p in pods["items"]] == ["p0", "p1", "p2"]
    assert pods["items"][0]["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}

    table = kubectl("get", "pg").stdout.splitlines()  # the columns of the chart's CRD
    assert table[0].split() == ["NAME", "QUEUE", "MINMEMBER", "PRIORITY", "PHASE", "AGE"]
    assert table[1].split()[:3] == ["train-1", "team-a", "2"]
    assert kubectl("get", "queues", "-o", "name").stdout.split() == ["queue.scheduling.run.ai/team-a"]

    # A change goes out as a patch; an unchanged object is left alone.
    manifest.write_text(manifest.read_text().replace("minMember: 2", "minMember: 3"))
    out = kubectl("apply", "-f", str(manifest)).stdout
    assert "podgroup.scheduling.run.ai/train-1 configured" in out and "pod/p0 unchanged" in out
    assert server.store.get("pg", "train-1")["spec"]["minMember"] == 3
    out = kubectl("apply", "--server-side", "-f", str(manifest)).stdout
    assert "queue.scheduling.run.ai/team-a serverside-applied" in out

    server.store.bind("default", "p1", "node-1")
    wide = kubectl("get", "pods", "-o", "wide").stdout
    assert any(line.split()[0] == "p1" and "node-1" in line.split() for line in wide.splitlines())

    out = kubectl("delete", "pod", "p0").stdout
    assert 'pod "p0" deleted' in out
    assert server.store.try_get("pods", "p0") is None
    failed = kubectl("get", "pod", "p0", check=False)
    assert failed.returncode != 0 and "NotFound" in failed.stderr


def test_discovery_for_kubectl(kubectl: Any) -> None:
    resources = kubectl("api-resources", "--no-headers").stdout.splitlines()
    by_name = {line.split()[0]: line.split() for line in resources}
    assert by_name["podgroups"][1] == "pg"
    assert by_name["podgroups"][2] == "scheduling.run.ai/v2alpha2"
    assert by_name["queues"][-1] == "Queue"
    assert "pytorchjobs" in by_name and "leases" in by_name and "priorityclasses" in by_name
    assert "Server Version: v1.32" in kubectl("version").stdout


def test_get_pods_watch(kubectl: Any, server: Any, make_pod: Any) -> None:
    server.store.create(make_pod("before"))
    proc = subprocess.Popen(
        [
            "kubectl",
            "--kubeconfig",
            str(kubectl.config),
            "--cache-dir",
            str(kubectl.config.parent / "kcache"),
            "get",
            "pods",
            "-w",
            "--output-watch-events",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert server.wait_for_watches(1, "pods", timeout=60)
        server.store.create(make_pod("after"))
        server.store.delete("pods", "before")
        seen: list[list[str]] = []
        while not any(r[:2] == ["DELETED", "before"] for r in seen):
            seen.append(lines.get(timeout=60).split())
        assert ["ADDED", "after"] in [r[:2] for r in seen]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        reader.join(30)


def test_create_generators_send_protobuf(kubectl: Any, server: Any) -> None:
    kubectl("create", "namespace", "team")
    kubectl("create", "configmap", "cfg", "-n", "team", "--from-literal=a=b")
    kubectl("create", "priorityclass", "train", "--value=50", "--description=d", "--preemption-policy=Never")
    assert server.store.get("namespaces", "team")["status"]["phase"] == "Active"
    assert server.store.get("configmaps", "cfg", "team")["data"] == {"a": "b"}
    pc = server.store.get("priorityclasses", "train")
    assert (pc["value"], pc["description"], pc["preemptionPolicy"]) == (50, "d", "Never")
    unsupported = kubectl("create", "deployment", "d", "--image=x", check=False)
    assert unsupported.returncode != 0 and "apply -f" in unsupported.stderr


def test_drain_evicts_through_the_eviction_subresource(
    kubectl: Any, server: Any, make_pod: Any, make_node: Any
) -> None:
    server.store.create(make_node("n1"))
    for name in ("a", "b"):
        server.store.create(make_pod(name))
    kubectl(
        "create",
        "-f",
        "-",
        input_text="apiVersion: v1\nkind: Binding\nmetadata: {name: a}\ntarget: {kind: Node, name: n1}\n",
    )
    assert server.store.get("pods", "a")["spec"]["nodeName"] == "n1"
    out = kubectl("drain", "n1", "--force", "--grace-period=0", "--timeout=60s").stdout
    assert "pod/a evicted" in out and "node/n1 drained" in out
    assert [e.name for e in server.store.evictions] == ["a"]
    assert [p["metadata"]["name"] for p in server.store.list("pods")] == ["b"]
    assert server.store.get("nodes", "n1")["spec"]["unschedulable"] is True
