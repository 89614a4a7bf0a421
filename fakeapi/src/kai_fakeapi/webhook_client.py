"""Calling one admission webhook as kube-apiserver calls it: HTTPS to `clientConfig.url`, or to
`clientConfig.service` (there is no cluster network here: tests tell where a Service's port is served,
`FakeApiServer.expose_service`), the serving certificate verified against `caBundle` for the host name
the API server uses (`<name>.<namespace>.svc` for a Service), `?timeout=<n>s` on the URL, and the call
given up after `timeoutSeconds`. A failure is a `CallFailed` whose text follows the API server's."""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .meta import Obj

ServiceAddress = Callable[[str, str, int], "tuple[str, int] | None"]
"""Where (host, port) a Service's port (namespace, name, port) is served; None when nowhere."""


class CallFailed(Exception):
    """The webhook could not be called or gave no usable answer (its failurePolicy decides what follows)."""


@dataclass(frozen=True)
class Target:
    url: str  # as the API server shows it in errors
    address: tuple[str, int] | None  # where to connect
    server_name: str  # the name the certificate must be valid for
    path: str
    host_header: str
    unreachable: str = ""  # why there is no address


def target(client_config: Obj, timeout: int, services: ServiceAddress) -> Target:
    query = f"?timeout={timeout}s"
    service = client_config.get("service")
    if isinstance(service, dict):
        name, namespace = str(service.get("name", "")), str(service.get("namespace", ""))
        port = int(service.get("port") or 443)
        host = f"{name}.{namespace}.svc"
        path = str(service.get("path") or "")
        url = f"https://{host}:{port}{path}{query}"
        address = services(namespace, name, port)
        why = (
            "" if address is not None else f'service "{name}" has no endpoints exposed to the fake API server'
        )
        return Target(url, address, host, (path or "/") + query, f"{host}:{port}", why)
    parts = urlsplit(str(client_config.get("url") or ""))
    url = f"{client_config.get('url')}{query}"
    if parts.scheme != "https" or not parts.hostname:
        return Target(
            url, None, "", "", "", f'unsupported URL "{client_config.get("url")}": it must be https'
        )
    port = parts.port or 443
    return Target(url, (parts.hostname, port), parts.hostname, (parts.path or "/") + query, parts.netloc)


def tls_context(client_config: Obj) -> ssl.SSLContext:
    """Trusts `caBundle` (base64 PEM), or the system's roots without one, as the API server does."""
    bundle = client_config.get("caBundle")
    if not bundle:
        return ssl.create_default_context()
    try:
        pem = base64.b64decode(str(bundle), validate=True).decode()
        return ssl.create_default_context(cadata=pem)
    except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError):
        raise CallFailed(
            "could not get REST client: unable to load root certificates: unable to parse bytes as PEM block"
        ) from None


def post(client_config: Obj, review: Obj, timeout: int, services: ServiceAddress) -> Obj:
    """POST the AdmissionReview; the answer decoded (any JSON object)."""
    context = tls_context(client_config)
    where = target(client_config, timeout, services)
    if where.address is None:
        raise CallFailed(f'failed to call webhook: Post "{where.url}": {where.unreachable}')
    conn = _Connection(where.address, where.server_name, context, timeout)
    try:
        conn.request(
            "POST",
            where.path,
            body=json.dumps(review).encode(),
            headers={
                "Host": where.host_header,
                "Content-Type": "application/json",
                "Accept": "application/json, */*",
            },
        )
        response = conn.getresponse()
        data = response.read()
    except OSError as exc:
        raise CallFailed(
            f'failed to call webhook: Post "{where.url}": {_network_error(exc, where)}'
        ) from None
    finally:
        conn.close()
    if not 200 <= response.status < 300:
        raise CallFailed(
            f"failed to call webhook: the server responded with the status code {response.status} "
            f"but did not return more information"
        )
    try:
        answer: Any = json.loads(data)
    except ValueError as exc:
        raise CallFailed(f"failed to call webhook: {exc}") from None
    if not isinstance(answer, dict):
        raise CallFailed("failed to call webhook: the answer is not an AdmissionReview object")
    return answer


def _network_error(exc: OSError, where: Target) -> str:
    """A connection's failure in the words of Go's HTTP client, which the API server's message carries."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        if exc.verify_code == 62:  # X509_V_ERR_HOSTNAME_MISMATCH
            reason = f"certificate is not valid for {where.server_name}"
        elif exc.verify_code in (10, 9):  # expired, not yet valid
            reason = "certificate has expired or is not yet valid"
        else:
            reason = "certificate signed by unknown authority"
        return f"tls: failed to verify certificate: x509: {reason}"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "context deadline exceeded"
    assert where.address is not None
    if isinstance(exc, ConnectionRefusedError):
        return f"dial tcp {where.address[0]}:{where.address[1]}: connect: connection refused"
    return str(exc) or type(exc).__name__


class _Connection(http.client.HTTPSConnection):
    """HTTPS to `address`, the certificate verified for `server_name` (a Service's DNS name is served at
    an address of the test's choosing)."""

    def __init__(
        self, address: tuple[str, int], server_name: str, context: ssl.SSLContext, timeout: int
    ) -> None:
        super().__init__(address[0], address[1], timeout=timeout, context=context)
        self._server_name = server_name
        self._tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        try:
            self.sock = self._tls.wrap_socket(sock, server_hostname=self._server_name)
        except BaseException:
            sock.close()
            raise
