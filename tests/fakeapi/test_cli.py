"""`python -m kai_fakeapi`: a standalone server for kubectl."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml


def test_standalone_server_writes_a_kubeconfig(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    seed = tmp_path / "seed.yaml"
    seed.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {capacity: {cpu: '8'}}\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kai_fakeapi",
            "--port",
            "0",
            "--kubeconfig",
            str(config),
            "--seed",
            "none",
            "-f",
            str(seed),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert yaml.safe_load(config.read_text())["clusters"][0]["cluster"]["server"] == url
        with urllib.request.urlopen(f"{url}/api/v1/nodes", timeout=30) as resp:
            nodes = json.load(resp)
        assert [n["metadata"]["name"] for n in nodes["items"]] == ["n1"]
        if shutil.which("kubectl"):
            out = subprocess.run(
                [
                    "kubectl",
                    "--kubeconfig",
                    str(config),
                    "--cache-dir",
                    str(tmp_path / "cache"),
                    "get",
                    "nodes",
                    "-o",
                    "name",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
            assert out.split() == ["node/n1"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=30) == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("the server did not stop on SIGTERM")
