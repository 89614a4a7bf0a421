"""The dynamicresources plugin in a session: KAI's PreFilter rules, the device filter, and what placing
and taking pods off does to their claims (ported from KAI's
pkg/scheduler/plugins/dynamicresources/dynamicresources_test.go and dynamicresources_statement_test.go)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from helpers import (
    cluster_state,
    device_class_manifest,
    node,
    objects_of,
    open_session,
    pod_group_manifest,
    pod_manifest,
    queue,
    resource_claim_manifest,
    resource_slice_manifest,
)
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.session import Session
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.dra import ClaimState
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.plugins.dynamicresources import DraSession, DynamicResourcesPlugin

NS = "test"
GPU = "nvidia.com/gpu"  # KAI's tests name their device class after the extended resource


def _claim(name: str, count: int = 1, **kwargs: Any) -> dict[str, Any]:
    return resource_claim_manifest(name, count, GPU, namespace=NS, driver=GPU, **kwargs)


def _slice(node_name: str, count: int) -> dict[str, Any]:
    return resource_slice_manifest(f"{node_name}-gpu", node_name, count, driver=GPU)


def _task_pod(
    name: str, *, claims: Sequence[str] = (), templates: dict[str, str] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """A pod of queue q-1 whose claim names are the claims' names, as KAI's fake tasks have them;
    `templates`: pod claim name -> the claim made from its template."""
    manifest = pod_manifest(name, "q-1", namespace=NS, claims={c: c for c in claims}, **kwargs)
    if templates:
        manifest["spec"].setdefault("resourceClaims", []).extend(
            {"name": ref, "resourceClaimTemplateName": ref} for ref in templates
        )
        manifest["status"] = {
            **manifest.get("status", {}),
            "resourceClaimStatuses": [
                {"name": ref, "resourceClaimName": made} for ref, made in templates.items()
            ],
        }
    return manifest


def _session(
    manifests: list[dict[str, Any]], *, nodes: int = 2, enabled: bool = True
) -> tuple[Session, DynamicResourcesPlugin]:
    objects: list[ApiObject] = [node(f"node{i}", gpus=0) for i in range(nodes)]
    objects += [queue("q-1")]
    objects += objects_of(device_class_manifest(GPU), *manifests)
    state = cluster_state(objects)
    snapshot = build_snapshot(replace(state, dra_enabled=enabled))
    session = open_session(snapshot, plugins=["predicates", "proportion"])
    plugin = DynamicResourcesPlugin({})
    plugin.on_session_open(session)
    return session, plugin


def _task(session: Session, name: str) -> TaskInfo:
    return session.snapshot.tasks[f"{NS}/{name}"]


def _prefilter(session: Session, name: str) -> str | None:
    """What the pre-predicates say of the pod (KAI's test calls its PrePredicateFn), and that the session
    explains a pod they refuse with their words and offers it no node."""
    task = _task(session, name)
    # Only DRA's (KAI's test calls the plugin's PreFilter alone): some of these pods ask for more GPUs than
    # one node has, which MaxNodePoolResources refuses first.
    own = [
        check
        for check in session.points.pre_predicates
        if isinstance(getattr(check, "__self__", None), DraSession)
    ]
    failure = next((f for check in own if (f := check(task)) is not None), None)
    if failure is not None:
        assert session.explain_no_fit(task) in {failure, session._pre_predicate_failure(task)}
        assert not session.candidate_nodes(task).any()
    return failure


# --- PreFilter (dynamicresources_test.go, TestDynamicResourceAllocationPreFilter: all 12 cases) -----

SLICES = [_slice("node0", 1), _slice("node1", 1)]


@pytest.mark.parametrize(
    ("case", "manifests", "enabled", "error"),
    [
        ("enabled, no claims", [_task_pod("task-1")], True, None),
        (
            "enabled, shared claims with the right queue label",
            [
                *SLICES,
                _claim("claim-0", queue="q-1"),
                _claim("claim-1", queue="q-1"),
                _task_pod("task-1", claims=["claim-0", "claim-1"]),
            ],
            True,
            None,
        ),
        (
            "enabled, a template whose claim is not made yet",
            [*SLICES, _task_pod("task-1", templates={"template-0": "claim-0"})],
            True,
            'failed to get resource claim test/claim-0: could not find ResourceClaim "test/claim-0"',
        ),
        (
            "enabled, a template with its claim",
            [*SLICES, _claim("claim-0"), _task_pod("task-1", templates={"template-0": "claim-0"})],
            True,
            None,
        ),
        ("disabled, no claims", [_task_pod("job-1-0")], False, None),
        (
            "disabled, with claims",
            [
                *SLICES,
                _claim("claim-0"),
                _claim("claim-1"),
                _task_pod("job-1-0", claims=["claim-0", "claim-1"]),
            ],
            False,
            "pod test/job-1-0 cannot be scheduled, it references resource claims <claim-0, claim-1> "
            "while dynamic resource allocation feature is not enabled in cluster",
        ),
        (
            "disabled, with a template",
            [*SLICES, _claim("claim-0"), _task_pod("job-1-0", templates={"template-0": "claim-0"})],
            False,
            "pod test/job-1-0 cannot be scheduled, it references resource claims <template-0> "
            "while dynamic resource allocation feature is not enabled in cluster",
        ),
        (
            "too many consumers",
            [
                *SLICES,
                _claim("claim-0", queue="q-1", reserved_for=[f"pod-{i}" for i in range(256)]),
                _task_pod("job-1-0", claims=["claim-0"]),
            ],
            True,
            "resource claim test/claim-0 has reached its maximum number of consumers (256)",
        ),
        (
            "a shared claim without a queue label",
            [SLICES[0], _claim("claim-no-label"), _task_pod("job-1-0", claims=["claim-no-label"])],
            True,
            "pod test/job-1-0 cannot be scheduled: DRA claim claim-no-label is a shared GPU claim but does "
            "not have a queue label (kai.scheduler/queue)",
        ),
        (
            "a shared claim with another queue's label",
            [
                SLICES[0],
                _claim("claim-wrong-queue", queue="different-queue"),
                _task_pod("job-1-0", claims=["claim-wrong-queue"]),
            ],
            True,
            "pod test/job-1-0 cannot be scheduled: DRA claim claim-wrong-queue is a shared GPU claim with "
            "wrong queue label (expected queue: q-1, claim queue label: different-queue)",
        ),
        (
            "a template's claim needs no queue label",
            [
                SLICES[0],
                _claim("claim-from-template"),
                _task_pod("job-1-0", templates={"template-0": "claim-from-template"}),
            ],
            True,
            None,
        ),
        (
            "a shared claim of another kind of device needs no queue label",
            [
                resource_slice_manifest("node0-network", "node0", 1, driver="network.example.com"),
                resource_claim_manifest("non-gpu-claim", 1, "network.example.com", namespace=NS),
                _task_pod("job-1-0", claims=["non-gpu-claim"]),
            ],
            True,
            None,
        ),
    ],
)
def test_prefilter(case: str, manifests: list[dict[str, Any]], enabled: bool, error: str | None) -> None:
    if any(m["kind"] == "ResourceClaim" and m["metadata"]["name"] == "non-gpu-claim" for m in manifests):
        manifests = [device_class_manifest("network.example.com"), *manifests]
    session, _ = _session(manifests, enabled=enabled)
    name = next(m["metadata"]["name"] for m in manifests if m["kind"] == "Pod")
    assert _prefilter(session, name) == error, case


# --- the device filter ------------------------------------------------------------------------------


def test_an_allocated_claim_keeps_its_pods_on_the_nodes_its_devices_reach() -> None:
    session, _ = _session(
        [
            *SLICES,
            _claim("shared", queue="q-1", allocated=["gpu-0"], node="node1", reserved_for=["other"]),
            _task_pod("task-1", claims=["shared"]),
        ]
    )
    assert session.candidate_nodes(_task(session, "task-1")).tolist() == [False, True]


@pytest.mark.parametrize(
    ("name", "pod", "allowed"),
    [
        # KAI v0.17.0 pkg/scheduler/api/node_info/node_info_test.go
        # TestPredicateByNodeResourcesType_SharedGPU_DRANode
        ("fraction pod rejected on DRA-only node", {"fraction": 0.5}, [False, True]),
        ("gpu-memory pod rejected on DRA-only node", {"gpu_memory": 2000}, [False, None]),
        ("cpu-only pod accepted on DRA-only node", {}, [True, True]),
        # (the 4th, "fraction pod accepted on device-plugin node", is the second node of the first case)
        # TestPredicateByNodeResourcesType_DRA "Extended resource request on DRA-only node is allowed ..."
        ("whole GPUs allowed on a DRA-only node", {"gpus": 1}, [True, True]),
    ],
)
def test_a_dra_only_node_refuses_shared_gpu_pods_only(
    name: str, pod: dict[str, Any], allowed: list[bool | None]
) -> None:
    objects: list[ApiObject] = [node("plugin-gpus", gpus=4), node("dra-gpus", gpus=0), queue("q-1")]
    objects += objects_of(
        device_class_manifest(GPU),
        resource_slice_manifest("s", "dra-gpus", 4, driver=GPU),
        pod_manifest("p", "q-1", **pod),
    )
    session = open_session(build_snapshot(cluster_state(objects)))
    task = session.snapshot.tasks["default/p"]
    # Nodes in name order: dra-gpus, plugin-gpus.
    # (None: the device-plugin node has no GPU memory label, so gpu-memory is another matter there.)
    got = session.candidate_nodes(task).tolist()
    assert [g if a is not None else None for g, a in zip(got, allowed, strict=True)] == allowed, name
    if "fraction" in pod:  # (gpu-memory is refused first for want of the nodes' GPU memory label)
        explained = session.explain_no_fit(task)
        assert "fractional/shared GPU pods are not yet supported on DRA-only nodes" in explained


def test_a_session_without_dra_registers_nothing() -> None:
    objects: list[ApiObject] = [node("n0"), queue("q-1"), *objects_of(pod_manifest("p", "q-1", gpus=1))]
    session = open_session(build_snapshot(cluster_state(objects)), plugins=[])
    before = (len(session.points.task_predicates), len(session.points.on_allocate))
    plugin = DynamicResourcesPlugin({})
    plugin.on_session_open(session)
    assert (len(session.points.task_predicates), len(session.points.on_allocate)) == before
    assert session.points.pre_predicates == [] and plugin.state is None


# --- placing and taking off (dynamicresources_statement_test.go) -------------------------------------


def _claims(plugin: DynamicResourcesPlugin) -> dict[str, ClaimState]:
    assert plugin.state is not None
    return plugin.state.claims


def _devices(state: ClaimState, plugin: DynamicResourcesPlugin) -> list[str]:
    assert plugin.state is not None
    return [plugin.state.dra.catalog.ids[d].name for d in state.devices]


@pytest.mark.parametrize(
    ("case", "claims", "node_gpus"),
    [
        ("Allocate then rollback pod with DRA claim", ["gpu-claim"], 1),
        ("Allocate then rollback pod with multiple DRA claims", ["gpu-claim-1", "gpu-claim-2"], 2),
    ],
)
def test_allocate_then_rollback(case: str, claims: list[str], node_gpus: int) -> None:
    session, plugin = _session(
        [
            _slice("node0", node_gpus),
            *(_claim(c, queue="q-1") for c in claims),
            _task_pod("task-1", claims=claims),
        ],
        nodes=1,
    )
    task = _task(session, "task-1")
    statement = session.statement("allocate")
    statement.allocate(task, 0, (), "test")
    states = _claims(plugin)
    assert all(states[f"{NS}/{c}"].allocation is not None for c in claims), case
    assert sorted(d for c in claims for d in _devices(states[f"{NS}/{c}"], plugin)) == [
        f"gpu-{i}" for i in range(node_gpus)
    ]
    assert all(states[f"{NS}/{c}"].reserved_for == {"task-1"} for c in claims)
    statement.rollback()
    assert all(
        states[f"{NS}/{c}"].allocation is None and not states[f"{NS}/{c}"].reserved_for for c in claims
    )
    assert plugin.state is not None and bool(plugin.state.free.all())


def test_allocate_then_rollback_a_pod_sharing_an_allocated_claim() -> None:
    """Case "Allocate then rollback pod where claim is already allocated to another pod (shared claim)"."""
    session, plugin = _session(
        [
            _slice("node0", 1),
            _claim(
                "shared-gpu-claim",
                queue="q-1",
                allocated=["gpu-0"],
                node="node0",
                reserved_for=["other-task"],
            ),
            _task_pod("other-task", claims=["shared-gpu-claim"], node_name="node0"),
            _task_pod("task-1", claims=["shared-gpu-claim"]),
        ],
        nodes=1,
    )
    state = _claims(plugin)[f"{NS}/shared-gpu-claim"]
    statement = session.statement("allocate")
    statement.allocate(_task(session, "task-1"), 0, (), "test")
    assert state.reserved_for == {"other-task", "task-1"} and _devices(state, plugin) == ["gpu-0"]
    statement.rollback()
    assert state.reserved_for == {"other-task"} and _devices(state, plugin) == ["gpu-0"]


@pytest.mark.parametrize("shared", [False, True])
def test_evict_then_unevict_gives_the_same_devices_back(shared: bool) -> None:
    """Cases "Evict then unevict running pod with DRA claim" and "... with shared DRA claim (multiple
    consumers)": evicting the only consumer frees the claim's devices; taking the eviction back gives it
    exactly the devices it had."""
    consumers = ["test-task", "task-other"] if shared else ["test-task"]
    session, plugin = _session(
        [
            _slice("node0", 2),
            _claim("gpu-claim", queue="q-1", allocated=["gpu-1"], node="node0", reserved_for=consumers),
            *(_task_pod(name, claims=["gpu-claim"], node_name="node0") for name in consumers),
        ],
        nodes=1,
    )
    state = _claims(plugin)[f"{NS}/gpu-claim"]
    statement = session.statement("reclaim")
    statement.evict(_task(session, "test-task"), "test")
    assert (state.allocation is None) is not shared
    statement.rollback()
    assert _devices(state, plugin) == ["gpu-1"] and state.reserved_for == set(consumers)
    assert plugin.state is not None and plugin.state.free.tolist() == [True, False]


@pytest.mark.parametrize(
    ("case", "claims"),
    [
        ("Pipeline then unpipeline pod with DRA claim", ["gpu-claim"]),
        ("Pipeline then unpipeline pod with multiple DRA claims", ["gpu-claim-1", "gpu-claim-2"]),
    ],
)
def test_pipeline_then_unpipeline(case: str, claims: list[str]) -> None:
    session, plugin = _session(
        [
            _slice("node0", len(claims)),
            *(_claim(c, queue="q-1") for c in claims),
            _task_pod("task-pending", claims=claims),
        ],
        nodes=1,
    )
    states = [_claims(plugin)[f"{NS}/{c}"] for c in claims]
    statement = session.statement("reclaim")
    statement.pipeline(_task(session, "task-pending"), 0, (), "test")
    assert all(state.allocation is not None for state in states), case
    assert {d for state in states for d in _devices(state, plugin)} == {
        f"gpu-{i}" for i in range(len(claims))
    }
    statement.rollback()
    assert all(state.allocation is None and not state.reserved_for for state in states)


def test_a_bound_pods_decision_carries_its_claims_allocations() -> None:
    objects: list[ApiObject] = [node("node0", gpus=0), queue("q-1")]
    objects += objects_of(
        device_class_manifest(GPU),
        _slice("node0", 2),
        _claim("c", 2, queue="q-1"),
        pod_group_manifest("g", "q-1", min_member=1, namespace=NS),
        _task_pod("p", claims=["c"], group="g"),
    )
    result = Scheduler(SchedulerConfig()).run(build_snapshot(cluster_state(objects)), cycle=1, now=0.0)
    (decision,) = result.decisions
    assert decision.type == "bind" and decision.node == "node0"
    (claim,) = decision.claims
    assert (claim.name, claim.claim) == ("c", f"{NS}/c")
    assert [r.device for r in claim.allocation.devices.results] == ["gpu-0", "gpu-1"]


def test_two_pods_do_not_get_the_same_devices_in_one_cycle() -> None:
    objects: list[ApiObject] = [node("node0", gpus=0), node("node1", gpus=0), queue("q-1")]
    objects += objects_of(
        device_class_manifest(GPU),
        _slice("node0", 2),
        _slice("node1", 1),
        *(_claim(f"c{i}", queue="q-1") for i in range(4)),
        *(_task_pod(f"p{i}", claims=[f"c{i}"]) for i in range(4)),
    )
    result = Scheduler(SchedulerConfig()).run(build_snapshot(cluster_state(objects)), cycle=1, now=0.0)
    taken = [
        (d.node, r.pool, r.device)
        for d in result.decisions
        for c in d.claims
        for r in c.allocation.devices.results
    ]
    assert len(taken) == 3 and len(set(taken)) == 3
    assert all(node_name == pool for node_name, pool, _ in taken)
    assert np.unique([d.pod for d in result.decisions]).size == 3
