"""Strict mode's RBAC: Kubernetes' semantics from the Roles, ClusterRoles and bindings in the store, the
real 403 bodies, the default policy for discovery, access reviews, and kubectl as a ServiceAccount."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.runtime.client import QUEUES, ApiStatusError
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

RBAC = "rbac.authorization.k8s.io"
BOT = "system:serviceaccount:team-a:bot"
FORBIDDEN = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden"}


def rule(resources: list[str], verbs: list[str], groups: tuple[str, ...] = ("",), **extra: Any) -> Any:
    return {"apiGroups": list(groups), "resources": resources, "verbs": verbs, **extra}


def role(name: str, rules: list[Any], namespace: str | None = None, **extra: Any) -> Any:
    metadata: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    kind = "Role" if namespace else "ClusterRole"
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": metadata, "rules": rules, **extra}


def binding(name: str, ref: str, subjects: list[Any], namespace: str | None = None) -> Any:
    """`ref`: "Role/name" or "ClusterRole/name"; a RoleBinding when `namespace` is given."""
    ref_kind, _, ref_name = ref.partition("/")
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "roleRef": {"apiGroup": RBAC, "kind": ref_kind, "name": ref_name},
        "subjects": subjects,
    }


def sa(name: str = "bot", namespace: str | None = "team-a") -> Any:
    return {"kind": "ServiceAccount", "name": name, **({"namespace": namespace} if namespace else {})}


def forbidden(message: str, **details: str) -> Any:
    return (403, {**FORBIDDEN, "message": message, "details": details, "code": 403})


@pytest.fixture
def seed(strict_server: FakeApiServer) -> Any:
    """`seed(obj, ...)`: create objects through the store (unchecked, as etcd)."""

    def create(*objs: Any) -> None:
        for obj in objs:
            strict_server.store.create(obj)

    return create


@pytest.fixture
def bot(api_as: Any, service_account: Any) -> Any:
    """A client as ServiceAccount team-a/bot; namespaces team-a and team-b exist."""
    service_account("team-b", "other")
    return api_as("team-a", "bot")


def test_role_binding_grants_its_role_in_its_namespace_only(bot: Any, seed: Any) -> None:
    seed(
        role("reader", [rule(["pods"], ["get", "list"])], "team-a"),
        binding("bot-reads", "Role/reader", [sa()], "team-a"),
    )
    assert bot.call("GET", "/api/v1/namespaces/team-a/pods")[0] == 200
    assert bot.call("GET", "/api/v1/namespaces/team-b/pods/p") == forbidden(
        f'pods "p" is forbidden: User "{BOT}" cannot get resource "pods" in API group "" in the namespace '
        '"team-b"',
        name="p",
        kind="pods",
    )
    assert bot.call("GET", "/api/v1/pods") == forbidden(
        f'pods is forbidden: User "{BOT}" cannot list resource "pods" in API group "" at the cluster scope',
        kind="pods",
    )


def test_cluster_roles_through_role_and_cluster_role_bindings(bot: Any, seed: Any) -> None:
    seed(
        role("pod-reader", [rule(["pods"], ["list"])]),
        role("node-reader", [rule(["nodes"], ["get", "list"])]),
        binding("bot-pods", "ClusterRole/pod-reader", [sa()], "team-b"),
    )
    assert bot.call("GET", "/api/v1/namespaces/team-b/pods")[0] == 200
    assert bot.call("GET", "/api/v1/namespaces/team-a/pods")[0] == 403
    assert bot.call("GET", "/api/v1/nodes")[0] == 403
    seed(binding("bot-nodes", "ClusterRole/node-reader", [sa()]))
    assert bot.call("GET", "/api/v1/nodes")[0] == 200


def test_subjects_user_group_and_service_account(bot: Any, api_as: Any, seed: Any) -> None:
    seed(
        role("reader", [rule(["configmaps"], ["list"])], "team-a"),
        # A ServiceAccount subject without a namespace is the binding's namespace's.
        binding("local-sa", "Role/reader", [sa(namespace=None)], "team-a"),
    )
    assert bot.call("GET", "/api/v1/namespaces/team-a/configmaps")[0] == 200
    other = api_as("team-b", "other")
    assert other.call("GET", "/api/v1/namespaces/team-a/configmaps")[0] == 403
    seed(
        binding(
            "team-b-sas",
            "Role/reader",
            [{"kind": "Group", "name": "system:serviceaccounts:team-b"}],
            "team-a",
        )
    )
    assert other.call("GET", "/api/v1/namespaces/team-a/configmaps")[0] == 200
    alice = {"Impersonate-User": "alice"}
    admin = api_as()
    assert admin.call("GET", "/api/v1/namespaces/team-a/configmaps", headers=alice)[0] == 403
    seed(binding("alice", "Role/reader", [{"kind": "User", "name": "alice"}], "team-a"))
    assert admin.call("GET", "/api/v1/namespaces/team-a/configmaps", headers=alice)[0] == 200


def test_subresources_wildcards_and_bindings(bot: Any, seed: Any, strict_server: FakeApiServer) -> None:
    strict_server.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team-a"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
    )
    seed(
        role("binder", [rule(["pods/binding"], ["create"]), rule(["*/status"], ["patch"], ("*",))], "team-a"),
        binding("bot-binds", "Role/binder", [sa()], "team-a"),
    )
    pod = "/api/v1/namespaces/team-a/pods/p"
    target = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"name": "n1"}}
    assert bot.call("POST", f"{pod}/binding", target)[0] == 201
    status = {"status": {"phase": "Running"}}
    assert bot.call("PATCH", f"{pod}/status", status, content_type="application/merge-patch+json")[0] == 200
    assert bot.call("PATCH", pod, status, content_type="application/merge-patch+json") == forbidden(
        f'pods "p" is forbidden: User "{BOT}" cannot patch resource "pods" in API group "" in the namespace '
        '"team-a"',
        name="p",
        kind="pods",
    )
    assert bot.call("POST", f"{pod}/eviction", {"metadata": {"name": "p"}})[1]["message"].startswith(
        f'pods "p" is forbidden: User "{BOT}" cannot create resource "pods/eviction"'
    )
    seed(
        role("all", [rule(["*"], ["*"], ("*",))], "team-a"), binding("bot-all", "Role/all", [sa()], "team-a")
    )
    assert bot.call("DELETE", pod)[0] == 200


def test_resource_names(bot: Any, seed: Any, strict_server: FakeApiServer, watch_as: Any) -> None:
    for name in ("cfg", "other"):
        strict_server.store.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "team-a"}}
        )
    seed(
        role(
            "one-config",
            [rule(["configmaps"], ["get", "list", "watch", "create"], resourceNames=["cfg"])],
            "team-a",
        ),
        binding("bot-cfg", "Role/one-config", [sa()], "team-a"),
    )
    configmaps = "/api/v1/namespaces/team-a/configmaps"
    assert bot.call("GET", f"{configmaps}/cfg")[0] == 200
    assert bot.call("GET", f"{configmaps}/other")[0] == 403
    assert bot.call("GET", configmaps)[0] == 403  # a list names no object
    listed = bot.ok("GET", f"{configmaps}?fieldSelector=metadata.name%3Dcfg")
    assert [c["metadata"]["name"] for c in listed["items"]] == ["cfg"]
    stream = watch_as("team-a", "bot")(f"{configmaps}?watch=true&fieldSelector=metadata.name%3Dcfg")
    assert stream.next_of("ADDED")["object"]["metadata"]["name"] == "cfg"
    new = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg2"}}
    assert bot.call("POST", configmaps, new) == forbidden(
        f'configmaps is forbidden: User "{BOT}" cannot create resource "configmaps" in API group "" in the '
        'namespace "team-a"',
        kind="configmaps",
    )


def test_verbs_as_the_api_server_names_them(bot: Any, seed: Any, strict_server: FakeApiServer) -> None:
    seed(
        role("lister", [rule(["pods"], ["list", "delete"])], "team-a"),
        binding("b", "Role/lister", [sa()], "team-a"),
    )
    pods = "/api/v1/namespaces/team-a/pods"
    assert bot.call("GET", pods)[0] == 200
    for path in (f"{pods}?watch=true", f"{pods}?watch=1", "/api/v1/watch/namespaces/team-a/pods"):
        status, body = bot.call("GET", path)
        assert status == 403 and 'cannot watch resource "pods"' in body["message"], path
    assert strict_server.open_watches() == 0  # refused before the stream opened
    status, body = bot.call("DELETE", pods)
    assert status == 403 and "cannot deletecollection resource" in body["message"]
    refused = strict_server.forbidden()[-1]
    assert (refused.user, refused.verb, refused.resource, refused.namespace) == (
        BOT,
        "deletecollection",
        "pods",
        "team-a",
    )


def test_aggregated_cluster_role(bot: Any, seed: Any) -> None:
    seed(
        role("aggregate", [], aggregationRule={"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]}),
        binding("bot-aggregate", "ClusterRole/aggregate", [sa()]),
    )
    assert bot.call("GET", "/api/v1/nodes")[0] == 403
    part = role("nodes", [rule(["nodes"], ["list"])])
    part["metadata"]["labels"] = {"team": "a"}
    seed(part)
    assert bot.call("GET", "/api/v1/nodes")[0] == 200


def test_a_missing_role_is_named_in_the_refusal(bot: Any, seed: Any) -> None:
    seed(binding("dangling", "ClusterRole/gone", [sa()]))
    assert bot.call("GET", "/api/v1/nodes") == forbidden(
        f'nodes is forbidden: User "{BOT}" cannot list resource "nodes" in API group "" at the cluster '
        f'scope: RBAC: clusterrole.{RBAC} "gone" not found',
        kind="nodes",
    )


def test_discovery_health_and_version_for_every_authenticated_user(bot: Any) -> None:
    for path in ("/version", "/healthz", "/readyz", "/livez", "/api", "/api/v1", "/apis", "/openapi/v3"):
        assert bot.call("GET", path)[0] == 200, path
    assert bot.call("GET", "/apis/scheduling.run.ai/v2")[0] == 200
    assert bot.call("GET", "/metrics") == forbidden(f'forbidden: User "{BOT}" cannot get path "/metrics"')


def test_kubectl_apply_of_rbac_takes_effect_at_once(
    bot: Any, api_as: Any, tmp_path: Path, kubectl_as: Any
) -> None:
    queues = "/apis/scheduling.run.ai/v2/queues"
    assert bot.call("GET", queues)[0] == 403
    manifest = tmp_path / "rbac.yaml"
    manifest.write_text(
        f"""\
