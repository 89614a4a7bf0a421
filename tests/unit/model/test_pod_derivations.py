"""A pod's request is derived once per pod, and once per distinct containers: pods that share container
objects (as the loader makes them, `api.shared_parts`) share the request, and their placement and host
ports, only when nothing else they are made of differs."""

from __future__ import annotations

from typing import Any

import pytest
from tests.helpers import pod_manifest

from kai_scheduler.api.objects import Container, Pod
from kai_scheduler.model import builder
from kai_scheduler.model.builder import PodDerivations


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
