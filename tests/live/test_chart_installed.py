"""The chart installed with Helm's rendering into an API server that enforces what a real one does (issue
#20): RBAC per ServiceAccount, the admission webhooks called over TLS through their Service, status
subresources. Every component runs as its own process with its own token, as the Deployments say
(`installed_chart.py`); the workload is applied with the real `kubectl`, as a user does. Every values
combination the chart tests render (`chart_support.VARIANTS`) is installed.

The workload: whole-GPU pods, a gang (a PodGroup of 3), and two half-GPU pods that share a GPU through a
reservation pod (the binder makes it; `FakeGpuNodes` plays the node's device plugin with the reservation
ServiceAccount's token). It must end with every pod bound exactly once, the queue's status written by the
status controllers, every pod through the webhooks, and not one request refused (401 or 403) in the whole
run. Where the chart turns GPU sharing off, the half-GPU pods are refused at admission instead.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from installed_chart import InstalledChart
from live_support import FakeGpuNodes, eventually, run

from chart_support import NAMESPACE, VARIANTS
from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.api.admission_gate import QUEUE_ADMITTED_ANNOTATION
from kai_scheduler.k8s.admission.certificates import TLSMaterial, issue, service_dns_names

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

TEAM = "team"
WHOLE = [f"whole-{i}" for i in range(3)]
GANG = [f"gang-{i}" for i in range(3)]
HALF = [f"half-{i}" for i in range(2)]
SECRET = "kai-admission-tls"  # admission.tls.secretName


def workload(scheduler: str, pods: list[str], *, setup: bool = True, gated: bool = False) -> str:
    """What a researcher applies: (with `setup`) a namespace, queues and a PodGroup, and pods for
    `scheduler`, in namespace `team`, as YAML; with `gated`, the pods' queue opts in to queue admission
    gating."""
    documents: list[dict[str, Any]] = []
    if setup:
        vision = queue_manifest("vision", gpu=8, parent="research")
        if gated:
            vision["spec"]["admissionGating"] = True
        documents += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}},
            queue_manifest("research", gpu=8),
            vision,
            pod_group_manifest("gang", "vision", min_member=3, namespace=TEAM),
        ]
    for name in pods:
        shape: dict[str, Any] = {"fraction": 0.5} if name in HALF else {"gpus": 1}
        group = "gang" if name in GANG else None
        pod = pod_manifest(name, "vision", group=group, scheduler=scheduler, namespace=TEAM, **shape)
        pod.pop("status", None)
        documents.append(pod)
    return yaml.safe_dump_all(documents)


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def bound_pods(server: FakeApiServer) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in server.store.list("pods", TEAM)
        if p["spec"].get("nodeName")
    }


def refused(server: FakeApiServer) -> list[str]:
    return [
        f"{r.code} {r.user} {r.verb} {r.resource}/{r.subresource or ''} {r.namespace or ''}/{r.name or ''}"
        for r in server.forbidden()
    ]


def _dig(values: dict[str, Any], *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(values, dict) or key not in values:
            return default
        values = values[key]
    return values


# --- what a cluster has besides the chart: cert-manager, the Prometheus operator's CRDs, user Secrets --


def _crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    """A CRD as an operator's chart installs it (any content: the schema is theirs, not ours)."""
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
            ],
        },
    }


OPERATOR_CRDS = [
    _crd("cert-manager.io", "Issuer", "issuers"),
    _crd("cert-manager.io", "Certificate", "certificates"),
    _crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
]


def _tls_secret(name: str, material: TLSMaterial) -> dict[str, Any]:
    data = {key: value for key, value in material.secret_data().items() if key != "ca.key"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "type": "kubernetes.io/tls",
        "data": data,
    }


