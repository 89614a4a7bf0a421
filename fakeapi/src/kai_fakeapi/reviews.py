"""The authentication and authorization APIs that are answered, not stored:

- `authorization.k8s.io/v1` SelfSubjectAccessReview (`kubectl auth can-i`, `--as` included) and
  SubjectAccessReview: whether a user may do something, from the same rules that guard the requests.
- `authentication.k8s.io/v1` SelfSubjectReview (`kubectl auth whoami`).
- The `token` subresource of ServiceAccounts: a TokenRequest answered with a token (`kubectl create token`).

Without strict mode every request is allowed, and the reviews say so.
"""

from __future__ import annotations

from typing import Any

from .access import AccessControl
from .auth import API_AUDIENCE, TokenAuthority, UserInfo
from .errors import ApiError, bad_request, conflict
from .meta import Obj, format_time
from .request_info import Attributes
from .routing import Route

_AUTHORIZATION = "authorization.k8s.io"
_AUTHENTICATION = "authentication.k8s.io"
_MIN_TOKEN_SECONDS = 10 * 60
_MAX_TOKEN_SECONDS = 1 << 32


class Reviews:
    def __init__(self, tokens: TokenAuthority, access: AccessControl | None) -> None:
        self.tokens = tokens
        self.access = access

    @staticmethod
    def serves(route: Route) -> bool:
        if route.subresource == "token":
            return route.rt.group == "" and route.rt.plural == "serviceaccounts"
        return (route.rt.group, route.rt.plural) in (
            (_AUTHORIZATION, "selfsubjectaccessreviews"),
            (_AUTHORIZATION, "subjectaccessreviews"),
            (_AUTHENTICATION, "selfsubjectreviews"),
        )

    def answer(self, route: Route, doc: Any, user: UserInfo | None, authorization: str | None) -> Obj:
        """The created review (or TokenRequest). `user`: the request's (None without strict mode, when
        `authorization`, the request's header, tells who asks)."""
        if not isinstance(doc, dict):
            raise bad_request("the body of the request must be a JSON object")
        plural = route.rt.plural
        if route.subresource == "token":
            assert route.namespace is not None and route.name is not None
            return self._token(route.namespace, route.name, doc)
        if plural == "selfsubjectreviews":
            me = user or self.tokens.authenticate(authorization) or UserInfo("system:anonymous", "", ())
            return _created(route, doc, status={"userInfo": me.admission_user_info()})
        spec = _mapping(doc.get("spec"))
        attributes = _attributes(route, spec)
        if plural == "subjectaccessreviews":
            if not spec.get("user") and not spec.get("groups"):
                raise _invalid(route, "spec.user", '""', "at least one of user or group must be specified")
            user = UserInfo(
                str(spec.get("user") or ""), str(spec.get("uid") or ""), tuple(spec.get("groups") or ())
            )
        status: Obj = {"allowed": True}
        if self.access is not None and user is not None:
            decision = self.access.authorize(user, attributes)
            status = {"allowed": decision.allowed}
            if decision.reason:
                status["reason"] = decision.reason
        return _created(route, doc, spec=spec, status=status)

    def _token(self, namespace: str, name: str, doc: Obj) -> Obj:
        metadata = _mapping(doc.get("metadata"))
        route_kind = ("TokenRequest", _AUTHENTICATION)
        for key, expected in (("name", name), ("namespace", namespace)):
            if metadata.get(key) and metadata[key] != expected:
                raise _invalid_kind(
                    route_kind,
                    name,
                    f"metadata.{key}",
                    f'"{metadata[key]}"',
                    f"must match the service account {key} if specified",
                )
        spec = dict(_mapping(doc.get("spec")))
        seconds = spec.get("expirationSeconds")
        seconds = 3600 if seconds is None else seconds
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise bad_request(f"spec.expirationSeconds must be an integer, not {seconds!r}")
        for wrong, why in (
            (seconds < _MIN_TOKEN_SECONDS, "may not specify a duration less than 10 minutes"),
            (seconds > _MAX_TOKEN_SECONDS, "may not specify a duration larger than 2^32 seconds"),
        ):
            if wrong:
                raise _invalid_kind(route_kind, "", "spec.expirationSeconds", str(seconds), why)
        audiences = tuple(spec.get("audiences") or (API_AUDIENCE,))
        bound = self._bound(namespace, spec.get("boundObjectRef"))
        token, expires = self.tokens.issue(
            namespace, name, expiration_seconds=seconds, audiences=audiences, bound=bound
        )
        now = self.tokens.clock()
        spec.update(audiences=list(audiences), expirationSeconds=seconds)
        spec.setdefault("boundObjectRef", None)
        return {
            "kind": "TokenRequest",
            "apiVersion": f"{_AUTHENTICATION}/v1",
            "metadata": {
                **metadata,
                "name": name,
                "namespace": namespace,
                "creationTimestamp": format_time(now),
            },
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": format_time(expires or now)},
        }

    def _bound(self, namespace: str, ref: Any) -> tuple[str, str, str] | None:
        """(kind, name, uid) of the object a token is bound to: it must exist (and be the one named)."""
        if not isinstance(ref, dict) or not ref:
            return None
        kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
        if kind not in self.tokens.bound_types:
            raise bad_request(f"cannot bind token for object of type /v1, Kind={kind}")
        obj = self.tokens.store.objects.require(self.tokens.bound_types[kind], namespace, name)
        uid = str(obj["metadata"].get("uid", ""))
        if ref.get("uid") and ref["uid"] != uid:
            raise conflict(
                kind,
                name,
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. "
                "The object might have been deleted and then recreated",
            )
        return kind, name, uid


def _attributes(route: Route, spec: Obj) -> Attributes:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        raise _invalid(
            route,
            "spec.nonResourceAttributes",
            "{...}",
            "cannot be specified in combination with resourceAttributes",
        )
    if isinstance(resource, dict):
        return Attributes(
            str(resource.get("verb") or ""),
            True,
            api_group=str(resource.get("group") or ""),
            api_version=str(resource.get("version") or "*"),
            namespace=str(resource.get("namespace") or ""),
            resource=str(resource.get("resource") or ""),
            subresource=str(resource.get("subresource") or ""),
            name=str(resource.get("name") or ""),
        )
    if isinstance(non_resource, dict):
        return Attributes(
            str(non_resource.get("verb") or ""), False, path=str(non_resource.get("path") or "")
        )
    raise _invalid(
        route,
        "spec.resourceAttributes",
        '"null"',
        "exactly one of nonResourceAttributes or resourceAttributes must be specified",
    )


def _mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _created(route: Route, doc: Obj, **fields: Obj) -> Obj:
    metadata = _mapping(doc.get("metadata"))
    return {
        "kind": route.rt.kind,
        "apiVersion": route.rt.api_version,
        "metadata": {**metadata, "creationTimestamp": None},
        **fields,
    }


def _invalid(route: Route, field: str, value: str, message: str) -> ApiError:
    return _invalid_kind((route.rt.kind, route.rt.group), "", field, value, message)


def _invalid_kind(kind: tuple[str, str], name: str, field: str, value: str, message: str) -> ApiError:
    """422 as `errors.NewInvalid` of a group's kind words it."""
    text = f"{field}: Invalid value: {value}: {message}"
    details: Obj = {"group": kind[1], "kind": kind[0]}
    if name:
        details = {"name": name, **details}
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": f"Invalid value: {value}: {message}", "field": field}
    ]
    return ApiError(422, f'{kind[0]}.{kind[1]} "{name}" is invalid: {text}', details=details)
