"""The admission webhook chain of the fake API server (`FakeApiServer(admission_webhooks=True)`): tiny HTTPS
webhooks made here, with a CA of the test's own, and the project's admission server with the chart's
webhook configurations; requests through our LightkubeClient, raw HTTP and kubectl."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import ssl
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.admission.certificates import issue, service_dns_names
from kai_scheduler.k8s.admission.server import WebhookServer
from kai_scheduler.k8s.runtime.client import PODS, QUEUES, ApiStatusError
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from chart_support import NAMESPACE, RELEASE, armed_webhook_configurations  # noqa: E402

T = TypeVar("T")
Obj = dict[str, Any]
Decide = Callable[[Obj], Obj]
POD_PATH = "/api/v1/namespaces/default/pods"
SERVICE = ("webhooks", "hooks")  # the Service the test webhooks are reached through
BINDING = {
    "apiVersion": "v1",
    "kind": "Binding",
    "metadata": {"name": "a"},
    "target": {"kind": "Node", "name": "n1"},
}


# ------------------------------------------------------------------------------------------ webhooks


class Hook:
    """An HTTPS admission webhook on a free port: `decide(review) -> answer`; what it got is kept."""

    def __init__(self, folder: Path, decide: Decide, dns_names: list[str]) -> None:
        material = issue(dns_names, dt.datetime.now(dt.UTC))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tls.crt").write_bytes(material.tls_crt)
        (folder / "tls.key").write_bytes(material.tls_key)
        self.ca_bundle = base64.b64encode(material.ca_bundle).decode()
        self.received: list[tuple[str, dict[str, str], Obj]] = []  # path, headers, review
        self.release = threading.Event()  # lets a webhook that hangs go at the end
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.received.append((self.path, dict(self.headers), review))
                data = json.dumps(decide(review)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.address = ("127.0.0.1", self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def reviews(self) -> list[Obj]:
        return [review["request"] for _, _, review in self.received]

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def answer(review: Obj, **response: Any) -> Obj:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": True, **response},
    }


def patched(operations: list[Obj]) -> Decide:
    encoded = base64.b64encode(json.dumps(operations).encode()).decode()
    return lambda review: answer(review, patchType="JSONPatch", patch=encoded)


def allow(review: Obj) -> Obj:
    return answer(review)


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[Callable[..., Hook]]:
    made: list[Hook] = []

    def make(decide: Decide = allow, dns_names: list[str] | None = None) -> Hook:
        names = dns_names if dns_names is not None else service_dns_names(SERVICE[1], SERVICE[0])
        made.append(Hook(tmp_path / f"hook{len(made)}", decide, names))
        return made[-1]

    yield make
    for hook in made:
        hook.close()


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(admission_webhooks=True, bookmark_interval=0.2) as srv:
        yield srv


def webhook(name: str, hook: Hook, *, path: str = "/", **fields: Any) -> Obj:
    body: Obj = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "clientConfig": {
            "service": {"namespace": SERVICE[0], "name": SERVICE[1], "path": path},
            "caBundle": hook.ca_bundle,
        },
        "rules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
        ],
    }
    body.update(fields)
    return body


def install(server: FakeApiServer, kind: str, name: str, *webhooks: Obj, exposed: Hook | None = None) -> None:
    """A `Mutating`/`Validating` WebhookConfiguration (through the store: a webhook never sees those)."""
    server.store.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": f"{kind}WebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": list(webhooks),
        }
    )
    if exposed is not None:
        server.expose_service(SERVICE[0], SERVICE[1], 443, exposed.address)


def pod(name: str, **labels: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "demo"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }


def run(server: FakeApiServer, body: Callable[[LightkubeClient], Coroutine[Any, Any, T]]) -> T:
    async def main() -> T:
        async with LightkubeClient.from_url(server.url, timeout=30.0) as client:
            return await body(client)

    return asyncio.run(main())


def create_pod(server: FakeApiServer, obj: Obj) -> Obj | ApiStatusError:
    async def create(client: LightkubeClient) -> Obj | ApiStatusError:
        try:
            return await client.create(PODS, obj)
        except ApiStatusError as error:
            return error

    return run(server, create)


# --------------------------------------------------------------------------------------------- tests


def test_a_mutating_webhook_patches_a_create_and_gets_the_review_kubernetes_sends(
    server: FakeApiServer, hooks: Callable[..., Hook]
) -> None:
    hook = hooks(patched([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]))
    install(server, "Mutating", "labeller", webhook("label.example.com", hook, path="/mutate"), exposed=hook)
    created = create_pod(server, pod("a"))
    assert isinstance(created, dict) and created["metadata"]["labels"] == {"app": "demo", "mutated": "yes"}
    assert server.store.get("pods", "a")["metadata"]["labels"]["mutated"] == "yes"

    ((path, headers, review),) = hook.received
    assert path == "/mutate?timeout=10s" and headers["Host"] == "hooks.webhooks.svc:443"
    assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    request = review["request"]
    assert set(request) == {
        "uid",
        "kind",
        "resource",
        "requestKind",
        "requestResource",
        "name",
        "namespace",
        "operation",
        "userInfo",
        "object",
        "oldObject",
        "dryRun",
        "options",
    }
    assert request["kind"] == request["requestKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert (request["name"], request["namespace"], request["operation"]) == ("a", "default", "CREATE")
    assert request["userInfo"] == {
        "username": "system:admin",
        "groups": ["system:masters", "system:authenticated"],
    }
    assert request["oldObject"] is None and request["dryRun"] is False
    assert request["options"] == {
        "kind": "CreateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "fieldManager": "kai-scheduler",
    }
    # Defaulted, not yet stored: no uid, no creation time.
    assert request["object"]["spec"]["restartPolicy"] == "Always"
    assert (
        "uid" not in request["object"]["metadata"]
        and "creationTimestamp" not in request["object"]["metadata"]
    )
    (call,) = server.webhook_calls()
    assert (call.configuration, call.webhook, call.mutating, call.error) == (
        "labeller",
        "label.example.com",
        True,
        None,
    )


def test_a_denial_is_the_webhooks_status_and_nothing_is_stored(
    server: FakeApiServer, hooks: Callable[..., Hook], api: Any
) -> None:
    def decide(review: Obj) -> Obj:
        name = review["request"]["name"]
        if name == "forbidden":
            return answer(
                review, allowed=False, status={"code": 403, "reason": "Forbidden", "message": "not today"}
            )
        return answer(
            review, allowed=name != "plain", status={"message": "no reason given"} if name == "plain" else {}
        )

    hook = hooks(decide)
    install(server, "Validating", "gate", webhook("gate.example.com", hook), exposed=hook)
    refused = create_pod(server, pod("forbidden"))
    assert isinstance(refused, ApiStatusError)
    assert (refused.code, refused.reason, refused.message) == (
        403,
        "Forbidden",
        'admission webhook "gate.example.com" denied the request: not today',
    )
    status, body = api.call("POST", POD_PATH, pod("plain"))
    assert status == 400 and "reason" not in body
    assert body["message"] == 'admission webhook "gate.example.com" denied the request: no reason given'
    assert [p["metadata"]["name"] for p in server.store.list("pods")] == []
    assert isinstance(create_pod(server, pod("fine")), dict)


def hang(release: threading.Event) -> Decide:
    def decide(review: Obj) -> Obj:
        release.wait()
        return answer(review)

    return decide


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unreachable", "has no endpoints exposed to the fake API server"),
        ("unknown CA", "tls: failed to verify certificate: x509: certificate signed by unknown authority"),
        (
            "other name",
            "tls: failed to verify certificate: x509: certificate is not valid for hooks.webhooks.svc",
        ),
        ("wrong uid", 'received invalid webhook response: expected response.uid="'),
        ("timeout", "context deadline exceeded"),
    ],
)
def test_a_webhook_that_fails_refuses_the_request_unless_its_policy_ignores_it(
    server: FakeApiServer, hooks: Callable[..., Hook], case: str, expected: str, request: Any
) -> None:
    stranger = hooks()
    release = threading.Event()
    request.addfinalizer(release.set)
    if case == "other name":
        hook = hooks(dns_names=["somewhere.else.svc"])
    elif case == "wrong uid":
        hook = hooks(lambda review: {**answer(review), "response": {"uid": "nope", "allowed": True}})
    elif case == "timeout":
        hook = hooks(hang(release))  # answers only when the test is over
    else:
        hook = hooks()
    config = webhook("fragile.example.com", hook, timeoutSeconds=1)
    if case == "unknown CA":
        config["clientConfig"]["caBundle"] = stranger.ca_bundle
    install(server, "Validating", "fragile", config, exposed=None if case == "unreachable" else hook)
    refused = create_pod(server, pod("a"))
    assert isinstance(refused, ApiStatusError) and (refused.code, refused.reason) == (500, "InternalError")
    assert refused.message.startswith(
        'Internal error occurred: failed calling webhook "fragile.example.com": '
    )
    assert expected in refused.message
    (call,) = server.webhook_calls("fragile.example.com")
    assert call.error is not None and expected in call.error

    server.store.patch(
        "validatingwebhookconfigurations",
        "fragile",
        [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}],
        patch_type="json",
    )
    assert isinstance(create_pod(server, pod("a")), dict)


def test_rules_pick_operations_resources_subresources_scope_and_selectors(
    server: FakeApiServer, hooks: Callable[..., Hook], api: Any
) -> None:
    hook = hooks()

    def rule(operations: list[str], resources: list[str], **extra: Any) -> Obj:
        return {
            "apiGroups": ["*"],
            "apiVersions": ["*"],
            "operations": operations,
            "resources": resources,
            **extra,
        }

    install(
        server,
        "Validating",
        "observers",
        webhook("status.example.com", hook, rules=[rule(["UPDATE"], ["*/status"])]),
        webhook("pods-and-subresources.example.com", hook, rules=[rule(["*"], ["pods/*"])]),
        webhook("cluster-scoped.example.com", hook, rules=[rule(["CREATE"], ["*"], scope="Cluster")]),
        webhook(
            "labelled-namespaces.example.com",
            hook,
            rules=[rule(["CREATE"], ["configmaps"])],
            namespaceSelector={"matchLabels": {"watched": "yes"}},
        ),
        webhook(
            "labelled-objects.example.com",
            hook,
            rules=[rule(["CREATE", "DELETE"], ["configmaps"])],
            objectSelector={"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},
        ),
        exposed=hook,
    )

    def seen() -> list[tuple[str, str, str, str]]:
        out = [
            (r["operation"], r["resource"]["resource"], r.get("subResource", ""), r.get("name", ""))
            for r in hook.reviews()
        ]
        hook.received.clear()
        return out

    api.ok("POST", POD_PATH, pod("a"))
    assert sorted(seen()) == [("CREATE", "pods", "", "a")]  # pods/* covers the pod itself
    api.ok(
        "PATCH",
        f"{POD_PATH}/a/status",
        {"status": {"phase": "Running"}},
        content_type="application/merge-patch+json",
    )
    assert seen() == [("UPDATE", "pods", "status", "a")] * 2
    api.ok("POST", f"{POD_PATH}/a/binding", BINDING)
    assert seen() == [("CREATE", "pods", "binding", "a")]
    api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "watched", "labels": {"watched": "yes"}}})
    assert seen() == [("CREATE", "namespaces", "", "watched")]
    api.ok("POST", "/api/v1/namespaces/watched/configmaps", {"metadata": {"name": "cm"}})
    assert seen() == [("CREATE", "configmaps", "", "cm")]
    api.ok("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "plain"}})
    api.ok(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        {"metadata": {"name": "gold", "labels": {"tier": "gold"}}},
    )
    assert seen() == [("CREATE", "configmaps", "", "gold")]
    api.ok("DELETE", "/api/v1/namespaces/default/configmaps/gold")
    (deleted,) = hook.reviews()
    assert deleted["operation"] == "DELETE" and deleted["object"] is None
    assert deleted["oldObject"]["metadata"]["name"] == "gold"
    assert deleted["options"]["kind"] == "DeleteOptions"
    hook.received.clear()
    # Webhook configurations are never sent to webhooks.
    api.ok(
        "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        {"metadata": {"name": "another"}, "webhooks": []},
    )
    assert seen() == []


def test_binding_and_eviction_are_creates_of_their_subresource(
    server: FakeApiServer, hooks: Callable[..., Hook], api: Any
) -> None:
    hook = hooks()
    rules = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods/binding", "pods/eviction"],
        }
    ]
    install(server, "Validating", "subresources", webhook("sub.example.com", hook, rules=rules), exposed=hook)
    server.store.create(pod("a"))
    api.ok("POST", f"{POD_PATH}/a/binding", BINDING)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "a", "namespace": "default"},
    }
    api.ok("POST", f"{POD_PATH}/a/eviction", eviction)
    bound, evicted = hook.reviews()
    assert bound["kind"] == {"group": "", "version": "v1", "kind": "Binding"}
    assert bound["object"]["target"] == {"kind": "Node", "name": "n1"}
    assert bound["object"]["metadata"] == {"name": "a", "namespace": "default"}
    assert evicted["kind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert evicted["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert (evicted["subResource"], evicted["requestSubResource"]) == ("eviction", "eviction")
    assert server.store.try_get("pods", "a") is None


def test_a_patch_is_admitted_as_the_object_it_makes(
    server: FakeApiServer, hooks: Callable[..., Hook], api: Any
) -> None:
    stamp = hooks(patched([{"op": "add", "path": "/metadata/annotations", "value": {"stamped": "yes"}}]))
    update = [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["configmaps"]}
    ]
    install(server, "Mutating", "stamp", webhook("stamp.example.com", stamp, rules=update), exposed=stamp)
    server.store.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}}
    )
    out = api.ok(
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm",
        {"data": {"b": "2"}},
        content_type="application/merge-patch+json",
    )
    assert out["data"] == {"a": "1", "b": "2"} and out["metadata"]["annotations"] == {"stamped": "yes"}
    (review,) = stamp.reviews()
    assert review["operation"] == "UPDATE" and review["object"]["data"] == {"a": "1", "b": "2"}
    assert review["oldObject"]["data"] == {"a": "1"}
    assert review["options"] == {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}


def test_dry_runs_are_refused_to_webhooks_with_side_effects(
    server: FakeApiServer, hooks: Callable[..., Hook], api: Any
) -> None:
    careful, careless = hooks(), hooks()
    install(
        server,
        "Validating",
        "a-careful",
        webhook("careful.example.com", careful, sideEffects="NoneOnDryRun"),
        exposed=careful,
    )
    status, body = api.call("POST", f"{POD_PATH}?dryRun=All", pod("a"))
    assert status == 201 and server.store.try_get("pods", "a") is None
    (review,) = careful.reviews()
    assert review["dryRun"] is True and review["options"]["dryRun"] == ["All"]
    install(server, "Validating", "b-careless", webhook("careless.example.com", careless, sideEffects="Some"))
    status, body = api.call("POST", f"{POD_PATH}?dryRun=All", pod("a"))
    assert (status, body["message"]) == (
        400,
        'admission webhook "careless.example.com" does not support dry run',
    )
    assert careless.reviews() == []


def test_warnings_reach_kubectl_and_reinvocation_follows_a_later_change(
    server: FakeApiServer, hooks: Callable[..., Hook], kubectl: Any
) -> None:
    def first(review: Obj) -> Obj:
        return answer(
            review, warnings=["first saw " + str(sorted(review["request"]["object"]["metadata"]["labels"]))]
        )

    early = hooks(first)
    late = hooks(patched([{"op": "add", "path": "/metadata/labels/late", "value": "yes"}]))
    install(
        server,
        "Mutating",
        "a-early",
        webhook("early.example.com", early, reinvocationPolicy="IfNeeded"),
        exposed=early,
    )
    install(server, "Mutating", "b-late", webhook("late.example.com", late))
    server.expose_service(SERVICE[0], SERVICE[1], 443, early.address)
    # (Both webhooks are one Service here: route the late one's calls to its own server by its port.)
    late_config = server.store.get("mutatingwebhookconfigurations", "b-late")
    late_config["webhooks"][0]["clientConfig"]["service"]["port"] = 8443
    server.store.update(late_config)
    server.expose_service(SERVICE[0], SERVICE[1], 8443, late.address)
    out = kubectl("apply", "-f", "-", input_text=json.dumps(pod("a")))
    assert "Warning: first saw ['app']" in out.stderr
    assert "Warning: first saw ['app', 'late']" in out.stderr  # called again after the late one's patch
    assert [len(early.reviews()), len(late.reviews())] == [2, 1]


def test_the_stores_own_writes_do_not_go_through_webhooks(
    server: FakeApiServer, hooks: Callable[..., Hook]
) -> None:
    hook = hooks(lambda review: answer(review, allowed=False))
    install(server, "Validating", "deny-all", webhook("deny.example.com", hook), exposed=hook)
    server.store.create(pod("seeded"))  # tests seed state; the fake's kubelet and controllers write too
    server.store.bind("default", "seeded", "n1")
    assert hook.reviews() == [] and server.webhook_calls() == []
    assert isinstance(create_pod(server, pod("through-http")), ApiStatusError)


def test_match_conditions_skip_a_webhook_or_fail_by_its_policy(
    server: FakeApiServer, hooks: Callable[..., Hook]
) -> None:
    hook = hooks()
    conditions = [
        {
            "name": "kai",
            "expression": "object.spec.schedulerName == 'kai-scheduler' && request.operation == 'CREATE'",
        },
        {"name": "labelled", "expression": "has(object.metadata.labels) && 'app' in object.metadata.labels"},
    ]
    install(
        server,
        "Validating",
        "conditional",
        webhook("cond.example.com", hook, matchConditions=conditions),
        exposed=hook,
    )
    kai = pod("kai")
    kai["spec"]["schedulerName"] = "kai-scheduler"
    assert isinstance(create_pod(server, kai), dict)
    assert isinstance(create_pod(server, pod("default")), dict)
    assert [r["name"] for r in hook.reviews()] == ["kai"]
    server.store.patch(
        "validatingwebhookconfigurations",
        "conditional",
        [
            {
                "op": "add",
                "path": "/webhooks/0/matchConditions/-",
                "value": {"name": "bad", "expression": "object.spec.nope == 1"},
            }
        ],
        patch_type="json",
    )
    refused = create_pod(server, {**kai, "metadata": {"name": "kai2", "labels": {"app": "x"}}})
    assert isinstance(refused, ApiStatusError) and refused.code == 403
    assert refused.message == (
        "pods \"kai2\" is forbidden: expression 'object.spec.nope == 1' resulted in error: no such key: nope"
    )
    assert isinstance(create_pod(server, pod("default2")), dict)  # a false condition decides first


def test_the_charts_webhooks_with_the_projects_admission_server(
    server: FakeApiServer, tmp_path: Path
) -> None:
    service = f"{RELEASE}-admission"
    material = issue(service_dns_names(service, NAMESPACE), dt.datetime.now(dt.UTC))
    (tmp_path / "tls.crt").write_bytes(material.tls_crt)
    (tmp_path / "tls.key").write_bytes(material.tls_key)
    bundle = base64.b64encode(material.ca_bundle).decode()
    kinds = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    for configuration in armed_webhook_configurations(bundle, kinds):
        server.store.create(configuration)
    admission = WebhookServer(tmp_path, host="127.0.0.1", port=0)
    admission.start()
    try:
        server.expose_service(NAMESPACE, service, 443, ("127.0.0.1", admission.port))
        gpu_pod = pod("trainer")
        gpu_pod["spec"]["schedulerName"] = "kai-scheduler"
        gpu_pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        created = create_pod(server, gpu_pod)
        assert isinstance(created, dict) and created["spec"]["runtimeClassName"] == "nvidia"
        bad = pod("bad")
        bad["spec"]["schedulerName"] = "kai-scheduler"
        bad["metadata"]["annotations"] = {"gpu-fraction": "1.5"}
        refused = create_pod(server, bad)
        assert isinstance(refused, ApiStatusError) and refused.code == 400
        assert refused.message.startswith(
            'admission webhook "pods.validate.kai.scheduler" denied the request: '
        )
        assert isinstance(create_pod(server, pod("not-kai")), dict)  # matchConditions: not for this scheduler

        async def queue_without_resources(client: LightkubeClient) -> ApiStatusError | None:
            try:
                await client.create(
                    QUEUES,
                    {
                        "apiVersion": "scheduling.run.ai/v2",
                        "kind": "Queue",
                        "metadata": {"name": "q"},
                        "spec": {},
                    },
                )
            except ApiStatusError as error:
                return error
            return None

        queue_refusal = run(server, queue_without_resources)
        assert queue_refusal is not None and "queues.validate.kai.scheduler" in queue_refusal.message
        called = {c.webhook for c in server.webhook_calls()}
        assert called == {
            "pods.mutate.kai.scheduler",
            "pods.validate.kai.scheduler",
            "queues.validate.kai.scheduler",
        }
        assert all(c.error is None for c in server.webhook_calls())
    finally:
        admission.stop()
