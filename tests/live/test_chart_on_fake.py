"""The chart's rendered manifests and its CRDs, applied with kubectl to the fake API server (issue #4: the
chart "validates against the Kubernetes schemas and `kubectl apply --validate=false` accepts it")."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kai_scheduler.fakeapi import FakeApiServer

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "kai-scheduler"
sys.path.insert(0, str(ROOT / "tests" / "unit" / "k8s"))

from test_chart import NAMESPACE, render_chart  # noqa: E402


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize(
    "overrides",
    [{}, {"allInOne": True}, {"resourceReservation": {"enabled": False}, "clusterAutoscaling": True}],
    ids=["per-component", "all-in-one", "fake-gpus-autoscaling"],
)
def test_kubectl_applies_the_rendered_chart(tmp_path: Path, overrides: dict[str, object]) -> None:
    documents = [document for _, document in render_chart(overrides)]
    rendered = tmp_path / "chart.yaml"
    rendered.write_text(yaml.safe_dump_all(documents))
    with FakeApiServer(auto_create_namespaces=True) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")

        def kubectl(*args: str) -> str:
            done = subprocess.run(
                ["kubectl", "--kubeconfig", str(kubeconfig), *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr.strip()}"
            return done.stdout

        kubectl("apply", "-f", str(CHART / "crds"))
        kubectl("apply", "--validate=false", "-f", str(rendered))
        for document in documents:
            kind, name = document["kind"], document["metadata"]["name"]
            namespace = document["metadata"].get("namespace")
            assert server.store.try_get(kind, name, namespace or NAMESPACE) is not None, f"{kind} {name}"
