"""The Helm chart under deploy/helm/kai-scheduler, linted and rendered by Helm itself (helm-python-sdk
embeds Helm 4's Go library: the same engine, value coalescing and lint rules as `helm install`), which
runs in a child process of its own (`tests/helm_engine.py`, see there why).

Each values combination is rendered once per test process (`render_chart` is cached), and the documents
it returns are shared: copy one before changing it. The release and namespace are those of the README's
install command, which `readme_install` reads from the README itself.
"""

from __future__ import annotations

import atexit
import functools
import json
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "kai-scheduler"
README = ROOT / "README.md"

Rendered = list[tuple[str, dict[str, Any]]]


class HelmEngine:
    """The child process that runs Helm: started on first use, ended when the test process ends."""

    def __init__(self) -> None:
        self._child: subprocess.Popen[str] | None = None

    def ask(self, op: str, **arguments: Any) -> Any:
        if self._child is None:
            self._child = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("helm_engine.py"))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            atexit.register(self._child.kill)
        assert self._child.stdin is not None and self._child.stdout is not None
        self._child.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self._child.stdin.flush()
        line = self._child.stdout.readline()
        if not line:
            raise AssertionError(f"Helm's engine ended (exit status {self._child.wait()}) on {op}")
        reply = json.loads(line)
        if "error" in reply:
            raise AssertionError(f"Helm's engine, {op}: {reply['error']}")
        return reply["result"]


ENGINE = HelmEngine()


@dataclass(frozen=True)
class HelmChart:
    """The chart as Helm loads it: its default values and its templates ({"name", "data"} each)."""

    path: Path
    values: dict[str, Any]
    templates: list[dict[str, Any]]

    def render(self, values: Mapping[str, Any], *, name: str, namespace: str) -> dict[str, str]:
        """Template path -> rendered text, as `helm template`."""
        rendered: dict[str, str] = ENGINE.ask(
            "render", chart=str(self.path), values=dict(values), release=name, namespace=namespace
        )
        return rendered


@dataclass(frozen=True)
class InstallCommand:
    release: str
    chart: Path
    namespace: str
    values: dict[str, Any]


def readme_install() -> InstallCommand:
    """The README's `helm install` command: release, chart, namespace and its `--set` values (parsed by
    Helm's own --set parser). A flag this does not know fails, so the README cannot drift from it."""
    lines = README.read_text().splitlines()
    (start,) = [index for index, line in enumerate(lines) if line.startswith("helm install ")]
    command = ""
    for line in lines[start:]:
        code = line.split(" #", 1)[0].rstrip()  # the README comments its flags
        command += " " + code.removesuffix("\\")
        if not code.endswith("\\"):
            break
    words = shlex.split(command)
    assert words[:2] == ["helm", "install"], words
    positional: list[str] = []
    namespace = "default"
    sets: list[str] = []
    rest = iter(words[2:])
    for word in rest:
        if word in ("-n", "--namespace"):
            namespace = next(rest)
        elif word == "--set":
            sets.append(next(rest))
        elif word == "--create-namespace":
            pass
        elif word.startswith("-"):
            raise AssertionError(f"README's helm install: teach tests/chart_support.py the flag {word}")
        else:
            positional.append(word)
    release, chart = positional
    # Helm parses each --set into the same map, in order: as one comma-separated expression.
    values = ENGINE.ask("parse_set", expression=",".join(sets)) if sets else {}
    return InstallCommand(release, ROOT / chart, namespace, values)


INSTALL = readme_install()
RELEASE = INSTALL.release
NAMESPACE = INSTALL.namespace


# A KAI v0.17 user's values file, each key from KAI v0.17.0's docs or its chart's example values: the
# release workflow's registry and tag (the README's install), docs/gpu-sharing (global.gpuSharing),
# docs/highavailability (global.leaderElection, global.requireDefaultPodAntiAffinityTerm), docs/operator
# (global.jsonLog), deployments/kai-scheduler/examples/custom-plugins-actions-values.yaml (placement
# strategy, plugins and actions but its made-up `mycustomplugin` and `mycustomaction`), docs/plugins/
# reflectjoborder.md (scheduler.plugins), docs/staleness-grace-period (the scheduler flag through
# scheduler.args) and the chart's own defaults for defaultQueue, defaultPriorityClasses and prometheus.
KAI_V017_VALUES: dict[str, Any] = {
    "global": {
        "registry": "ghcr.io/kai-scheduler/kai-scheduler",
        "tag": "v0.17.0",
        "gpuSharing": True,
        "leaderElection": True,
        "requireDefaultPodAntiAffinityTerm": True,
        "jsonLog": True,
    },
    "scheduler": {
        "placementStrategy": "spread",
        "plugins": {
            "elastic": {"enabled": False},
            "predicates": {"priority": 50},
            "proportion": {"arguments": {"kValue": "2.0"}},
            "gpuspread": {"enabled": False},
            "gpupack": {"enabled": True},
            "reflectjoborder": {"enabled": True},
        },
        "actions": {"consolidation": {"enabled": False}, "allocate": {"priority": 600}},
        "args": {"default-staleness-grace-period": "2m"},
    },
    "defaultShard": {"enabled": True},
    "defaultQueue": {"createDefaultQueue": True},
    "defaultPriorityClasses": {"enabled": True},
    "prometheus": {"enabled": False},
}

