"""Strict mode's gate in front of every HTTP request, in the API server's order: authentication (401
without a valid bearer token: anonymous requests are not accepted), impersonation, then authorization
(403 with the real message: `pods "p" is forbidden: User "..." cannot get resource "pods" in API group ""
in the namespace "default"`)."""

from __future__ import annotations

import json

from .auth import TokenAuthority, UserInfo, unauthorized
from .errors import ApiError
from .impersonation import impersonated
from .rbac import Decision, RbacAuthorizer
from .request_head import HeaderFields
from .request_info import Attributes, request_attributes


class Refusal(ApiError):
    """A 401 or 403, with whom and what it refused (for the server's record of refusals)."""

    def __init__(self, error: ApiError, user: UserInfo | None, attributes: Attributes | None) -> None:
        super().__init__(error.code, error.message, reason=error.reason, details=error.details)
        self.user = user
        self.attributes = attributes


class AccessControl:
    def __init__(self, tokens: TokenAuthority, authorizer: RbacAuthorizer) -> None:
        self.tokens = tokens
        self.authorizer = authorizer

    def admit(self, method: str, path: str, query: dict[str, str], headers: HeaderFields) -> UserInfo:
        """The user the request acts as; raises a `Refusal` when it may not be served."""
        attributes = request_attributes(method, path, query)
        requester = self.tokens.authenticate(headers.get("Authorization"))
        if requester is None:
            raise Refusal(unauthorized(), None, attributes)
        user = impersonated(requester, headers, self.check) or requester
        self.check(user, attributes)
        return user

    def authorize(self, user: UserInfo, attributes: Attributes) -> Decision:
        return self.authorizer.authorize(user, attributes)

    def check(self, user: UserInfo, attributes: Attributes) -> None:
        decision = self.authorizer.authorize(user, attributes)
        if not decision.allowed:
            raise Refusal(forbidden(user, attributes, decision.reason), user, attributes)


def forbidden(user: UserInfo, a: Attributes, reason: str) -> ApiError:
    """The API server's 403 (`responsewriters.Forbidden`): its message and `details`."""
    if not a.resource_request:
        message = f"User {_q(user.username)} cannot {a.verb} path {_q(a.path)}"
    else:
        scope = f"in the namespace {_q(a.namespace)}" if a.namespace else "at the cluster scope"
        message = (
            f"User {_q(user.username)} cannot {a.verb} resource {_q(a.combined_resource)} "
            f"in API group {_q(a.api_group)} {scope}"
        )
    message = _sanitized(message) + (f": {reason}" if reason else "")
    qualified = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
    details: dict[str, str] = {}
    if a.name:
        details["name"] = a.name
    if a.api_group:
        details["group"] = a.api_group
    if a.resource:
        details["kind"] = a.resource
    if not qualified:
        text = f"forbidden: {message}"
    elif a.name:
        text = f"{qualified} {_q(a.name)} is forbidden: {message}"
    else:
        text = f"{qualified} is forbidden: {message}"
    return ApiError(403, text, details=details)


def _q(text: str) -> str:
    """Go's `%q` for the strings found here."""
    return json.dumps(text, ensure_ascii=False)


def _sanitized(text: str) -> str:
    """As the API server writes it: nothing in an error may look like HTML."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
