"""The admission webhooks' own TLS material, when nobody else provides it: a CA and a serving certificate
for the webhook Service's DNS names, as KAI's operator makes them (`pkg/operator/cert-utils`), kept in a
Secret by `self_signed.py`. Pure: the current time comes in as an argument, nothing is read or written.

The CA outlives the serving certificates it signs (10 years against 1 by default), so that renewing the
serving certificate leaves the webhook configurations' `caBundle` as it is: no moment in which the API
server trusts a CA that some replica does not yet serve, or the other way round. When the CA itself comes
close to its end, a new one signs the next serving certificate, and the bundle keeps the old CA beside it
while the old CA is valid (replicas still serving the old certificate stay trusted until they reload).
"""

from __future__ import annotations

import base64
import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kai_scheduler.api.timestamps import format_rfc3339

CA_LIFETIME: Final = dt.timedelta(days=3650)
CERT_LIFETIME: Final = dt.timedelta(days=365)
# Renew when less than this part of a certificate's lifetime is left (cert-manager's default is a third).
RENEW_WHEN_LEFT: Final = 1 / 3
# Certificates start a little in the past: clocks of the API server and this pod may differ.
_BACKDATE: Final = dt.timedelta(minutes=5)

# The Secret's keys: the kubernetes.io/tls pair, cert-manager's `ca.crt`, and the CA's key (ours only).
TLS_CRT: Final = "tls.crt"
TLS_KEY: Final = "tls.key"
CA_CRT: Final = "ca.crt"
CA_KEY: Final = "ca.key"


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names a client may use for Service `service` in `namespace`; the API server calls webhooks at
    `<service>.<namespace>.svc`."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


@dataclass(frozen=True, slots=True)
class TLSMaterial:
    """PEM texts: the CA bundle (the signing CA first, then earlier CAs still valid), the signing CA's key
    (None when someone else made the material: it is then never renewed here), and the serving pair."""

    ca_bundle: bytes
    ca_key: bytes | None
    tls_crt: bytes
    tls_key: bytes

    def secret_data(self) -> dict[str, str]:
        """The Secret's `data` (base64)."""
        data = {CA_CRT: self.ca_bundle, TLS_CRT: self.tls_crt, TLS_KEY: self.tls_key}
        if self.ca_key is not None:
            data[CA_KEY] = self.ca_key
        return {key: base64.b64encode(value).decode() for key, value in data.items()}

    @classmethod
    def from_secret_data(cls, data: Mapping[str, object]) -> TLSMaterial:
        """From a Secret's `data`; ValueError naming the key that is missing or not base64."""
        decoded: dict[str, bytes] = {}
        for key in (CA_CRT, CA_KEY, TLS_CRT, TLS_KEY):
            value = data.get(key)
            if value is None:
                continue
            try:
                decoded[key] = base64.b64decode(str(value), validate=True)
            except ValueError:
                raise ValueError(f"data.{key} is not base64") from None
        for key in (TLS_CRT, TLS_KEY):
            if not decoded.get(key):
                raise ValueError(f"data.{key} is missing")
        return cls(decoded.get(CA_CRT, b""), decoded.get(CA_KEY), decoded[TLS_CRT], decoded[TLS_KEY])


def issue(
    dns_names: Sequence[str],
    now: dt.datetime,
    *,
    previous: TLSMaterial | None = None,
    ca_lifetime: dt.timedelta = CA_LIFETIME,
    cert_lifetime: dt.timedelta = CERT_LIFETIME,
) -> TLSMaterial:
    """A serving certificate for `dns_names`, signed by `previous`'s CA when that CA is ours and not due for
    renewal itself, else by a new CA (the bundle then also lists `previous`'s CAs that are still valid)."""
    try:
        ca = _usable_ca(previous, now)
    except ValueError:  # a CA that does not load is replaced like one that expires
        ca = None
    earlier: list[x509.Certificate] = []
    if ca is None:
        ca = _new_ca(now, ca_lifetime)
        if previous is not None:
            earlier = [cert for cert in _load_all(previous.ca_bundle) if _valid_at(cert, now)]
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + cert_lifetime, ca_cert.not_valid_after_utc)
    # (A common name is at most 64 characters; clients go by the DNS names, all of them in the SAN.)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0][:64])])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    bundle = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [ca_cert, *earlier])
    return TLSMaterial(bundle, _key_pem(ca_key), cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def renewal_reason(
    material: TLSMaterial,
    dns_names: Sequence[str],
    now: dt.datetime,
    *,
    renew_when_left: float = RENEW_WHEN_LEFT,
) -> str | None:
    """Why our material needs a new serving certificate now (None: it does not): it does not parse, does
    not name every DNS name, has less than `renew_when_left` of its lifetime left, or its CA has."""
    try:
        cert = x509.load_pem_x509_certificate(material.tls_crt)
        ca = _usable_ca(material, now, renew_when_left=renew_when_left)
    except ValueError as error:
        return f"it does not load ({error})"
    if ca is None:
        return "its CA is close to expiry"
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        covered = set(names.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        covered = set()
    missing = [n for n in dns_names if n not in covered]
    if missing:
        return f"it does not name {', '.join(missing)}"
    if _running_out(cert, now, renew_when_left):
        return f"it expires at {format_rfc3339(cert.not_valid_after_utc)}"
    return None


def not_after(pem: bytes) -> dt.datetime:
    """When the (first) certificate of `pem` expires."""
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc


def _usable_ca(
    material: TLSMaterial | None, now: dt.datetime, *, renew_when_left: float = RENEW_WHEN_LEFT
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """The material's signing CA and its key, unless there is none of ours or it is due for renewal."""
    if material is None or material.ca_key is None or not material.ca_bundle:
        return None
    cert = x509.load_pem_x509_certificate(material.ca_bundle)
    key = serialization.load_pem_private_key(material.ca_key, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or _running_out(cert, now, renew_when_left):
        return None
    return cert, key


def _new_ca(now: dt.datetime, lifetime: dt.timedelta) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    # A name of its own per CA: a client's store holding two of them (during a rotation) tells them apart.
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"kai-scheduler admission CA {os.urandom(8).hex()}")]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _running_out(cert: x509.Certificate, now: dt.datetime, renew_when_left: float) -> bool:
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return end - now < (end - start) * renew_when_left


def _valid_at(cert: x509.Certificate, now: dt.datetime) -> bool:
    return cert.not_valid_before_utc <= now < cert.not_valid_after_utc


def _load_all(pem: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        return []


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


__all__ = [
    "CA_LIFETIME",
    "CERT_LIFETIME",
    "RENEW_WHEN_LEFT",
    "TLSMaterial",
    "issue",
    "not_after",
    "renewal_reason",
    "service_dns_names",
]
