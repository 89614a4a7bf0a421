"""What a request asks for, in the terms authorization speaks: verb, API group, resource, subresource,
namespace and name, or a path for non-resource requests (`/version`, `/healthz`, discovery).

Read from the URL alone, before routing, as the API server's `RequestInfoFactory` does: a request for a
resource that does not exist is refused (403) before it could be answered 404. The verbs are the API
server's: GET of a collection is `list`, or `watch` with `?watch=...` or under `/watch/`; DELETE of a
collection is `deletecollection`; POST is `create` (a binding or an eviction: `create` on `pods/binding`,
`pods/eviction`). A list or watch filtered by `metadata.name` carries that name, so that a rule with
`resourceNames` can allow it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from .selectors import required_field_value

_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True, slots=True)
class Attributes:
    """One request's authorization attributes (`authorizer.Attributes` without the user)."""

    verb: str
    resource_request: bool
    path: str = ""  # non-resource requests only
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    @property
    def combined_resource(self) -> str:
        """`pods/binding`: what a rule's `resources` entry names."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def request_attributes(method: str, path: str, query: dict[str, str]) -> Attributes:
    parts = [p for p in path.strip("/").split("/") if p]
    if "%" in path:
        parts = [unquote(p) for p in parts]
    non_resource = Attributes(verb=method.lower(), resource_request=False, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    if parts[0] == "apis":
        if len(parts) < 4:
            return non_resource
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        group, version, rest = "", parts[1], parts[2:]
    verb = _METHOD_VERBS.get(method, "")
    if rest[0] == "watch" and len(rest) > 1:
        verb, rest = "watch", rest[1:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        # `/namespaces/ns/pods`: the resource follows; `/namespaces/ns[/status]` is the namespace itself.
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if _watching(query) else "list"
        selected = required_field_value(query.get("fieldSelector"), "metadata.name")
        if selected and _valid_path_segment(selected):
            name = selected
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(verb, True, "", group, version, namespace, resource, subresource, name)


def _watching(query: dict[str, str]) -> bool:
    """`?watch=` as the API server reads a boolean parameter: anything but 0, f and false is true."""
    if "watch" not in query:
        return False
    return query["watch"].lower() not in ("0", "f", "false")


def _valid_path_segment(name: str) -> bool:
    return name not in (".", "..") and "/" not in name and "%" not in name
