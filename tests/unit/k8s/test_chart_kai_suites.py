"""KAI v0.17.0's own chart tests (`deployments/kai-scheduler/tests/*_test.yaml`, helm-unittest suites),
ported by case name: the same values, given to this chart, rendered by Helm's engine (chart_support).

Where KAI's chart hands a value to its operator (kai-config's `service.enabled`, the operator's own args)
the port asserts what this chart does with it instead: the component's Deployment, its pods' args. Cases
that need a cluster lookup (`kubernetesProvider`: "... when it already exists") are left out: this chart
renders the same everywhere (no `lookup`), the user says `create...: false` instead. Values that this chart
refuses (a KAI-only feature) are ported as the refusal.
"""

from __future__ import annotations

from typing import Any

import pytest

from chart_support import RELEASE, render_chart

SUITES = "deployments/kai-scheduler/tests"  # in KAI v0.17.0


def documents(values: dict[str, Any] | None = None, kind: str | None = None) -> list[dict[str, Any]]:
    return [d for _, d in render_chart(values or {}) if kind is None or d["kind"] == kind]


def one(values: dict[str, Any] | None, kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [d for d in documents(values, kind) if name is None or d["metadata"]["name"] == name]
    return found


def deployments(values: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in documents(values, "Deployment")}


def args(deployment: dict[str, Any]) -> list[str]:
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def refused(values: dict[str, Any]) -> str:
    with pytest.raises(AssertionError) as raised:
        render_chart(values)
    return str(raised.value)


# --- default_shard_test.yaml ---------------------------------------------------------------------------


def test_default_shard_should_render_the_default_scheduling_shard_by_default() -> None:
    assert one(None, "SchedulingShard")["metadata"]["name"] == "default"


def test_default_shard_should_render_the_default_scheduling_shard_when_explicitly_enabled() -> None:
    assert one({"defaultShard": {"enabled": True}}, "SchedulingShard")["metadata"]["name"] == "default"


def test_default_shard_should_not_render_the_default_scheduling_shard_when_disabled() -> None:
    assert documents({"defaultShard": {"enabled": False}}, "SchedulingShard") == []


def test_default_shard_should_render_scenario_search_budgets() -> None:
    budgets = {
        "maxActionSearchDuration": {"reclaim": "2s"},
        "maxJobSearchDuration": "250ms",
        "minJobSearchDuration": "0s",
        "maxGeneratorSearchDuration": {"NodeLocalGreedy": "50ms"},
    }
    spec = one({"scheduler": {"scenarioSearchBudgets": budgets}}, "SchedulingShard")["spec"]
    assert spec["scenarioSearchBudgets"] == budgets


def test_default_shard_should_render_go_memory_limit_configuration() -> None:
    spec = one({"scheduler": {"goMemLimitRatio": 0.85, "goMemLimit": "6Gi"}}, "SchedulingShard")["spec"]
    assert (spec["goMemLimitRatio"], spec["goMemLimit"]) == (0.85, "6Gi")


# --- resourcereservation_namespace_test.yaml, resourcereservation_serviceaccount_test.yaml --------------


def _reservation_namespaces(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [d for d in documents(values, "Namespace") if d["metadata"]["name"] != "kai-scale-adjust"]


def _reservation_account(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        d
        for d in documents(values, "ServiceAccount")
        if d["metadata"]["labels"].get("app.kubernetes.io/component") == "resource-reservation"
    ]


def test_resourcereservation_namespace_should_render_namespace_by_default() -> None:
    """KAI's "... when it does not already exist" (no lookup here)."""
    (namespace,) = _reservation_namespaces()
    assert namespace["metadata"]["name"] == "kai-resource-reservation"


def test_resourcereservation_namespace_should_not_render_namespace_when_create_namespace_is_false() -> None:
    assert _reservation_namespaces({"global": {"resourceReservation": {"createNamespace": False}}}) == []


def test_resourcereservation_namespace_should_use_custom_reservation_namespace_value() -> None:
    values = {"global": {"resourceReservation": {"namespace": "custom-reservation-ns"}}}
    (namespace,) = _reservation_namespaces(values)
    assert namespace["metadata"]["name"] == "custom-reservation-ns"


def test_resourcereservation_namespace_should_render_namespace_labels_when_configured() -> None:
    values = {"global": {"resourceReservation": {"namespaceLabels": {"team": "platform", "env": "staging"}}}}
    (namespace,) = _reservation_namespaces(values)
    assert namespace["metadata"]["labels"]["team"] == "platform"
    assert namespace["metadata"]["labels"]["env"] == "staging"


def test_resourcereservation_serviceaccount_should_render_service_account() -> None:
    """KAI's "... when it does not already exist" (no lookup here)."""
    (account,) = _reservation_account()
    assert account["metadata"]["name"] == account["metadata"]["namespace"] == "kai-resource-reservation"


def test_resourcereservation_serviceaccount_should_not_render_when_create_service_account_is_false() -> None:
    assert _reservation_account({"global": {"resourceReservation": {"createServiceAccount": False}}}) == []


def test_resourcereservation_serviceaccount_should_use_custom_namespace_and_service_account_values() -> None:
    values = {
        "global": {
            "resourceReservation": {
                "namespace": "custom-reservation-ns",
                "serviceAccount": "custom-reservation-sa",
            }
        }
    }
    (account,) = _reservation_account(values)
    assert (account["metadata"]["name"], account["metadata"]["namespace"]) == (
        "custom-reservation-sa",
        "custom-reservation-ns",
    )
    binder = args(deployments(values)[f"{RELEASE}-binder"])
    assert {
        "--reservation-namespace=custom-reservation-ns",
        "--reservation-service-account=custom-reservation-sa",
    } <= set(binder)


def test_resourcereservation_serviceaccount_should_render_image_pull_secrets_when_configured() -> None:
    (account,) = _reservation_account({"global": {"imagePullSecrets": [{"name": "reservation-pull-secret"}]}})
    assert account["imagePullSecrets"] == [{"name": "reservation-pull-secret"}]


# --- priority_classes_test.yaml ----------------------------------------------------------------------


def test_priority_classes_should_render_the_existing_priority_classes_by_default() -> None:
    classes = {d["metadata"]["name"]: d["value"] for d in documents(None, "PriorityClass")}
    assert classes == {"build": 100, "train": 50, "inference": 125, "build-preemptible": 75}


def test_priority_classes_should_not_render_priority_classes_when_disabled() -> None:
    assert documents({"defaultPriorityClasses": {"enabled": False}}, "PriorityClass") == []


# --- priority_class_name_test.yaml (kai-config; the operator's pod: here, every component's) ------------


def test_priority_class_name_should_not_render_priority_class_name_in_kai_config_by_default() -> None:
    assert "priorityClassName" not in one(None, "Config")["spec"]["global"]


def test_priority_class_name_should_not_render_priority_class_name_in_kai_config_when_empty() -> None:
    assert "priorityClassName" not in one({"global": {"priorityClassName": ""}}, "Config")["spec"]["global"]


def test_priority_class_name_should_render_priority_class_name_in_kai_config_when_set() -> None:
    config = one({"global": {"priorityClassName": "system-cluster-critical"}}, "Config")
    assert config["spec"]["global"]["priorityClassName"] == "system-cluster-critical"


def test_priority_class_name_should_not_set_priority_class_name_on_the_pods_by_default() -> None:
    for deployment in deployments().values():
        assert "priorityClassName" not in deployment["spec"]["template"]["spec"]


def test_priority_class_name_should_set_priority_class_name_on_the_pods_when_set() -> None:
    for deployment in deployments({"global": {"priorityClassName": "system-cluster-critical"}}).values():
        assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"


# --- image_pull_secrets_test.yaml ------------------------------------------------------------------------


def test_image_pull_secrets_should_not_render_additional_image_pull_secrets_when_not_configured() -> None:
    assert "additionalImagePullSecrets" not in one(None, "Config")["spec"]["global"]


def test_image_pull_secrets_should_not_render_legacy_images_pull_secret_when_not_configured() -> None:
    assert "imagesPullSecret" not in one(None, "Config")["spec"]["global"]


def test_image_pull_secrets_should_render_additional_image_pull_secrets_as_array_when_configured() -> None:
    config = one({"global": {"imagePullSecrets": [{"name": "my-secret"}]}}, "Config")
    assert config["spec"]["global"]["additionalImagePullSecrets"] == ["my-secret"]
    for deployment in deployments({"global": {"imagePullSecrets": [{"name": "my-secret"}]}}).values():
        assert deployment["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "my-secret"}]


def test_image_pull_secrets_should_not_render_legacy_images_pull_secret_field() -> None:
    config = one({"global": {"imagePullSecrets": [{"name": "my-secret"}]}}, "Config")
    assert "imagesPullSecret" not in config["spec"]["global"]


def test_image_pull_secrets_should_render_multiple_additional_image_pull_secrets() -> None:
    secrets = [{"name": "secret1"}, {"name": "secret2"}, {"name": "secret3"}]
    config = one({"global": {"imagePullSecrets": secrets}}, "Config")
    assert config["spec"]["global"]["additionalImagePullSecrets"] == ["secret1", "secret2", "secret3"]


# --- leader_election_test.yaml (the operator's --leader-elect: here, every controller's) ----------------

CONTROLLERS = ("scheduler", "binder", "podgrouper", "status-controllers")


def _elects(values: dict[str, Any]) -> set[bool]:
    found = deployments(values)
    return {"--leader-elect" in args(found[f"{RELEASE}-{name}"]) for name in CONTROLLERS}


def test_leader_election_should_disable_leader_election_with_a_single_replica_when_global_says_so() -> None:
    """KAI's "by default (single replica)": KAI's default global.leaderElection is false, this chart's
    leaderElection true; the KAI value given, the same result."""
    assert _elects({"global": {"leaderElection": False}}) == {False}


def test_leader_election_should_enable_leader_election_when_global_leader_election_is_true() -> None:
    assert _elects({"global": {"leaderElection": True}}) == {True}


def test_leader_election_should_auto_enable_leader_election_when_replica_count_above_1() -> None:
    assert _elects({"global": {"leaderElection": False}, "operator": {"replicaCount": 2}}) == {True}


def test_leader_election_should_keep_leader_election_enabled_when_both_are_set() -> None:
    assert _elects({"global": {"leaderElection": True}, "operator": {"replicaCount": 2}}) == {True}


# --- prometheus_test.yaml -------------------------------------------------------------------------------

URL = "http://prometheus-kube-prometheus-prometheus.monitoring.svc.cluster.local:9090"


def test_prometheus_should_not_render_prometheus_section_when_disabled() -> None:
    assert "prometheus" not in one(None, "Config")["spec"]
    assert "prometheus" not in one({"prometheus": {"enabled": False}}, "Config")["spec"]


def test_prometheus_enabled_without_url_is_refused() -> None:
    """KAI's "should render prometheus section when enabled" and "... not render externalPrometheusUrl
    when not set": KAI deploys a Prometheus of its own then; this chart deploys none, and says so."""
    assert "this chart deploys no Prometheus" in refused({"prometheus": {"enabled": True}})


def test_prometheus_should_render_external_prometheus_url_when_set() -> None:
    config = one({"prometheus": {"enabled": True, "externalPrometheusUrl": URL}}, "Config")
    assert config["spec"]["prometheus"] == {"enabled": True, "externalPrometheusUrl": URL}


def test_prometheus_should_render_external_prometheus_url_with_custom_port() -> None:
    url = "http://my-prometheus.custom-ns.svc.cluster.local:8080"
    config = one({"prometheus": {"enabled": True, "externalPrometheusUrl": url}}, "Config")
    assert config["spec"]["prometheus"]["externalPrometheusUrl"] == url


def test_prometheus_should_not_render_prometheus_when_disabled_even_if_url_is_set() -> None:
    config = one(
        {"prometheus": {"enabled": False, "externalPrometheusUrl": "http://prometheus:9090"}}, "Config"
    )
    assert "prometheus" not in config["spec"]


# --- kai_config_render_test.yaml -----------------------------------------------------------------------


def test_kai_config_render_renders_kai_config_by_default() -> None:
    """KAI's "should not render the kai-config CR by default" (its hook applies it): rendered here, as
    this chart has no hooks."""
    assert one(None, "Config")["metadata"]["name"] == "kai-config"


def test_kai_config_render_should_render_the_kai_config_cr_as_a_release_resource_in_gitops_mode() -> None:
    values = {"kaiConfigDeployer": {"enabled": False}, "kaiConfig": {"render": True}}
    assert one(values, "Config")["metadata"]["name"] == "kai-config"


def test_kai_config_render_should_not_render_the_kai_config_cr_when_both_mechanisms_are_disabled() -> None:
    assert (
        documents({"kaiConfigDeployer": {"enabled": False}, "kaiConfig": {"render": False}}, "Config") == []
    )


def test_kai_config_render_should_fail_when_both_render_and_deployer_are_set() -> None:
    message = refused({"kaiConfigDeployer": {"enabled": True}, "kaiConfig": {"render": True}})
    assert "kaiConfig.render and kaiConfigDeployer.enabled: give one" in message


# --- scalingpod_namespace_test.yaml ---------------------------------------------------------------------


def _scaling_namespaces(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in documents(values, "Namespace") if d["metadata"]["name"] == "kai-scale-adjust"]


def test_scalingpod_namespace_should_not_render_namespace_when_cluster_autoscaling_is_disabled() -> None:
    assert _scaling_namespaces({}) == []


def test_scalingpod_namespace_should_render_namespace_when_cluster_autoscaling_is_enabled() -> None:
    assert len(_scaling_namespaces({"global": {"clusterAutoscaling": True}})) == 1
    assert f"{RELEASE}-scale-adjuster" in deployments({"global": {"clusterAutoscaling": True}})


def test_scalingpod_namespace_custom_value_is_refused() -> None:
    """KAI's "should use custom scaling pod namespace value": fixed here (`run` has no flag for it)."""
    values = {
        "global": {"clusterAutoscaling": True},
        "nodescaleadjuster": {"scalingPodNamespace": "custom-scaling-ns"},
    }
    assert 'nodescaleadjuster.scalingPodNamespace: "custom-scaling-ns" is not supported' in refused(values)


def test_scalingpod_namespace_should_render_namespace_labels_when_configured() -> None:
    values = {
        "global": {"clusterAutoscaling": True},
        "nodescaleadjuster": {"labels": {"team": "platform", "env": "staging"}},
    }
    (namespace,) = _scaling_namespaces(values)
    assert namespace["metadata"]["labels"]["team"] == "platform"
    assert namespace["metadata"]["labels"]["env"] == "staging"


# --- enabled_test.yaml (kai-config's service.enabled: here, the components' Deployments) ---------------


def test_enabled_should_enable_all_services_by_default() -> None:
    global_ = one(None, "Config")["spec"]["global"]
    assert (global_["queueLabelKey"], global_["nodePoolLabelKey"]) == (
        "kai.scheduler/queue",
        "kai.scheduler/node-pool",
    )
    names = {f"{RELEASE}-{name}" for name in (*CONTROLLERS, "admission")}
    assert set(deployments()) == names


def test_enabled_should_wire_global_node_pool_label_key_into_kai_config() -> None:
    config = one({"global": {"nodePoolLabelKey": "runai/node-pool"}}, "Config")
    assert config["spec"]["global"]["nodePoolLabelKey"] == "runai/node-pool"


def test_enabled_podgrouper_queue_label_key_is_refused() -> None:
    """KAI's "should wire podgrouper.queueLabelKey into spec.global.queueLabelKey": pods name their queue
    with kai.scheduler/queue here."""
    assert 'podgrouper.queueLabelKey: "runai/queue" is not supported' in refused(
        {"podgrouper": {"queueLabelKey": "runai/queue"}}
    )


@pytest.mark.parametrize(
    "component", ["binder", "podgrouper", "podgroupcontroller", "queuecontroller", "scheduler"]
)
def test_enabled_should_render_a_component_when_explicitly_enabled_and_refuse_disabling_it(
    component: str,
) -> None:
    """KAI's "should render <component> enabled true when explicitly set" and "... false when disabled":
    every component but the admission always runs here."""
    assert len(deployments({component: {"enabled": True}})) == 5
    assert f"{component}.enabled: false: this chart always runs the {component}" in refused(
        {component: {"enabled": False}}
    )


def test_enabled_should_render_admission_enabled_false_when_disabled() -> None:
    assert f"{RELEASE}-admission" in deployments({"admission": {"enabled": True}})
    assert f"{RELEASE}-admission" not in deployments({"admission": {"enabled": False}})


def test_enabled_should_render_node_scale_adjuster_by_cluster_autoscaling() -> None:
    assert f"{RELEASE}-scale-adjuster" not in deployments()
    assert f"{RELEASE}-scale-adjuster" in deployments({"global": {"clusterAutoscaling": True}})


# --- openshift_test.yaml ---------------------------------------------------------------------------------


def test_openshift_is_refused() -> None:
    """KAI's "should render the SCC ... when openshift is set": this chart makes no SCC."""
    assert "openshift: true: this chart makes no SecurityContextConstraints" in refused({"openshift": True})
