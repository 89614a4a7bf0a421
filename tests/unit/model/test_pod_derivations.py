"""A pod's request is derived once per pod, and once per distinct containers: pods that share container
objects (as the loader makes them, `api.shared_parts`) share the request, and their placement and host
ports, only when nothing else they are made of differs."""

from __future__ import annotations

from typing import Any

import pytest
from tests.helpers import node, pod_manifest, queue

from kai_scheduler.api.objects import Container, Pod
from kai_scheduler.model import builder
from kai_scheduler.model.builder import PodDerivations
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.snapshot import PodState


def pod_with(containers: list[Container], name: str, *, host_network: bool = False, **kwargs: Any) -> Pod:
    manifest = pod_manifest(name, **kwargs)
    manifest["spec"]["containers"] = containers  # the objects themselves, as the loader shares them
    if host_network:
        manifest["spec"]["hostNetwork"] = True
    return Pod.model_validate(manifest)


def test_pods_that_share_containers_differ_by_their_gpu_share() -> None:
    (shared,) = Pod.model_validate(pod_manifest("a", cpu="2", gpus=1)).spec.containers
    derivations = PodDerivations()
    whole = derivations.of(pod_with([shared], "whole"))[0]
    again = derivations.of(pod_with([shared], "again"))[0]
    half = derivations.of(pod_with([shared], "half", fraction=0.5))[0]
    assert again is whole
    assert (whole.cpu, whole.gpu_portion) == (2000.0, 0.0)
    assert (half.cpu, half.gpu_portion) == (2000.0, 0.5)


def test_equal_containers_of_other_objects_share_one_request() -> None:
    derivations = PodDerivations()
    first = derivations.of(Pod.model_validate(pod_manifest("a", cpu="2", gpus=1)))[0]
    second = derivations.of(Pod.model_validate(pod_manifest("b", cpu="2", gpus=1)))[0]
    other = derivations.of(Pod.model_validate(pod_manifest("c", cpu="3", gpus=1)))[0]
    assert second is first
    assert other.cpu == 3000.0


def test_pods_of_containers_of_their_own_keep_no_memory_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builder, "_MAX_BY_CONTAINERS", 2)
    derivations = PodDerivations()
    for n in range(5):
        request = derivations.of(Pod.model_validate(pod_manifest(f"p{n}", cpu=str(n + 1))))[0]
        assert request.cpu == 1000.0 * (n + 1)
    assert len(derivations._by_containers) <= 2


def shared_container(**fields: Any) -> Container:
    return Container.model_validate({"name": "main", "resources": {"requests": {"cpu": "1"}}, **fields})


def test_pods_that_share_containers_take_host_ports_by_their_own_network() -> None:
    container = shared_container(ports=[{"containerPort": 8080}])
    derivations = PodDerivations()
    _, own_placement, own_ports = derivations.of(pod_with([container], "own"))
    _, host_placement, host_ports = derivations.of(pod_with([container], "host", host_network=True))
    assert own_ports == ()
    assert [port.port for port in host_ports] == [8080]
    assert host_placement.key != own_placement.key


def test_pods_that_share_containers_need_the_config_maps_of_their_own_namespace() -> None:
    container = shared_container(
        env=[{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}]
    )
    derivations = PodDerivations()
    first = derivations.of(pod_with([container], "a", namespace="team-a"))[1]
    second = derivations.of(pod_with([container], "b", namespace="team-b"))[1]
    assert (first.config_maps, second.config_maps) == (("team-a/settings",), ("team-b/settings",))


def test_a_pod_with_constraints_of_its_own_does_not_place_as_one_sharing_its_containers() -> None:
    container = shared_container()
    derivations = PodDerivations()
    plain = derivations.of(pod_with([container], "plain"))[1]
    again = derivations.of(pod_with([container], "again"))[1]
    selective = derivations.of(pod_with([container], "selective", node_selector={"zone": "a"}))[1]
    tolerant = derivations.of(
        pod_with([container], "tolerant", tolerations=[{"key": "gpu", "operator": "Exists"}])
    )[1]
    assert again is plain
    assert selective.node_selector == {"zone": "a"}
    assert [t.key for t in tolerant.tolerations] == ["gpu"]
    assert len({plain.key, selective.key, tolerant.key}) == 3


def test_a_pod_placed_by_its_node_selector_alone_places_as_its_whole_spec_says() -> None:
    derivations = PodDerivations()
    bare = Pod.model_validate(pod_manifest("bare", gpus=1))
    zone = Pod.model_validate(pod_manifest("zone", node_selector={"zone": "a", "rack": "r1"}))
    same_zone = Pod.model_validate(pod_manifest("same-zone", node_selector={"rack": "r1", "zone": "a"}))
    for pod in (bare, zone, same_zone):
        _, placement, host_ports = derivations.of(pod)
        assert (placement, host_ports) == (builder.pod_placement(pod), ())
    assert derivations.of(same_zone)[1] is derivations.of(zone)[1]
    assert derivations.of(zone)[1] is not derivations.of(bare)[1]


