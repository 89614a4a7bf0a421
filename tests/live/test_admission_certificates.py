"""The admission webhooks' own certificate (issue #13: an install that works with the chart's defaults),
against the fake API server: `kai-scheduler run` with the chart's admission flags and no Secret creates
it, writes its CA into both webhook configurations, and serves TLS that a real TLS client verifies against
that CA for the Service's name; a second replica serves the same certificate; renewal, CA rotation and
replicas that race are driven with an injected clock (no real waiting). The component runs as the chart's
admission ServiceAccount; the test's own setup goes straight into the store, as an administrator's."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import os
import socket
import ssl
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from child_process import running
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from identities import account, client_as, kubeconfig_as, refusals, strict_server
from lightkube.config.kubeconfig import KubeConfig
from live_support import in_thread, run
from ports import free_port, http_status

from chart_support import INSTALL, NAMESPACE, RELEASE, render_chart
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.admission.certificates import not_after
from kai_scheduler.k8s.admission.self_signed import (
    SECRETS,
    CertificateKeeper,
    SelfSignedTLS,
)
from kai_scheduler.k8s.admission.server import WebhookServer
from kai_scheduler.k8s.runtime.client import KubeClient, ResourceKind
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

SERVICE = f"{RELEASE}-admission"
SERVICE_NAMES = [
    SERVICE,
    f"{SERVICE}.{NAMESPACE}",
    f"{SERVICE}.{NAMESPACE}.svc",
    f"{SERVICE}.{NAMESPACE}.svc.cluster.local",
]


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout}s: {what}")
        time.sleep(0.05)


def _review(port: int, ca_pem: str, hostname: str) -> tuple[bytes, dict[str, Any]]:
    """An AdmissionReview POSTed as the API server does: TLS verified against `ca_pem` for `hostname`
    (the Service name the API server calls), over a connection to 127.0.0.1. The certificate the server
    presented (DER) and the review it answered."""
    context = ssl.create_default_context(cadata=ca_pem)  # verifies the chain and the host name
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}
    pod["spec"] = {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "i"}]}
    request = {"uid": "u-1", "operation": "CREATE", "object": pod}
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=hostname) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        head = (
            f"POST /validate--v1-pod HTTP/1.1\r\nHost: {hostname}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        tls.sendall(head.encode() + body.encode())
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 200 " in status_line, answer[:300]
    return der, json.loads(rest.partition(b"\r\n\r\n")[2])


def _ca_bundles(server: FakeApiServer) -> set[str]:
    """The caBundle of every webhook of both configurations, decoded (one value when they agree)."""
    bundles = set()
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for webhook in server.store.get(plural, SERVICE)["webhooks"]:
            encoded = webhook["clientConfig"].get("caBundle")
            bundles.add(base64.b64decode(encoded).decode() if encoded else "")
    return bundles


def _failure_policies(server: FakeApiServer) -> set[str]:
    return {
        webhook["failurePolicy"]
        for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
        for webhook in server.store.get(plural, SERVICE)["webhooks"]
    }


def test_the_charts_admission_makes_publishes_and_shares_its_certificate(tmp_path: Path) -> None:
    documents = [document for _, document in render_chart(INSTALL.values)]  # the README's install
    (deployment,) = [
        d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] == f"{RELEASE}-admission"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    configurations = [
        d
        for d in documents
        if d["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    ]
    with strict_server(INSTALL.values) as server:
        for configuration in configurations:
            server.store.create(configuration)
        # As installed: no CA, and failures ignored, so that nothing waits for the admission pods.
        assert _ca_bundles(server) == {""} and _failure_policies(server) == {"Ignore"}
        assert server.store.try_get("secrets", "kai-admission-tls", NAMESPACE) is None
        kubeconfig = kubeconfig_as(server, tmp_path / "kubeconfig", "admission")
        env = {**os.environ, "POD_NAMESPACE": NAMESPACE}

        def replica(webhook_port: int, metrics_port: int) -> list[str]:
            # The chart's arguments, with ports of the test's own (the last --webhook-port counts).
            ports = [f"--webhook-port={webhook_port}", f"--metrics-port={metrics_port}"]
            return [
                sys.executable,
                "-m",
                "kai_scheduler",
                *container["args"],
                *ports,
                "--kubeconfig",
                str(kubeconfig),
            ]

        first_port, first_metrics = free_port(), free_port()
        with running(replica(first_port, first_metrics), env=env) as first:
            _wait(
                lambda: http_status(f"http://127.0.0.1:{first_metrics}/readyz") == 200,
                60,
                "the first replica ready",
            )
            _wait(
                lambda: _failure_policies(server) == {"Fail"}, 30, "the CA published with failurePolicy Fail"
            )
            secret = server.store.get("secrets", "kai-admission-tls", NAMESPACE)
            assert secret["type"] == "kubernetes.io/tls"
            (ca_pem,) = _ca_bundles(server)  # both configurations, every webhook: one CA
            assert ca_pem == base64.b64decode(secret["data"]["ca.crt"]).decode()

            served, answer = _review(first_port, ca_pem, f"{SERVICE}.{NAMESPACE}.svc")
            assert answer["response"] == {"uid": "u-1", "allowed": True}
            assert served == x509.load_pem_x509_certificate(
                base64.b64decode(secret["data"]["tls.crt"])
            ).public_bytes(Encoding.DER)
            for name in SERVICE_NAMES:
                _review(first_port, ca_pem, name)
            with pytest.raises(ssl.SSLCertVerificationError):
                _review(first_port, ca_pem, "elsewhere.example")

            second_port, second_metrics = free_port(), free_port()
            with running(replica(second_port, second_metrics), env=env) as second:
                _wait(
                    lambda: http_status(f"http://127.0.0.1:{second_metrics}/readyz") == 200,
                    60,
                    "the second replica ready",
                )
                served_second, _ = _review(second_port, ca_pem, f"{SERVICE}.{NAMESPACE}.svc")
            assert second.returncode == 0, second.output()
            assert served_second == served  # the same certificate, from the same Secret
            after = server.store.get("secrets", "kai-admission-tls", NAMESPACE)
            assert after["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]
        assert first.returncode == 0, first.output()
        assert len(server.requests(verb="create", resource="secrets")) == 1
        assert refusals(server) == []


# --- renewal, CA rotation and races, with an injected clock -------------------------------------------

T0 = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
LIFETIME = dt.timedelta(days=30)
CA_LIFETIME = dt.timedelta(days=300)


class Clock:
    def __init__(self, start: dt.datetime = T0) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now


def _settings(**overrides: Any) -> SelfSignedTLS:
    values: dict[str, Any] = {
        "secret": "kai-admission-tls",
        "service": SERVICE,
        "namespace": NAMESPACE,
        "mutating_webhook_configuration": SERVICE,
        "validating_webhook_configuration": SERVICE,
        "cert_lifetime": LIFETIME,
        "ca_lifetime": CA_LIFETIME,
    }
    return SelfSignedTLS(**{**values, **overrides})


def _install_webhook_configurations(server: FakeApiServer) -> None:
    """Both webhook configurations as the chart installs them (no CA yet, failures ignored)."""
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        webhooks = [
            {
                "name": f"{hook}.kai.scheduler",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "clientConfig": {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": f"/{hook}"}},
            }
            for hook in ("pods", "queues")
        ]
        api = "admissionregistration.k8s.io/v1"
        server.store.create(
            {"apiVersion": api, "kind": kind, "metadata": {"name": SERVICE}, "webhooks": webhooks}
        )


def _served(port: int, ca_pem: str) -> bytes:
    der, _ = _review(port, ca_pem, f"{SERVICE}.{NAMESPACE}.svc")
    return der


def _pem_to_der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


def test_renewal_reaches_every_replica_and_the_server_without_a_restart(
    server: FakeApiServer, tmp_path: Path
) -> None:
    # The TLS client checks validity against the real time: the renewal falls on it.
    t0 = dt.datetime.now(dt.UTC) - LIFETIME * 0.7
    clock = Clock(t0)
    _install_webhook_configurations(server)

    async def body() -> None:
        async with client_as(server, "admission") as client:
            first = CertificateKeeper(client, _settings(), tmp_path / "first", clock=clock)
            second = CertificateKeeper(client, _settings(), tmp_path / "second", clock=clock)
            original = await first.sync()
            assert await second.sync() == original
            (ca_pem,) = _ca_bundles(server)
            webhook = WebhookServer(tmp_path / "second", host="127.0.0.1", port=0, reload_interval=0.05)
            webhook.start()
            try:
                assert await in_thread(_served, webhook.port, ca_pem) == _pem_to_der(original.tls_crt)
                # Half its life gone: nothing changes.
                clock.now = t0 + LIFETIME / 2
                assert await first.sync() == original
                version = server.store.get("secrets", "kai-admission-tls", NAMESPACE)["metadata"]
                # Less than a third left: the first replica renews; the CA stays, so the webhooks too.
                clock.now = t0 + LIFETIME * 0.7
                renewed = await first.sync()
                assert renewed.tls_crt != original.tls_crt
                assert renewed.ca_bundle == original.ca_bundle and renewed.ca_key == original.ca_key
                assert not_after(renewed.tls_crt) == (clock.now + LIFETIME).replace(microsecond=0)
                secret = server.store.get("secrets", "kai-admission-tls", NAMESPACE)
                assert secret["metadata"]["resourceVersion"] != version["resourceVersion"]
                assert _ca_bundles(server) == {ca_pem}
                # The second replica takes the renewal from the Secret (makes none of its own), and its
                # server, still running, serves it once its files change.
                assert await second.sync() == renewed
                new = _pem_to_der(renewed.tls_crt)

                async def serving_the_renewal() -> None:
                    while await in_thread(_served, webhook.port, ca_pem) != new:
                        await asyncio.sleep(0.05)

                await asyncio.wait_for(serving_the_renewal(), 10)
                assert webhook.reloader is not None and webhook.reloader.reloads >= 1
            finally:
                await webhook.aclose()
            assert len(server.requests(verb="update", resource="secrets")) == 1

    run(body(), timeout=60)


def test_a_ca_close_to_its_end_is_rotated_and_the_old_one_stays_trusted(
    server: FakeApiServer, tmp_path: Path
) -> None:
    clock = Clock()
    _install_webhook_configurations(server)

    async def body() -> None:
        async with client_as(server, "admission") as client:
            keeper = CertificateKeeper(client, _settings(), tmp_path, clock=clock)
            original = await keeper.sync()
            clock.now = T0 + CA_LIFETIME * 0.7
            rotated = await keeper.sync()
            assert rotated.ca_key != original.ca_key
            cas = x509.load_pem_x509_certificates(rotated.ca_bundle)
            old_ca = x509.load_pem_x509_certificate(original.ca_bundle)
            # The new CA signs, the old one is still trusted (replicas not yet reloaded serve its cert).
            assert len(cas) == 2 and cas[1] == old_ca and cas[0] != old_ca
            assert x509.load_pem_x509_certificate(rotated.tls_crt).issuer == cas[0].subject
            assert _ca_bundles(server) == {rotated.ca_bundle.decode()}
            # Once the old CA has expired, the next CA rotation leaves it out.
            clock.now = T0 + CA_LIFETIME * 0.7 + CA_LIFETIME * 0.7
            again = await keeper.sync()
            assert len(x509.load_pem_x509_certificates(again.ca_bundle)) == 2
            assert old_ca not in x509.load_pem_x509_certificates(again.ca_bundle)

    run(body(), timeout=60)


class _Together:
    """A client whose first read of the Secret waits until `count` callers have read it: replicas that
    start at the same moment, both finding no Secret."""

    def __init__(self, client: KubeClient, count: int) -> None:
        self._client = client
        self._waiting = count
        self._all_read = asyncio.Event()

    async def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> Any:
        try:
            return await self._client.get(kind, name, namespace)
        finally:
            if kind == SECRETS and not self._all_read.is_set():
                self._waiting -= 1
                if self._waiting == 0:
                    self._all_read.set()
                await self._all_read.wait()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_replicas_that_start_together_agree_on_one_certificate(server: FakeApiServer, tmp_path: Path) -> None:
    _install_webhook_configurations(server)

    async def body() -> None:
        async with client_as(server, "admission") as client:
            together: Any = _Together(client, 3)
            keepers = [
                CertificateKeeper(together, _settings(), tmp_path / str(i), clock=Clock()) for i in range(3)
            ]
            results = await asyncio.gather(*(keeper.sync() for keeper in keepers))
            assert len(server.requests(verb="create", resource="secrets")) == 3  # all three tried
            stored = server.store.get("secrets", "kai-admission-tls", NAMESPACE)
            assert {r.tls_crt for r in results} == {base64.b64decode(stored["data"]["tls.crt"])}
            files = {(tmp_path / str(i) / "tls.crt").read_bytes() for i in range(3)}
            assert files == {results[0].tls_crt}
            assert _ca_bundles(server) == {results[0].ca_bundle.decode()}

    run(body(), timeout=60)


def test_a_secret_someone_else_made_is_served_and_left_alone(server: FakeApiServer, tmp_path: Path) -> None:
    clock = Clock()
    _install_webhook_configurations(server)

    async def body() -> None:
        async with client_as(server, "admission") as client:
            # Someone else's: a certificate without the CA's key (one of ours, its key dropped).
            made = await CertificateKeeper(client, _settings(), tmp_path / "x", clock=clock).sync()
            data = made.secret_data()
            del data["ca.key"]
            _replace_secret(server, data)
            keeper = CertificateKeeper(client, _settings(), tmp_path / "y", clock=clock)
            clock.now = T0 + LIFETIME * 0.9  # due for renewal, were it ours
            material = await keeper.sync()
            assert material.tls_crt == made.tls_crt and material.ca_key is None
            assert (tmp_path / "y" / "tls.key").read_bytes() == made.tls_key
            assert not server.requests(verb="update", resource="secrets")
            # Broken and not ours: a clear error naming it, and still no write.
            _replace_secret(server, {})
            broken = CertificateKeeper(client, _settings(), tmp_path / "z", clock=clock)
            with pytest.raises(
                ValueError, match=rf"Secret {NAMESPACE}/kai-admission-tls: data.tls.crt is missing"
            ):
                await broken.sync()
            assert not server.requests(verb="update", resource="secrets")

    run(body(), timeout=60)


def _replace_secret(server: FakeApiServer, data: dict[str, str]) -> None:
    """The Secret kai-admission-tls made anew by someone else (an administrator), with `data`."""
    if server.store.try_get("secrets", "kai-admission-tls", NAMESPACE) is not None:
        server.store.delete("secrets", "kai-admission-tls", NAMESPACE)
    metadata = {"name": "kai-admission-tls", "namespace": NAMESPACE}
    server.store.create({"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "data": data})


def test_a_broken_secret_of_ours_is_made_again(server: FakeApiServer, tmp_path: Path) -> None:
    async def body() -> None:
        async with client_as(server, "admission") as client:
            keeper = CertificateKeeper(client, _settings(), tmp_path, clock=Clock())
            await keeper.sync()  # no webhook configurations: logged, the certificate is made anyway
            garbage = {"data": {"tls.crt": base64.b64encode(b"garbage").decode()}}
            server.store.patch("secrets", "kai-admission-tls", garbage, namespace=NAMESPACE)
            again = await keeper.sync()
            assert x509.load_pem_x509_certificate(again.tls_crt)
            stored = server.store.get("secrets", "kai-admission-tls", NAMESPACE)
            assert base64.b64decode(stored["data"]["tls.crt"]) == again.tls_crt

    run(body(), timeout=60)


def test_an_unreachable_api_server_is_retried_until_stop(
    server: FakeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The server's credentials on a fresh free port where nothing listens (not the port of a server
    # stopped here, which another server may have taken since).
    config = server.kubeconfig(service_account=account("admission"))
    config["clusters"][0]["cluster"]["server"] = f"{server.url.rsplit(':', 1)[0]}:{free_port()}"

    def retries() -> int:
        return sum("trying again" in record.getMessage() for record in caplog.records)

    async def body() -> None:
        async with LightkubeClient(KubeConfig.from_dict(config), timeout=1.0) as client:
            keeper = CertificateKeeper(client, _settings(), tmp_path)
            stop = asyncio.Event()
            task = asyncio.create_task(keeper.start(stop))
            while retries() < 2:  # failed, waited, failed again: retried, not given up
                assert not task.done()
                await asyncio.sleep(0.02)
            stop.set()
            assert await asyncio.wait_for(task, 5) is False

    with caplog.at_level(logging.ERROR, logger="kai_scheduler.k8s.admission.self_signed"):
        run(body(), timeout=30)


@pytest.mark.refusals_expected
def test_until_it_has_a_certificate_the_component_is_not_ready_and_serves_nothing(
    server: FakeApiServer, tmp_path: Path
) -> None:
    """`run_components` with the admission's own certificate: while the Secret cannot be read (its Role is
    not bound yet), /readyz says not ready (the Service sends the API server nowhere) and no webhook port
    is open; once it can, the webhooks serve and /readyz says so."""
    from kai_scheduler.framework.config import SchedulerConfig
    from kai_scheduler.k8s.components import RunOptions, run_components

    webhook_port, metrics_port = free_port(), free_port()
    options = RunOptions(
        components=frozenset({"admission"}),
        config=SchedulerConfig(),
        metrics_port=metrics_port,
        webhook_port=webhook_port,
        self_signed=_settings(),
    )
    readyz = f"http://127.0.0.1:{metrics_port}/readyz"

    _install_webhook_configurations(server)
    binding = server.store.get("rolebindings", f"{RELEASE}-admission", NAMESPACE)
    server.store.delete("rolebindings", f"{RELEASE}-admission", NAMESPACE)
    binding["metadata"] = {"name": f"{RELEASE}-admission", "namespace": NAMESPACE}

    async def body() -> None:
        async with client_as(server, "admission") as client:
            stop = asyncio.Event()
            task = asyncio.create_task(run_components(options, stop, client))
            try:
                while len(server.forbidden()) < 2:  # refused twice: retried, not given up
                    await asyncio.sleep(0.05)
                assert await in_thread(http_status, readyz) == 503
                with pytest.raises(OSError):
                    socket.create_connection(("127.0.0.1", webhook_port), timeout=1).close()
                server.store.create(binding)  # as `helm install` gets to it
                deadline = asyncio.get_running_loop().time() + 20
                while await in_thread(http_status, readyz) != 200:
                    assert asyncio.get_running_loop().time() < deadline, "never ready"
                    await asyncio.sleep(0.05)
                while len(_ca_bundles(server)) != 1 or _ca_bundles(server) == {""}:
                    await asyncio.sleep(0.05)
                (ca_pem,) = _ca_bundles(server)
                await in_thread(_served, webhook_port, ca_pem)
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)

    run(body(), timeout=60)
    assert {(r.code, r.verb, r.resource, r.name) for r in server.forbidden()} == {
        (403, "get", "secrets", "kai-admission-tls")
    }
