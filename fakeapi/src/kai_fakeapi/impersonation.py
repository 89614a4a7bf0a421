"""Impersonation headers (`kubectl --as=... --as-group=...`): `Impersonate-User`, `Impersonate-Group`,
`Impersonate-Uid` and `Impersonate-Extra-<key>`, as the API server's impersonation filter reads them.

Each thing impersonated is authorized first, with the verb `impersonate`: `users` (or `serviceaccounts`
in their namespace, for a `system:serviceaccount:<ns>:<name>` user), `groups`, `uids` and
`userextras/<key>` (those two in `authentication.k8s.io`). The new user is in the groups asked for (a
ServiceAccount, without any: its own), plus `system:authenticated` unless it or `system:unauthenticated`
is among them (`system:unauthenticated` for `system:anonymous`). Extras are checked, not kept
(`UserInfo` has none).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote

from .auth import AUTHENTICATED, UserInfo, service_account_user, split_service_account
from .errors import ApiError
from .request_head import HeaderFields
from .request_info import Attributes

_EXTRA_PREFIX = "impersonate-extra-"
_UNAUTHENTICATED = "system:unauthenticated"
_ANONYMOUS = "system:anonymous"

Check = Callable[[UserInfo, Attributes], None]
"""Raise the 403 for a refused `Attributes` of the requester."""


def impersonated(requester: UserInfo, headers: HeaderFields, check: Check) -> UserInfo | None:
    """The user a request acts as, after `check` allowed each part; None without impersonation headers."""
    if not any(key[:12].lower() == "impersonate-" for key in headers):
        return None
    username = headers.get("Impersonate-User") or ""
    groups = list(headers.get_all("Impersonate-Group") or [])
    uid = headers.get("Impersonate-Uid") or ""
    extras = [
        (unquote(key.lower()[len(_EXTRA_PREFIX) :]), value)
        for key, value in headers.items()
        if key.lower().startswith(_EXTRA_PREFIX)
    ]
    if not (username or groups or uid or extras):
        return None
    if not username:
        raise ApiError(500, "requested impersonation of groups, a uid or extras without impersonating a user")
    service_account = split_service_account(username)
    if service_account is not None:
        namespace, name = service_account
        check(requester, _acting_as("serviceaccounts", name, namespace=namespace))
        if not groups:
            groups = list(service_account_user(namespace, name).groups[:-1])
    else:
        check(requester, _acting_as("users", username))
    for group in headers.get_all("Impersonate-Group") or []:
        check(requester, _acting_as("groups", group))
    for key, value in extras:
        check(requester, _acting_as("userextras", value, group="authentication.k8s.io", subresource=key))
    if uid:
        check(requester, _acting_as("uids", uid, group="authentication.k8s.io"))
    if username == _ANONYMOUS:
        if _UNAUTHENTICATED not in groups:
            groups.append(_UNAUTHENTICATED)
    elif _UNAUTHENTICATED not in groups and AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return UserInfo(username, uid, tuple(groups))


def _acting_as(
    resource: str, name: str, *, namespace: str = "", group: str = "", subresource: str = ""
) -> Attributes:
    return Attributes(
        "impersonate",
        True,
        api_group=group,
        api_version="v1",
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )
