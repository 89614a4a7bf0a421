"""`python -m kai_fakeapi`: a standalone server for kubectl."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml


@contextlib.contextmanager
def _standalone(*args: str) -> Iterator[str]:
    """`python -m kai_fakeapi --port 0 ARGS...`: its URL (the first line it prints); stopped by SIGTERM."""
    command = [sys.executable, "-m", "kai_fakeapi", "--port", "0", *args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=30) == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("the server did not stop on SIGTERM")


def _kubectl(config: Path, tmp_path: Path, *args: str) -> str:
    command = ["kubectl", "--kubeconfig", str(config), "--cache-dir", str(tmp_path / "cache"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout


def test_standalone_server_writes_a_kubeconfig(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    seed = tmp_path / "seed.yaml"
    seed.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {capacity: {cpu: '8'}}\n")
    with _standalone("--kubeconfig", str(config), "--seed", "none", "-f", str(seed)) as url:
        assert url.startswith("http://127.0.0.1:")
        assert yaml.safe_load(config.read_text())["clusters"][0]["cluster"]["server"] == url
        with urllib.request.urlopen(f"{url}/api/v1/nodes", timeout=30) as resp:
            nodes = json.load(resp)
        assert [n["metadata"]["name"] for n in nodes["items"]] == ["n1"]
        if shutil.which("kubectl"):
            assert _kubectl(config, tmp_path, "get", "nodes", "-o", "name").split() == ["node/n1"]


def test_strict_server_serves_https_to_authenticated_clients(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    with _standalone("--kubeconfig", str(config), "--strict") as url:
        assert url.startswith("https://127.0.0.1:")
        cluster = yaml.safe_load(config.read_text())["clusters"][0]["cluster"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(
                f"{url}/api/v1/nodes", timeout=30, context=ssl.create_default_context(cadata=ca)
            )
        assert refused.value.code == 401
        if shutil.which("kubectl"):
            # The try-it seed's two nodes, read as the kubeconfig's admin.
            assert len(_kubectl(config, tmp_path, "get", "nodes", "-o", "name").split()) == 2


def test_strict_server_calls_the_webhooks_through_the_services_it_is_told_to_route(tmp_path: Path) -> None:
    """--strict passes writes through the admission webhooks; --expose-service routes a webhook's Service
    (here to a port nothing listens on: a Fail webhook then refuses the write, as a real API server)."""
    config = tmp_path / "kubeconfig"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    webhooks = tmp_path / "webhooks.yaml"
    webhooks.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "guard"},
                "webhooks": [
                    {
                        "name": "guard.example.com",
                        "clientConfig": {"service": {"namespace": "default", "name": "guard", "path": "/v"}},
                        "rules": [
                            {
                                "operations": ["CREATE"],
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "resources": ["configmaps"],
                            }
                        ],
                        "failurePolicy": "Fail",
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                    }
                ],
            }
        )
    )
    route = f"default/guard:443=127.0.0.1:{closed}"
    args = ("--kubeconfig", str(config), "--strict", "--seed", "none", "-f", str(webhooks))
    with _standalone(*args, "--expose-service", route):
        if shutil.which("kubectl"):
            command = ["kubectl", "--kubeconfig", str(config), "create", "configmap", "c"]
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
            assert done.returncode != 0
            assert 'failed calling webhook "guard.example.com"' in done.stderr


def test_a_malformed_service_route_is_a_one_line_error() -> None:
    command = [sys.executable, "-m", "kai_fakeapi", "--port", "0", "--expose-service", "guard=nowhere"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--expose-service 'guard=nowhere': expected NAMESPACE/NAME:PORT=HOST:PORT" in done.stderr
