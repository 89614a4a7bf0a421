"""Accounted-resource limits in live mode (issue #25 section 1, KAI's AccountedResource design): the
scheduler reads AccountedResources from the API server (the chart's RBAC lets it list and watch them),
places an H200-limited queue's pods on A100 nodes once its H200 GPUs are used, says which accounted limit
holds a pod that may only use H200 nodes (on the pod, and so in `kubectl kai why`), and writes each
queue's usage into its status (which `kubectl kai queues` shows). The chart's validating webhook refuses
what the design's rules refuse, and a queue naming a missing AccountedResource says so in its
`AccountedResourcesResolved` condition."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from identities import ADMIN, client_as, strict_server
from live_support import Live, run

from chart_support import NAMESPACE, RELEASE, armed_webhook_configurations
from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.k8s.admission.certificates import issue, service_dns_names
from kai_scheduler.k8s.admission.server import WebhookServer
from kai_scheduler.k8s.runtime.client import ACCOUNTED_RESOURCES, QUEUES, ApiStatusError
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.kubectl_plugin import queues, why
from kai_scheduler.kubectl_plugin.api_client import Cluster

H200 = {"nvidia.com/gpu.product": "H200"}


def gpu_h200() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v1alpha1",
        "kind": "AccountedResource",
        "metadata": {"name": "gpu-h200"},
        "spec": {"sources": [{"resourceName": "nvidia.com/gpu", "match": {"nodeLabels": H200}}]},
    }


def node_of(store: Store, pod: str) -> str | None:
    return (store.get("pods", pod, "default").get("spec") or {}).get("nodeName")


def unschedulable_message(store: Store, pod: str) -> str | None:
    for condition in (store.get("pods", pod, "default").get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return None


def accounted_status(store: Store, queue: str) -> Any:
    return (store.get("queues", queue).get("status") or {}).get("accountedResources")


def test_an_h200_limited_queue_places_on_a100_nodes(
    server: FakeApiServer, make_client: Callable[..., LightkubeClient]
) -> None:
    store = server.store
    store.create(gpu_h200())
    store.create(node_manifest("a-h200", gpus=4, labels=H200))
    store.create(node_manifest("b-a100", gpus=4, labels={"nvidia.com/gpu.product": "A100"}))
    team = queue_manifest("team-a")
    team["spec"]["accountedResources"] = [{"resourceRef": "gpu-h200", "limit": "1"}]
    store.create(team)
    for name in ("p-0", "p-1", "p-2"):
        store.create(pod_manifest(name, "team-a", gpus=1))
    # z-0 may only use H200 nodes and asks for 2 H200 GPUs: over the limit of 1 wherever it goes.
    store.create(pod_manifest("z-0", "team-a", gpus=2, node_selector=H200))
    names = ("p-0", "p-1", "p-2")
    used_one = {"gpu-h200": {"used": "1", "limit": "1"}}

    def settled() -> bool:
        return all(node_of(store, name) for name in names) and unschedulable_message(store, "z-0") is not None

    async def body() -> tuple[str, str]:
        async with Live(server) as live:
            await live.until(settled, timeout=20)
            # Written after a cycle that counted the bound pods (the one that decided counted none yet).
            await live.until(lambda: accounted_status(store, "team-a") == used_one, timeout=10)
        client = make_client(ADMIN)
        try:
            cluster = Cluster(client, "default")
            rows = queues.queue_tree(await queues.fetch(cluster))
            return queues.accounted_table(rows), why.text(await why.explain(cluster, "pod/z-0"))
        finally:
            await client.aclose()

    table, explained = run(body(), timeout=40)
    nodes = sorted(str(node_of(store, name)) for name in names)
    assert nodes == ["a-h200", "b-a100", "b-a100"]  # one H200 GPU (the limit), the rest on the A100 node
    assert node_of(store, "z-0") is None
    message = unschedulable_message(store, "z-0")
    assert message is not None
    assert (
        "OverLimit: queue team-a would exceed its accounted gpu-h200 limit (1 used + 2 requested > limit 1)"
        in (message)
    )
    assert table.splitlines()[1].split() == ["team-a", "gpu-h200", "1", "1"]
    assert "accounted gpu-h200 limit" in explained


def _serve_the_charts_validating_webhooks(server: FakeApiServer, directory: Path) -> WebhookServer:
    """The project's admission server behind the chart's ValidatingWebhookConfiguration, as the admission
    component serves it once its certificate is in (refusing, not ignoring, when a call fails)."""
    service = f"{RELEASE}-admission"
    material = issue(service_dns_names(service, NAMESPACE), dt.datetime.now(dt.UTC))
    (directory / "tls.crt").write_bytes(material.tls_crt)
    (directory / "tls.key").write_bytes(material.tls_key)
    bundle = base64.b64encode(material.ca_bundle).decode()
    for configuration in armed_webhook_configurations(bundle, ("ValidatingWebhookConfiguration",)):
        server.store.create(configuration)
    admission = WebhookServer(directory, host="127.0.0.1", port=0)
    admission.start()
    server.expose_service(NAMESPACE, service, 443, ("127.0.0.1", admission.port))
    return admission


def resolved_condition(store: Store, queue: str) -> tuple[str, str, str] | None:
    for condition in (store.get("queues", queue).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "AccountedResourcesResolved":
            return condition["status"], condition["reason"], condition["message"]
    return None


def test_the_webhook_checks_accounted_resources_and_a_queue_says_what_it_names_is_missing(
    tmp_path: Path,
) -> None:
    with strict_server(admission_webhooks=True, bookmark_interval=0.1) as server:
        admission = _serve_the_charts_validating_webhooks(server, tmp_path)
        store = server.store
        two_kinds = gpu_h200()
        two_kinds["metadata"]["name"] = "two-kinds"
        two_kinds["spec"]["sources"][0]["podAnnotation"] = {"key": "gpu-memory", "unit": "Mi"}
        twice = queue_manifest("twice")
        twice["spec"]["accountedResources"] = [
            {"resourceRef": "gpu-h200", "limit": "1"},
            {"resourceRef": "gpu-h200", "limit": "2"},
        ]
        team = queue_manifest("team-a")
        team["spec"]["accountedResources"] = [{"resourceRef": "gpu-h200", "limit": "-1"}]

        async def refusal(client: LightkubeClient, resource: Any, obj: dict[str, Any]) -> str:
            try:
                await client.create(resource, obj)
            except ApiStatusError as error:
                assert error.code == 400
                return error.message
            raise AssertionError(f"{obj['metadata']['name']} was admitted")

        async def body() -> tuple[str, str, Any, Any]:
            client = client_as(server, ADMIN)
            try:
                bad_source = await refusal(client, ACCOUNTED_RESOURCES, two_kinds)
                duplicate = await refusal(client, QUEUES, twice)
                # A queue may name an AccountedResource not made yet (applied in any order): the scheduler
                # blocks its jobs and says so on the queue until it exists.
                await client.create(QUEUES, team)
                async with Live(server) as live:
                    await live.until(lambda: resolved_condition(store, "team-a") is not None, timeout=20)
                    missing = resolved_condition(store, "team-a")
                    await client.create(ACCOUNTED_RESOURCES, gpu_h200())
                    await live.until(lambda: resolved_condition(store, "team-a") != missing, timeout=20)
                return bad_source, duplicate, missing, resolved_condition(store, "team-a")
            finally:
                await client.aclose()

        try:
            bad_source, duplicate, missing, resolved = run(body(), timeout=60)
        finally:
            admission.stop()
    assert bad_source == (
        'admission webhook "accountedresources.validate.kai.scheduler" denied the request: spec.sources[0]: '
        "set exactly one of resourceName, dra and podAnnotation (found: resourceName, podAnnotation)"
    )
    assert duplicate.startswith('admission webhook "queues.validate.kai.scheduler" denied the request: ')
    assert "duplicate resourceRef 'gpu-h200'" in duplicate
    assert missing == (
        "False",
        "AccountedResourceNotFound",
        "queue team-a names AccountedResource gpu-h200, which does not exist",
    )
    assert resolved == ("True", "Resolved", "every AccountedResource queue team-a names exists")