def test_a_pod_with_container_ports_or_environment_is_not_placed_by_its_selector_alone() -> None:
    derivations = PodDerivations()
    selector = {"zone": "a"}
    ported = pod_with([shared_container(ports=[{"containerPort": 80, "hostPort": 80}])], "ported")
    needy = pod_with(
        [shared_container(envFrom=[{"configMapRef": {"name": "settings"}}])], "needy", node_selector=selector
    )
    plain = derivations.of(Pod.model_validate(pod_manifest("plain", node_selector=selector)))[1]
    _, ported_placement, ported_ports = derivations.of(ported)
    needy_placement = derivations.of(needy)[1]
    assert [port.port for port in ported_ports] == [80]
    assert needy_placement.config_maps == ("default/settings",)
    assert len({plain.key, ported_placement.key, needy_placement.key}) == 3


def test_pods_of_containers_of_their_own_stop_being_looked_up_by_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(builder, "_MAX_BY_CONTAINERS", 2)
    derivations = PodDerivations()
    tolerant = [{"key": "gpu", "operator": "Exists"}]  # no plain pod: those are found by `_lean_key` first
    requests = [
        derivations.of(Pod.model_validate(pod_manifest(f"p{n}", cpu=str(n % 2 + 1), tolerations=tolerant)))[0]
        for n in range(6)
    ]
    assert [request.cpu for request in requests] == [1000.0, 2000.0] * 3
    assert requests[2] is requests[0]  # equal shapes still share one request
    assert not derivations._by_containers


def test_plain_pods_of_equal_quantities_share_one_entry_that_holds_its_quantities() -> None:
    derivations = PodDerivations()
    pods = [
        Pod.model_validate(pod_manifest(f"p{n}", cpu="2", gpus=1, node_selector={"zone": "a"}))
        for n in range(3)
    ]
    derived = [derivations.of(pod) for pod in pods]
    assert all(found[0] is derived[0][0] and found[1] is derived[0][1] for found in derived)
    ((key, (_, _, held)),) = derivations._by_lean_key.items()
    assert {id(quantity) for quantity in held} == {
        part for ids in key if isinstance(ids, tuple) for part in ids if isinstance(part, int)
    }
    other_zone = derivations.of(
        Pod.model_validate(pod_manifest("b", cpu="2", gpus=1, node_selector={"zone": "b"}))
    )
    assert other_zone[0] is derived[0][0] and other_zone[1].node_selector == {"zone": "b"}


def test_plain_pods_whose_quantities_are_their_own_stop_being_looked_up_by_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(builder, "_MAX_BY_CONTAINERS", 2)
    derivations = PodDerivations()
    requests = []
    for n in range(6):
        manifest = pod_manifest(f"p{n}")
        manifest["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": n % 2 + 1}
        }  # a number: not shared
        requests.append(derivations.of(Pod.model_validate(manifest))[0])
    assert [request.cpu for request in requests] == [1000.0, 2000.0] * 3
    assert requests[2] is requests[0]
    assert not derivations._by_lean_key and not derivations._by_lean_keys


def test_pods_that_share_containers_keep_being_looked_up_by_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builder, "_MAX_BY_CONTAINERS", 2)
    one, two = (shared_container(resources={"requests": {"cpu": cpu}}) for cpu in ("1", "2"))
    derivations = PodDerivations()
    for n in range(6):
        request = derivations.of(pod_with([one if n % 2 else two], f"p{n}"))[0]
        assert request.cpu == (1000.0 if n % 2 else 2000.0)
    assert len(derivations._by_containers) == 2


def test_a_pod_of_ours_is_derived_as_it_arrives_and_its_job_made_from_that(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cache works out what a pod of ours asks for when the pod arrives (`PodIndex`), so that a
    cycle after many arrivals makes their jobs without deriving any again; another scheduler's pending
    pod is not derived (fails when the arrival does not derive the pod, or the job's task differs)."""
    cache = ClusterCache()
    cache.set_nodes([node("n1", gpus=4)])
    cache.set_queues([queue("a")])
    derived: list[str] = []
    derive = PodDerivations._derive
    monkeypatch.setattr(
        PodDerivations, "_derive", lambda self, pod, key: derived.append(pod.key) or derive(self, pod, key)
    )
    ours = PodState(Pod.model_validate(pod_manifest("p", "a", gpus=1, cpu="2")), 0)
    cache.upsert_pod(ours)
    other = pod_manifest("other", "a", gpus=1, scheduler="default-scheduler")
    cache.upsert_pod(PodState(Pod.model_validate(other), 1))
    assert derived == ["default/p"]
    cache.catch_up(now=0.0)
    assert derived == ["default/p"]
    (task,) = cache.snapshot().jobs["default/pg-p"].tasks
    assert (task.request, task.placement) == PodDerivations().of(ours.pod)[:2]
