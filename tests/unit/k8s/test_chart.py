"""The Helm chart under deploy/helm/kai-scheduler, linted and rendered by Helm (tests/chart_support.py).

For every values combination below, and the README's install command: `helm lint --strict` finds nothing;
every document parses and names apiVersion/kind/metadata.name; built-in kinds load into the Kubernetes API
models (lightkube, which checks types and required fields) without unknown fields; RBAC names only known
resources and verbs, exactly the rules each component needs; no install hooks; every workload's service
account, role and config exists; Services select pods; the queues validate against the Queue CRD; every
flag a Deployment passes is one `kai-scheduler run` accepts, and values.yaml's flag contract names it.
"""

from __future__ import annotations

import copy
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import codecs

from chart_support import (
    CHART,
    INSTALL,
    NAMESPACE,
    RELEASE,
    ROOT,
    VARIANTS,
    chart,
    lint_chart,
    render_chart,
    render_notes,
)
from kai_fakeapi.crd_validation import schema_for, validate_object
from kai_scheduler import cli
from kai_scheduler.api import crds
from kai_scheduler.api.constants import BUILTIN_PRIORITY_CLASSES
from kai_scheduler.cli import run as cli_run
from kai_scheduler.framework.config import parse_config
from kai_scheduler.k8s.binder.reservations import GpuReservation
from kai_scheduler.k8s.components import ALL_COMPONENTS, RunOptions
from kai_scheduler.k8s.needs import needs, reservation_app_needs
from kai_scheduler.k8s.runtime.access import VERBS, Access, Permission, minimal, permissions
from kai_scheduler.k8s.scaleadjuster.plan import DEFAULT_IMAGE as DEFAULT_SCALING_POD_IMAGE
from kai_scheduler.k8s.scaleadjuster.plan import DEFAULT_NAMESPACE as SCALE_ADJUST_NAMESPACE

# --- the values combinations ---------------------------------------------------------------------


def _rendered(variant: str) -> list[tuple[str, dict[str, Any]]]:
    return render_chart(VARIANTS[variant])


def _docs(variant: str, kind: str | None = None) -> list[dict[str, Any]]:
    return [document for _, document in _rendered(variant) if kind is None or document["kind"] == kind]


def _one(variant: str, kind: str, name: str) -> dict[str, Any]:
    (found,) = [document for document in _docs(variant, kind) if document["metadata"]["name"] == name]
    return found


