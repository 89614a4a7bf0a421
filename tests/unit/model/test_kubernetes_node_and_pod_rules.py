"""Kubernetes rules the snapshot follows: node readiness, the kubelet's hostname label, sidecar init
containers, and scheduling gates (KAI's Gated pods)."""

from __future__ import annotations

from typing import Any

from helpers import node_manifest, pod_manifest, queue_manifest, simulate, snapshot_of
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import ApiObject, Pod


def objects(*manifests: dict[str, Any]) -> list[ApiObject]:
    return [parse_object(m, "test", i) for i, m in enumerate(manifests)]


def not_ready(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "False"}]
    return manifest


def group(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(g for g in document["podGroups"] if g["name"] == name)
    return found


# --- node readiness ---------------------------------------------------------------------------------


def test_a_node_that_is_not_ready_takes_no_pods() -> None:
    document = simulate(
        objects(
            not_ready(node_manifest("n0", gpus=4)),
            queue_manifest("q"),
            pod_manifest("p", gpus=1),
        )
    )
    assert next(p for p in document["pods"] if p["name"] == "p")["node"] is None
    assert "1 node(s) were not ready" in group(document, "pg-p")["unschedulableReason"]


def test_a_ready_condition_true_and_no_conditions_both_mean_ready() -> None:
    ready = node_manifest("n0", gpus=4)
    ready["status"]["conditions"] = [
        {"type": "MemoryPressure", "status": "False"},
        {"type": "Ready", "status": "True"},
    ]
    document = simulate(
        objects(ready, node_manifest("n1", gpus=4), queue_manifest("q"), pod_manifest("p", gpus=8))
    )
    # 8 GPUs on two 4-GPU nodes do not fit one pod, but both nodes count.
    assert document["summary"]["gpu"]["capacity"] == 8


def test_fair_share_divides_only_ready_nodes_and_their_foreign_pods_take_nothing_from_it() -> None:
    snap = snapshot_of(
        objects(
            node_manifest("n0", gpus=4, cpu="8"),
            not_ready(node_manifest("n1", gpus=4, cpu="8")),
            queue_manifest("q"),
            pod_manifest("foreign", None, gpus=1, cpu="2", scheduler="default-scheduler", node_name="n1"),
        )
    )
    assert snap.capacity.gpu == 4
    assert snap.capacity.cpu == 8000


# --- the hostname label -----------------------------------------------------------------------------


def test_every_node_has_its_hostname_label_as_the_kubelet_sets_it() -> None:
    document = simulate(
        objects(
            node_manifest("n0", gpus=4),
            node_manifest("n1", gpus=4),
            queue_manifest("q"),
            pod_manifest("p", gpus=1, node_selector={"kubernetes.io/hostname": "n1"}),
        )
    )
    assert next(p for p in document["pods"] if p["name"] == "p")["node"] == "n1"


def test_an_explicit_hostname_label_is_kept() -> None:
    snap = snapshot_of(objects(node_manifest("n0", labels={"kubernetes.io/hostname": "host-a"})))
    assert snap.nodes.specs[0].labels["kubernetes.io/hostname"] == "host-a"


# --- sidecar init containers ------------------------------------------------------------------------


def pod_with_init(init: list[dict[str, Any]], main_cpu: str) -> Pod:
    manifest = pod_manifest("p", cpu=main_cpu, memory=None)
    manifest["spec"]["initContainers"] = init
    found = Pod.model_validate(manifest)
    return found


def init(cpu: str, *, sidecar: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"name": f"i{cpu}", "image": "x", "resources": {"requests": {"cpu": cpu}}}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def test_a_sidecar_runs_beside_the_main_containers_and_adds_to_their_request() -> None:
    assert pod_with_init([init("2", sidecar=True)], "3").resource_requests()["cpu"] == 5


def test_a_plain_init_container_counts_only_if_larger_than_the_main_containers() -> None:
    assert pod_with_init([init("2")], "3").resource_requests()["cpu"] == 3
    assert pod_with_init([init("4")], "3").resource_requests()["cpu"] == 4


def test_an_init_container_after_a_sidecar_runs_together_with_it() -> None:
    # sidecar 2, then init 3 (runs with the sidecar: 5), then main 1 (with the sidecar: 3): the peak is 5.
    assert pod_with_init([init("2", sidecar=True), init("3")], "1").resource_requests()["cpu"] == 5
    # An init container before the sidecar runs alone.
    assert pod_with_init([init("3"), init("2", sidecar=True)], "1").resource_requests()["cpu"] == 3


# --- scheduling gates -------------------------------------------------------------------------------


def gated(name: str, **kwargs: Any) -> dict[str, Any]:
    manifest = pod_manifest(name, **kwargs)
    manifest["spec"]["schedulingGates"] = [{"name": "example.com/not-yet"}]
    return manifest


def test_a_gated_pod_is_not_scheduled_and_says_why() -> None:
    document = simulate(objects(node_manifest("n0", gpus=4), queue_manifest("q"), gated("g", gpus=1)))
    assert next(p for p in document["pods"] if p["name"] == "g")["node"] is None
    pg = group(document, "pg-g")
    assert pg["pending"] == 1
    assert "schedulingGates" in pg["unschedulableReason"]


def test_a_gang_with_a_gated_member_waits_whole() -> None:
    from helpers import pod_group_manifest

    document = simulate(
        objects(
            node_manifest("n0", gpus=4),
            queue_manifest("q"),
            pod_group_manifest("gang", "q", min_member=2),
            pod_manifest("gang-0", gpus=1, group="gang"),
            gated("gang-1", gpus=1, group="gang"),
        )
    )
    assert {p["name"]: p["node"] for p in document["pods"]} == {"gang-0": None, "gang-1": None}
    assert "1 wait for their schedulingGates" in group(document, "gang")["unschedulableReason"]


def test_a_bound_pod_with_leftover_gates_still_holds_its_node() -> None:
    document = simulate(
        objects(
            node_manifest("n0", gpus=1),
            queue_manifest("q"),
            gated("running", gpus=1, node_name="n0", phase="Running"),
            pod_manifest("waiting", gpus=1),
        )
    )
    pods = {p["name"]: p["node"] for p in document["pods"]}
    assert pods == {"running": "n0", "waiting": None}
