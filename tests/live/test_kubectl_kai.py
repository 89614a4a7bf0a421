"""`kubectl kai` through the real kubectl (issue #13): kubectl finds the plugin on PATH and runs it against
the fake API server, on which `kai-scheduler run --all` schedules a small cluster, so that the Queue
status, fair shares, conditions and events the plugin reads are the components' own.

The cluster: the fake API server's try-it seed (two 8-GPU nodes, KAI's default queues) plus queue team
(GPU quota 4, limit 6) and queue roomy (quota 2, no limit). Pods: `whole` (1 GPU) and `half` (half a
shared GPU) in team run; `capped` (6 GPUs) in team would take team over its limit (OverLimit); `huge`
(10 GPUs) in roomy fits on no node (Unschedulable); `lost` names queue nobody (QueueDoesNotExist); `bad`
asks for `gpu-fraction: abc` (InvalidPod on the pod: admission is off).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from child_process import running
from identities import ADMIN, ALL_IN_ONE, kubeconfig_as, refusals, strict_server
from ports import free_port

from kai_fakeapi.seed import try_it_seed
from kai_scheduler.kubectl_plugin.main import main as plugin_main

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 120.0

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def queue(name: str, gpu_quota: float, gpu_limit: float) -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "parentQueue": "default-parent-queue",
            "resources": {
                "gpu": {"quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": 1},
                "cpu": unlimited,
                "memory": unlimited,
            },
        },
    }


def pod(name: str, queue_name: str, gpus: float | str) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "100m"}}
    annotations = {}
    if isinstance(gpus, str) or gpus < 1:
        annotations["gpu-fraction"] = str(gpus)
    else:
        resources["limits"] = {"nvidia.com/gpu": str(int(gpus))}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kai.scheduler/queue": queue_name}, "annotations": annotations},
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path, env: dict[str, str]) -> None:
        self.kubeconfig, self.cache, self.env = kubeconfig, cache, env

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=self.env,
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done

    def kai(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`kubectl kai ...`: kubectl passes the arguments after `kai` on, --kubeconfig included."""
        return subprocess.run(
            ["kubectl", "kai", *args, "--kubeconfig", str(self.kubeconfig)],
            capture_output=True,
            text=True,
            timeout=60,
            env=self.env,
        )

    def plugin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """What `kai(*args)` answers, from the plugin's command line run in this process: `kai` shows that
        kubectl finds the plugin and passes its output and exit status on; the other questions are about
        what the plugin answers, and a child interpreter for each would only add its start-up."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = plugin_main([*args, "--kubeconfig", str(self.kubeconfig)])
            except SystemExit as usage_error:  # argparse's
                status = usage_error.code if isinstance(usage_error.code, int) else 2
        return subprocess.CompletedProcess(["kubectl", "kai", *args], status, out.getvalue(), err.getvalue())

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)


def plugin_path(folder: Path) -> dict[str, str]:
    """A `kubectl-kai` on PATH that runs this worktree's plugin with this interpreter (what the package's
    console script does once installed)."""
    folder.mkdir()
    script = folder / "kubectl-kai"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kai_scheduler.kubectl_plugin.main "$@"\n')
    script.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{folder}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(ROOT / "fakeapi" / "src"), env.get("PYTHONPATH", "")]
    )
    env.pop("KUBECONFIG", None)
    return env


def columns(table: str) -> list[dict[str, str]]:
    """A `kubectl get` table's rows by header, cut at the header's column starts (headers may hold one
    space, columns are three apart)."""
    lines = table.rstrip("\n").splitlines()
    header = lines[0]
    starts = [i for i in range(len(header)) if header[i] != " " and (i == 0 or header[i - 2 : i] == "  ")]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [
        {name: line[a:b].rstrip() for name, a, b in zip(names, starts, [*starts[1:], None], strict=True)}
        for line in lines[1:]
    ]


@contextlib.contextmanager
def cluster(tmp_path: Path, plugin_server_port: int = 0) -> Iterator[Kubectl]:
    """What `kai-fakeapi` serves by default (its try-it seed, its kubelet), strict, with `kai-scheduler run
    --all` on it as the chart's all-in-one account; kubectl and the plugin are the user's (an admin's).
    The scheduler's plugin server listens on `plugin_server_port` (0: none)."""
    env = plugin_path(tmp_path / "bin")
    with strict_server(kubelet=True) as server:
        server.store.load(try_it_seed())
        kubeconfig = kubeconfig_as(server, tmp_path / "kubeconfig", ADMIN)
        components = kubeconfig_as(server, tmp_path / "run.kubeconfig", ALL_IN_ONE)
        scheduler = [
            *(sys.executable, "-m", "kai_scheduler", "run", "--all", "--skip", "admission"),
            *("--no-gpu-reservation", "--kubeconfig", str(components)),
            *("--metrics-port", str(free_port()), "--plugin-server-port", str(plugin_server_port)),
            # The estimates are off: the test writes the annotation itself, and no estimator may drop it.
            *("--start-estimates", "0"),
        ]
        with running(scheduler, env=env):
            yield Kubectl(kubeconfig, tmp_path / "cache", env)
        assert refusals(server) == []


def running_first(kubectl: Kubectl) -> bool:
    pods = kubectl.json("get", "pods")["items"]
    return sum(1 for p in pods if p["status"].get("phase") == "Running") == 2


def settled(kubectl: Kubectl) -> bool:
    pods = {p["metadata"]["name"]: p for p in kubectl.json("get", "pods")["items"]}
    groups = {g["metadata"]["name"]: g for g in kubectl.json("get", "podgroups")["items"]}
    team = kubectl.json("get", "queue", "team")

    def reason(pod_name: str) -> str | None:
        group = groups.get(pods[pod_name]["metadata"].get("annotations", {}).get("pod-group-name", ""))
        conditions = ((group or {}).get("status") or {}).get("schedulingConditions") or []
        return conditions[-1]["reason"] if conditions else None

    return (
        all(pods[name]["status"].get("phase") == "Running" for name in ("whole", "half"))
        and reason("capped") == "OverLimit"
        and reason("huge") == "Unschedulable"
        and reason("lost") == "QueueDoesNotExist"
        and any(
            condition.get("reason") == "InvalidPod"
            for condition in pods["bad"]["status"].get("conditions", [])
        )
        and (team.get("status") or {}).get("allocated", {}).get("nvidia.com/gpu") == "1500m"
        # What waits is in the queue's status once its PodGroup's first status is written: a new PodGroup
        # whose pods stay pending gets it after the status controller's settle window.
        and (team.get("status") or {}).get("requested", {}).get("nvidia.com/gpu") == "7500m"
        and "fairShare" in (team.get("status") or {})
    )


def test_kubectl_kai_queues_why_and_top(tmp_path: Path) -> None:
    with cluster(tmp_path) as kubectl:
        listed = kubectl("plugin", "list")
        assert str(tmp_path / "bin" / "kubectl-kai") in listed.stdout, listed.stdout + listed.stderr
        # What runs first (same-second creations have no order), then what waits.
        first = [
            queue("team", 4, 6),
            queue("roomy", 2, -1),
            pod("whole", "team", 1),
            pod("half", "team", 0.5),
        ]
        then = [pod("capped", "team", 6), pod("huge", "roomy", 10), pod("lost", "nobody", 1)]
        then.append(pod("bad", "roomy", "abc"))  # admission is off: the scheduler says what is wrong
        deadline = time.monotonic() + DEADLINE_SECONDS
        for objects, done in ((first, running_first), (then, settled)):
            (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(objects))
            kubectl("apply", "-f", str(tmp_path / "objects.yaml"))
            while not done(kubectl):
                assert time.monotonic() < deadline, kubectl(
                    "get", "pods,podgroups,queues", "-o", "yaml"
                ).stdout
                time.sleep(0.3)

        # queues: the tree, indented, with team's numbers from its spec and status.
        done = kubectl.kai("queues")
        assert done.returncode == 0, done.stderr
        rows = {row["QUEUE"].strip(): row for row in columns(done.stdout)}
        assert [row["QUEUE"] for row in columns(done.stdout)] == [
            "default-parent-queue",
            "  default-queue",
            "  roomy",
            "  team",
        ]
        team = rows["team"]
        assert (team["GPU QUOTA"], team["GPU LIMIT"], team["GPU ALLOCATED"]) == ("4", "6", "1.5")
        assert team["GPU REQUESTED"] == "7.5"  # what runs and what waits (capped's 6)
        assert rows["roomy"]["GPU LIMIT"] == "unlimited"
        as_json = json.loads(kubectl.plugin("queues", "-o", "json").stdout)
        by_name = {q["name"]: q for q in as_json["queues"]}
        assert by_name["team"]["parent"] == "default-parent-queue"
        assert by_name["team"]["allocated"]["gpu"] == 1.5
        # Fair share: quota first (team 4, roomy 2), then what is left of 16 GPUs by weight to the queues
        # that ask for more (roomy's 10-GPU pod; team stays within its 6 GPU limit).
        share = {name: by_name[name]["fairShare"]["gpu"] for name in ("team", "roomy")}
        assert share["team"] >= 4 and share["roomy"] >= 2 and share["team"] + share["roomy"] <= 16, share
        assert team["GPU FAIR SHARE"] == f"{share['team']:.2f}".rstrip("0").rstrip(".")
        cpu = {
            row["QUEUE"].strip(): row for row in columns(kubectl.plugin("queues", "--resource", "cpu").stdout)
        }
        assert (cpu["team"]["CPU QUOTA"], cpu["team"]["CPU ALLOCATED"]) == ("unlimited", "200m")

        # why: each waiting pod's reason, and what would let it start.
        capped = kubectl.plugin("-n", "default", "why", "capped")
        assert capped.returncode == 0, capped.stderr
        assert "OverLimit" in capped.stdout
        assert "queue team may use at most 6 gpu; it holds 1.5 and this job asks for 6" in capped.stdout
        huge = kubectl.plugin("why", "pod/huge")
        assert "Unschedulable" in huge.stdout and "pod huge does not fit" in huge.stdout, huge.stdout
        hint = "no node has 10 GPUs (the largest has 8): ask for fewer GPUs per pod, or add a node that large"
        assert f"To start:\n  - {hint}\nEvents:" in huge.stdout, huge.stdout
        # An estimated start on the PodGroup (the scheduler's estimates write it) is shown as it is.
        group = json.loads(kubectl.plugin("why", "huge", "-o", "json").stdout)["podGroup"]
        kubectl("annotate", "podgroup", group, "kai.scheduler/estimated-start=2026-12-02T03:00:00Z")
        assert "Estimated start: 2026-12-02T03:00:00Z\n" in kubectl.plugin("why", "huge").stdout
        starts = {row["QUEUE"]: row["ESTIMATED START"] for row in columns(kubectl.plugin("why").stdout)}
        assert starts == {"team": "-", "roomy": "2026-12-02T03:00:00Z", "nobody": "-"}
        lost = json.loads(kubectl.plugin("why", "lost", "-o", "json").stdout)
        assert (lost["reason"], lost["queue"], lost["state"]) == ("QueueDoesNotExist", "nobody", "Waiting")
        assert lost["toStart"] == [
            "queue nobody does not exist: create it, or label the workload with an existing queue"
        ]
        assert any(event["reason"] == "Unschedulable" for event in lost["events"]), lost
        bad = json.loads(kubectl.plugin("why", "bad", "-o", "json").stdout)
        assert (bad["reason"], bad["state"]) == ("InvalidPod", "Waiting"), bad
        assert "gpu-fraction" in bad["message"] and "abc" in bad["message"], bad
        assert bad["toStart"][0].startswith("fix the field the message names"), bad
        whole = json.loads(kubectl.plugin("why", "whole", "-o", "json").stdout)
        assert whole["state"] == "Running" and whole["toStart"] == []
        waiting = columns(kubectl.plugin("why", "-A").stdout)
        assert {(row["NAMESPACE"], row["QUEUE"], row["REASON"]) for row in waiting} == {
            ("default", "team", "OverLimit"),
            ("default", "roomy", "Unschedulable"),
            ("default", "nobody", "QueueDoesNotExist"),
        }

        # top: one node holds the whole GPU and the shared one (binpack), half of which is in use.
        done = kubectl.plugin("top")
        assert done.returncode == 0, done.stderr
        nodes_table, shared_table = done.stdout.split("\n\n")
        nodes = {row["NODE"]: row for row in columns(nodes_table)}
        busy = [row for row in nodes.values() if row["ALLOCATED"] != "0"]
        assert len(nodes) == 2 and len(busy) == 1, done.stdout
        assert (busy[0]["GPUS"], busy[0]["ALLOCATED"], busy[0]["SHARED GPUS"], busy[0]["FREE"]) == (
            "8",
            "1.5",
            "1",
            "6",
        )
        (gpu,) = columns(shared_table)
        assert (gpu["NODE"], gpu["ALLOCATED"], gpu["PODS"]) == (busy[0]["NODE"], "0.5", "default/half")
        top = json.loads(kubectl.plugin("top", "-o", "json").stdout)
        assert sum(node["allocated"] for node in top["nodes"]) == 1.5

        # Errors: one line, exit 1 for what does not exist, 2 for a cluster that cannot be reached.
        missing = kubectl.kai("why", "nosuch")
        assert missing.returncode == 1
        assert missing.stderr == "error: no pod or pod group nosuch in namespace default\n"
        elsewhere = kubectl.plugin("why", "capped", "-n", "kube-system")
        assert elsewhere.stderr == "error: no pod or pod group capped in namespace kube-system\n"
        unreachable_config = tmp_path / "unreachable"
        unreachable_config.write_text(
            kubectl.kubeconfig.read_text().replace(
                yaml.safe_load(kubectl.kubeconfig.read_text())["clusters"][0]["cluster"]["server"],
                f"http://127.0.0.1:{free_port()}",
            )
        )
        gone = subprocess.run(
            ["kubectl", "kai", "queues", "--kubeconfig", str(unreachable_config)],
            capture_output=True,
            text=True,
            timeout=60,
            env=kubectl.env,
        )
        assert gone.returncode == 2, gone.stderr
        assert gone.stderr.startswith("error: cannot reach the API server http://127.0.0.1:"), gone.stderr
        assert gone.stderr.count("\n") == 1 and "Traceback" not in gone.stderr