NAMESPACED = {
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Deployment",
    "Service",
    "ConfigMap",
    "Issuer",
    "Certificate",
    "ServiceMonitor",
}
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "PriorityClass",
    "Queue",
    "Namespace",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "SchedulingShard",
    "Config",
}
# Not in the Kubernetes API models; KAI's own kinds are checked against their CRDs instead.
FOREIGN_KINDS = {"Queue", "Issuer", "Certificate", "ServiceMonitor", "SchedulingShard", "Config"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_helm_lint_finds_nothing(variant: str) -> None:
    assert lint_chart(VARIANTS[variant]) == []


@pytest.mark.parametrize(
    ("template", "finding"),
    [
        # A warning (what --strict turns into a failure): a value not set renders an empty name.
        ("metadata:\n  name: {{ .Values.noSuchValue }}\n", "object name does not conform"),
        # An error: the template renders YAML that does not parse.
        ("metadata:\n  name: {{ .Release.Name }}-extra\n  broken\n", "unable to parse YAML"),
    ],
    ids=["warning", "error"],
)
def test_helm_lint_finds_a_broken_template(tmp_path: Path, template: str, finding: str) -> None:
    """The control of the test above: the same lint, on a copy of the chart with one broken template
    added, finds it (so an empty answer there is the chart's, not a lint that cannot fail)."""
    broken = tmp_path / CHART.name
    shutil.copytree(CHART, broken)
    (broken / "templates" / "broken.yaml").write_text(f"apiVersion: v1\nkind: ConfigMap\n{template}")
    findings = lint_chart(chart=broken)
    assert [f for f in findings if finding in f], findings


def _actions() -> Iterator[tuple[str, str]]:
    """(template, action) for every `{{ ... }}` of the chart's templates, comments left out."""
    for template in chart().templates:
        code = re.sub(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", "", template["data"], flags=re.DOTALL)
        for action in re.findall(r"\{\{(.*?)\}\}", code, flags=re.DOTALL):
            yield template["name"], action


def test_templates_read_only_values_that_values_yaml_defines() -> None:
    """Helm prints a value that is not set as an empty string (even `helm lint --strict` passes it); a
    template reading a key values.yaml lacks would install a broken object without a word."""
    defaults = chart().values
    read = {
        (template, path)
        for template, action in _actions()
        for path in re.findall(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", action)
    }
    assert read
    for template, path in sorted(read):
        value: Any = defaults
        for key in path[1:].split("."):
            assert isinstance(value, dict) and key in value, f"{template}: .Values{path} not in values.yaml"
            value = value[key]


def test_the_chart_renders_the_same_everywhere() -> None:
    """No `lookup` (empty under `helm template` and GitOps tools) and no random or time-based values: a
    rendered chart replays unchanged."""
    for template, action in _actions():
        assert not re.search(r"\b(lookup|rand\w*|uuidv4|now|genCA|genSelfSignedCert)\b", action), template
    assert chart().render({}, name=RELEASE, namespace=NAMESPACE) == chart().render(
        {}, name=RELEASE, namespace=NAMESPACE
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_document_is_a_kubernetes_object(variant: str) -> None:
    for source, document in _rendered(variant):
        where = f"{source}: {document.get('kind')}/{document.get('metadata', {}).get('name')}"
        assert isinstance(document.get("apiVersion"), str) and document["apiVersion"], where
        assert isinstance(document.get("kind"), str) and document["kind"], where
        assert isinstance(document.get("metadata", {}).get("name"), str) and document["metadata"]["name"]
        kind = document["kind"]
        assert kind in NAMESPACED | CLUSTER_SCOPED, f"{kind}: add it to the scope tables"
        if kind in NAMESPACED:
            assert document["metadata"].get("namespace"), (
                f"{where}: namespaced objects name their namespace (for kubectl apply)"
            )
        else:
            assert "namespace" not in document["metadata"], where
        annotations = document["metadata"].get("annotations") or {}
        hooks = [key for key in annotations if key.startswith(("helm.sh/hook", "argocd.argoproj.io/hook"))]
        assert not hooks, where
        if kind not in FOREIGN_KINDS:
            loaded = codecs.from_dict(document)  # types and required fields, per the Kubernetes API models
            assert _unknown_fields(document, loaded.to_dict()) == [], where  # type: ignore[no-untyped-call]
        schema = schema_for(document["apiVersion"], kind)
        if schema is not None:  # KAI's kinds, as the API server validates them against the chart's CRDs
            assert validate_object(schema, document) == [], where


def _unknown_fields(original: Any, loaded: Any, path: str = "") -> list[str]:
    """Fields of `original` that the typed model dropped: names Kubernetes does not know."""
    if isinstance(original, dict):
        if not isinstance(loaded, dict):
            return [path or "<root>"]
        missing = []
        for key, value in original.items():
            if key not in loaded:
                if value not in ({}, [], None):  # empty values may be dropped on the way
                    missing.append(f"{path}.{key}")
            else:
                missing.extend(_unknown_fields(value, loaded[key], f"{path}.{key}"))
        return missing
    if isinstance(original, list) and isinstance(loaded, list):
        return [
            error
            for index, item in enumerate(original)
            for error in _unknown_fields(item, loaded[index], f"{path}[{index}]")
        ]
    return []


@pytest.mark.parametrize("variant", VARIANTS)
def test_names_are_unique(variant: str) -> None:
    keys = [(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in _docs(variant)]
    assert len(keys) == len(set(keys))


def test_crds_ship_in_crds_and_nowhere_else() -> None:
    for variant in VARIANTS:
        assert not _docs(variant, "CustomResourceDefinition")
    shipped = sorted(path.name for path in (CHART / "crds").glob("*.yaml"))
    assert shipped == sorted(crds.generated_files())
    for path in (CHART / "crds").glob("*.yaml"):
        assert "{{" not in path.read_text(), "Helm does not template crds/"


# --- workloads ---------------------------------------------------------------------------------------

COMPONENTS = ("scheduler", "binder", "podgrouper", "admission", "status-controllers")


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_default_runs_one_deployment_per_component() -> None:
    deployments = {d["metadata"]["name"]: d for d in _docs("default", "Deployment")}
    assert set(deployments) == {f"{RELEASE}-{component}" for component in COMPONENTS}
    for component in COMPONENTS:
        deployment = deployments[f"{RELEASE}-{component}"]
        args = _container(deployment)["args"]
        assert args[:2] == ["run", f"--component={component}"]
        assert "--scheduler-name=kai-scheduler" in args
        assert ("--leader-elect" in args) is (component != "admission")
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == f"{RELEASE}-{component}"
    scheduler_args = _container(deployments[f"{RELEASE}-scheduler"])["args"]
    assert "--placement-strategy=binpack" in scheduler_args


def test_all_in_one_runs_everything_in_one_deployment() -> None:
    (deployment,) = _docs("all-in-one", "Deployment")
    args = _container(deployment)["args"]
    assert args[:2] == ["run", "--all"]
    assert {"--leader-elect", "--webhook-port=9443", "--placement-strategy=binpack"} <= set(args)
    assert [
        sa["metadata"]["name"]
        for sa in _docs("all-in-one", "ServiceAccount")
        if sa["metadata"]["namespace"] == NAMESPACE
    ] == [f"{RELEASE}-all-in-one"]
    (minimal,) = _docs("all-in-one-minimal", "Deployment")
    assert "--skip=admission" in _container(minimal)["args"]
    assert "--leader-elect" not in _container(minimal)["args"]


def test_values_reach_the_pods() -> None:
    deployments = {d["metadata"]["name"]: d for d in _docs("custom", "Deployment")}
    scheduler = deployments[f"{RELEASE}-scheduler"]
    assert scheduler["spec"]["replicas"] == 2
    pod = scheduler["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert pod["tolerations"][0]["operator"] == "Exists"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert {"--placement-strategy=spread", "--scheduler-name=gpu-scheduler"} <= set(
        _container(scheduler)["args"]
    )
    config = _one("custom", "ConfigMap", f"{RELEASE}-scheduler-config")
    assert yaml.safe_load(config["data"]["config.yaml"]) == {"actions": "allocate, reclaim"}
    assert (
        yaml.safe_load(_one("default", "ConfigMap", f"{RELEASE}-scheduler-config")["data"]["config.yaml"])
        == {}
    )
    (mutating,) = _docs("custom", "MutatingWebhookConfiguration")
    assert mutating["webhooks"][0]["clientConfig"]["caBundle"] == "Y2E="
    assert mutating["webhooks"][0]["failurePolicy"] == "Ignore"
    assert (
        mutating["webhooks"][0]["matchConditions"][0]["expression"]
        == "object.spec.schedulerName == 'gpu-scheduler'"
    )
    image = _container(deployments[f"{RELEASE}-binder"])["image"]
    assert image == "kai-scheduler:0.1.0"


# --- the flag contract with `kai-scheduler run` ----------------------------------------------------

RESERVATION_FLAGS = {
    "--no-gpu-reservation",
    "--reservation-namespace",
    "--reservation-service-account",
    "--reservation-image",
    "--reservation-timeout",
}


def _flag(arg: str) -> str:
    return arg.split("=", 1)[0]


def _args(variant: str, deployment: str) -> list[str]:
    args: list[str] = _container(_one(variant, "Deployment", f"{RELEASE}-{deployment}"))["args"]
    return args


def _run(args: list[str]) -> Any:
    """The arguments as `kai-scheduler run` parses them (cli.UsageError on an unknown flag or value)."""
    assert args[0] == "run"
    return cli.parser().parse_args(args)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_flag_is_one_run_accepts(variant: str) -> None:
    for deployment in _docs(variant, "Deployment"):
        parsed = _run(_container(deployment)["args"])
        if not parsed.no_gpu_reservation:
            cli_run.reservation(parsed)  # the timeout is a duration, not negative
        components = set(parsed.component or ALL_COMPONENTS) - set(parsed.skip)
        if "admission" in components:
            assert parsed.tls_cert_dir or parsed.tls_secret
        if parsed.all:
            assert "scale-adjuster" not in components


def test_values_state_the_flag_contract() -> None:
    """The header of values.yaml names exactly the flags the chart passes (in some variant)."""
    header = (CHART / "values.yaml").read_text().split("\n\n", 1)[0]
    stated = set(re.findall(r"--[a-z][a-z-]*", header))
    passed = {
        _flag(arg)
        for variant in VARIANTS
        for deployment in _docs(variant, "Deployment")
        for arg in _container(deployment)["args"][1:]
    }
    assert passed == stated


@pytest.mark.parametrize(
    ("variant", "deployment"),
    [("default", "binder"), ("all-in-one", "all-in-one"), ("custom-images", "binder")],
)
def test_the_binder_creates_reservation_pods_as_the_values_say(variant: str, deployment: str) -> None:
    args = _args(variant, deployment)
    reservation = cli_run.reservation(_run(args))
    if variant == "custom-images":
        assert reservation == GpuReservation(
            namespace="gpu-reservations",
            service_account="gpu-reserver",
            image="registry.example/kai-scheduler:dev",
            timeout=120.0,
        )
    else:  # the chart's defaults are the binder's, but for the image: the chart's own
        own_image = _container(_one(variant, "Deployment", f"{RELEASE}-{deployment}"))["image"]
        assert reservation == GpuReservation(image=own_image)
        assert own_image == "kai-scheduler:0.1.0"
    assert "--no-gpu-reservation" not in args
    # The namespace, account and RBAC the pods need are where the flags point.
    namespace, account = reservation.namespace, reservation.service_account
    assert _one(variant, "Namespace", namespace)
    assert _one(variant, "ServiceAccount", account)["metadata"]["namespace"] == namespace
    app_role = _one(variant, "Role", f"{RELEASE}-resource-reservation")
    assert app_role["metadata"]["namespace"] == namespace
    app_binding = _one(variant, "RoleBinding", f"{RELEASE}-resource-reservation")
    assert app_binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    binder_role = _one(variant, "Role", f"{RELEASE}-binder-reservations")
    assert binder_role["metadata"]["namespace"] == namespace
    # Only the binder creates reservation pods.
    for other in _docs(variant, "Deployment"):
        if other["metadata"]["name"] != f"{RELEASE}-{deployment}":
            assert not {_flag(arg) for arg in _container(other)["args"]} & RESERVATION_FLAGS


@pytest.mark.parametrize(
    ("variant", "deployment", "base"),
    [("fake-gpus", "binder", "default"), ("all-in-one-fake-gpus", "all-in-one", "all-in-one")],
)
def test_fake_gpu_nodes_run_no_reservation_pods(variant: str, deployment: str, base: str) -> None:
    args = _args(variant, deployment)
    assert [arg for arg in args if _flag(arg) in RESERVATION_FLAGS] == ["--no-gpu-reservation"]
    assert _run(args).no_gpu_reservation
    # No reservation namespace, account or roles; nothing else changes.
    expected = []
    for source, document in _rendered(base):
        if source == "resource-reservation.yaml":
            continue
        if document["kind"] == "Deployment" and document["metadata"]["name"] == f"{RELEASE}-{deployment}":
            document = copy.deepcopy(document)
            container = _container(document)
            container["args"] = [arg for arg in container["args"] if _flag(arg) not in RESERVATION_FLAGS]
            container["args"].insert(container["args"].index("--leader-elect") + 1, "--no-gpu-reservation")
        expected.append(document)
    assert _docs(variant) == expected


def test_scaling_pod_image_reaches_the_scale_adjuster() -> None:
    default = yaml.safe_load((CHART / "values.yaml").read_text())["scaleAdjuster"]["scalingPodImage"]
    assert default == DEFAULT_SCALING_POD_IMAGE == "registry.k8s.io/pause:3.9"
    for variant, image in (
        ("cluster-autoscaling", default),
        ("all-in-one-cluster-autoscaling", default),
        ("custom-images", "mirror.example/pause:3.9"),
    ):
        assert _run(_args(variant, "scale-adjuster")).scaling_pod_image == image
        for deployment in _docs(variant, "Deployment"):
            if deployment["metadata"]["name"] != f"{RELEASE}-scale-adjuster":
                assert "--scaling-pod-image" not in {_flag(arg) for arg in _container(deployment)["args"]}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_leader_elect_account_may_hold_its_lease(variant: str) -> None:
    electing = {
        deployment["spec"]["template"]["spec"]["serviceAccountName"]
        for deployment in _docs(variant, "Deployment")
        if "--leader-elect" in _container(deployment)["args"]
    }
    bindings = [
        binding
        for binding in _docs(variant, "RoleBinding")
        if binding["roleRef"]["name"] == f"{RELEASE}-leader-election"
    ]
    if not electing:
        assert not bindings
        return
    (binding,) = bindings
    assert {subject["name"] for subject in binding["subjects"]} == electing
    role = _one(variant, "Role", f"{RELEASE}-leader-election")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize("variant", VARIANTS)
def test_pods_run_hardened(variant: str) -> None:
    for deployment in _docs(variant, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        container = _container(deployment)
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["resources"]["requests"] and container["resources"]["limits"]
        assert any(port["containerPort"] == 8080 and port["name"] == "metrics" for port in container["ports"])
        assert container["livenessProbe"]["httpGet"]["port"] == "metrics"


@pytest.mark.parametrize("variant", VARIANTS)
def test_workload_references_exist(variant: str) -> None:
    accounts = {
        (sa["metadata"]["namespace"], sa["metadata"]["name"]) for sa in _docs(variant, "ServiceAccount")
    }
    config_maps = {cm["metadata"]["name"] for cm in _docs(variant, "ConfigMap")}
    secrets_from_cert_manager = {cert["spec"]["secretName"] for cert in _docs(variant, "Certificate")}
    for deployment in _docs(variant, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert (deployment["metadata"]["namespace"], pod["serviceAccountName"]) in accounts
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
        mounts = {mount["name"] for mount in _container(deployment)["volumeMounts"]}
        assert mounts == {volume["name"] for volume in pod["volumes"]}
        for volume in pod["volumes"]:
            if "configMap" in volume:
                assert volume["configMap"]["name"] in config_maps
            if "secret" in volume and variant == "cert-manager":
                assert volume["secret"]["secretName"] in secrets_from_cert_manager
    for binding in _docs(variant, "ClusterRoleBinding") + _docs(variant, "RoleBinding"):
        for subject in binding["subjects"]:
            assert (subject["namespace"], subject["name"]) in accounts, binding["metadata"]["name"]
        role_kind = binding["roleRef"]["kind"]
        roles = {(r["metadata"].get("namespace"), r["metadata"]["name"]) for r in _docs(variant, role_kind)}
        assert (binding["metadata"].get("namespace"), binding["roleRef"]["name"]) in roles


@pytest.mark.parametrize("variant", VARIANTS)
def test_services_select_pods(variant: str) -> None:
    pods = [
        (d["metadata"]["namespace"], d["spec"]["template"]["metadata"]["labels"], _container(d))
        for d in _docs(variant, "Deployment")
    ]
    for service in _docs(variant, "Service"):
        selected = [
            container
            for namespace, labels, container in pods
            if namespace == service["metadata"]["namespace"]
            and service["spec"]["selector"].items() <= labels.items()
        ]
        assert selected, service["metadata"]["name"]
        for port in service["spec"]["ports"]:
            for container in selected:
                assert port["targetPort"] in {p["name"] for p in container["ports"]}
    metrics = _one(variant, "Service", f"{RELEASE}-metrics")
    assert metrics["spec"]["ports"][0]["port"] == 8080


@pytest.mark.parametrize("variant", VARIANTS)
def test_webhooks_point_at_the_webhook_service(variant: str) -> None:
    configurations = _docs(variant, "MutatingWebhookConfiguration") + _docs(
        variant, "ValidatingWebhookConfiguration"
    )
    admission_enabled = VARIANTS[variant].get("admission", {}).get("enabled", True)
    assert len(configurations) == (2 if admission_enabled else 0)
    paths = set()
    for configuration in configurations:
        for webhook in configuration["webhooks"]:
            service = webhook["clientConfig"]["service"]
            assert (
                _one(variant, "Service", service["name"])["spec"]["ports"][0]["port"]
                == service["port"]
                == 443
            )
            assert webhook["sideEffects"] == "None" and webhook["admissionReviewVersions"] == ["v1"]
            paths.add(service["path"])
        annotations = configuration["metadata"].get("annotations", {})
        policies = {webhook["failurePolicy"] for webhook in configuration["webhooks"]}
        given = VARIANTS[variant].get("admission", {}).get("failurePolicy", "Fail")
        # A certificate given (cert-manager, caBundle): the policy as given; else Ignore until the CA is in.
        own = variant != "cert-manager" and not VARIANTS[variant].get("admission", {}).get("caBundle")
        assert policies == {"Ignore" if own else given}, variant
        if variant == "cert-manager":
            assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{RELEASE}-admission"
            (certificate,) = _docs(variant, "Certificate")
            assert f"{RELEASE}-admission.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
        else:
            assert not annotations
    if admission_enabled:
        assert paths == {
            "/mutate--v1-pod",
            "/validate--v1-pod",
            "/validate-scheduling-run-ai-v2-queue",
            "/validate-scheduling-run-ai-v2alpha2-podgroup",
            "/validate-kai-scheduler-v1alpha1-topology",
            "/validate-scheduling-run-ai-v1alpha1-accountedresource",
        }


# --- RBAC ------------------------------------------------------------------------------------------
#
# What each ServiceAccount may do is what its components call, as the code declares it (k8s/needs.py):
# every Deployment's args make the `RunOptions` that `kai-scheduler run` would start with, those give each
# component's needs, and the roles bound to the Deployment's account must grant exactly their union,
# namespaces and object names included.


def _permissions(rule: dict[str, Any], namespace: str | None) -> Iterator[Permission]:
    assert "nonResourceURLs" not in rule
    for group in rule["apiGroups"]:
        for resource in rule["resources"]:
            for verb in rule["verbs"]:
                for name in rule.get("resourceNames") or [None]:
                    yield Permission(group, resource, verb, namespace, name)


def _granted(variant: str) -> dict[tuple[str, str], frozenset[Permission]]:
    """(namespace, ServiceAccount) -> what the roles bound to it grant (`minimal`): a ClusterRole bound by a
    ClusterRoleBinding everywhere, a role bound by a RoleBinding in the binding's namespace."""
    roles = {
        (role["kind"], role["metadata"].get("namespace"), role["metadata"]["name"]): role
        for role in _docs(variant, "ClusterRole") + _docs(variant, "Role")
    }
    granted: dict[tuple[str, str], set[Permission]] = {}
    for binding in _docs(variant, "ClusterRoleBinding") + _docs(variant, "RoleBinding"):
        where = binding["metadata"].get("namespace")
        ref = binding["roleRef"]
        role = roles[(ref["kind"], where if ref["kind"] == "Role" else None, ref["name"])]
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            account = granted.setdefault((subject["namespace"], subject["name"]), set())
            for rule in role["rules"]:
                account.update(_permissions(rule, where))
    return {account: minimal(permissions) for account, permissions in granted.items()}


def _deployment_options(variant: str, deployment: dict[str, Any], tmp_path: Path) -> RunOptions:
    """What `kai-scheduler run` starts with in this Deployment's pod: its args, its config file (the
    chart's ConfigMap, mounted there) and POD_NAMESPACE (the downward API's metadata.namespace)."""
    container = _container(deployment)
    env = {entry["name"]: entry for entry in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    args = list(container["args"])
    for index, arg in enumerate(args):
        if arg.startswith("--config="):
            config = _one(variant, "ConfigMap", f"{RELEASE}-scheduler-config")["data"]["config.yaml"]
            path = tmp_path / f"{deployment['metadata']['name']}.yaml"
            path.write_text(config)
            args[index] = f"--config={path}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POD_NAMESPACE", deployment["metadata"]["namespace"])
        return cli.run_options(_run(args))


def _needed(variant: str, tmp_path: Path) -> dict[tuple[str, str], frozenset[Permission]]:
    """(namespace, ServiceAccount) -> what the components running as it call (`minimal`): every
    Deployment's components, and the binder's reservation pods (`kai-scheduler reserve`)."""
    needed: dict[tuple[str, str], set[Access]] = {}
    for deployment in _docs(variant, "Deployment"):
        options = _deployment_options(variant, deployment, tmp_path)
        account = (
            deployment["metadata"]["namespace"],
            deployment["spec"]["template"]["spec"]["serviceAccountName"],
        )
        for component in options.components:
            needed.setdefault(account, set()).update(needs(component, options))
        if "binder" in options.components and options.reservation is not None:
            reservation = options.reservation
            pods = (reservation.namespace, reservation.service_account)
            needed.setdefault(pods, set()).update(reservation_app_needs(reservation.namespace))
    return {account: permissions(accesses) for account, accesses in needed.items()}


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_account_is_granted_exactly_what_its_components_call(variant: str, tmp_path: Path) -> None:
    """Nothing missing (no 403 in a cluster that enforces RBAC), nothing more (least privilege)."""
    needed, granted = _needed(variant, tmp_path), _granted(variant)
    for account in sorted(needed.keys() | granted.keys()):
        missing = needed.get(account, frozenset()) - granted.get(account, frozenset())
        extra = granted.get(account, frozenset()) - needed.get(account, frozenset())
        assert not missing and not extra, (account, sorted(missing), sorted(extra))
    accounts = {
        (sa["metadata"]["namespace"], sa["metadata"]["name"]) for sa in _docs(variant, "ServiceAccount")
    }
    assert needed.keys() <= accounts


@pytest.mark.parametrize("variant", VARIANTS)
def test_rbac_is_plain(variant: str) -> None:
    """Named verbs on named resources: no wildcards, no non-resource URLs; events in the core group only
    (what the components write)."""
    for role in _docs(variant, "ClusterRole") + _docs(variant, "Role"):
        for rule in role["rules"]:
            assert set(rule["verbs"]) <= VERBS, role["metadata"]["name"]
            assert "*" not in rule["apiGroups"] and "*" not in rule["resources"]
            assert not ("events" in rule["resources"] and "events.k8s.io" in rule["apiGroups"])


def test_the_scheduler_deletes_its_victims_and_a_pool_scheduler_labels_pods(tmp_path: Path) -> None:
    """KAI's evictor: a victim's DisruptionTarget condition, then its delete (no eviction subresource);
    the scheduler of a node pool (a shard with a partition value) also labels the pods it binds. Every
    scheduler patches pods: it removes the queue-admission gate, also with queue admission gating off
    (pods left gated are let go)."""
    scheduler = _granted("default")[(NAMESPACE, f"{RELEASE}-scheduler")]
    assert {Permission("", "pods/status", "patch"), Permission("", "pods", "delete")} <= scheduler
    assert not {p for p in scheduler if p.resource in ("pods/eviction", "pods") and p.verb == "create"}
    assert Permission("", "pods", "patch") in scheduler
    assert Permission("policy", "poddisruptionbudgets", "watch") in scheduler
    assert Permission("", "pods", "patch") in _granted("shards")[(NAMESPACE, f"{RELEASE}-scheduler")]


def _bound_roles(variant: str, account: str) -> set[tuple[str, str]]:
    return {
        (binding["kind"], binding["roleRef"]["name"])
        for binding in _docs(variant, "ClusterRoleBinding") + _docs(variant, "RoleBinding")
        if account in {s["name"] for s in binding["subjects"]}
    }


SECRET = "kai-admission-tls"  # admission.tls.secretName
WEBHOOKS = f"{RELEASE}-admission"  # both webhook configurations


def test_admission_making_its_certificate_may_touch_only_its_secret_and_webhooks() -> None:
    admission = _granted("default")[(NAMESPACE, f"{RELEASE}-admission")]
    assert admission == {
        Permission("", "secrets", "create", NAMESPACE),
        Permission("", "secrets", "get", NAMESPACE, SECRET),
        Permission("", "secrets", "update", NAMESPACE, SECRET),
        *(
            Permission("admissionregistration.k8s.io", configurations, verb, None, WEBHOOKS)
            for configurations in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
            for verb in ("get", "patch")
        ),
    }
    (account,) = [
        sa for sa in _docs("default", "ServiceAccount") if sa["metadata"]["name"] == f"{RELEASE}-admission"
    ]
    assert "automountServiceAccountToken" not in account  # it talks to the API server


@pytest.mark.parametrize("variant", ["cert-manager", "custom"])
def test_admission_given_a_certificate_reads_nothing_from_the_api_server(variant: str) -> None:
    """With cert-manager or a caBundle, the Secret is mounted: no RBAC, no token, no --tls-secret."""
    (admission,) = [
        sa for sa in _docs(variant, "ServiceAccount") if sa["metadata"]["name"] == f"{RELEASE}-admission"
    ]
    assert admission["automountServiceAccountToken"] is False
    assert _bound_roles(variant, f"{RELEASE}-admission") == set()
    assert not [
        r
        for r in _docs(variant, "Role") + _docs(variant, "ClusterRole")
        if "admission" in r["metadata"]["name"]
    ]
    parsed = _run(_args(variant, "admission"))
    assert parsed.tls_cert_dir == "/etc/kai-scheduler/tls" and parsed.tls_secret is None
    pod = _one(variant, "Deployment", f"{RELEASE}-admission")["spec"]["template"]["spec"]
    (tls,) = [volume for volume in pod["volumes"] if volume["name"] == "tls"]
    assert tls["secret"]["secretName"] == SECRET


@pytest.mark.parametrize(("variant", "deployment"), [("default", "admission"), ("all-in-one", "all-in-one")])
def test_admission_makes_its_certificate_for_the_charts_names(variant: str, deployment: str) -> None:
    """By default the component makes its own certificate: the flags name the Secret its Role may write,
    the Service the webhooks call, the two webhook configurations it may patch, and the failure policy
    they get with the CA (installed with Ignore, so nothing waits for the admission pods)."""
    parsed = _run(_args(variant, deployment))
    tls = cli_run.self_signed(parsed)
    assert tls is not None and parsed.tls_cert_dir is None
    assert tls.secret == SECRET
    configurations = _docs(variant, "MutatingWebhookConfiguration") + _docs(
        variant, "ValidatingWebhookConfiguration"
    )
    assert {(c["kind"], c["metadata"]["name"]) for c in configurations} == {
        ("MutatingWebhookConfiguration", tls.mutating_webhook_configuration),
        ("ValidatingWebhookConfiguration", tls.validating_webhook_configuration),
    }
    for configuration in configurations:
        for webhook in configuration["webhooks"]:
            assert webhook["clientConfig"]["service"] == {
                **webhook["clientConfig"]["service"],
                "name": tls.service,
                "namespace": NAMESPACE,
            }
            assert "caBundle" not in webhook["clientConfig"]
            assert webhook["failurePolicy"] == "Ignore"
    assert tls.failure_policy == "Fail"  # admission.failurePolicy, KAI's
    assert _one(variant, "Service", tls.service)
    pod = _one(variant, "Deployment", f"{RELEASE}-{deployment}")["spec"]["template"]["spec"]
    assert "tls" not in {volume["name"] for volume in pod["volumes"]}
    # The files go to a directory of the process's own under $TMPDIR or /tmp: a writable emptyDir.
    assert {"name": "tmp", "mountPath": "/tmp"} in _container(
        _one(variant, "Deployment", f"{RELEASE}-{deployment}")
    )["volumeMounts"]
    account = pod["serviceAccountName"]
    assert {("ClusterRoleBinding", f"{RELEASE}-admission"), ("RoleBinding", f"{RELEASE}-admission")} <= (
        _bound_roles(variant, account)
    )


def test_namespaced_grants() -> None:
    leader = _one("default", "Role", f"{RELEASE}-leader-election")
    assert leader["metadata"]["namespace"] == NAMESPACE
    binding = _one("default", "RoleBinding", f"{RELEASE}-leader-election")
    assert {s["name"] for s in binding["subjects"]} == {
        f"{RELEASE}-{c}" for c in COMPONENTS if c != "admission"
    }
    reservations = _one("default", "Role", f"{RELEASE}-binder-reservations")
    assert reservations["metadata"]["namespace"] == "kai-resource-reservation"
    assert _one("default", "Namespace", "kai-resource-reservation")
    assert not [
        role for role in _docs("minimal", "Role") if role["metadata"]["name"].endswith("leader-election")
    ]


def test_all_in_one_account_holds_every_component_role() -> None:
    subjects = {
        binding["roleRef"]["name"]: {s["name"] for s in binding["subjects"]}
        for binding in _docs("all-in-one", "ClusterRoleBinding") + _docs("all-in-one", "RoleBinding")
    }
    for component in ("scheduler", "binder", "podgrouper", "status-controllers", "admission"):
        assert subjects[f"{RELEASE}-{component}"] == {f"{RELEASE}-all-in-one"}
    assert subjects[f"{RELEASE}-leader-election"] == {f"{RELEASE}-all-in-one"}
    assert subjects[f"{RELEASE}-binder-reservations"] == {f"{RELEASE}-all-in-one"}
    assert subjects[f"{RELEASE}-admission"] == {f"{RELEASE}-all-in-one"}


def _scale_adjuster_objects(variant: str) -> list[dict[str, Any]]:
    return [
        document
        for document in _docs(variant)
        if document["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "scale-adjuster"
    ]


def test_cluster_autoscaling_is_off_by_default_and_changes_nothing_else() -> None:
    assert yaml.safe_load((CHART / "values.yaml").read_text())["clusterAutoscaling"] is False
    assert render_chart({"clusterAutoscaling": False}) == _rendered("default")
    for variant, overrides in VARIANTS.items():
        if not overrides.get("clusterAutoscaling"):
            assert _scale_adjuster_objects(variant) == [], variant
            reserving = overrides.get("resourceReservation", {}).get("enabled", True)
            assert {ns["metadata"]["name"] for ns in _docs(variant, "Namespace")} == (
                {"kai-resource-reservation"} if reserving else set()
            )
    # Turning it on only adds the scale adjuster's objects.
    for on, off in (("cluster-autoscaling", "default"), ("all-in-one-cluster-autoscaling", None)):
        others = [d for d in _docs(on) if d not in _scale_adjuster_objects(on)]
        base = _rendered(off) if off else render_chart({"allInOne": True, "leaderElection": False})
        assert others == [document for _, document in base]


@pytest.mark.parametrize("variant", ["cluster-autoscaling", "all-in-one-cluster-autoscaling"])
def test_scale_adjuster_deployment(variant: str) -> None:
    deployment = _one(variant, "Deployment", f"{RELEASE}-scale-adjuster")
    # One replica, recreated (not rolled): two adjusters would undo each other's plans, so no Lease.
    assert _container(deployment)["args"] == [
        "run",
        "--component=scale-adjuster",
        "--scheduler-name=kai-scheduler",
        "--scaling-pod-image=registry.k8s.io/pause:3.9",
    ]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == f"{RELEASE}-scale-adjuster"
    names = {d["metadata"]["name"] for d in _docs(variant, "Deployment")}
    if VARIANTS[variant].get("allInOne"):
        assert names == {f"{RELEASE}-all-in-one", f"{RELEASE}-scale-adjuster"}
        (all_in_one,) = [
            d for d in _docs(variant, "Deployment") if d["metadata"]["name"].endswith("all-in-one")
        ]
        assert _container(all_in_one)["args"][:2] == ["run", "--all"]
    else:
        assert names == {f"{RELEASE}-{c}" for c in (*COMPONENTS, "scale-adjuster")}


@pytest.mark.parametrize("variant", ["cluster-autoscaling", "all-in-one-cluster-autoscaling"])
def test_scale_adjuster_rbac(variant: str) -> None:
    account = f"{RELEASE}-scale-adjuster"
    roles = {role["metadata"]["name"] for role in _docs(variant, "ClusterRole")}
    assert roles == {f"{RELEASE}-{c}" for c in (*COMPONENTS, "scale-adjuster")}
    pods = _one(variant, "Role", f"{RELEASE}-scale-adjuster-pods")
    assert pods["metadata"]["namespace"] == SCALE_ADJUST_NAMESPACE
    assert _one(variant, "Namespace", SCALE_ADJUST_NAMESPACE)  # the chart's: the adjuster makes none
    assert _one(variant, "ServiceAccount", account)["metadata"]["namespace"] == NAMESPACE
    bound = {
        (binding["kind"], binding["roleRef"]["name"])
        for binding in _docs(variant, "ClusterRoleBinding") + _docs(variant, "RoleBinding")
        if any(subject["name"] == account for subject in binding["subjects"])
    }
    assert bound == {("ClusterRoleBinding", account), ("RoleBinding", f"{RELEASE}-scale-adjuster-pods")}
    for binding in _docs(variant, "ClusterRoleBinding") + _docs(variant, "RoleBinding"):
        if binding["roleRef"]["name"].startswith(account):
            assert [s["name"] for s in binding["subjects"]] == [account]


# --- KAI's cluster objects -------------------------------------------------------------------------


def test_priority_classes() -> None:
    classes = {pc["metadata"]["name"]: pc for pc in _docs("default", "PriorityClass")}
    assert {name: pc["value"] for name, pc in classes.items()} == BUILTIN_PRIORITY_CLASSES
    assert BUILTIN_PRIORITY_CLASSES == {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
    assert not any(pc.get("globalDefault") for pc in classes.values())
    assert not _docs("minimal", "PriorityClass")


def test_default_queues_are_plain_valid_queues() -> None:
    queues = {queue["metadata"]["name"]: queue for queue in _docs("default", "Queue")}
    assert set(queues) == {"default-parent-queue", "default-queue"}
    assert queues["default-queue"]["spec"]["parentQueue"] == "default-parent-queue"
    assert "parentQueue" not in queues["default-parent-queue"]["spec"]
    schema = schema_for("scheduling.run.ai/v2", "Queue")
    assert schema is not None
    for queue in queues.values():
        assert validate_object(schema, queue) == []
        assert set(queue["spec"]["resources"]) == {"cpu", "gpu", "memory"}
        for resource in queue["spec"]["resources"].values():
            assert resource == {"quota": 0, "limit": -1, "overQuotaWeight": 1}
    assert not _docs("minimal", "Queue")


# --- the chart files ------------------------------------------------------------------------------


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "kai-scheduler" and chart["type"] == "application"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    for template in (CHART / "templates").iterdir():  # no hook, not even behind a value
        assert "helm.sh/hook" not in template.read_text(), template.name


def test_dockerfile_is_slim_and_non_root() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    lines = [line.strip() for line in dockerfile.splitlines() if line.strip() and not line.startswith("#")]
    assert all(line.startswith("FROM python:3.11-slim") for line in lines if line.startswith("FROM"))
    user = [line for line in lines if line.startswith("USER ")]
    assert user and user[-1].split()[1].split(":")[0] not in ("root", "0")
    assert 'ENTRYPOINT ["kai-scheduler"]' in lines
    assert any("pip" in line and "install" in line for line in lines)


def _iter_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _iter_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _iter_strings(item)


@pytest.mark.parametrize("variant", VARIANTS)
def test_nothing_is_left_unrendered(variant: str) -> None:
    dashboard = (CHART / "dashboards" / "kai-scheduler.json").read_text()
    for template, document in _rendered(variant):
        if template == "dashboard.yaml":
            # Grafana's own templates (`{{queue_name}}` legends) are in it: it is the file, unrendered.
            assert document["data"] == {"kai-scheduler.json": dashboard.rstrip("\n")}
            continue
        for text in _iter_strings(document):
            assert "{{" not in text and "<no value>" not in text


@pytest.mark.parametrize(
    ("variant", "deployment"),
    [("no-gpu-sharing", "admission"), ("all-in-one-no-gpu-sharing", "all-in-one"), ("default", "admission")],
)
def test_admission_gpu_sharing_off_refuses_fractions(variant: str, deployment: str) -> None:
    """`admission.gpuSharing: false` (KAI's `global.gpuSharing: false`) reaches the webhook as
    `--no-gpu-sharing`; the default allows GPU sharing."""
    args = _args(variant, deployment)
    assert ("--no-gpu-sharing" in args) == (variant != "default")
    assert _run(args).no_gpu_sharing == (variant != "default")


@pytest.mark.parametrize(
    ("variant", "deployment"),
    [("cdi", "binder"), ("all-in-one-cdi", "all-in-one"), ("default", "binder")],
)
def test_binder_cdi_enabled_reaches_the_binder(variant: str, deployment: str) -> None:
    """`binder.cdiEnabled` (KAI's value) becomes `--cdi-enabled`; off by default."""
    args = _args(variant, deployment)
    assert _run(args).cdi_enabled == (variant != "default")


@pytest.mark.parametrize("variant", ["admission-gating", "default"])
def test_queue_admission_gating_switches_both_sides(variant: str, tmp_path: Path) -> None:
    """`queueAdmissionGating` (KAI's design: one master switch the operator fans out) reaches the scheduler's
    configuration (and so its `ungate` action, last) and the webhook (`--queue-admission-gating`, which
    watches Queues); off by default, where neither side gates anything."""
    on = variant != "default"
    scheduler = _deployment_options(variant, _one(variant, "Deployment", f"{RELEASE}-scheduler"), tmp_path)
    assert scheduler.config.admission_gating.enabled == on
    assert (scheduler.config.actions[-1] == "ungate") == on
    if on:
        assert scheduler.config.admission_gating.reservation_timeout == 300.0
    admission = _deployment_options(variant, _one(variant, "Deployment", f"{RELEASE}-admission"), tmp_path)
    assert admission.queue_admission_gating == on
    granted = _granted(variant)[(NAMESPACE, f"{RELEASE}-admission")]
    assert (Permission("scheduling.run.ai", "queues", "watch") in granted) == on


def test_readme_installs_this_chart() -> None:
    assert INSTALL.chart == CHART
    assert INSTALL.values == {}  # the defaults: the admission webhooks make their own certificate


@pytest.mark.parametrize("variant", ["default", "fake-gpus", "custom"])
def test_install_notes_name_the_release(variant: str) -> None:
    """What `helm install` prints: where it runs, how pods opt in, and what to watch."""
    notes = render_notes(VARIANTS[variant])
    assert f"is installed in namespace {NAMESPACE}." in notes
    scheduler_name = VARIANTS[variant].get("schedulerName", "kai-scheduler")
    assert f"`schedulerName: {scheduler_name}`" in notes
    assert f"kubectl -n {NAMESPACE} port-forward svc/{RELEASE}-metrics 8080" in notes
    assert _one(variant, "Service", f"{RELEASE}-metrics")["spec"]["ports"][0]["port"] == 8080
    reserving = VARIANTS[variant].get("resourceReservation", {}).get("enabled", True)
    assert ("kubectl get pods -n kai-resource-reservation" in notes) == reserving


# --- scheduling shards -------------------------------------------------------------------------------


def test_each_shard_runs_a_scheduler_of_its_own() -> None:
    """scheduler.shards: one Deployment per shard (`--shard=<name>`, its placement strategy, selectors that
    do not overlap), and the configuration that every shard's `run` reads, with the shards in it."""
    deployments = {
        d["metadata"]["name"]: d
        for d in _docs("shards", "Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "scheduler"
    }
    assert set(deployments) == {f"{RELEASE}-scheduler-default", f"{RELEASE}-scheduler-a100"}
    selectors = [tuple(sorted(d["spec"]["selector"]["matchLabels"].items())) for d in deployments.values()]
    assert len(set(selectors)) == 2
    document = yaml.safe_load(
        _one("shards", "ConfigMap", f"{RELEASE}-scheduler-config")["data"]["config.yaml"]
    )
    config = parse_config(document)
    assert config.node_pool_label_key == "example.com/pool"
    for name, strategy, value in (("default", "binpack", None), ("a100", "spread", "a100")):
        deployment = deployments[f"{RELEASE}-scheduler-{name}"]
        assert deployment["spec"]["template"]["metadata"]["labels"]["kai.scheduler/shard"] == name
        args = _run(_container(deployment)["args"])
        assert (args.shard, args.placement_strategy) == (name, strategy)
        choice = cli_run.shard(config, args.shard, args.config)
        shard_config, partition = choice.config, choice.partition
        assert (choice.name, choice.configured) == (name, True)
        assert (partition.label_key, partition.value) == ("example.com/pool", value)
        assert shard_config.actions == ("allocate", "reclaim")  # scheduler.config under the shard's keys
        assert shard_config.queue_depth_per_action == ({"allocate": 25} if name == "a100" else {})
    # No shards: the one scheduler of the default shard, and the configuration as it was given.
    assert "--shard" not in " ".join(_args("default", "scheduler"))


def test_shards_need_a_scheduler_deployment_each() -> None:
    with pytest.raises(AssertionError, match="allInOne: false"):
        render_chart({"allInOne": True, "scheduler": {"shards": [{"name": "a"}]}})
    with pytest.raises(AssertionError, match="every shard needs a name"):
        render_chart({"scheduler": {"shards": [{"partitionLabelValue": "a"}]}})


# --- KAI v0.17's values and operator objects -----------------------------------------------------------


def test_the_default_shard_and_kai_config_are_installed() -> None:
    """KAI's chart installs the SchedulingShard `default` from scheduler.* and the Config `kai-config`;
    this one too, as plain objects (no hook: the CRDs are in crds/, which Helm installs first)."""
    (shard,) = _docs("default", "SchedulingShard")
    assert shard["metadata"]["name"] == "default"
    assert shard["spec"] == {
        "partitionLabelValue": "",
        "placementStrategy": {"gpu": "binpack", "cpu": "binpack"},
    }
    (config,) = _docs("default", "Config")
    assert config["metadata"]["name"] == "kai-config"
    assert config["spec"]["namespace"] == NAMESPACE
    assert config["spec"]["global"]["nodePoolLabelKey"] == "kai.scheduler/node-pool"
    assert _one("shards", "Config", "kai-config")["spec"]["global"]["nodePoolLabelKey"] == "example.com/pool"
    # This chart's own configuration (scheduler.shards, scheduler.config), which the object would override:
    # no SchedulingShard `default` beside it.
    assert _docs("shards", "SchedulingShard") == []
    assert _docs("custom", "SchedulingShard") == []
    assert not [
        d for _, d in render_chart({"defaultShard": {"enabled": False}}) if d["kind"] == "SchedulingShard"
    ]


def test_kai_values_set_what_they_mean_here() -> None:
    """The KAI v0.17 values file: its scheduler.* make the default SchedulingShard, its global.* reach
    every component (JSON logs, leader election, GPU sharing) and what has no counterpart is listed."""
    (shard,) = _docs("kai-v0.17", "SchedulingShard")
    spec = shard["spec"]
    assert spec["placementStrategy"] == {"gpu": "spread", "cpu": "spread"}
    assert spec["plugins"]["proportion"] == {"arguments": {"kValue": "2.0"}}
    assert spec["actions"]["consolidation"] == {"enabled": False}
    assert spec["args"] == {"default-staleness-grace-period": "2m"}
    assert _one("kai-v0.17", "Config", "kai-config")["spec"]["global"]["jsonLog"] is True
    for deployment in _docs("kai-v0.17", "Deployment"):
        assert "--log-format=json" in _container(deployment)["args"], deployment["metadata"]["name"]
    scheduler = _run(_args("kai-v0.17", "scheduler"))
    assert (scheduler.placement_strategy, scheduler.leader_elect) == ("spread", True)
    assert "--no-gpu-sharing" not in _args("kai-v0.17", "admission")
    notes = render_notes(VARIANTS["kai-v0.17"])
    ignored = "global.registry, global.tag, global.requireDefaultPodAntiAffinityTerm"
    assert f"(no counterpart here: KAI's operator, images and hooks): {ignored}\n" in notes + "\n"
    assert "accepted and ignored" not in render_notes(VARIANTS["default"])


def test_kai_global_values_reach_the_pods() -> None:
    values = {
        "global": {
            "nodeSelector": {"pool": "system"},
            "tolerations": [{"key": "system", "operator": "Exists"}],
            "imagePullSecrets": [{"name": "kai"}],
            "imagePullPolicy": "Always",
            "priorityClassName": "system-cluster-critical",
            "nodePoolLabelKey": "example.com/pool",
            "gpuSharing": False,
            "leaderElection": False,
            "clusterAutoscaling": True,
            "resourceReservation": {
                "namespace": "gpu-reservations",
                "serviceAccount": "reserver",
                "namespaceLabels": {"team": "infra"},
            },
        },
        "operator": {"replicaCount": 2},
        "admission": {"gpuFractionRuntimeClassName": "nvidia-cdi"},
        "defaultPriorityClasses": {"enabled": False},
        "defaultQueue": {"parentName": "root", "childName": "default-queue"},
    }
    documents = [document for _, document in render_chart(values)]
    deployments = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Deployment"}
    assert f"{RELEASE}-scale-adjuster" in deployments
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"pool": "system"}, name
        assert pod["tolerations"] == [{"key": "system", "operator": "Exists"}], name
        assert pod["imagePullSecrets"] == [{"name": "kai"}], name
        assert pod["priorityClassName"] == "system-cluster-critical", name
        assert pod["containers"][0]["imagePullPolicy"] == "Always", name
        if name != f"{RELEASE}-scale-adjuster":  # one Recreate replica, as KAI's
            assert deployment["spec"]["replicas"] == 2, name
            # KAI: more than one replica elects a leader, whatever global.leaderElection says.
            elects = "--leader-elect" in pod["containers"][0]["args"]
            assert elects == (name != f"{RELEASE}-admission"), name
    admission = _run(_container(deployments[f"{RELEASE}-admission"])["args"])
    assert (admission.no_gpu_sharing, admission.gpu_pod_runtime_class) == (True, "nvidia-cdi")
    binder = _run(_container(deployments[f"{RELEASE}-binder"])["args"])
    assert (binder.reservation_namespace, binder.reservation_service_account) == (
        "gpu-reservations",
        "reserver",
    )
    namespaces = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Namespace"}
    namespace = namespaces["gpu-reservations"]
    assert namespace["metadata"]["labels"]["team"] == "infra"
    assert not [d for d in documents if d["kind"] == "PriorityClass"]
    queues = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Queue"}
    assert queues["default-queue"]["spec"]["parentQueue"] == "root" and "root" in queues
    config = next(d for d in documents if d["kind"] == "Config")
    assert config["spec"]["global"]["nodePoolLabelKey"] == "example.com/pool"
    one = [d for _, d in render_chart({"global": {"leaderElection": False}}) if d["kind"] == "Deployment"]
    assert not [d for d in one if "--leader-elect" in _container(d)["args"]]
    # KAI's createNamespace / createServiceAccount false: they exist already.
    existing = {"global": {"resourceReservation": {"createNamespace": False, "createServiceAccount": False}}}
    kinds = {d["kind"] for _, d in render_chart(existing) if d["metadata"].get("namespace") != NAMESPACE}
    assert "Namespace" not in kinds and "ServiceAccount" not in kinds
    assert not [
        d for _, d in render_chart({"defaultQueue": {"createDefaultQueue": False}}) if d["kind"] == "Queue"
    ]


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        ({"openshift": True}, "openshift: true: this chart makes no SecurityContextConstraints"),
        (
            {"global": {"podLabelSelector": {"app": "batch"}}},
            "global.podLabelSelector, global.namespaceLabelSelector: not supported",
        ),
        (
            {"global": {"namespaceLabelSelector": {"team": "ml"}}},
            "global.podLabelSelector, global.namespaceLabelSelector: not supported",
        ),
        ({"global": {"blockNvidiaVisibleDevices": True}}, "global.blockNvidiaVisibleDevices: not supported"),
        (
            {"global": {"resourceReservation": {"appLabel": "mine"}}},
            'global.resourceReservation.appLabel: "mine" is not supported',
        ),
        ({"binder": {"enabled": False}}, "binder.enabled: false: this chart always runs the binder"),
        (
            {"queuecontroller": {"enabled": False}},
            "queuecontroller.enabled: false: this chart always runs the queuecontroller",
        ),
        ({"podgrouper": {"queueLabelKey": "team"}}, 'podgrouper.queueLabelKey: "team" is not supported'),
        (
            {"nodescaleadjuster": {"scalingPodNamespace": "scale"}},
            'nodescaleadjuster.scalingPodNamespace: "scale" is not supported',
        ),
        (
            {"scheduler": {"placementStrategy": "pack"}},
            'scheduler.placementStrategy: "pack"; expected binpack or spread',
        ),
        ({"prometheus": {"enabled": True}}, "prometheus.enabled without prometheus.externalPrometheusUrl"),
        (
            {"scheduler": {"shards": [{"name": "a"}], "plugins": {"elastic": {"enabled": False}}}},
            "scheduler.args, plugins, actions, scenarioSearchBudgets make the SchedulingShard default",
        ),
        (
            {"scheduler": {"config": {"actions": "allocate"}, "args": {"v": "3"}}},
            "which scheduler.config and scheduler.shards replace; give the configuration in one place",
        ),
    ],
)
def test_kai_values_that_contradict_this_chart_are_refused_in_one_line(
    values: dict[str, Any], refusal: str
) -> None:
    with pytest.raises(AssertionError) as raised:
        render_chart(values)
    message = str(raised.value)
    assert refusal in message and "\n" not in message.strip()


def test_kai_prometheus_goes_into_kai_config() -> None:
    url = "http://prometheus.monitoring:9090"
    documents = render_chart({"prometheus": {"enabled": True, "externalPrometheusUrl": url}})
    (config,) = [d for _, d in documents if d["kind"] == "Config"]
    assert config["spec"]["prometheus"] == {"enabled": True, "externalPrometheusUrl": url}
