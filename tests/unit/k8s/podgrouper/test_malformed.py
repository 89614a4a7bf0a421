"""Malformed input raises `GroupingError`: one line naming the object and the field, never a KeyError."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_objects import (
    jobset,
    jobset_pod,
    knative,
    kubeflow_pod,
    lws,
    lws_pods,
    mpijob,
    obj,
    pod,
    pod_template,
    pytorchjob,
    ray_cluster_spec,
    ray_pod,
)

from kai_scheduler.controlplane.podgrouper import GroupingError, plan_pod_group

Case = tuple[dict[str, Any], list[dict[str, Any]]]


def ptj_case(mutate: Callable[[dict[str, Any]], None]) -> Case:
    job = pytorchjob()
    p = kubeflow_pod(job, "worker", 0)
    mutate(job)
    return p, [job]


def owner_case(api_version: str, kind: str, spec: Any, labels: dict[str, str] | None = None) -> Case:
    owner = obj(api_version, kind, "w", "uid-w", spec=spec if isinstance(spec, dict) else None)
    if not isinstance(spec, dict):
        owner["spec"] = spec
    return pod("w-0", "uid-w0", owner=owner, labels=labels), [owner]


def _set(path: list[str], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(job: dict[str, Any]) -> None:
        node = job
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return mutate


def segmented_pytorchjob(**kwargs: Any) -> dict[str, Any]:
    """Segments of 2 workers, on the Worker template where KAI's PyTorchJob grouper reads them."""
    job = pytorchjob(**kwargs)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] = {
        "kai.scheduler/segment-size": "2",
        "kai.scheduler/segment-topology-required-placement": "rack",
    }
    return job


