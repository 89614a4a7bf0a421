"""The chart's manifests as Helm renders them (tests/chart_support.py) and its CRDs, applied with kubectl to
the strict fake API server by its administrator (issue #4: the chart "validates against the Kubernetes
schemas and `kubectl apply --validate=false` accepts it"); one case is the README's install command."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from identities import ADMIN, kubeconfig_as, refusals, strict_server

from chart_support import CHART, INSTALL, NAMESPACE, render_chart


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"allInOne": True},
        {"resourceReservation": {"enabled": False}, "clusterAutoscaling": True},
        INSTALL.values,
    ],
    ids=["per-component", "all-in-one", "fake-gpus-autoscaling", "readme-install"],
)
def test_kubectl_applies_the_rendered_chart(tmp_path: Path, overrides: dict[str, object]) -> None:
    documents = [document for _, document in render_chart(overrides)]
    rendered = tmp_path / "chart.yaml"
    rendered.write_text(yaml.safe_dump_all(documents))
    with strict_server(chart=False, auto_create_namespaces=True) as server:
        kubeconfig = kubeconfig_as(server, tmp_path / "kubeconfig", ADMIN)

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
        assert refusals(server) == []
