"""A pod's request is derived once per pod, and once per distinct containers: pods that share container
objects (as the loader makes them, `api.shared_parts`) share the request only when nothing else it is
made of differs."""

from __future__ import annotations

from typing import Any

import pytest
from tests.helpers import pod_manifest

from kai_scheduler.api.objects import Container, Pod
from kai_scheduler.model import builder
from kai_scheduler.model.builder import PodDerivations


def pod_with(containers: list[Container], name: str, **kwargs: Any) -> Pod:
    manifest = pod_manifest(name, **kwargs)
    manifest["spec"]["containers"] = containers  # the objects themselves, as the loader shares them
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
