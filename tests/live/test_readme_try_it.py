"""The README's try-it walk-through, run as written: the fake API server, `kai-scheduler run --all` and
kubectl applying `examples/live/hello-gpu.yaml` end with the Job's pod bound and Running (issue #14).

Only what a test must change is changed: a free port for 6443, a temporary kubeconfig for
/tmp/kubeconfig, this interpreter for `.venv/bin/` (`python -m kai_fakeapi`, `python -m kai_scheduler`),
and free ports for the scheduler's metrics and plugin servers (8080 and 8081 by default).

The walk-through's server is strict (`--strict`: HTTPS, tokens, RBAC, webhooks), its kubeconfig the cluster
admin's: someone trying kai-scheduler out has no chart installed to give the components accounts of their
own (`test_chart_installed.py` runs each component with its own)."""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from child_process import Child, running
from ports import free_port

from markdown_support import code_blocks

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 90.0

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def readme_try_it_lines() -> list[str]:
    """The commands of the README's code block that starts the fake API server, comments dropped."""
    blocks = code_blocks((ROOT / "README.md").read_text())
    (block,) = [b for b in blocks if any("kai-fakeapi --port" in line for line in b)]
    return [line.split("#", 1)[0].strip() for line in block if line.split("#", 1)[0].strip()]


def as_run_here(line: str, port: int, kubeconfig: Path) -> list[str]:
    line = line.replace("6443", str(port)).replace("/tmp/kubeconfig", str(kubeconfig))
    words = shlex.split(line.rstrip("&").strip())
    programs = {".venv/bin/kai-fakeapi": "kai_fakeapi", ".venv/bin/kai-scheduler": "kai_scheduler"}
    if words[0] in programs:
        return [sys.executable, "-m", programs[words[0]], *words[1:]]
    return words


def kubectl(words: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    assert words[0] == "kubectl"
    return subprocess.run(
        [*words[:1], "--cache-dir", str(cache), *words[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def wait_for_kubeconfig(path: Path, server: Child) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not path.exists():
        assert server.returncode is None, "the fake API server stopped"
        assert time.monotonic() < deadline, "the fake API server wrote no kubeconfig"
        time.sleep(0.05)


def test_the_readme_walk_through_ends_with_the_jobs_pod_running(tmp_path: Path) -> None:
    lines = readme_try_it_lines()
    kubeconfig, cache = tmp_path / "kubeconfig", tmp_path / "kubectl-cache"
    port = free_port()
    background = [line for line in lines if line.endswith("&")]
    commands = [line for line in lines if not line.endswith("&")]
    assert [shlex.split(line)[0] for line in background] == [
        ".venv/bin/kai-fakeapi",
        ".venv/bin/kai-scheduler",
    ]
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(running(as_run_here(background[0], port, kubeconfig)))
        wait_for_kubeconfig(kubeconfig, server)
        assert '"server": "https://' in json.dumps(yaml.safe_load(kubeconfig.read_text()))  # strict: HTTPS
        metrics, plugins = free_port(), free_port()
        ports = ["--metrics-port", str(metrics), "--plugin-server-port", str(plugins)]
        scheduler = stack.enter_context(running([*as_run_here(background[1], port, kubeconfig), *ports]))
        for line in commands:
            done = kubectl(as_run_here(line, port, kubeconfig), cache)
            assert done.returncode == 0, f"{line}: {done.stderr}"
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            listed = kubectl(["kubectl", "--kubeconfig", str(kubeconfig), "get", "pods", "-o", "json"], cache)
            pods = json.loads(listed.stdout)["items"] if listed.returncode == 0 else []
            running_pods = [
                p
                for p in pods
                if p["metadata"]["name"].startswith("hello-gpu-")
                and p["status"].get("phase") == "Running"
                and p["spec"].get("nodeName") in ("gpu-node-1", "gpu-node-2")
            ]
            if running_pods:
                break
            assert time.monotonic() < deadline, f"the Job's pod is not Running: {json.dumps(pods)[:2000]}"
            time.sleep(0.2)
        (pod,) = running_pods
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("Job", "hello-gpu")
    # Its log tells the story at the default level: the servers it serves, a line for the cycle that
    # decided to bind the pod.
    assert f"metrics listening on 0.0.0.0:{metrics}" in scheduler.stderr, scheduler.output()
    assert " ERROR " not in scheduler.stderr, scheduler.output()
    cycle_lines = [line for line in scheduler.stderr.splitlines() if " INFO " in line and ": 1 bind" in line]
    assert cycle_lines, scheduler.output()