apiVersion: {RBAC}/v1
kind: ClusterRole
metadata: {{name: queue-reader}}
rules: [{{apiGroups: [scheduling.run.ai], resources: [queues], verbs: [list]}}]
---
apiVersion: {RBAC}/v1
kind: ClusterRoleBinding
metadata: {{name: bot-queues}}
roleRef: {{apiGroup: {RBAC}, kind: ClusterRole, name: queue-reader}}
subjects: [{{kind: ServiceAccount, name: bot, namespace: team-a}}]
"""
    )
    kubectl_as()("apply", "-f", str(manifest))
    assert bot.call("GET", queues)[0] == 200
    api_as().ok("DELETE", f"/apis/{RBAC}/v1/clusterrolebindings/bot-queues")
    assert bot.call("GET", queues)[0] == 403


def test_our_client_sees_the_real_refusal(
    strict_server: FakeApiServer, service_account: Any, tmp_path: Path
) -> None:
    service_account("kai-scheduler", "kai-scheduler-binder")
    config = strict_server.write_kubeconfig(
        tmp_path / "kc", service_account=("kai-scheduler", "kai-scheduler-binder")
    )

    async def list_queues() -> None:
        async with LightkubeClient.from_kubeconfig(config) as client:
            await client.list_objects(QUEUES)

    with pytest.raises(ApiStatusError) as refused:
        asyncio.run(list_queues())
    assert (refused.value.code, refused.value.message) == (
        403,
        'queues.scheduling.run.ai is forbidden: User "system:serviceaccount:kai-scheduler:'
        'kai-scheduler-binder" cannot list resource "queues" in API group "scheduling.run.ai" at the cluster '
        "scope",
    )
    record = strict_server.forbidden()[-1]
    assert (record.verb, record.resource, record.namespace, record.name) == (
        "list",
        "queues.scheduling.run.ai",
        None,
        None,
    )


def test_access_reviews(bot: Any, api_as: Any, seed: Any) -> None:
    seed(
        role("reader", [rule(["pods"], ["list"])], "team-a"),
        binding("bot-reads", "Role/reader", [sa()], "team-a"),
    )
    ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    can_list = {"resourceAttributes": {"namespace": "team-a", "verb": "list", "resource": "pods"}}
    review = bot.ok(
        "POST",
        ssar,
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": can_list},
    )
    assert review["kind"] == "SelfSubjectAccessReview" and review["spec"] == can_list
    assert review["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "bot-reads/team-a" of Role "reader" to ServiceAccount '
        '"bot/team-a"',
    }
    everywhere = {"resourceAttributes": {"verb": "list", "resource": "pods"}}
    assert bot.ok("POST", ssar, {"spec": everywhere})["status"] == {"allowed": False}
    status, error = bot.call("POST", ssar, {"spec": {}})
    assert (status, error["message"]) == (
        422,
        'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: '
        '"null": exactly one of nonResourceAttributes or resourceAttributes must be specified',
    )

    sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    for_bot = {**can_list, "user": BOT, "groups": ["system:serviceaccounts"]}
    assert bot.call("POST", sar, {"spec": for_bot}) == forbidden(
        f'subjectaccessreviews.authorization.k8s.io is forbidden: User "{BOT}" cannot create resource '
        '"subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope',
        group="authorization.k8s.io",
        kind="subjectaccessreviews",
    )
    admin = api_as()
    assert admin.ok("POST", sar, {"spec": for_bot})["status"]["allowed"] is True
    assert admin.ok("POST", sar, {"spec": {**for_bot, "user": "alice"}})["status"] == {"allowed": False}
    non_resource = {
        "nonResourceAttributes": {"path": "/version", "verb": "get"},
        "groups": ["system:authenticated"],
    }
    assert admin.ok("POST", sar, {"spec": non_resource})["status"]["allowed"] is True
    status, error = admin.call("POST", sar, {"spec": can_list})
    assert status == 422 and "at least one of user or group must be specified" in error["message"]


def test_kubectl_as_a_service_account(kubectl_as: Any, seed: Any) -> None:
    as_bot = kubectl_as("team-a", "bot")
    refused = as_bot("get", "pods", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f'Error from server (Forbidden): pods is forbidden: User "{BOT}" cannot list resource "pods" in API '
        'group "" in the namespace "team-a"'
    )
    can_i = as_bot("auth", "can-i", "list", "pods", check=False)
    assert (can_i.returncode, can_i.stdout.strip()) == (1, "no")
    admin = kubectl_as()
    admin("create", "role", "reader", "-n", "team-a", "--verb=get,list,watch", "--resource=pods")
    admin(
        "create", "rolebinding", "bot-reads", "-n", "team-a", "--role=reader", "--serviceaccount=team-a:bot"
    )
    assert as_bot("auth", "can-i", "list", "pods").stdout.strip() == "yes"
    assert as_bot("get", "pods").stderr.strip() == "No resources found in team-a namespace."
    impersonated = admin("auth", "can-i", "watch", "pods", "-n", "team-a", "--as", BOT)
    assert impersonated.stdout.strip() == "yes"
    elsewhere = admin("auth", "can-i", "list", "pods", "-n", "default", "--as", BOT, check=False)
    assert elsewhere.stdout.strip() == "no"
