"""Create, read, update, patch and delete over HTTP, with the real API server's answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kai_fakeapi.errors import ApiError

PODS = "/api/v1/namespaces/default/pods"
PGS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"
QUEUES = "/apis/scheduling.run.ai/v2/queues"


def podgroup(name: str, queue: str = "team-a") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 1, "queue": queue},
    }


def test_create_sets_server_fields_and_bumps_one_global_version(api: Any, make_pod: Any) -> None:
    a = api.ok("POST", PODS, make_pod("a"))
    b = api.ok("POST", PGS, podgroup("pg"))
    for obj in (a, b):
        meta = obj["metadata"]
        assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and meta["generation"] == 1
        assert isinstance(meta["resourceVersion"], str)
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1
    assert a["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert a["spec"]["priority"] == 0 and a["spec"]["schedulerName"] == "kai-scheduler"
    listed = api.ok("GET", PODS)
    assert (
        listed["kind"] == "PodList"
        and listed["metadata"]["resourceVersion"] == b["metadata"]["resourceVersion"]
    )
    assert [p["metadata"]["name"] for p in listed["items"]] == ["a"]
    assert api.ok("GET", f"{PGS}/pg")["spec"]["queue"] == "team-a"


def test_create_errors(api: Any, make_pod: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    status, body = api.call("POST", PODS, make_pod("a"))
    assert status == 409 and body["kind"] == "Status" and body["reason"] == "AlreadyExists"
    assert body["message"] == 'pods "a" already exists'
    status, body = api.call("POST", "/api/v1/namespaces/nowhere/pods", make_pod("b", "nowhere"))
    assert (status, body["reason"]) == (404, "NotFound")
    status, body = api.call("POST", PODS, make_pod("Bad_Name"))
    assert (status, body["reason"]) == (422, "Invalid")
    no_image = make_pod("c")
    del no_image["spec"]["containers"][0]["image"]
    assert api.call("POST", PODS, no_image)[0] == 422
    status, body = api.call("POST", PODS, make_pod("d", priorityClassName="missing"))
    assert (status, body["reason"]) == (403, "Forbidden")
    status, body = api.call("GET", f"{PODS}/zzz")
    assert (status, body["reason"], body["details"]["kind"]) == (404, "NotFound", "pods")


def test_generate_name_defaults_and_priority_admission(api: Any, make_pod: Any) -> None:
    api.ok(
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "train"},
            "value": 50,
        },
    )
    p = make_pod("", priorityClassName="train")
    p["metadata"] = {"generateName": "worker-"}
    p["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}}
    created = api.ok("POST", PODS, p)
    assert created["metadata"]["name"].startswith("worker-") and len(created["metadata"]["name"]) == 12
    assert created["spec"]["priority"] == 50
    assert created["spec"]["containers"][0]["resources"]["requests"] == {
        "nvidia.com/gpu": "1",
        "cpu": "1",
        "memory": "1Gi",
    }
    assert created["status"]["qosClass"] == "Guaranteed"


def test_update_checks_resource_version(api: Any, make_pod: Any) -> None:
    created = api.ok("POST", PGS, podgroup("pg"))
    changed = json.loads(json.dumps(created))
    changed["spec"]["minMember"] = 3
    updated = api.ok("PUT", f"{PGS}/pg", changed)
    assert updated["spec"]["minMember"] == 3 and updated["metadata"]["generation"] == 2
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    status, body = api.call("PUT", f"{PGS}/pg", changed)  # carries the old resourceVersion
    assert status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    # A custom resource needs a resourceVersion on update; a no-op update writes nothing.
    del changed["metadata"]["resourceVersion"]
    assert api.call("PUT", f"{PGS}/pg", changed)[0] == 422
    same = api.ok("PUT", f"{PGS}/pg", updated)
    assert same["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]


def test_status_subresource_and_main_resource_are_separate(api: Any) -> None:
    pg = api.ok("POST", PGS, {**podgroup("pg"), "status": {"phase": "Ignored"}})
    assert "status" not in pg
    pg["status"] = {"phase": "Running"}
    pg["spec"]["minMember"] = 9
    after = api.ok("PUT", f"{PGS}/pg/status", pg)
    assert after["status"] == {"phase": "Running"} and after["spec"]["minMember"] == 1
    patched = api.ok(
        "PATCH",
        f"{PGS}/pg",
        {"status": {"phase": "X"}, "spec": {"minMember": 2}},
        content_type="application/merge-patch+json",
    )
    assert patched["status"] == {"phase": "Running"} and patched["spec"]["minMember"] == 2
    assert api.ok("GET", f"{PGS}/pg/status")["status"] == {"phase": "Running"}


def test_pod_spec_is_immutable_except_image(api: Any, make_pod: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    status, body = api.call(
        "PATCH", f"{PODS}/a", {"spec": {"nodeName": "n1"}}, content_type="application/merge-patch+json"
    )
    assert status == 422 and "pod updates may not change fields" in body["message"]
    patch = {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}
    out = api.ok("PATCH", f"{PODS}/a", patch, content_type="application/strategic-merge-patch+json")
    assert out["spec"]["containers"][0]["image"] == "busybox:1.37"
    assert out["spec"]["containers"][0]["terminationMessagePath"] == "/dev/termination-log"  # merged by name


def test_patch_flavours(api: Any, make_pod: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    merge = api.ok(
        "PATCH",
        f"{PODS}/a",
        {"metadata": {"labels": {"x": "1", "app": None}}},
        content_type="application/merge-patch+json",
    )
    assert merge["metadata"]["labels"] == {"x": "1"}
    ops = [
        {"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}},
        {"op": "test", "path": "/metadata/labels/x", "value": "1"},
        {"op": "remove", "path": "/metadata/labels/x"},
    ]
    jp = api.ok("PATCH", f"{PODS}/a", ops, content_type="application/json-patch+json")
    assert jp["metadata"]["annotations"] == {"k": "v"} and jp["metadata"].get("labels", {}) == {}
    failing = [{"op": "test", "path": "/metadata/name", "value": "other"}]
    assert api.call("PATCH", f"{PODS}/a", failing, content_type="application/json-patch+json")[0] == 422
    smp = {
        "metadata": {"finalizers": ["a/b"]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    out = api.ok("PATCH", f"{PODS}/a/status", smp, content_type="application/strategic-merge-patch+json")
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert "finalizers" not in out["metadata"]  # a status write changes only the status
    stale = {"metadata": {"resourceVersion": "1"}, "spec": {"activeDeadlineSeconds": 5}}
    assert api.call("PATCH", f"{PODS}/a", stale, content_type="application/merge-patch+json")[0] == 409
    api.ok("POST", PGS, podgroup("pg"))
    status, _ = api.call(
        "PATCH",
        f"{PGS}/pg",
        {"spec": {"minMember": 2}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 415  # as on a real server: no strategic merge patch for custom resources
    assert api.call("PATCH", f"{PGS}/nope", {}, content_type="application/merge-patch+json")[0] == 404


def test_server_side_apply_creates_merges_and_prunes(api: Any) -> None:
    doc = (
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: q\n  labels: {a: '1', b: '2'}\n"
        "spec:\n  priority: 100\n  parentQueue: root\n"
    )
    path = f"{QUEUES}/q?fieldManager=me"
    status, created = api.call("PATCH", path, doc, content_type="application/apply-patch+yaml")
    assert status == 201 and created["spec"] == {"priority": 100, "parentQueue": "root"}
    api.ok(
        "PATCH", f"{QUEUES}/q", {"spec": {"displayName": "Q"}}, content_type="application/merge-patch+json"
    )
    doc2 = (
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: q\n  labels: {a: '1'}\n"
        "spec:\n  priority: 7\n"
    )
    status, out = api.call("PATCH", path, doc2, content_type="application/apply-patch+yaml")
    assert status == 200
    assert out["spec"] == {"priority": 7, "displayName": "Q"}  # parentQueue pruned, the other manager's kept
    assert out["metadata"]["labels"] == {"a": "1"}
    assert api.call("PATCH", f"{QUEUES}/q", doc2, content_type="application/apply-patch+yaml")[0] == 400


def test_delete_and_preconditions(api: Any, make_pod: Any) -> None:
    created = api.ok("POST", PODS, make_pod("a"))
    bad = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "other"}}
    assert api.call("DELETE", f"{PODS}/a", bad)[0] == 409
    deleted = api.ok("DELETE", f"{PODS}/a")
    assert deleted["metadata"]["uid"] == created["metadata"]["uid"]
    assert api.call("GET", f"{PODS}/a")[0] == 404
    assert api.call("DELETE", f"{PODS}/a")[0] == 404


def test_finalizers_hold_deletion(api: Any) -> None:
    pg = podgroup("pg")
    pg["metadata"]["finalizers"] = ["kai.scheduler/test"]
    api.ok("POST", PGS, pg)
    held = api.ok("DELETE", f"{PGS}/pg")
    assert held["metadata"]["deletionTimestamp"]
    assert api.ok("GET", f"{PGS}/pg")["metadata"]["deletionTimestamp"]
    api.ok(
        "PATCH", f"{PGS}/pg", {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json"
    )
    assert api.call("GET", f"{PGS}/pg")[0] == 404


def test_selectors(api: Any, make_pod: Any, server: Any) -> None:
    for name, app in (("a", "x"), ("b", "y"), ("c", "x")):
        p = make_pod(name)
        p["metadata"]["labels"] = {"app": app, "tier": name}
        api.ok("POST", PODS, p)
    server.store.bind("default", "a", "n1")
    server.store.set_status("pods", "c", {"phase": "Running"})

    def names(query: str) -> list[str]:
        return [p["metadata"]["name"] for p in api.ok("GET", f"{PODS}?{query}")["items"]]

    assert names("labelSelector=app%3Dx") == ["a", "c"]
    assert names("labelSelector=app!%3Dx") == ["b"]
    assert names("labelSelector=tier+in+(a,b),app") == ["a", "b"]
    assert names("labelSelector=!missing,tier+notin+(a)") == ["b", "c"]
    assert names("fieldSelector=spec.nodeName%3Dn1") == ["a"]
    assert names("fieldSelector=spec.nodeName%3D") == ["b", "c"]
    assert names("fieldSelector=status.phase!%3DPending,metadata.namespace%3Ddefault") == ["c"]
    assert names("fieldSelector=metadata.name%3Db") == ["b"]
    all_ns = api.ok("GET", "/api/v1/pods?fieldSelector=metadata.namespace%3Ddefault")
    assert len(all_ns["items"]) == 3
    status, body = api.call("GET", f"{PODS}?fieldSelector=spec.bogus%3D1")
    assert status == 400 and "field label not supported" in body["message"]
    assert api.call("GET", f"{PODS}?labelSelector=a+in+b")[0] == 400


def test_pagination_and_expired_continue(api: Any, make_pod: Any, server: Any) -> None:
    for i in range(5):
        api.ok("POST", PODS, make_pod(f"p{i}"))
    first = api.ok("GET", f"{PODS}?limit=2")
    token = first["metadata"]["continue"]
    assert [p["metadata"]["name"] for p in first["items"]] == ["p0", "p1"]
    assert first["metadata"]["remainingItemCount"] == 3
    api.ok("DELETE", f"{PODS}/p3")  # the next pages still show the list as of the first page
    second = api.ok("GET", f"{PODS}?limit=2&continue={token}")
    third = api.ok("GET", f"{PODS}?limit=2&continue={second['metadata']['continue']}")
    assert [p["metadata"]["name"] for p in second["items"] + third["items"]] == ["p2", "p3", "p4"]
    assert "continue" not in third["metadata"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    server.compact()
    status, body = api.call("GET", f"{PODS}?limit=2&continue={token}")
    assert (status, body["reason"]) == (410, "Expired")


def test_namespaces_and_cluster_scope(api: Any, make_pod: Any) -> None:
    api.ok(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    )
    api.ok("POST", "/api/v1/namespaces/team/pods", make_pod("a", "team"))
    ns = api.ok("GET", "/api/v1/namespaces/team")
    assert ns["status"]["phase"] == "Active"
    assert api.call("POST", "/api/v1/namespaces/team/pods", make_pod("b", "other"))[0] == 400
    assert api.call("GET", "/apis/scheduling.run.ai/v2/namespaces/team/queues")[0] == 404
    api.ok("DELETE", "/api/v1/namespaces/team")
    assert api.call("GET", "/api/v1/namespaces/team/pods/a")[0] == 404


def test_every_requested_type_is_served(api: Any) -> None:
    paths = [
        "/api/v1/nodes",
        "/api/v1/namespaces/default/configmaps",
        "/api/v1/namespaces/default/events",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        "/apis/scheduling.run.ai/v2/queues",
        PGS,
        "/apis/scheduling.run.ai/v1alpha2/namespaces/default/bindrequests",
        "/apis/kai.scheduler/v1alpha1/topologies",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "/apis/batch/v1/namespaces/default/jobs",
        "/apis/apps/v1/namespaces/default/deployments",
        "/apis/apps/v1/namespaces/default/replicasets",
        "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs",
    ]
    for path in paths:
        assert api.call("GET", path)[0] == 200, path


def test_lease_optimistic_concurrency(api: Any) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    lease = api.ok(
        "POST",
        path,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "kai-scheduler"},
            "spec": {"holderIdentity": "a"},
        },
    )
    lease["spec"]["holderIdentity"] = "b"
    api.ok("PUT", f"{path}/kai-scheduler", lease)
    lease["spec"]["holderIdentity"] = "c"
    assert api.call("PUT", f"{path}/kai-scheduler", lease)[0] == 409


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def widget_crd(schema: dict[str, Any]) -> dict[str, Any]:
    version = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [version],
        },
    }


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def test_crd_registration_serves_a_new_kind(api: Any) -> None:
    crd = widget_crd({"type": "object"})
    out = api.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert {c["type"] for c in out["status"]["conditions"]} == {"NamesAccepted", "Established"}
    path = "/apis/example.com/v1/namespaces/default/widgets"
    api.ok("POST", path, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert "widgets" in [r["name"] for r in api.ok("GET", "/apis/example.com/v1")["resources"]]
    api.ok("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
    assert api.call("GET", path)[0] == 404
    bad = json.loads(json.dumps(crd))
    bad["metadata"]["name"] = "wrong"
    assert api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bad)[0] == 422


def test_a_crds_changed_schema_holds_from_the_next_write(api: Any) -> None:
    spec = {"type": "object", "properties": {"size": {"type": "integer"}}}
    crd = api.ok("POST", CRDS, widget_crd({"type": "object", "properties": {"spec": spec}}))
    assert api.ok("POST", WIDGETS, widget("a", size=1, colour="red"))["spec"] == {"size": 1}
    spec["properties"] = {"size": {"type": "string"}, "colour": {"type": "string"}}
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = spec
    api.ok("PUT", f"{CRDS}/widgets.example.com", crd)
    kept = api.ok("POST", WIDGETS, widget("b", size="L", colour="red"))
    assert kept["spec"] == {"size": "L", "colour": "red"}
    assert api.call("POST", WIDGETS, widget("c", size=1, colour="red"))[0] == 422  # as "a" was


def test_a_deleted_crds_kind_is_no_longer_known_by_name(server: Any, api: Any) -> None:
    api.ok("POST", CRDS, widget_crd({"type": "object"}))
    assert server.store.resource("widget").key == "widgets.example.com"
    api.ok("DELETE", f"{CRDS}/widgets.example.com")
    with pytest.raises(ApiError) as gone:
        server.store.resource("widget")
    assert gone.value.code == 404


def test_python_api_seeds_state(server: Any, make_node: Any, make_pod: Any) -> None:
    store = server.store
    store.create(make_node("n1"))
    running = make_pod("r", nodeName="n1")
    running["status"] = {"phase": "Running"}
    store.create(running)
    assert store.get("pods", "r")["status"]["phase"] == "Running"
    assert store.get("no", "n1")["status"]["allocatable"] == {"nvidia.com/gpu": "8"}
    store.load(
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: q}\nspec: {priority: 1}\n---\n"
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: q}\nspec: {priority: 2}\n"
    )
    assert store.get("queues", "q")["spec"]["priority"] == 2
    assert [q["metadata"]["name"] for q in store.list("queue")] == ["q"]
    assert store.try_get("pg", "none") is None


def test_delete_collection_and_dry_run(api: Any, make_pod: Any, server: Any) -> None:
    for name in ("a", "b", "c"):
        p = make_pod(name)
        p["metadata"]["labels"] = {"group": "x" if name != "c" else "y"}
        api.ok("POST", PODS, p)
    before = server.store.resource_version
    assert api.ok("POST", f"{PODS}?dryRun=All", make_pod("d"))["metadata"]["name"] == "d"
    api.ok("DELETE", f"{PODS}/a?dryRun=All")
    assert server.store.resource_version == before  # dry runs write nothing
    deleted = api.ok("DELETE", f"{PODS}?labelSelector=group%3Dx")
    assert deleted["kind"] == "PodList" and [p["metadata"]["name"] for p in deleted["items"]] == ["a", "b"]
    assert [p["metadata"]["name"] for p in server.store.list("pods")] == ["c"]
    assert api.call("DELETE", "/api/v1/namespaces/default")[0] == 403


def test_strategic_merge_patch_merges_webhooks_by_name(api: Any) -> None:
    """As Kubernetes' admissionregistration types (`patchMergeKey:"name"`): a patch that names one webhook
    changes that one and keeps the rest of it and the others (how a CA is injected into caBundle)."""
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    service = {"name": "svc", "namespace": "kai", "path": "/validate"}
    webhooks = [
        {"name": name, "failurePolicy": "Ignore", "clientConfig": {"service": service}, "sideEffects": "None"}
        for name in ("a.kai", "b.kai")
    ]
    api.ok("POST", path, {"metadata": {"name": "hooks"}, "webhooks": webhooks})
    patch = {"webhooks": [{"name": "b.kai", "failurePolicy": "Fail", "clientConfig": {"caBundle": "Q0E="}}]}
    out = api.ok("PATCH", f"{path}/hooks", patch, content_type="application/strategic-merge-patch+json")
    assert out["webhooks"] == [
        webhooks[0],
        {**webhooks[1], "failurePolicy": "Fail", "clientConfig": {"service": service, "caBundle": "Q0E="}},
    ]


def test_discovery_and_openapi_documents_are_served_at_every_depth(api: Any) -> None:
    root = api.ok("GET", "/openapi/v3")["paths"]
    for path in ("/api/v1", "/apis/scheduling.run.ai", "/apis/scheduling.run.ai/v2/"):
        assert api.call("GET", path)[0] == 200, path
    for key in ("api/v1", "apis/scheduling.run.ai/v2"):
        assert api.call("GET", root[key]["serverRelativeURL"].partition("?")[0])[0] == 200, key


def test_a_percent_encoded_name_in_a_path_is_decoded(api: Any, make_pod: Any) -> None:
    api.ok("POST", PODS, make_pod("a-b"))
    assert api.ok("GET", f"{PODS}/a%2Db")["metadata"]["name"] == "a-b"