CASES: list[tuple[str, Case, str]] = [
    (
        "replicas not an integer",
        ptj_case(_set(["spec", "pytorchReplicaSpecs", "Worker", "replicas"], "four")),
        "PyTorchJob team-a/mnist: spec.pytorchReplicaSpecs.Worker.replicas: expected an integer, got 'four'",
    ),
    (
        "negative replicas",
        ptj_case(_set(["spec", "pytorchReplicaSpecs", "Worker", "replicas"], -1)),
        "PyTorchJob team-a/mnist: spec.pytorchReplicaSpecs.Worker.replicas: must be at least 0, got -1",
    ),
    (
        "replica specs missing",
        ptj_case(lambda j: j["spec"].pop("pytorchReplicaSpecs")),
        "PyTorchJob team-a/mnist: spec.pytorchReplicaSpecs: is missing",
    ),
    (
        "replica specs a list",
        ptj_case(_set(["spec", "pytorchReplicaSpecs"], [])),
        "PyTorchJob team-a/mnist: spec.pytorchReplicaSpecs: expected an object, got a list",
    ),
    (
        "spec a string",
        ptj_case(_set(["spec"], "oops")),
        "PyTorchJob team-a/mnist: spec: expected an object, got 'oops'",
    ),
    (
        "minAvailable above the job",
        ptj_case(_set(["spec", "runPolicy", "schedulingPolicy", "minAvailable"], 9)),
        "PyTorchJob team-a/mnist: spec.runPolicy.schedulingPolicy.minAvailable: "
        "9 is more than the 5 pods of the job",
    ),
    (
        "minReplicas a float",
        ptj_case(_set(["spec", "elasticPolicy", "minReplicas"], 1.5)),
        "PyTorchJob team-a/mnist: spec.elasticPolicy.minReplicas: expected an integer, got 1.5",
    ),
    (
        "no replicas at all",
        ptj_case(_set(["spec", "pytorchReplicaSpecs"], {"Worker": {"replicas": 0}})),
        "PyTorchJob team-a/mnist: spec.pytorchReplicaSpecs: has no replicas",
    ),
    (
        "owner without name",
        ptj_case(lambda j: j["metadata"].pop("name")),
        "PyTorchJob uid-ptj: metadata.name: is missing",
    ),
    (
        "owner without uid",
        ptj_case(lambda j: j["metadata"].pop("uid")),
        "Pod team-a/mnist-worker-0: metadata.ownerReferences[0]: the owner PyTorchJob mnist (uid uid-ptj) "
        "was not provided",
    ),
    (
        "label value not a string",
        ptj_case(_set(["metadata", "labels"], {"kai.scheduler/queue": 7})),
        'PyTorchJob team-a/mnist: metadata.labels["kai.scheduler/queue"]: expected a string value, got 7',
    ),
    (
        "pod replica type unknown",
        (kubeflow_pod(pytorchjob(), "evaluator", 0), [pytorchjob()]),
        'Pod team-a/mnist-evaluator-0: metadata.labels["training.kubeflow.org/replica-type"]: '
        "replica type 'evaluator' is not one of the job's (master, worker)",
    ),
    (
        "worker index beyond the job",
        (kubeflow_pod(segmented_pytorchjob(), "worker", 4), [segmented_pytorchjob()]),
        'Pod team-a/mnist-worker-4: metadata.labels["training.kubeflow.org/replica-index"]: '
        "index 4 is beyond the 4 pods of sub-group 'worker'",
    ),
    (
        "MPI launcher policy unknown",
        owner_case(
            "kubeflow.org/v2beta1",
            "MPIJob",
            {
                "launcherCreationPolicy": "Later",
                "mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}},
            },
        ),
        "MPIJob team-a/w: spec.launcherCreationPolicy: "
        "must be one of AtStartup, WaitForWorkersReady, got 'Later'",
    ),
    (
        "ray worker group without a name",
        owner_case("ray.io/v1", "RayCluster", {"headGroupSpec": {}, "workerGroupSpecs": [{"replicas": 2}]}),
        "RayCluster team-a/w: spec.workerGroupSpecs[0].groupName: is missing",
    ),
    (
        "ray without a head",
        owner_case("ray.io/v1", "RayCluster", {"workerGroupSpecs": []}),
        "RayCluster team-a/w: spec.headGroupSpec: is missing",
    ),
    (
        "ray worker group named like the head",
        owner_case(
            "ray.io/v1", "RayCluster", {"headGroupSpec": {}, "workerGroupSpecs": [{"groupName": "headgroup"}]}
        ),
        "RayCluster team-a/w: two sub-groups would be named 'headgroup'",
    ),
    (
        "ray node type unknown",
        owner_case("ray.io/v1", "RayCluster", {"headGroupSpec": {}}, {"ray.io/node-type": "sidecar"}),
        "Pod team-a/w-0: metadata.labels[\"ray.io/node-type\"]: expected head or worker, got 'sidecar'",
    ),
    (
        "jobset without jobs",
        owner_case("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": []}),
        "JobSet team-a/w: spec.replicatedJobs: has no replicated jobs",
    ),
    (
        "jobset order unknown",
        owner_case(
            "jobset.x-k8s.io/v1alpha2",
            "JobSet",
            {"startupPolicy": {"startupPolicyOrder": "Random"}, "replicatedJobs": [{"name": "a"}]},
        ),
        "JobSet team-a/w: spec.startupPolicy.startupPolicyOrder: "
        "must be one of AnyOrder, InOrder, got 'Random'",
    ),
    (
        "in-order jobset pod without its replicated job",
        owner_case(
            "jobset.x-k8s.io/v1alpha2",
            "JobSet",
            {"startupPolicy": {"startupPolicyOrder": "InOrder"}, "replicatedJobs": [{"name": "a"}]},
        ),
        'Pod team-a/w-0: metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]: is missing',
    ),
    (
        "lws pod without group index",
        owner_case("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"leaderWorkerTemplate": {"size": 2}}),
        'Pod team-a/w-0: metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]: is missing',
    ),
    (
        "lws size zero",
        owner_case("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"leaderWorkerTemplate": {"size": 0}}),
        "LeaderWorkerSet team-a/w: spec.leaderWorkerTemplate.size: must be at least 1, got 0",
    ),
    (
        "lws startup policy unknown",
        owner_case("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"startupPolicy": "Whenever"}),
        "LeaderWorkerSet team-a/w: spec.startupPolicy: "
        "must be one of LeaderCreated, LeaderReady, got 'Whenever'",
    ),
    (
        "lws worker index not a number",
        owner_case(
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            {"leaderWorkerTemplate": {"size": 3}},
            {"leaderworkerset.sigs.k8s.io/group-index": "0", "leaderworkerset.sigs.k8s.io/worker-index": "x"},
        ),
        'Pod team-a/w-0: metadata.labels["leaderworkerset.sigs.k8s.io/worker-index"]: '
        "expected an integer, got 'x'",
    ),
    (
        "knative service without revision",
        owner_case("serving.knative.dev/v1", "Service", {}),
        "Service team-a/w: the pod is not under a Knative Revision of this object",
    ),
    (
        "cronjob pod not under a job",
        owner_case("batch/v1", "CronJob", {"jobTemplate": {"spec": {"template": pod_template()}}}),
        "CronJob team-a/w: the pod is not under a batch Job of this CronJob",
    ),
    (
        "pod priorityClassName not a string",
        (
            {**pod("p", "uid-p"), "spec": {"priorityClassName": ["high"], "containers": []}},
            [],
        ),
        "Pod team-a/p: spec.priorityClassName: expected a string, got a list",
    ),
    (
        "bare pod without uid",
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}}, []),
        "Pod team-a/p: metadata.uid: is missing",
    ),
    (
        "controller flag not a boolean",
        (
            {
                **pod("p", "uid-p"),
                "metadata": {
                    "name": "p",
                    "uid": "uid-p",
                    "namespace": "team-a",
                    "ownerReferences": [{"kind": "Job", "name": "j", "uid": "u", "controller": "yes"}],
                },
            },
            [],
        ),
        "Pod team-a/p: metadata.ownerReferences[0].controller: expected a boolean, got 'yes'",
    ),
]


