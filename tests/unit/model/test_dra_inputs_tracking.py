"""Which pods the cache's DRA part keeps as asking for a resource a DeviceClass may back: answered once per
container objects (the loader shares equal ones), and so by every container a pod has, sidecars and init
containers included."""

from __future__ import annotations

from typing import Any

from kai_scheduler.api.objects import Container, Pod
from kai_scheduler.model.cache.dra_inputs import DraInputs


def container(name: str, requests: dict[str, str]) -> Container:
    return Container.model_validate({"name": name, "resources": {"requests": requests}})


def pod(name: str, containers: list[Container], init: list[Container] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": containers, "initContainers": init or []}
    return Pod.model_validate({"metadata": {"name": name}, "spec": spec})


def test_pods_sharing_their_main_container_ask_by_their_own_init_containers() -> None:
    main = container("main", {"cpu": "1"})
    fpga = container("setup", {"example.com/fpga": "1"})
    inputs = DraInputs()
    inputs.track("default/plain", pod("plain", [main]))
    inputs.track("default/again", pod("again", [main]))
    inputs.track("default/setup", pod("setup", [main], init=[fpga]))
    inputs.track("default/device", pod("device", [container("main", {"example.com/fpga": "2"})]))
    assert sorted(inputs._extended) == ["default/device", "default/setup"]
