"""Fault injection: rules that make matching requests fail (an error status, a cut connection, a delay,
or an error after the write happened). `FakeApiServer.fail_next` adds them."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError
from .routing import Route

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass
class FaultRule:
    """Fail the next `remaining` matching requests with `status` (0: cut the connection, no response).

    `after_commit`: perform the request first, then answer the error (the response was lost: the client
    sees a failure although the write happened)."""

    status: int
    remaining: int
    verb: str | None = None
    resource: str | None = None
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    message: str | None = None
    retry_after: int | None = None
    delay: float = 0.0
    after_commit: bool = False
    hits: int = 0

    def matches(self, route: Route) -> bool:
        if self.verb is not None and self.verb != route.verb:
            return False
        if self.resource is not None:
            resource, _, sub = self.resource.partition("/")
            if resource not in (route.rt.plural, route.rt.key):
                return False
            if sub != (route.subresource or "") and self.subresource is None:
                return False  # `pods` is the pods themselves, `pods/binding` their binding
        if self.subresource is not None and self.subresource != (route.subresource or ""):
            return False
        if self.namespace is not None and self.namespace != route.namespace:
            return False
        return self.name is None or self.name == route.name

    def error(self) -> ApiError:
        message = self.message or f"injected fault: {self.status}"
        retry = (
            self.retry_after if self.retry_after is not None else (1 if self.status in (429, 503) else None)
        )
        return ApiError(self.status, message, retry_after=retry)
