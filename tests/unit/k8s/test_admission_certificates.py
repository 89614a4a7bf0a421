"""The admission webhooks' own CA and serving certificate (`k8s/admission/certificates.py`): what a TLS
client checks (chain, names, validity, key usage through cryptography's own verifier), when renewal is
due, and the Secret's data."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from kai_scheduler.k8s.admission.certificates import (
    TLSMaterial,
    issue,
    not_after,
    renewal_reason,
    service_dns_names,
)

NOW = dt.datetime(2027, 3, 1, 12, 0, tzinfo=dt.UTC)
NAMES = service_dns_names("kai-scheduler-admission", "kai-scheduler")
DAY = dt.timedelta(days=1)


def _verify(material: TLSMaterial, name: str, at: dt.datetime) -> None:
    """As a TLS client with the CA bundle would (raises VerificationError)."""
    store = Store(x509.load_pem_x509_certificates(material.ca_bundle))
    verifier = PolicyBuilder().store(store).time(at).build_server_verifier(x509.DNSName(name))
    verifier.verify(x509.load_pem_x509_certificate(material.tls_crt), [])


def test_the_service_names() -> None:
    assert NAMES == [
        "kai-scheduler-admission",
        "kai-scheduler-admission.kai-scheduler",
        "kai-scheduler-admission.kai-scheduler.svc",
        "kai-scheduler-admission.kai-scheduler.svc.cluster.local",
    ]


def test_the_certificate_verifies_for_every_service_name_and_no_other() -> None:
    material = issue(NAMES, NOW)
    for name in NAMES:
        _verify(material, name, NOW)
    with pytest.raises(VerificationError):
        _verify(material, "other.kai-scheduler.svc", NOW)
    with pytest.raises(VerificationError):
        _verify(material, NAMES[2], NOW + dt.timedelta(days=366))  # expired (a year by default)


def test_a_certificate_never_outlives_its_ca() -> None:
    material = issue(NAMES, NOW, ca_lifetime=10 * DAY, cert_lifetime=30 * DAY)
    assert not_after(material.tls_crt) == not_after(material.ca_bundle) == NOW + 10 * DAY


def test_renewal_is_due_with_a_third_of_the_lifetime_left() -> None:
    material = issue(NAMES, NOW, cert_lifetime=30 * DAY)
    assert renewal_reason(material, NAMES, NOW) is None
    assert renewal_reason(material, NAMES, NOW + 19 * DAY) is None
    reason = renewal_reason(material, NAMES, NOW + 21 * DAY)
    assert reason is not None and reason.startswith("it expires at")


def test_renewal_is_due_for_other_names_a_broken_certificate_or_an_ageing_ca() -> None:
    material = issue(NAMES, NOW, ca_lifetime=90 * DAY, cert_lifetime=30 * DAY)
    other = service_dns_names("renamed", "kai-scheduler")
    assert renewal_reason(material, other, NOW) == f"it does not name {', '.join(other)}"
    broken = TLSMaterial(material.ca_bundle, material.ca_key, b"garbage", material.tls_key)
    assert (renewal_reason(broken, NAMES, NOW) or "").startswith("it does not load")
    # A serving certificate renewed at day 61 is fresh, but its CA (90 days) has less than a third left.
    renewed = issue(NAMES, NOW + 61 * DAY, previous=material, ca_lifetime=90 * DAY, cert_lifetime=30 * DAY)
    assert renewed.ca_bundle != material.ca_bundle  # so that renewal already made a new CA
    assert renewal_reason(material, NAMES, NOW + 61 * DAY) == "its CA is close to expiry"


def test_a_renewal_keeps_a_ca_that_has_time_left() -> None:
    material = issue(NAMES, NOW)
    renewed = issue(NAMES, NOW + 300 * DAY, previous=material)
    assert (renewed.ca_bundle, renewed.ca_key) == (material.ca_bundle, material.ca_key)
    assert renewed.tls_crt != material.tls_crt and renewed.tls_key != material.tls_key
    _verify(renewed, NAMES[2], NOW + 300 * DAY)


def test_the_secret_data_round_trips_and_errors_name_the_key() -> None:
    material = issue(NAMES, NOW)
    data = material.secret_data()
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert TLSMaterial.from_secret_data(data) == material
    assert base64.b64decode(data["tls.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
    with pytest.raises(ValueError, match=r"^data\.tls\.key is missing$"):
        TLSMaterial.from_secret_data({"tls.crt": data["tls.crt"]})
    with pytest.raises(ValueError, match=r"^data\.ca\.crt is not base64$"):
        TLSMaterial.from_secret_data({**data, "ca.crt": "not base64!"})
