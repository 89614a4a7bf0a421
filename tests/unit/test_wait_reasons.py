"""Structured reasons (issue #10): a job that waits carries KAI's reason code as data from the core, and
the simulator's result shows it beside the message (live mode writes it as the PodGroup condition's
reason: tests/live/test_scheduler_loop.py)."""

from __future__ import annotations

import json
from pathlib import Path

from kai_scheduler.cli import main

INPUT = """
apiVersion: v1
kind: Node
metadata: {name: n0}
status: {allocatable: {cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "4"}}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: capped}
spec:
  resources:
    gpu: {quota: 1, limit: 1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: over-limit, labels: {kai.scheduler/queue: capped}}
  spec:
    schedulerName: kai-scheduler
    containers: [{name: m, resources: {requests: {nvidia.com/gpu: "2"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: lost, labels: {kai.scheduler/queue: no-such-queue}}
  spec:
    schedulerName: kai-scheduler
    containers: [{name: m, resources: {requests: {nvidia.com/gpu: "1"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: too-big, labels: {kai.scheduler/queue: capped}}
  spec:
    schedulerName: kai-scheduler
    containers: [{name: m, resources: {requests: {cpu: "64"}}}]
"""


def test_each_waiting_job_carries_its_reason_code(tmp_path: Path) -> None:
    manifests = tmp_path / "input.yaml"
    manifests.write_text(INPUT)
    out = tmp_path / "result.json"
    assert main(["simulate", str(manifests), "--output", "json", "--out", str(out)]) == 0
    groups = {g["name"]: g for g in json.loads(out.read_text())["podGroups"]}
    assert groups["pg-over-limit"]["unschedulableCode"] == "OverLimit"
    assert groups["pg-lost"]["unschedulableCode"] == "QueueDoesNotExist"
    assert groups["pg-too-big"]["unschedulableCode"] == "Unschedulable"
    for group in groups.values():
        assert group["unschedulableReason"]  # and the message people read, as before
