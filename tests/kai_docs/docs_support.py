"""Running KAI v0.17's documentation examples the way a user runs them: `kai-scheduler simulate` on the
manifests the doc applies, next to the cluster the doc assumes.

Each test holds its example's manifests as data: the objects the doc has a user apply (names, labels,
annotations, resources: the API, not the doc's prose), the same content as in KAI v0.17.0 (commit
`f218c69b`) at the path the test names, without the files' license headers and comments. What the doc
only assumes (nodes, the queues a fresh install creates, a Topology) the test adds and says so.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kai_scheduler.cli import main

KAI_COMMIT = "f218c69b"  # KAI v0.17.0

# What a fresh KAI install creates (docs/quickstart/default-queues.yaml): every example that names
# `default-queue` assumes it.
DEFAULT_QUEUES = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: default-parent-queue
spec:
  resources:
    cpu:
      limit: -1
      overQuotaWeight: 1
      quota: 0
    gpu:
      limit: -1
      overQuotaWeight: 1
      quota: 0
    memory:
      limit: -1
      overQuotaWeight: 1
      quota: 0
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: default-queue
spec:
  parentQueue: default-parent-queue
  resources:
    cpu:
      limit: -1
      overQuotaWeight: 1
      quota: 0
    gpu:
      limit: -1
      overQuotaWeight: 1
      quota: 0
    memory:
      limit: -1
      overQuotaWeight: 1
      quota: 0
"""

ARRIVAL = "simulation.kai.scheduler/arrival"


@dataclass(frozen=True)
class DocRun:
    """A `simulate --output json` run: the result document and the warnings printed on stderr."""

    document: dict[str, Any]
    warnings: list[str]

    @property
    def pods(self) -> dict[str, dict[str, Any]]:
        """By name (the examples' pod names are unique across namespaces)."""
        return {p["name"]: p for p in self.document["pods"]}

    @property
    def groups(self) -> dict[str, dict[str, Any]]:
        return {g["name"]: g for g in self.document["podGroups"]}

    @property
    def queues(self) -> dict[str, dict[str, Any]]:
        return {q["name"]: q for q in self.document["queues"]}

    def group_of(self, pod: str) -> dict[str, Any]:
        name = self.pods[pod]["podGroup"].split("/", 1)[1]
        return self.groups[name]

    def decisions(self, **match: Any) -> list[dict[str, Any]]:
        return [d for d in self.document["decisions"] if all(d.get(k) == v for k, v in match.items())]

    def running(self) -> dict[str, str]:
        """Running pods by name -> node."""
        return {p["name"]: p["node"] for p in self.document["pods"] if p["phase"] == "Running"}

    def pending(self) -> set[str]:
        return {p["name"] for p in self.document["pods"] if p["phase"] == "Pending"}


def simulate(tmp_path: Path, *manifests: str, config: str | None = None, **flags: str) -> DocRun:
    """`kai-scheduler simulate` on the manifests (one file each, in order), as a user runs it. `flags`:
    `until="90s"`, `cycles="3"`, ..."""
    folder, paths = _written(tmp_path, "run", manifests)
    args = ["simulate", *paths, "--output", "json", "--out", str(folder / "result.json")]
    if config is not None:
        config_path = folder / "config.yaml"
        config_path.write_text(config, encoding="utf-8")
        args += ["--config", str(config_path)]
    for flag, value in flags.items():
        args += [f"--{flag.replace('_', '-')}", value]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        status = main(args)
    assert status == 0, stderr.getvalue()
    document = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    return DocRun(document, [line for line in stderr.getvalue().splitlines() if line])


def applied_at(seconds: int, manifests: str) -> str:
    """The manifests applied `seconds` into the run (the doc's "after X is running, apply Y"): the same
    objects with the simulator's arrival annotation, which a real cluster ignores."""
    documents = [d for d in yaml.safe_load_all(manifests) if d]
    for document in documents:
        document.setdefault("metadata", {}).setdefault("annotations", {})[ARRIVAL] = f"{seconds}s"
    return yaml.safe_dump_all(documents, sort_keys=False)


def with_scheduler_name(manifests: str) -> str:
    """The manifests with `schedulerName: kai-scheduler` on every pod and pod template: the one field some
    of KAI's doc snippets leave out, without which KAI leaves the pods to the default scheduler."""
    documents = [d for d in yaml.safe_load_all(manifests) if d]
    for document in documents:
        for spec in _pod_specs(document):
            spec["schedulerName"] = "kai-scheduler"
    return yaml.safe_dump_all(documents, sort_keys=False)


def _pod_specs(node: Any) -> Iterable[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("kind") == "Pod" and isinstance(node.get("spec"), dict):
            yield node["spec"]
        for key, value in node.items():
            is_template = key == "template" or key.endswith("Template")  # LWS: leaderTemplate, workerTemplate
            if is_template and isinstance(value, dict) and isinstance(value.get("spec"), dict):
                yield value["spec"]
            yield from _pod_specs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _pod_specs(item)


def nodes(*names: str, labels: dict[str, dict[str, str]] | None = None, **allocatable: str) -> str:
    """Nodes as the test's cluster has them: `allocatable` the same on each (cpu, memory, pods,
    nvidia.com/gpu), `labels` per node name."""
    documents = []
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", **allocatable}
    for name in names:
        node_labels = {"kubernetes.io/hostname": name, **(labels or {}).get(name, {})}
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": node_labels},
                "status": {"allocatable": resources},
            }
        )
    return yaml.safe_dump_all(documents, sort_keys=False)


def fake_gpu_nodes(count: int = 2, gpus: int = 8) -> str:
    """A fake GPU node set as KAI's quickstart assumes (the GPU operator's labels and allocatable):
    `count` nodes of `gpus` 40 GiB GPUs each."""
    names = [f"gpu-node-{i}" for i in range(count)]
    gpu_labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.memory": "40960"}
    labels = {n: {**gpu_labels, "nvidia.com/gpu.count": str(gpus)} for n in names}
    return nodes(*names, labels=labels, **{"nvidia.com/gpu": str(gpus)})


def refused(tmp_path: Path, *manifests: str) -> str:
    """`kai-scheduler simulate` on manifests it refuses: exit status 2 and the one-line error."""
    folder, paths = _written(tmp_path, "refused", manifests)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        status = main(["simulate", *paths, "--output", "json", "--out", str(folder / "result.json")])
    lines = [line for line in stderr.getvalue().splitlines() if "error" in line]
    assert status == 2 and len(lines) == 1, stderr.getvalue()
    return lines[0]


def _written(tmp_path: Path, kind: str, manifests: tuple[str, ...]) -> tuple[Path, list[str]]:
    """A new folder under `tmp_path` with one file per manifest text, and the files' paths in order."""
    folder = tmp_path / f"{kind}-{len(list(tmp_path.glob(f'{kind}-*')))}"
    folder.mkdir()
    paths = []
    for index, text in enumerate(manifests):
        path = folder / f"{index:02d}.yaml"
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    return folder, paths
