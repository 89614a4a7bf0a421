"""API errors as the Kubernetes API server reports them: a `Status` object with an HTTP code and a reason."""

from __future__ import annotations

from typing import Any

REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """A failed API call; `status()` is the `Status` body the server sends."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else REASONS.get(code, "Unknown")
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # (a Status some handlers build themselves has none)
            body["reason"] = self.reason
        details = dict(self.details or {})
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        if details or self.details is not None:  # `{}` given is sent, as Go sends an empty StatusDetails
            body["details"] = details
        body["code"] = self.code
        return body


def success_status(code: int = 201, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The body of a successful binding/eviction: `Status` with `status: Success`."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = details
    body["code"] = code
    return body


def _details(qualified: str, name: str) -> dict[str, Any]:
    plural, _, grp = qualified.partition(".")
    out: dict[str, Any] = {"name": name, "kind": plural}
    if grp:
        out["group"] = grp
    return out


def not_found(qualified: str, name: str) -> ApiError:
    return ApiError(404, f'{qualified} "{name}" not found', details=_details(qualified, name))


def already_exists(qualified: str, name: str) -> ApiError:
    return ApiError(
        409, f'{qualified} "{name}" already exists', reason="AlreadyExists", details=_details(qualified, name)
    )


def conflict(qualified: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        details=_details(qualified, name),
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, name: str, causes: list[tuple[str, str]], qualified: str = "") -> ApiError:
    """422 Invalid; `causes` are (field, message) pairs."""
    text = ", ".join(f"{field}: {message}" for field, message in causes)
    details: dict[str, Any] = {"name": name, "kind": kind}
    if qualified and "." in qualified:
        details["group"] = qualified.partition(".")[2]
    details["causes"] = [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes]
    return ApiError(422, f'{kind} "{name}" is invalid: {text}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def gone(message: str, reason: str = "Expired") -> ApiError:
    return ApiError(410, message, reason=reason)