@pytest.mark.parametrize(("case", "message"), [(c, m) for _, c, m in CASES], ids=[n for n, _, _ in CASES])
def test_malformed_input_is_a_one_line_grouping_error(case: Case, message: str) -> None:
    p, owners = case
    with pytest.raises(GroupingError) as err:
        plan_pod_group(p, owners)
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_error_carries_object_and_field() -> None:
    p, owners = ptj_case(_set(["spec", "pytorchReplicaSpecs", "Worker", "replicas"], "x"))
    with pytest.raises(GroupingError) as err:
        plan_pod_group(p, owners)
    assert err.value.object_ref == "PyTorchJob team-a/mnist"
    assert err.value.field == "spec.pytorchReplicaSpecs.Worker.replicas"
    assert isinstance(err.value, ValueError)


# --- nothing but GroupingError, whatever the shape --------------------------------------------------

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += _paths(child, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


def _workloads() -> list[Case]:
    job = segmented_pytorchjob(annotations={"kai.scheduler/topology": "t"}, elasticPolicy={"minReplicas": 3})
    rc = obj("ray.io/v1", "RayCluster", "rc", "uid-rc", spec=ray_cluster_spec())
    js = jobset("InOrder")
    js_pod, js_job = jobset_pod(js, "workers", 0, 0)
    mpi = mpijob("v2beta1", "WaitForWorkersReady")
    return [
        (kubeflow_pod(job, "worker", 1), [job]),
        (ray_pod(rc, "worker", "gpu-small", 0), [rc]),
        (js_pod, [js_job, js]),
        lws_pods(lws(annotations={"kai.scheduler/segment-size": "2"}), 1, 2),
        knative("2"),
        (kubeflow_pod(mpi, "launcher", 0), [mpi]),
    ]


WORKLOADS = _workloads()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_corruption_raises_only_grouping_error(data: st.DataObject) -> None:
    p, owners = copy.deepcopy(data.draw(st.sampled_from(WORKLOADS)))
    target = data.draw(st.sampled_from([p, *owners]))
    path = data.draw(st.sampled_from(_paths(target)))
    _replace(target, path, data.draw(JUNK))
    try:
        plan = plan_pod_group(p, owners)
    except GroupingError as err:
        assert "\n" not in str(err)
        assert str(err)
    else:
        # A PodGroup needs one pod at least, or states how many of its sub-groups it needs (a JobSet).
        assert plan.min_member >= 1 or (plan.min_sub_group is not None and plan.min_sub_group >= 1)
        assert all(g.min_member >= 0 for g in plan.sub_groups)
