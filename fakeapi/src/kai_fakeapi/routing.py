"""From a request's method and path to what it asks for: a discovery document, or a `Route` (verb,
resource type, namespace, name, subresource), with the API server's 404 and 405 for anything else."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from . import discovery
from .errors import ApiError
from .meta import Obj
from .resources import Registry, ResourceType

# Subresources that are only POSTed to: a pod's binding and eviction, a ServiceAccount's TokenRequest.
CREATE_SUBRESOURCES = ("binding", "eviction", "token")


@dataclass(frozen=True)
class Route:
    verb: str
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def discovery_document(registry: Registry, address: str, method: str, path: str) -> Obj | str | None:
    """The answer to a GET of a discovery path (`/version`, `/api`, `/apis/<group>`, `/openapi/v3/...`,
    the health checks), or None when `path` is not one (a resource path). `address`: host:port."""
    if method != "GET":
        return None
    if path.count("/") > 4 and not path.startswith("/openapi/"):
        return None  # deeper than `/apis/<group>/<version>/`: a resource's path
    path = path.rstrip("/") or "/"
    body: Obj | str | None = None
    if path == "/version":
        body = discovery.KUBERNETES_VERSION
    elif path in ("/healthz", "/readyz", "/livez"):
        body = "ok"
    elif path == "/api":
        body = discovery.api_versions(address)
    elif path == "/apis":
        body = discovery.api_group_list(registry)
    elif path == "/openapi/v3":
        body = discovery.openapi_v3_root(registry)
    elif path.startswith("/openapi/v3/"):
        rest = path[len("/openapi/v3/") :].split("/")
        if rest[0] == "api" and len(rest) == 2:
            body = discovery.openapi_v3_document(registry, "", rest[1])
        elif rest[0] == "apis" and len(rest) == 3:
            body = discovery.openapi_v3_document(registry, rest[1], rest[2])
        if body is None:
            raise not_found_path()
    else:
        parts = _segments(path)
        if parts[0] == "api" and len(parts) == 2:
            body = discovery.api_resource_list(registry, "", parts[1])
        elif parts[0] == "apis" and len(parts) == 2:
            body = discovery.api_group(registry, parts[1])
        elif parts[0] == "apis" and len(parts) == 3:
            body = discovery.api_resource_list(registry, parts[1], parts[2])
        else:
            return None
        if body is None:
            raise not_found_path()
    return body


def route(registry: Registry, method: str, path: str, query: dict[str, str]) -> Route:
    """The route of a resource path (`/api/v1/namespaces/ns/pods/p/binding`, `/apis/g/v/watch/...`)."""
    parts = _segments(path)
    if parts[0] == "api" and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise not_found_path()
    watch_path = False
    if rest and rest[0] == "watch":
        watch_path, rest = True, rest[1:]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces" and registry.lookup(group, version, rest[2]) is not None:
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise not_found_path()
    rt = registry.lookup(group, version, rest[0])
    if rt is None:
        raise not_found_path()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if namespace is not None and not rt.namespaced:
        raise not_found_path()
    if sub is not None and sub not in rt.subresources:
        raise not_found_path()
    watching = watch_path or query.get("watch") in ("true", "1")
    if method == "GET":
        verb = "get" if name else ("watch" if watching else "list")
    elif method == "POST":
        if name and sub not in CREATE_SUBRESOURCES:
            raise method_not_allowed()
        if rt.namespaced and namespace is None:
            raise method_not_allowed()
        verb = "create"
    elif method == "PUT" and name:
        verb = "update"
    elif method == "PATCH" and name:
        verb = "patch"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        raise method_not_allowed()
    if verb not in rt.verbs:
        raise method_not_allowed()
    if sub in CREATE_SUBRESOURCES and verb != "create":
        raise method_not_allowed()
    if sub == "status" and verb not in ("get", "update", "patch"):
        raise method_not_allowed()
    if rt.namespaced and name and namespace is None:
        raise not_found_path()
    return Route(verb, rt, namespace, name, sub)


def _segments(path: str) -> list[str]:
    """A path's segments, percent-decoded (only when one is encoded: most paths have none)."""
    parts = path.strip("/").split("/")
    return [unquote(p) for p in parts] if "%" in path else parts


def not_found_path() -> ApiError:
    return ApiError(
        404,
        "the server could not find the requested resource",
        details={"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]},
    )


def method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource")
