"""`kai-scheduler reserve` as it runs inside a GPU reservation pod: a separate process against the fake
API server, as the chart's reservation ServiceAccount. There is no NVML library on the test machine, so the
GPU comes from NVIDIA_VISIBLE_DEVICES."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from child_process import Child, running
from identities import RESERVATION, kubeconfig_as

from helpers import pod_manifest
from kai_fakeapi import FakeApiServer

NAMESPACE = "kai-resource-reservation"
POD = "gpu-reservation-node-1-abcde"
ANNOTATION = "run.ai/reserve_for_gpu_index"
KAI_SCHEDULER = str(Path(sys.executable).with_name("kai-scheduler"))


def _environment(**variables: str) -> dict[str, str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("POD_NAME", "POD_NAMESPACE", "NVIDIA_VISIBLE_DEVICES", "KUBECONFIG")
    }
    environment.update(variables)
    return environment


def _command(kubeconfig: Path) -> list[str]:
    return [KAI_SCHEDULER, "reserve", "--kubeconfig", str(kubeconfig)]


def _reserve(kubeconfig: Path, **variables: str) -> Child:
    """`reserve` run to its end (killed after 60 s)."""
    child = Child(_command(kubeconfig), env=_environment(**variables))
    child.wait(60)
    return child


def _annotation(server: FakeApiServer) -> str | None:
    pod = server.store.get("pods", POD, NAMESPACE)
    return (pod["metadata"].get("annotations") or {}).get(ANNOTATION)


def _create_reservation_pod(server: FakeApiServer) -> None:
    server.store.create(pod_manifest(POD, None, gpus=1, namespace=NAMESPACE))  # in the chart's namespace


def _kubeconfig(server: FakeApiServer, tmp_path: Path) -> Path:
    return kubeconfig_as(server, tmp_path / "kubeconfig", RESERVATION)


def test_reserve_publishes_the_gpu_and_holds_it_until_sigterm(server: FakeApiServer, tmp_path: Path) -> None:
    _create_reservation_pod(server)
    kubeconfig = _kubeconfig(server, tmp_path)
    environment = _environment(POD_NAME=POD, POD_NAMESPACE=NAMESPACE, NVIDIA_VISIBLE_DEVICES="GPU-1234")
    # A failure below (a time-out included) shows reserve's output; it is stopped with SIGTERM at the end.
    with running(_command(kubeconfig), env=environment) as child:
        deadline = time.monotonic() + 60
        while _annotation(server) != "GPU-1234":
            assert child.returncode is None, "reserve exited before it published its GPU"
            assert time.monotonic() < deadline, "timed out waiting for the pod's GPU annotation"
            time.sleep(0.05)
        # Published, and still running: the pod holds the GPU.
        assert child.returncode is None
    assert child.returncode == 0 and not child.killed, child.output()
    assert "Traceback" not in child.stderr, child.output()


def test_reserve_for_a_pod_that_does_not_exist_is_one_line(server: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(server, tmp_path)
    child = _reserve(kubeconfig, POD_NAME="gone", POD_NAMESPACE=NAMESPACE, NVIDIA_VISIBLE_DEVICES="GPU-1234")
    assert child.returncode == 2, child.output()
    lines = child.stderr.strip().splitlines()
    assert len(lines) == 1, child.output()
    assert lines[0].startswith("kai-scheduler: error: reserve:")
    assert f"{NAMESPACE}/gone" in lines[0]
    assert "404" in lines[0] or "NotFound" in lines[0]


def test_reserve_without_a_pod_name_is_one_line(server: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(server, tmp_path)
    child = _reserve(kubeconfig, POD_NAMESPACE=NAMESPACE, NVIDIA_VISIBLE_DEVICES="GPU-1234")
    assert child.returncode == 2, child.output()
    lines = child.stderr.strip().splitlines()
    assert len(lines) == 1, child.output()
    assert lines[0].startswith("kai-scheduler: error: reserve:")
    assert "--pod-name" in lines[0]


def test_reserve_without_a_discoverable_gpu_is_one_line(server: FakeApiServer, tmp_path: Path) -> None:
    _create_reservation_pod(server)
    kubeconfig = _kubeconfig(server, tmp_path)
    child = _reserve(kubeconfig, POD_NAME=POD, POD_NAMESPACE=NAMESPACE, NVIDIA_VISIBLE_DEVICES="all")
    assert child.returncode == 2, child.output()
    lines = child.stderr.strip().splitlines()
    assert len(lines) == 1, child.output()
    assert lines[0].startswith("kai-scheduler: error: reserve:")
    assert "NVIDIA_VISIBLE_DEVICES" in lines[0]
    assert _annotation(server) is None
