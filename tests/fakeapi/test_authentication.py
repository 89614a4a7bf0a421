"""Strict mode's authentication: the admin token, ServiceAccount tokens (issued by the Python API, by the
TokenRequest subresource and `kubectl create token`), 401 for anything else, impersonation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai_fakeapi import FakeApiServer
from kai_fakeapi.auth import UserInfo

UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}
BOT = "system:serviceaccount:default:bot"


def _token_request(api: Any, name: str, spec: dict[str, Any] | None = None, ns: str = "default") -> Any:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec or {}}
    return api.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", body)


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def test_requests_without_a_valid_token_are_401(strict_server: FakeApiServer, api_as: Any) -> None:
    for token in ("", "wrong", "a.b.c"):
        api = api_as(token=token)
        for path in ("/api/v1/namespaces/default/pods", "/version", "/apis"):
            assert api.call("GET", path) == (401, UNAUTHORIZED)
    assert api_as().call("GET", "/api/v1/namespaces/default/pods")[0] == 200
    refused = strict_server.forbidden()
    assert len(refused) == 9 and all(r.code == 401 and r.user is None for r in refused)
    assert (refused[0].verb, refused[0].resource, refused[0].namespace) == ("list", "pods", "default")


def test_admin_token_is_system_admin_in_system_masters(api_as: Any) -> None:
    review = api_as().ok("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
    assert review["status"]["userInfo"] == {
        "username": "system:admin",
        "groups": ["system:masters", "system:authenticated"],
    }


def test_service_account_token_names_its_user(strict_server: FakeApiServer, api_as: Any) -> None:
    bot = api_as("default", "bot")
    review = bot.ok("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
    uid = strict_server.store.get("serviceaccounts", "bot", "default")["metadata"]["uid"]
    assert review["status"]["userInfo"] == {
        "username": BOT,
        "uid": uid,
        "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
    }
    assert strict_server.requests()[-1].user == BOT


def test_user_info_in_admission_review_form() -> None:
    user = UserInfo("system:serviceaccount:ns:sa", "1234", ("system:serviceaccounts", "system:authenticated"))
    assert user.admission_user_info() == {
        "username": "system:serviceaccount:ns:sa",
        "uid": "1234",
        "groups": ["system:serviceaccounts", "system:authenticated"],
    }


def test_a_token_for_a_missing_service_account_is_refused_clearly(strict_server: FakeApiServer) -> None:
    with pytest.raises(ValueError, match='no ServiceAccount "nobody" in namespace "default"'):
        strict_server.service_account_token("default", "nobody")


def test_token_stops_working_when_its_service_account_is_deleted(
    strict_server: FakeApiServer, api_as: Any, service_account: Any
) -> None:
    bot = api_as("default", "bot")
    assert bot.call("GET", "/version")[0] == 200
    strict_server.store.delete("serviceaccounts", "bot", "default")
    assert bot.call("GET", "/version") == (401, UNAUTHORIZED)
    service_account("default", "bot")  # the same name, another uid
    assert bot.call("GET", "/version") == (401, UNAUTHORIZED)
    assert api_as("default", "bot").call("GET", "/version")[0] == 200


def test_token_expires(strict_server: FakeApiServer, api_as: Any, service_account: Any) -> None:
    service_account("default", "bot")
    now = [1_000_000.0]
    strict_server.tokens.clock = lambda: now[0]
    api = api_as(token=strict_server.service_account_token("default", "bot", expiration_seconds=600))
    now[0] += 599
    assert api.call("GET", "/version")[0] == 200
    now[0] += 1
    assert api.call("GET", "/version") == (401, UNAUTHORIZED)


def test_token_request_subresource(api_as: Any, service_account: Any) -> None:
    admin = api_as()
    service_account("default", "bot")
    status, answer = _token_request(admin, "bot", {"expirationSeconds": 1200})
    assert status == 201
    assert answer["kind"] == "TokenRequest" and answer["apiVersion"] == "authentication.k8s.io/v1"
    assert answer["metadata"]["name"] == "bot" and answer["spec"]["expirationSeconds"] == 1200
    assert answer["status"]["expirationTimestamp"].endswith("Z")
    bot = api_as(token=answer["status"]["token"])
    assert (
        bot.ok("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {})["status"]["userInfo"][
            "username"
        ]
        == BOT
    )

    status, error = _token_request(admin, "bot", {"expirationSeconds": 599})
    assert (status, error["message"]) == (
        422,
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 599: '
        "may not specify a duration less than 10 minutes",
    )
    status, error = _token_request(admin, "ghost")
    assert (status, error["message"]) == (404, 'serviceaccounts "ghost" not found')


def test_token_for_another_audience_does_not_authenticate(api_as: Any, service_account: Any) -> None:
    service_account("default", "bot")
    _, answer = _token_request(api_as(), "bot", {"audiences": ["vault"]})
    api = api_as(token=answer["status"]["token"])
    assert api.call("GET", "/version") == (401, UNAUTHORIZED)


def test_token_bound_to_a_pod_ends_with_the_pod(
    strict_server: FakeApiServer, api_as: Any, service_account: Any
) -> None:
    service_account("default", "bot")
    strict_server.store.create(_pod("p"))
    bound = {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}
    api = api_as(token=_token_request(api_as(), "bot", bound)[1]["status"]["token"])
    assert api.call("GET", "/version")[0] == 200
    strict_server.store.delete("pods", "p", "default")
    assert api.call("GET", "/version") == (401, UNAUTHORIZED)
    status, error = _token_request(api_as(), "bot", {"boundObjectRef": {"kind": "Pod", "name": "p"}})
    assert (status, error["message"]) == (404, 'pods "p" not found')


def test_kubectl_create_token_and_whoami(strict_server: FakeApiServer, kubectl_as: Any) -> None:
    admin = kubectl_as()
    admin("create", "serviceaccount", "bot")
    token = admin("create", "token", "bot", "--duration", "20m").stdout.strip()
    whoami = json.loads(admin("--token", token, "auth", "whoami", "-o", "json").stdout)
    assert whoami["status"]["userInfo"]["username"] == BOT
    refused = admin("--token", "not-a-token", "get", "pods", check=False)
    assert refused.returncode == 1
    assert "error: You must be logged in to the server" in refused.stderr


def test_write_kubeconfig_for_a_service_account(
    strict_server: FakeApiServer, api_as: Any, service_account: Any, tmp_path: Path
) -> None:
    service_account("kai-scheduler", "binder")
    path = strict_server.write_kubeconfig(tmp_path / "kc", service_account=("kai-scheduler", "binder"))
    config = yaml.safe_load(path.read_text())
    assert config["clusters"][0]["cluster"]["server"].startswith("https://")
    api = api_as(token=config["users"][0]["user"]["token"])
    review = api.ok("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
    assert review["status"]["userInfo"]["username"] == "system:serviceaccount:kai-scheduler:binder"


def test_impersonation(strict_server: FakeApiServer, api_as: Any, kubectl_as: Any) -> None:
    whoami = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    admin = api_as()
    user = admin.ok("POST", whoami, {}, headers={"Impersonate-User": BOT})["status"]["userInfo"]
    assert user == {
        "username": BOT,
        "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
    }
    as_bob = {"Impersonate-User": "bob", "Impersonate-Group": "team-a"}
    assert admin.ok("POST", whoami, {}, headers=as_bob)["status"]["userInfo"] == {
        "username": "bob",
        "groups": ["team-a", "system:authenticated"],
    }
    status, error = admin.call("POST", whoami, {}, headers={"Impersonate-Group": "team-a"})
    assert status == 500 and "without impersonating a user" in error["message"]

    bot = api_as("default", "bot")
    status, error = bot.call("GET", "/api/v1/namespaces/default/pods", headers={"Impersonate-User": "bob"})
    assert (status, error["message"], error["details"]) == (
        403,
        f'users "bob" is forbidden: User "{BOT}" cannot impersonate resource "users" in API group "" at the '
        "cluster scope",
        {"name": "bob", "kind": "users"},
    )
    assert (strict_server.forbidden()[-1].verb, strict_server.forbidden()[-1].resource) == (
        "impersonate",
        "users",
    )
    admin.ok(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "impersonator"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["users"],
                    "verbs": ["impersonate"],
                    "resourceNames": ["bob"],
                }
            ],
        },
    )
    admin.ok(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "bot-impersonates"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "impersonator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}],
        },
    )
    assert (
        bot.ok("POST", whoami, {}, headers={"Impersonate-User": "bob"})["status"]["userInfo"]["username"]
        == "bob"
    )
    status, _ = bot.call("POST", whoami, {}, headers={"Impersonate-User": "alice"})
    assert status == 403
    status, error = bot.call(
        "POST", whoami, {}, headers={"Impersonate-User": "bob", "Impersonate-Group": "x"}
    )
    assert (status, error["details"]) == (403, {"name": "x", "kind": "groups"})

    as_bot = kubectl_as()("auth", "whoami", "--as", BOT, "-o", "json").stdout
    assert json.loads(as_bot)["status"]["userInfo"]["username"] == BOT


def test_without_strict_mode_nothing_is_checked(server: FakeApiServer, api: Any) -> None:
    assert api.call("GET", "/api/v1/namespaces/default/pods")[0] == 200
    review = api.ok(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {"spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}},
    )
    assert review["status"] == {"allowed": True}
    assert server.requests()[-1].user is None and server.forbidden() == []