def play_cert_manager(server: FakeApiServer) -> None:
    """What cert-manager does for the chart's Certificates: a serving certificate in the Certificate's
    Secret, and (its CA injector) the CA into the webhook configurations that ask for it."""
    store = server.store
    for certificate in store.list("certificates", NAMESPACE):
        material = issue(certificate["spec"]["dnsNames"], dt.datetime.now(dt.UTC))
        store.create(_tls_secret(certificate["spec"]["secretName"], material))
        source = f"{NAMESPACE}/{certificate['metadata']['name']}"
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            for configuration in store.list(kind):
                if (
                    configuration["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
                    == source
                ):
                    for webhook in configuration["webhooks"]:
                        webhook["clientConfig"]["caBundle"] = base64.b64encode(material.ca_bundle).decode()
                    store.update(configuration)


# --- the test ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_installed_chart_binds_every_pod_once_with_no_request_refused(
    variant: str, tmp_path: Path
) -> None:
    overrides = dict(VARIANTS[variant])
    material = None
    if _dig(overrides, "admission", "caBundle"):
        # A user who brings a certificate gives its CA as caBundle and its pair in the Secret.
        material = issue(service_dns_names("kai-scheduler-admission", NAMESPACE), dt.datetime.now(dt.UTC))
        ca = base64.b64encode(material.ca_bundle).decode()
        overrides["admission"] = {**overrides["admission"], "caBundle": ca}
    admission = _dig(overrides, "admission", "enabled", default=True)
    sharing = admission is False or _dig(overrides, "admission", "gpuSharing", default=True)
    reserving = _dig(overrides, "resourceReservation", "enabled", default=True)
    reservation_namespace = _dig(
        overrides, "resourceReservation", "namespace", default="kai-resource-reservation"
    )
    reservation_account = _dig(
        overrides, "resourceReservation", "serviceAccount", default="kai-resource-reservation"
    )
    scheduler = _dig(overrides, "schedulerName", default="kai-scheduler")
    gated = _dig(overrides, "queueAdmissionGating", "enabled", default=False)
    names = WHOLE + GANG + (HALF if sharing else [])

    with FakeApiServer(
        strict=True, tls=True, admission_webhooks=True, kubelet=True, bookmark_interval=0.2
    ) as server:
        store = server.store
        for name in ("n1", "n2"):
            store.create(node_manifest(name, gpus=4, gpu_memory=40000))
        for crd in OPERATOR_CRDS:
            store.create(crd)
        chart = InstalledChart(server, tmp_path / "chart", overrides)
        chart.install()
        if material is not None:
            store.create(_tls_secret(SECRET, material))
        if _dig(overrides, "admission", "certManager", "enabled"):
            play_cert_manager(server)
        admin = server.write_kubeconfig(tmp_path / "admin.kubeconfig")

        async def body() -> None:
            with chart.running():
                await chart.until_ready()
                if admission:
                    # The webhooks serve once their certificate's CA is in both configurations.
                    await eventually(lambda: _webhooks_armed(server), timeout=60)
                reserver = (reservation_namespace, reservation_account)
                gpus = FakeGpuNodes(server, reservation_namespace, service_account=reserver)
                async with gpus if reserving else contextlib.nullcontext():
                    applied = kubectl(
                        admin, "apply", "-f", "-", stdin=workload(scheduler, names, gated=gated)
                    )
                    assert applied.returncode == 0, applied.stderr
                    if not sharing:  # the validating webhook refuses shared-GPU pods
                        half = kubectl(
                            admin, "apply", "-f", "-", stdin=workload(scheduler, HALF, setup=False)
                        )
                        assert half.returncode != 0 and "gpu" in half.stderr.lower(), half.stderr

                    def done() -> bool:
                        chart.alive()
                        return sorted(bound_pods(server)) == sorted(names)

                    await eventually(done, timeout=90)
                    await eventually(lambda: _queue_status_written(server), timeout=60)

        run(body(), timeout=240)
        # Where the chart renders KAI's SchedulingShard default, the scheduler runs its configuration.
        if any(document["kind"] == "SchedulingShard" for document in chart.documents):
            schedulers = [p for p in chart.pods if p.deployment.endswith(("-scheduler", "-all-in-one"))]
            assert schedulers
            for pod in schedulers:
                assert pod.child is not None and "SchedulingShard default: read" in pod.child.stderr, pod.name
        counts = Counter(b.name for b in store.binds if b.namespace == TEAM)
        assert counts == Counter({name: 1 for name in names})
        assert refused(server) == []
        if admission:
            # Each pod went through the webhooks over TLS: the mutating one set the GPU runtime class.
            calls = [c for c in server.webhook_calls() if c.review["request"]["kind"]["kind"] == "Pod"]
            assert calls and [c.error for c in calls if c.error] == []
            runtime = {
                p["metadata"]["name"]: p["spec"].get("runtimeClassName") for p in store.list("pods", TEAM)
            }
            assert runtime == {name: "nvidia" for name in names}
        if gated:
            # Queue admission gating: every pod was gated by the webhook, and admitted (the gate removed,
            # the admission stamped) by the scheduler, within the 8 GPUs of its queue.
            admitted = {
                p["metadata"]["name"]: QUEUE_ADMITTED_ANNOTATION in p["metadata"].get("annotations", {})
                for p in store.list("pods", TEAM)
            }
            assert admitted == {name: True for name in names}


def _webhooks_armed(server: FakeApiServer) -> bool:
    kinds = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
    configurations = [c for kind in kinds for c in server.store.list(kind)]
    return bool(configurations) and all(
        webhook["clientConfig"].get("caBundle")
        for configuration in configurations
        for webhook in configuration.get("webhooks") or []
    )


def _queue_status_written(server: FakeApiServer) -> bool:
    status = server.store.get("queues", "vision").get("status") or {}
    allocated = status.get("allocated") or {}
    return str(allocated.get("nvidia.com/gpu", "")) not in ("", "0")
