"""Authentication by bearer token, as the API server's token authenticators do it.

Two kinds of token: the admin token of the default kubeconfig (`fakeapi`: user `system:admin` in
`system:masters`, which RBAC does not restrict), and ServiceAccount tokens. Those are JWTs in the
claims the real issuer writes (`sub` `system:serviceaccount:<ns>:<name>`, the ServiceAccount's uid,
audiences, expiry), signed with a key of this server (HMAC, where the real one signs with RSA). Like a
bound token, one stops working when its ServiceAccount is deleted (or deleted and created again: the
uid differs), when it expires, and when the Pod or Secret it is bound to is gone.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .meta import Obj
from .resources import ResourceType
from .store import Store

ADMIN_TOKEN = "fakeapi"
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
AUTHENTICATED = "system:authenticated"
SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class UserInfo:
    """Who a request is from (the API server's `user.Info`, without extras)."""

    username: str
    uid: str
    groups: tuple[str, ...]

    def admission_user_info(self) -> dict[str, Any]:
        """The `userInfo` of an AdmissionReview (and of a SelfSubjectReview's status)."""
        out: dict[str, Any] = {"username": self.username}
        if self.uid:
            out["uid"] = self.uid
        out["groups"] = list(self.groups)
        return out


ADMIN = UserInfo("system:admin", "", ("system:masters", AUTHENTICATED))


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED)
    return UserInfo(f"{SA_PREFIX}{namespace}:{name}", uid, groups)


def split_service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a `system:serviceaccount:<ns>:<name>` username, else None."""
    if not username.startswith(SA_PREFIX):
        return None
    namespace, sep, name = username[len(SA_PREFIX) :].partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized")


@dataclass(frozen=True)
class _Claims:
    namespace: str
    name: str
    uid: str
    expires: float | None
    audiences: tuple[str, ...]
    bound: tuple[str, str, str] | None  # (kind, name, uid) of the Pod or Secret it is bound to


class TokenAuthority:
    """Issues ServiceAccount tokens and tells whose a bearer token is (`authenticate`)."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._key = secrets.token_bytes(32)
        self._service_accounts = store.resource("serviceaccounts")
        # What a token may be bound to, by kind.
        self.bound_types: dict[str, ResourceType] = {
            "Pod": store.resource("pods"),
            "Secret": store.resource("secrets"),
        }
        self._verified: dict[str, _Claims] = {}  # a signature is checked once per token

    def issue(
        self,
        namespace: str,
        name: str,
        *,
        expiration_seconds: int | None = None,
        audiences: tuple[str, ...] = (API_AUDIENCE,),
        bound: tuple[str, str, str] | None = None,
    ) -> tuple[str, float | None]:
        """A token of the ServiceAccount (which must exist: a 404 `ApiError` otherwise) and its expiry
        (None: it does not expire). `bound`: (kind, name, uid) of a Pod or Secret in `namespace`."""
        account = self.store.objects.require(self._service_accounts, namespace, name)
        now = self.clock()
        claims: Obj = {
            "aud": list(audiences),
            "iat": int(now),
            "iss": API_AUDIENCE,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": name, "uid": account["metadata"].get("uid", "")},
            },
            "nbf": int(now),
            "sub": f"{SA_PREFIX}{namespace}:{name}",
        }
        expires = None
        if expiration_seconds is not None:
            expires = now + expiration_seconds
            claims["exp"] = int(expires)
        if bound is not None:
            kind, bound_name, bound_uid = bound
            claims["kubernetes.io"][kind.lower()] = {"name": bound_name, "uid": bound_uid}
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signing_input = f"{header}.{payload}"
        return f"{signing_input}.{_b64(self._sign(signing_input))}", expires

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        """The user of an `Authorization: Bearer <token>` header; None when it names no one (now)."""
        if not authorization:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        if token == ADMIN_TOKEN:
            return ADMIN
        claims = self._verified.get(token)
        if claims is None:
            claims = self._verify(token)
            if claims is None:
                return None
            if len(self._verified) > 10_000:
                self._verified.clear()
            self._verified[token] = claims
        if not self._valid_now(claims):
            return None
        return service_account_user(claims.namespace, claims.name, claims.uid)

    def _valid_now(self, claims: _Claims) -> bool:
        if claims.expires is not None and self.clock() >= claims.expires:
            return False
        if API_AUDIENCE not in claims.audiences:
            return False
        account = self.store.objects.find(self._service_accounts, claims.namespace, claims.name)
        if account is None or account["metadata"].get("uid", "") != claims.uid:
            return False
        if claims.bound is not None:
            kind, name, uid = claims.bound
            obj = self.store.objects.find(self.bound_types[kind], claims.namespace, name)
            if obj is None or obj["metadata"].get("uid") != uid:
                return False
        return True

    def _verify(self, token: str) -> _Claims | None:
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            signature = _unb64(parts[2])
            if not hmac.compare_digest(signature, self._sign(f"{parts[0]}.{parts[1]}")):
                return None
            claims = json.loads(_unb64(parts[1]))
            k8s = claims["kubernetes.io"]
            account = k8s["serviceaccount"]
            bound = next(
                (
                    (kind, str(k8s[kind.lower()]["name"]), str(k8s[kind.lower()]["uid"]))
                    for kind in self.bound_types
                    if kind.lower() in k8s
                ),
                None,
            )
            return _Claims(
                str(k8s["namespace"]),
                str(account["name"]),
                str(account["uid"]),
                float(claims["exp"]) if "exp" in claims else None,
                tuple(claims.get("aud") or ()),
                bound,
            )
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None

    def _sign(self, signing_input: str) -> bytes:
        return hmac.new(self._key, signing_input.encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