# The values combinations the chart tests render (tests/unit/k8s/test_chart.py) and install
# (tests/live/test_chart_installed.py).
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "all-in-one": {"allInOne": True},
    "cert-manager": {
        "admission": {"certManager": {"enabled": True}},
        "metrics": {"serviceMonitor": {"enabled": True}},
    },
    "minimal": {
        "admission": {"enabled": False},
        "leaderElection": False,
        "priorityClasses": {"enabled": False},
        "defaultQueue": {"enabled": False},
    },
    "all-in-one-minimal": {"allInOne": True, "admission": {"enabled": False}, "leaderElection": False},
    "cluster-autoscaling": {"clusterAutoscaling": True},
    "all-in-one-cluster-autoscaling": {"allInOne": True, "clusterAutoscaling": True, "leaderElection": False},
    "fake-gpus": {"resourceReservation": {"enabled": False}},
    "all-in-one-fake-gpus": {"allInOne": True, "resourceReservation": {"enabled": False}},
    "no-gpu-sharing": {"admission": {"gpuSharing": False}},
    "admission-gating": {"queueAdmissionGating": {"enabled": True, "reservationTimeout": "5m"}},
    "cdi": {"binder": {"cdiEnabled": True}},
    "all-in-one-cdi": {"allInOne": True, "binder": {"cdiEnabled": True}},
    "all-in-one-no-gpu-sharing": {"allInOne": True, "admission": {"gpuSharing": False}},
    "custom-images": {
        "clusterAutoscaling": True,
        "resourceReservation": {
            "namespace": "gpu-reservations",
            "serviceAccount": "gpu-reserver",
            "image": "registry.example/kai-scheduler:dev",
            "timeout": "2m",
        },
        "scaleAdjuster": {"scalingPodImage": "mirror.example/pause:3.9"},
    },
    "custom": {
        "admission": {"caBundle": "Y2E=", "failurePolicy": "Ignore"},
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
        ],
        "imagePullSecrets": [{"name": "registry"}],
        "scheduler": {"replicas": 2, "config": {"actions": "allocate, reclaim"}},
        "placementStrategy": "spread",
        "schedulerName": "gpu-scheduler",
    },
    "shards": {
        "nodePoolLabelKey": "example.com/pool",
        "scheduler": {
            "config": {"actions": "allocate, reclaim"},
            "shards": [
                {"name": "default"},
                {
                    "name": "a100",
                    "partitionLabelValue": "a100",
                    "placementStrategy": "spread",
                    "config": {"queueDepthPerAction": {"allocate": 25}},
                },
            ],
        },
    },
    # The README's `helm install` (release and namespace are the README's for every variant).
    "readme-install": INSTALL.values,
    # A values file written for KAI v0.17's chart: the keys its docs have a user set.
    "kai-v0.17": KAI_V017_VALUES,
}


@functools.cache
def chart() -> HelmChart:
    loaded = ENGINE.ask("chart", chart=str(CHART))
    return HelmChart(CHART, loaded["values"], loaded["templates"])


def unknown_values(overrides: Mapping[str, Any], defaults: Mapping[str, Any], path: str = "") -> list[str]:
    """Keys of `overrides` that values.yaml does not have (Helm would take them silently: a typo in a test's
    values would test nothing). Below a map that is empty by default (nodeSelector, scheduler.config) any
    key goes."""
    unknown = []
    for key, value in overrides.items():
        if key not in defaults:
            unknown.append(f"{path}{key}")
        elif isinstance(value, Mapping) and isinstance(defaults[key], dict) and defaults[key]:
            unknown.extend(unknown_values(value, defaults[key], f"{path}{key}."))
    return unknown


def _key(overrides: Mapping[str, Any] | None) -> str:
    return json.dumps(overrides or {}, sort_keys=True)


@functools.cache
def _render(key: str, release: str, namespace: str) -> tuple[Rendered, str]:
    overrides = json.loads(key)
    assert unknown_values(overrides, chart().values) == [], "values not in values.yaml"
    manifests = chart().render(overrides, name=release, namespace=namespace)
    documents: Rendered = []
    notes = ""
    for path in sorted(manifests):
        template = path.rsplit("/", 1)[-1]
        if template == "NOTES.txt":
            notes = manifests[path]
            continue
        for document in yaml.safe_load_all(manifests[path]):
            if document is not None:
                documents.append((template, document))
    return documents, notes


def render_chart(
    overrides: Mapping[str, Any] | None = None, *, release: str = RELEASE, namespace: str = NAMESPACE
) -> Rendered:
    """(template file, document) for every manifest `helm template` would print, in file order."""
    return _render(_key(overrides), release, namespace)[0]


def armed_webhook_configurations(ca_bundle: str, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """The chart's webhook configurations of `kinds` as the admission component leaves them once it serves
    (its CA in each webhook), refusing rather than ignoring when a call fails."""
    configurations = []
    for _, document in render_chart():
        if document.get("kind") in kinds:
            configuration = json.loads(json.dumps(document))
            for hook in configuration["webhooks"]:
                hook["clientConfig"]["caBundle"] = ca_bundle
                hook["failurePolicy"] = "Fail"
            configurations.append(configuration)
    return configurations


def render_notes(overrides: Mapping[str, Any] | None = None) -> str:
    """NOTES.txt as `helm install` prints it."""
    return _render(_key(overrides), RELEASE, NAMESPACE)[1]


@functools.cache
def _lint(key: str, chart: str) -> tuple[str, ...]:
    report = ENGINE.ask("lint", chart=chart, values=json.loads(key), namespace=NAMESPACE)
    # Severity 2 is a warning, 3 an error (also in "errors"); 1 is advice such as "icon is recommended".
    findings = [message["error"] for message in report["messages"] if message["severity"] >= 2]
    return (*findings, *(error for error in report["errors"] if error not in findings))


def lint_chart(overrides: Mapping[str, Any] | None = None, *, chart: Path = CHART) -> list[str]:
    """What `helm lint --strict` finds (warnings and errors) in `chart` (ours unless said) with these
    values; [] when clean."""
    return list(_lint(_key(overrides), str(chart)))
