"""Input a KAI user applies never stops a run for the wrong reason: Namespaces are read (their labels are
what namespaceSelectors match), objects of kinds the scheduler does not model are skipped with one
warning, and a pod that waits for a template only such an object's controller makes is named."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.objects import Namespace
from kai_scheduler.sim.input_checks import warnings
from kai_scheduler.sim.loader import load_manifests

# KAI's own DRA example (docs/dra/gpu-imex-pod.yaml, v0.17.0), as written but for the queue.
IMEX_EXAMPLE = """
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: imex-channel-injection
spec:
  numNodes: 1
  channel:
    resourceClaimTemplate:
      name: imex-channel-0
---
apiVersion: v1
kind: Pod
metadata:
  name: gpu-imex-pod
  labels:
    kai.scheduler/queue: q
spec:
  schedulerName: kai-scheduler
  containers:
    - name: main
      image: ubuntu
      resources:
        limits:
          nvidia.com/gpu: "1"
        claims:
        - name: imex-channel-0
  resourceClaims:
  - name: imex-channel-0
    resourceClaimTemplateName: imex-channel-0
"""


def write(folder: Path, name: str, documents: list[dict[str, Any]], extra: str = "") -> str:
    path = folder / name
    text = yaml.safe_dump_all(documents, sort_keys=False)
    path.write_text(text + ("---\n" + textwrap.dedent(extra).lstrip() if extra else ""))
    return str(path)


def service(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"}}


def test_objects_of_unmodelled_kinds_are_skipped_and_listed_in_one_warning(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "in.yaml",
        [node_manifest("n"), queue_manifest("q"), service("a"), service("b"), pod_manifest("p")],
        IMEX_EXAMPLE.split("---")[0],
    )
    loaded = load_manifests([path])
    assert [entry.obj.kind for entry in loaded] == ["Node", "Queue", "Pod"]
    assert [entry.ref for entry in loaded.skipped] == [
        "Service default/a",
        "Service default/b",
        "ComputeDomain imex-channel-injection",
    ]
    starts = [i for i, line in enumerate(Path(path).read_text().splitlines(), 1) if line.startswith("api")]
    assert warnings(loaded, loaded.skipped) == [
        "skipped 3 objects of kinds the scheduler does not model: "
        "resource.nvidia.com/v1beta1 ComputeDomain x1 (imex-channel-injection); v1 Service x2 (default/a, "
        f"default/b); the first is in {path} document 3 (line {starts[2]})"
    ]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"apiVersion": "v1", "kind": "Nod", "metadata": {"name": "n"}}, "unsupported kind v1 Nod"),
        ({"apiVersion": "scheduling.run.ai/v1", "kind": "Queue", "metadata": {"name": "q"}}, "apiVersion"),
        ({"kind": "ComputeDomain", "metadata": {"name": "c"}}, "apiVersion"),
        ({"apiVersion": "x/v1", "metadata": {"name": "c"}}, "kind: required field is missing"),
    ],
    ids=["a typo of a modelled kind", "a modelled kind's wrong version", "no apiVersion", "no kind"],
)
def test_what_is_a_typo_rather_than_another_kind_still_stops_the_run(
    tmp_path: Path, doc: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ManifestError, match=expected):
        load_manifests([write(tmp_path, "in.yaml", [doc])])


def test_a_pod_waiting_for_a_template_a_skipped_object_makes_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "in.yaml", [node_manifest("n"), queue_manifest("q")], IMEX_EXAMPLE)
    loaded = load_manifests([path])
    assert warnings(loaded, loaded.skipped)[1:] == [
        "Pod default/gpu-imex-pod waits: its ResourceClaimTemplate default/imex-channel-0 is made by "
        "ComputeDomain imex-channel-injection's controller, and ComputeDomain is not modelled here (give "
        "the template in the input to schedule the pod)"
    ]


def test_a_template_given_in_the_input_is_no_warning(tmp_path: Path) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "imex-channel-0", "namespace": "default"},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "channel", "exactly": {"deviceClassName": "c"}}]}}
        },
    }
    path = write(tmp_path, "in.yaml", [node_manifest("n"), queue_manifest("q"), template], IMEX_EXAMPLE)
    loaded = load_manifests([path])
    assert len(warnings(loaded, loaded.skipped)) == 1  # the skipped ComputeDomain only


def _affinity_to_db_in_gold_namespaces() -> dict[str, Any]:
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "namespaceSelector": {"matchLabels": {"tier": "gold"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _namespace_case(tmp_path: Path, labels: dict[str, str]) -> str:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "data", "labels": labels}}
    documents = [
        namespace,
        node_manifest("n0"),
        node_manifest("n1"),
        queue_manifest("q"),
        pod_manifest("db", namespace="data", labels={"app": "db"}, node_name="n1", phase="Running"),
        pod_manifest("app", affinity=_affinity_to_db_in_gold_namespaces()),
    ]
    return write(tmp_path, f"ns-{len(labels)}.yaml", documents)


def _simulate(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kai_scheduler", "simulate", path, "--output", "json"],
        capture_output=True,
        text=True,
        check=False,
    )


def test_namespaces_are_read_and_give_namespace_selectors_their_labels(tmp_path: Path) -> None:
    loaded = load_manifests([_namespace_case(tmp_path, {"tier": "gold"})])
    assert isinstance(loaded[0].obj, Namespace)
    assert loaded[0].obj.metadata.labels == {"tier": "gold"}
    gold = json.loads(_simulate(_namespace_case(tmp_path, {"tier": "gold"})).stdout)
    plain = json.loads(_simulate(_namespace_case(tmp_path, {})).stdout)
    binds = {(d["pod"], d["node"]) for d in gold["decisions"] if d["type"] == "bind"}
    assert binds == {("default/app", "n1")}
    assert [d for d in plain["decisions"] if d["type"] == "bind"] == []


def test_the_command_line_warns_and_runs_on(tmp_path: Path) -> None:
    other = pod_manifest("other", annotations={"kai.scheduler/preemtion-delay": "2m"})
    path = write(
        tmp_path, "in.yaml", [node_manifest("n"), queue_manifest("q"), service("web"), other], IMEX_EXAMPLE
    )
    completed = _simulate(path)
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    lines = completed.stderr.splitlines()
    assert lines[0].startswith(
        "kai-scheduler: warning: skipped 2 objects of kinds the scheduler does not model"
    )
    assert lines[1].startswith("kai-scheduler: warning: Pod default/gpu-imex-pod waits: its ResourceClaim")
    assert lines[2].endswith(
        '"kai.scheduler/preemtion-delay" is not a key KAI reads; '
        'did you mean "kai.scheduler/preemption-delay"?'
    )
    assert len(lines) == 3
    result = json.loads(completed.stdout)
    binds = [d["pod"] for d in result["decisions"] if d["type"] == "bind"]
    assert binds == ["default/other"]
