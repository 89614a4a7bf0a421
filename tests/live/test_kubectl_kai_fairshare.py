"""`kubectl kai fairshare` and `kubectl kai usage` through the real kubectl (issue #25, section 3): `kai-
scheduler run --all` schedules on the fake API server with its plugin server on a free port, and the
plugin shows that scheduler's own numbers: the fair share it explains is the one the scheduler wrote to
the Queue's status, and the pod groups holding the queue are the ones running, with their users, in
reclaim order. An unknown queue and an unreachable scheduler are one-line errors.

The cluster: the fake API server's try-it seed (two 8-GPU nodes, KAI's default queues) plus queue team
(GPU quota 4, limit 6) and queue roomy (quota 2, no limit), both at the top of the tree. In team,
alice's training pod (1 GPU) and bob's inference pod (2 GPUs, non-preemptible) run; in roomy a 10-GPU pod
waits (it fits on no node), so roomy asks for more than its quota and the over-quota phase has something
to divide.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from ports import free_port
from test_kubectl_kai import Kubectl, cluster, queue

DEADLINE_SECONDS = 120.0

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def pod(
    name: str, queue_name: str, gpus: int, user: str, priority_class: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": "100m"}, "limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    labels = {"kai.scheduler/queue": queue_name, "user": user}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def top_level(manifest: dict[str, Any]) -> dict[str, Any]:
    """A queue without a parent: the non-preemptible pod must fit in the quota of every queue above it."""
    del manifest["spec"]["parentQueue"]
    return manifest


def settled(kubectl: Kubectl) -> bool:
    pods = {p["metadata"]["name"]: p for p in kubectl.json("get", "pods")["items"]}
    team = kubectl.json("get", "queue", "team")
    roomy = kubectl.json("get", "queue", "roomy")
    return (
        all(pods[name]["status"].get("phase") == "Running" for name in ("alice-train", "bob-serve"))
        and (team.get("status") or {}).get("allocated", {}).get("nvidia.com/gpu") == "3"
        and "fairShare" in (team.get("status") or {})
        and (roomy.get("status") or {}).get("requested", {}).get("nvidia.com/gpu") == "10"
    )


def test_fairshare_and_usage_show_the_scheduler_s_own_numbers(tmp_path: Path) -> None:
    port = free_port()
    with cluster(tmp_path, port) as kubectl:
        objects = [
            top_level(queue("team", 4, 6)),
            top_level(queue("roomy", 2, -1)),
            pod("alice-train", "team", 1, "alice"),
            pod("bob-serve", "team", 2, "bob", priority_class="inference"),
            pod("huge", "roomy", 10, "carol"),
        ]
        (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(objects))
        deadline = time.monotonic() + DEADLINE_SECONDS
        kubectl("apply", "-f", str(tmp_path / "objects.yaml"))
        while not settled(kubectl):
            assert time.monotonic() < deadline, kubectl("get", "pods,queues", "-o", "yaml").stdout
            time.sleep(0.3)
        scheduler = ("--scheduler", f"127.0.0.1:{port}")
        listed = json.loads(kubectl.plugin("queues", "-o", "json").stdout)["queues"]
        written = {q["name"]: q["fairShare"] for q in listed}

        # fairshare: the division down to team, ending in the share the scheduler wrote to its status.
        done = kubectl.kai("fairshare", "team", *scheduler)
        assert done.returncode == 0, done.stderr
        text = done.stdout
        assert text.startswith("Fair share of queue team, as scheduling cycle ")
        among = text[text.index("Level 1: the cluster's 16 GPU among ") :].split("\n")[0].split(" among ")[1]
        assert set(among.split(", ")) == {"default-parent-queue", "team", "roomy"}, text
        gpu_share = written["team"]["gpu"]
        assert f"Result: team's gpu fair share is {gpu_share:g} GPU" in text, text
        explained = json.loads(kubectl.plugin("fairshare", "team", *scheduler, "-o", "json").stdout)
        for resource in ("gpu", "cpu"):
            assert explained["resources"][resource]["fairShare"] == pytest.approx(
                written["team"][resource], abs=1e-3
            ), resource
        (level,) = explained["resources"]["gpu"]["levels"]  # team is at the top: one level
        team = next(q for q in level["queues"] if q["name"] == "team")
        assert (team["quota"], team["limit"], team["request"]) == (4, 6, 3)
        roomy = next(q for q in level["queues"] if q["name"] == "roomy")
        assert roomy["request"] == 10 and roomy["fairShare"] == pytest.approx(written["roomy"]["gpu"])

        # usage: who holds team's GPUs, alice's training first to be reclaimed, bob's inference never.
        held = json.loads(kubectl.plugin("usage", "team", *scheduler, "-o", "json").stdout)
        groups = {group["user"]: group for group in held["podGroups"]}
        assert set(groups) == {"alice", "bob"}
        assert (groups["alice"]["allocated"]["gpu"], groups["alice"]["reclaimOrder"]) == (1, 1)
        assert groups["alice"]["standing"] == "within quota"  # team holds 3 of its quota of 4
        assert (groups["bob"]["allocated"]["gpu"], groups["bob"]["reclaimOrder"]) == (2, None)
        assert held["fairShare"]["gpu"] == pytest.approx(gpu_share, abs=1e-3)
        assert held["allocated"]["gpu"] == 3
        table = kubectl.plugin("usage", "team", *scheduler)
        assert table.returncode == 0, table.stderr
        assert "By user:" in table.stdout and "alice" in table.stdout, table.stdout

        # Errors: one line; 1 for a queue the scheduler does not have, 2 for a scheduler not reached.
        for command in ("fairshare", "usage"):
            missing = kubectl.plugin(command, "nobody", *scheduler)
            assert missing.returncode == 1, missing.stderr
            assert missing.stderr.startswith(
                f"error: the scheduler at http://127.0.0.1:{port}: queue nobody: "
            )
            assert missing.stderr.count("\n") == 1
        gone = kubectl.kai("fairshare", "team", "--scheduler", f"127.0.0.1:{free_port()}")
        assert gone.returncode == 2
        assert gone.stderr.startswith(
            "error: cannot reach the scheduler's plugin server at http://127.0.0.1:"
        )
        assert gone.stderr.count("\n") == 1 and "Traceback" not in gone.stderr
