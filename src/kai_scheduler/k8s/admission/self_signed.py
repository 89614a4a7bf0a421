"""The admission webhooks' certificate when the install provides none (the chart's default: no
cert-manager, no `caBundle`): kept in a Secret that the first replica creates, written for the server as
`tls.crt`/`tls.key` in a directory of its own (the server reloads them when they change), renewed before
it expires, and its CA published in the webhook configurations' `caBundle`.

Replicas agree through the Secret: it is created once (a replica that loses the race, 409, reads the
winner's), renewed with the resourceVersion it was read at (a replica that loses that race reads the
renewal), and every replica re-reads it every `check_interval`, so a renewal made by one reaches all of them
without a restart. Every pass also makes sure that both webhook configurations carry the CA bundle and the
failure policy: the chart installs them with `failurePolicy: Ignore` and no CA, so that nothing in the
cluster is refused while no replica serves yet, and the policy asked for (KAI's: Fail) starts with the CA.
A `helm upgrade` that puts the chart's values back is corrected the same way on the next pass, and so is
the one race left: a replica that read the Secret just before another rotated the CA (every few years)
may publish the older bundle after the newer one, until the next pass a minute later.

A Secret this component did not make (without its label) is served as it is and never written: whoever made
it renews it; its `ca.crt`, if any, is published.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kai_scheduler.k8s.admission.certificates import (
    CA_LIFETIME,
    CERT_LIFETIME,
    RENEW_WHEN_LEFT,
    TLSMaterial,
    issue,
    not_after,
    renewal_reason,
    service_dns_names,
)
from kai_scheduler.k8s.admission.server import TLS_CERT_FILE, TLS_KEY_FILE
from kai_scheduler.k8s.runtime.access import Access, access
from kai_scheduler.k8s.runtime.backoff import RETRY_BACKOFF
from kai_scheduler.k8s.runtime.client import ApiStatusError, JsonObject, KubeClient, ResourceKind
from kai_scheduler.k8s.runtime.objects import metadata_of
from kai_scheduler.k8s.runtime.wait import wait_or_stop

log = logging.getLogger(__name__)

SECRETS: Final = ResourceKind("", "v1", "Secret", "secrets", True)
MUTATING_WEBHOOKS: Final = ResourceKind(
    "admissionregistration.k8s.io",
    "v1",
    "MutatingWebhookConfiguration",
    "mutatingwebhookconfigurations",
    False,
)
VALIDATING_WEBHOOKS: Final = ResourceKind(
    "admissionregistration.k8s.io",
    "v1",
    "ValidatingWebhookConfiguration",
    "validatingwebhookconfigurations",
    False,
)
# The label that marks a Secret as this component's to renew.
MANAGED_BY: Final = ("app.kubernetes.io/managed-by", "kai-scheduler-admission")
FAILURE_POLICIES: Final = ("Fail", "Ignore")


@dataclass(frozen=True, slots=True)
class SelfSignedTLS:
    """Where the certificate lives and whom it is for (`kai-scheduler run --tls-secret ...`)."""

    secret: str
    service: str
    namespace: str = field(default_factory=lambda: os.environ.get("POD_NAMESPACE", "kai-scheduler"))
    mutating_webhook_configuration: str | None = None
    validating_webhook_configuration: str | None = None
    failure_policy: str = "Fail"  # what the webhooks get together with the CA
    ca_lifetime: dt.timedelta = CA_LIFETIME
    cert_lifetime: dt.timedelta = CERT_LIFETIME
    renew_when_left: float = RENEW_WHEN_LEFT
    check_interval: float = 60.0  # seconds between passes (Secret re-read, renewal, webhooks)

    @property
    def dns_names(self) -> list[str]:
        return service_dns_names(self.service, self.namespace)

    @property
    def webhook_configurations(self) -> list[tuple[ResourceKind, str]]:
        named = [
            (MUTATING_WEBHOOKS, self.mutating_webhook_configuration),
            (VALIDATING_WEBHOOKS, self.validating_webhook_configuration),
        ]
        return [(kind, name) for kind, name in named if name]


def certificate_access(settings: SelfSignedTLS) -> tuple[Access, ...]:
    """The Secret: created by the first replica, then read and renewed by name; the webhook
    configurations: read and patched by name."""
    secrets = (
        access(SECRETS, "create", namespace=settings.namespace),
        access(SECRETS, "get", "update", namespace=settings.namespace, names=[settings.secret]),
    )
    return (
        *secrets,
        *(access(kind, "get", "patch", names=[name]) for kind, name in settings.webhook_configurations),
    )


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class CertificateKeeper:
    """Keeps `settings.secret` and the files `tls.crt`/`tls.key` of `cert_dir` holding a valid certificate
    for the Service, and the webhook configurations trusting its CA. `clock`: the current time (UTC)."""

    def __init__(
        self,
        client: KubeClient,
        settings: SelfSignedTLS,
        cert_dir: str | os.PathLike[str],
        *,
        clock: Callable[[], dt.datetime] = _utc_now,
    ) -> None:
        self.client = client
        self.settings = settings
        self.cert_dir = Path(cert_dir)
        self.clock = clock
        self.material: TLSMaterial | None = None
        """What the files hold (None before the first pass)."""

    @property
    def where(self) -> str:
        return f"Secret {self.settings.namespace}/{self.settings.secret}"

    async def start(self, stop: asyncio.Event) -> bool:
        """The certificate from the Secret (made when there is none) into the files, retried (with backoff,
        logged) until that succeeds: True, the files hold a certificate; False, `stop` came first. The CA is
        published by `run`, once the server serves."""
        attempt = 0
        while not stop.is_set():
            try:
                await self.obtain()
                return True
            except (ApiStatusError, ConnectionError, OSError, ValueError) as error:
                log.error("admission certificate: %s; trying again", error)
            await wait_or_stop(asyncio.sleep(RETRY_BACKOFF.delay(attempt)), stop)
            attempt += 1
        return False

    async def run(self, stop: asyncio.Event) -> None:
        """A pass now and then every `check_interval` seconds until `stop`: the Secret re-read (a renewal
        by another replica is picked up), renewed when due, the CA published; a failed pass is logged and
        repeated at the next."""
        while not stop.is_set():
            try:
                await self.sync()
            except (ApiStatusError, ConnectionError, OSError, ValueError) as error:
                log.error(
                    "admission certificate: %s; trying again in %gs", error, self.settings.check_interval
                )
            await wait_or_stop(asyncio.sleep(self.settings.check_interval), stop)

    async def sync(self) -> TLSMaterial:
        """One pass: the Secret read (created or renewed when needed), the files written when they differ,
        the webhook configurations patched when they lack the CA or the failure policy."""
        material = await self.obtain()
        await self.publish(material.ca_bundle)
        return material

    async def obtain(self) -> TLSMaterial:
        """The Secret read (created or renewed when needed) and the files written when they differ."""
        material = await self._settle_secret()
        self._write_files(material)
        return material

    async def _settle_secret(self) -> TLSMaterial:
        # Each conflict means another replica wrote the Secret in between: read it again and take theirs.
        for _ in range(5):
            secret = await self._read_secret()
            now = self.clock()
            if secret is None:
                material = self._issue(now, None)
                try:
                    await self.client.create(SECRETS, self._secret_object(material))
                except ApiStatusError as error:
                    if error.code == 409:
                        continue
                    raise
                log.info(
                    "created %s: a CA and a certificate until %s", self.where, not_after(material.tls_crt)
                )
                return material
            if not _is_ours(secret):
                return self._theirs(secret)
            stored: TLSMaterial | None = None
            try:
                stored = TLSMaterial.from_secret_data(secret.get("data") or {})
            except ValueError as error:
                reason: str | None = str(error)
            else:
                reason = renewal_reason(
                    stored, self.settings.dns_names, now, renew_when_left=self.settings.renew_when_left
                )
                if reason is None:
                    return stored
            renewed = self._issue(now, stored)
            secret["data"] = renewed.secret_data()
            try:
                await self.client.replace(SECRETS, secret)
            except ApiStatusError as error:
                if error.code == 409:
                    continue
                raise
            log.info(
                "renewed the certificate in %s (%s): valid until %s",
                self.where,
                reason,
                not_after(renewed.tls_crt),
            )
            return renewed
        raise ValueError(f"{self.where} keeps changing under this replica; giving up this pass")

    async def _read_secret(self) -> JsonObject | None:
        try:
            return await self.client.get(SECRETS, self.settings.secret, self.settings.namespace)
        except ApiStatusError as error:
            if error.code == 404:
                return None
            raise

    def _theirs(self, secret: JsonObject) -> TLSMaterial:
        try:
            material = TLSMaterial.from_secret_data(secret.get("data") or {})
        except ValueError as error:
            raise ValueError(
                f"{self.where}: {error}; it was not made by kai-scheduler (no label "
                f"{MANAGED_BY[0]}={MANAGED_BY[1]}), so it is left alone: fix it or delete it"
            ) from None
        return TLSMaterial(material.ca_bundle, None, material.tls_crt, material.tls_key)

    def _issue(self, now: dt.datetime, previous: TLSMaterial | None) -> TLSMaterial:
        return issue(
            self.settings.dns_names,
            now,
            previous=previous,
            ca_lifetime=self.settings.ca_lifetime,
            cert_lifetime=self.settings.cert_lifetime,
        )

    def _secret_object(self, material: TLSMaterial) -> JsonObject:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": self.settings.secret,
                "namespace": self.settings.namespace,
                "labels": {MANAGED_BY[0]: MANAGED_BY[1]},
            },
            "type": "kubernetes.io/tls",
            "data": material.secret_data(),
        }

    def _write_files(self, material: TLSMaterial) -> None:
        """The pair, each file replaced whole (the server never reads half a file; a new certificate beside
        the old key does not load, and the server keeps its context until both are new)."""
        if self.material is not None and (self.material.tls_crt, self.material.tls_key) == (
            material.tls_crt,
            material.tls_key,
        ):
            self.material = material
            return
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        for name, content in ((TLS_CERT_FILE, material.tls_crt), (TLS_KEY_FILE, material.tls_key)):
            target = self.cert_dir / name
            partial = target.with_name(f".{name}.new")
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(content)
            os.replace(partial, target)
        self.material = material

    async def publish(self, ca_bundle: bytes) -> None:
        """Both webhook configurations get the bundle as every webhook's `clientConfig.caBundle`, and the
        failure policy, in one strategic merge patch each (webhooks merge by name), when they lack either.
        A configuration that does not exist is logged (the server serves anyway)."""
        if not ca_bundle:
            log.warning("%s has no ca.crt: the webhook configurations are left as they are", self.where)
            return
        encoded = base64.b64encode(ca_bundle).decode()
        for kind, name in self.settings.webhook_configurations:
            try:
                configuration = await self.client.get(kind, name)
            except ApiStatusError as error:
                if error.code != 404:
                    raise
                log.warning("%s %s does not exist: nothing to give the CA to", kind.kind, name)
                continue
            changes = _webhook_changes(
                configuration.get("webhooks") or [], encoded, self.settings.failure_policy
            )
            if changes:
                await self.client.patch(kind, name, {"webhooks": changes}, patch_type="strategic")
                log.info(
                    "%s %s: caBundle and failurePolicy %s set on %s",
                    kind.kind,
                    name,
                    self.settings.failure_policy,
                    ", ".join(change["name"] for change in changes),
                )


def _is_ours(secret: JsonObject) -> bool:
    labels = metadata_of(secret).get("labels") or {}
    return bool(labels.get(MANAGED_BY[0]) == MANAGED_BY[1])


def _webhook_changes(webhooks: Sequence[Any], ca_bundle: str, failure_policy: str) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = []
    for webhook in webhooks:
        if not isinstance(webhook, dict) or not webhook.get("name"):
            continue
        client_config = webhook.get("clientConfig") or {}
        if client_config.get("caBundle") != ca_bundle or webhook.get("failurePolicy") != failure_policy:
            changes.append(
                {
                    "name": webhook["name"],
                    "clientConfig": {"caBundle": ca_bundle},
                    "failurePolicy": failure_policy,
                }
            )
    return changes


__all__ = [
    "FAILURE_POLICIES",
    "MANAGED_BY",
    "MUTATING_WEBHOOKS",
    "SECRETS",
    "VALIDATING_WEBHOOKS",
    "CertificateKeeper",
    "SelfSignedTLS",
    "certificate_access",
]
