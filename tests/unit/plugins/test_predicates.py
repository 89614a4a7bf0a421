"""predicates: which nodes a pod may run on at all (and the k8s preference scores).

Reference: kai-reference §4.4 `predicates` (node conditions/unschedulable, NodeAffinity, TaintToleration,
InterPodAffinity, GPU type rules: MIG vs whole vs fraction, gpu-memory only on nodes with the memory
label, max pods), §6 MIG ("single" nodes accept no fractions, "mixed" nodes accept only MIG-instance
jobs), §4.4 score constants (K8sPlugins 100 000 for preferred affinity / PreferNoSchedule).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from helpers import binds, cluster_state, config, node, one_cycle, open_session, pod, queue, run
from kai_scheduler.model.cache import build_snapshot

ALLOCATE = config(actions="allocate")


def placed(objects: list[Any]) -> dict[str, str]:
    return binds(one_cycle(objects, ALLOCATE))


def reason(objects: list[Any], job: str) -> str:
    return run(objects, ALLOCATE, cycles=1).reasons[f"default/{job}"]


def test_node_selector() -> None:
    objects = [
        node("a", labels={"zone": "x"}),
        node("b", labels={"zone": "y"}),
        queue("q"),
        pod("p", gpus=1, node_selector={"zone": "y"}),
        pod("none", gpus=1, node_selector={"zone": "z"}),
    ]
    assert placed(objects) == {"p": "b"}
    assert "didn't match Pod's node affinity/selector" in reason(objects, "pg-none")


def _required(key: str, operator: str, values: list[str]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": operator, "values": values}]}
                ]
            }
        }
    }


def test_required_node_affinity() -> None:
    objects = [
        node("a", labels={"gpu": "a100"}),
        node("b", labels={"gpu": "h100"}),
        node("c", labels={"gpu": "l4"}),
        queue("q"),
        pod("in", gpus=1, affinity=_required("gpu", "In", ["h100"])),
        pod("notin", gpus=1, affinity=_required("gpu", "NotIn", ["a100", "h100"])),
    ]
    assert placed(objects) == {"in": "b", "notin": "c"}


def test_preferred_node_affinity_wins_over_name_order() -> None:
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "fast", "operator": "Exists"}]}}
            ]
        }
    }
    objects = [node("a"), node("b", labels={"fast": "yes"}), queue("q"), pod("p", gpus=1, affinity=preferred)]
    assert placed(objects) == {"p": "b"}


def test_taints_and_tolerations() -> None:
    taint = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    toleration = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]
    objects = [
        node("a", gpus=1, taints=taint),
        node("b", gpus=1),
        queue("q"),
        pod("tolerant", gpus=1, tolerations=toleration),  # a and b both allowed: a by name
        pod("plain", gpus=1),
        pod("plain2", gpus=1),
    ]
    decisions = placed(objects)
    assert decisions["tolerant"] == "a"
    assert decisions["plain"] == "b"
    assert "plain2" not in decisions
    assert "1 node(s) had untolerated taint" in reason(objects, "pg-plain2")


def test_exists_toleration_tolerates_any_value() -> None:
    objects = [
        node("a", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
        queue("q"),
        pod("p", gpus=1, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]),
    ]
    assert placed(objects) == {"p": "a"}


def test_prefer_no_schedule_taint_is_avoided_but_not_forbidden() -> None:
    soft = [{"key": "spot", "effect": "PreferNoSchedule"}]
    objects = [node("a", taints=soft), node("b"), queue("q"), pod("p", gpus=1)]
    assert placed(objects) == {"p": "b"}
    only_soft = [node("a", taints=soft), queue("q"), pod("p", gpus=1)]
    assert placed(only_soft) == {"p": "a"}


def test_unschedulable_nodes_are_skipped() -> None:
    objects = [
        node("a", unschedulable=True),
        node("b", gpus=1),
        queue("q"),
        pod("p", gpus=1),
        pod("r", gpus=1),
    ]
    assert placed(objects) == {"p": "b"}
    assert "1 node(s) were unschedulable" in reason(objects, "pg-r")


def _anti(app: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }


def _host(name: str, **kwargs: Any) -> Any:
    return node(name, labels={"kubernetes.io/hostname": name}, **kwargs)


def test_pod_anti_affinity_spreads_replicas_across_nodes() -> None:
    objects = [
        _host("a"),
        _host("b"),
        _host("c"),
        queue("q"),
        *[pod(f"r{i}", gpus=1, labels={"app": "web"}, affinity=_anti("web")) for i in range(4)],
    ]
    decisions = placed(objects)
    assert sorted(decisions) == ["r0", "r1", "r2"]
    assert sorted(decisions.values()) == ["a", "b", "c"]
    assert "pod affinity/anti-affinity" in reason(objects, "pg-r3")


def test_running_pods_anti_affinity_repels_newcomers() -> None:
    objects = [
        _host("a"),
        _host("b"),
        queue("q"),
        pod("guard", gpus=1, node_name="a", labels={"app": "guard"}, affinity=_anti("web")),
        pod("web", gpus=1, labels={"app": "web"}),
    ]
    assert placed(objects) == {"web": "b"}


def test_required_pod_affinity_co_locates() -> None:
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    objects = [
        _host("a", gpus=8),
        _host("b", gpus=8),
        queue("q"),
        pod("db", gpus=1, node_name="b", labels={"app": "db"}),
        pod("client", gpus=1, affinity=affinity),
    ]
    assert placed(objects) == {"client": "b"}


def _team_anti(app: str) -> dict[str, Any]:
    """Required anti-affinity to pods labelled `app` in the namespaces labelled team=a."""
    term = {
        "labelSelector": {"matchLabels": {"app": app}},
        "namespaceSelector": {"matchLabels": {"team": "a"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


@pytest.mark.parametrize(
    ("labels", "candidates"),
    [
        ({"team": "a"}, [False, True]),  # the namespace carries team=a: node a is off limits
        ({"team": "b"}, [True, True]),  # it does not: the term selects no namespace with pods
        (None, [True, True]),  # its labels are unknown (as in the simulator): only the name label
    ],
)
@pytest.mark.parametrize("side", ["incoming", "placed"])
def test_anti_affinity_namespace_selector_matches_namespace_labels(
    labels: dict[str, str] | None, candidates: list[bool], side: str
) -> None:
    # "incoming": the pending pod's own term selects the running pod's namespace (ns-x);
    # "placed": the running pod's term (in ns-x) selects the pending pod's namespace (ns-x too).
    incoming = side == "incoming"
    objects = [
        _host("a"),
        _host("b"),
        queue("q"),
        pod(
            "db",
            gpus=1,
            node_name="a",
            namespace="ns-x",
            labels={"app": "db"},
            affinity=None if incoming else _team_anti("web"),
        ),
        pod(
            "web",
            gpus=1,
            namespace="ns-x" if not incoming else "default",
            labels={"app": "web"},
            affinity=_team_anti("db") if incoming else None,
        ),
    ]
    state = cluster_state(objects)
    namespaces = {"ns-x": labels} if labels is not None else {}
    snapshot = build_snapshot(replace(state, namespace_labels=namespaces))
    session = open_session(snapshot, plugins=["predicates"])
    web = next(t for t in session.snapshot.tasks.values() if t.name == "web")
    assert list(session.candidate_nodes(web)) == candidates


# --- GPU kinds -----------------------------------------------------------------------------------


def _mixed(name: str) -> Any:
    return node(
        name,
        gpus=8,
        labels={"nvidia.com/mig.strategy": "mixed"},
        extra={"nvidia.com/mig-1g.10gb": 7},
    )


def test_mixed_mig_node_takes_only_mig_requests() -> None:
    objects = [
        _mixed("a-mig"),
        node("b-plain", gpus=1),
        queue("q"),
        pod("mig", extra_requests={"nvidia.com/mig-1g.10gb": 1}),
        pod("whole", gpus=1),
        pod("whole2", gpus=1),
        pod("frac", fraction=0.5),
    ]
    decisions = placed(objects)
    assert decisions["mig"] == "a-mig"
    assert decisions["whole"] == "b-plain"
    assert "whole2" not in decisions  # the mixed node has 8 "GPUs" but takes no regular GPU request
    assert decisions.get("frac") != "a-mig"


def test_cpu_only_pod_may_use_a_mixed_mig_node() -> None:
    objects = [_mixed("a-mig"), queue("q"), pod("cpu", cpu="1")]
    assert placed(objects) == {"cpu": "a-mig"}


def test_single_mig_node_takes_whole_gpus_but_no_fractions() -> None:
    single = node("a-single", gpus=4, labels={"nvidia.com/mig.strategy": "single"})
    objects = [single, queue("q"), pod("whole", gpus=1), pod("frac", fraction=0.5)]
    decisions = placed(objects)
    assert decisions == {"whole": "a-single"}


def test_mig_request_on_a_node_without_that_profile_does_not_fit() -> None:
    objects = [node("plain", gpus=8), queue("q"), pod("mig", extra_requests={"nvidia.com/mig-3g.40gb": 1})]
    assert placed(objects) == {}


def test_gpu_memory_pods_need_nodes_with_a_known_gpu_memory() -> None:
    objects = [
        node("a-unknown", gpus=4),
        node("b-known", gpus=1, gpu_memory=40000),
        queue("q"),
        pod("m1", gpu_memory=10000),
        pod("m2", gpu_memory=30000),
        pod("m3", gpu_memory=10000),
    ]
    decisions = placed(objects)
    assert decisions == {"m1": "b-known", "m2": "b-known"}  # 0.25 + 0.75 fill the one 40 GB GPU


def test_max_pods_per_node() -> None:
    objects = [
        node("a", gpus=0, pods=2),
        queue("q"),
        pod("p0"),
        pod("p1"),
        pod("p2"),
    ]
    assert sorted(placed(objects)) == ["p0", "p1"]
    assert "Too many pods" in reason(objects, "pg-p2")


def test_a_fraction_that_opens_a_shared_gpu_needs_a_slot_for_the_reservation_pod() -> None:
    objects = [node("a", gpus=1, pods=1), queue("q"), pod("f", fraction=0.5, cpu=None, memory=None)]
    assert placed(objects) == {}
    assert "Too many pods" in reason(objects, "pg-f")


def test_a_fraction_joining_an_existing_shared_gpu_needs_one_slot() -> None:
    objects = [
        node("a", gpus=1, pods=3),
        queue("q"),
        pod("old", fraction=0.5, node_name="a", labels={"runai-gpu-group": "g"}),
        pod("f", fraction=0.5),
    ]
    assert placed(objects) == {"f": "a"}


def test_no_execute_taints_repel_too() -> None:
    objects = [node("a", taints=[{"key": "k", "effect": "NoExecute"}]), queue("q"), pod("p", gpus=1)]
    assert placed(objects) == {}


def test_predicate_masks_are_shared_by_pods_with_equal_placements() -> None:
    objects = [
        node("a", labels={"zone": "x"}),
        node("b", labels={"zone": "y"}),
        queue("q"),
        pod("p", node_selector={"zone": "y"}),
        pod("r", node_selector={"zone": "y"}),
    ]
    session = open_session(objects, plugins=["predicates"])
    p, r = session.snapshot.tasks["default/p"], session.snapshot.tasks["default/r"]
    assert p.placement is r.placement
    assert list(session.candidate_nodes(p)) == [False, True]


def test_every_open_shared_gpu_holds_a_pod_slot_for_its_reservation_pod() -> None:
    # pods=3: f0 and the reservation pod of its new GPU take two slots; f1 cannot join f0's GPU (0.5 left)
    # and would need a new GPU, i.e. two more slots.
    objects = [node("a", gpus=2, pods=3), queue("q"), pod("f0", fraction=0.5), pod("f1", fraction=0.75)]
    assert placed(objects) == {"f0": "a"}
    # A running shared GPU's reservation pod counts too: pods=2 is already full.
    running = [
        node("a", gpus=2, pods=2),
        queue("q"),
        pod("old", fraction=0.5, node_name="a", labels={"runai-gpu-group": "g"}),
        pod("f", fraction=0.5),
    ]
    assert placed(running) == {}
    # Whole-GPU and CPU pods take one slot each, next to the reservation pod.
    mixed = [node("a", gpus=2, pods=3), queue("q"), pod("f0", fraction=0.5), pod("w", gpus=1), pod("x")]
    assert placed(mixed) == {"f0": "a", "w": "a"}
