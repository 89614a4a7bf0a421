"""`kai-scheduler reserve` as it runs inside a GPU reservation pod: a separate process against the fake
API server. There is no NVML library on the test machine, so the GPU comes from NVIDIA_VISIBLE_DEVICES."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import pod_manifest
from kai_scheduler.fakeapi import FakeApiServer

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


def _reserve(kubeconfig: Path, **variables: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [KAI_SCHEDULER, "reserve", "--kubeconfig", str(kubeconfig)],
        env=_environment(**variables),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _annotation(server: FakeApiServer) -> str | None:
    pod = server.store.get("pods", POD, NAMESPACE)
    return (pod["metadata"].get("annotations") or {}).get(ANNOTATION)


def _create_reservation_pod(server: FakeApiServer) -> None:
    server.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    server.store.create(pod_manifest(POD, None, gpus=1, namespace=NAMESPACE))


def test_reserve_publishes_the_gpu_and_holds_it_until_sigterm(server: FakeApiServer, tmp_path: Path) -> None:
    _create_reservation_pod(server)
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    process = _reserve(kubeconfig, POD_NAME=POD, POD_NAMESPACE=NAMESPACE, NVIDIA_VISIBLE_DEVICES="GPU-1234")
    try:
        deadline = time.monotonic() + 60
        while _annotation(server) != "GPU-1234":
            if process.poll() is not None:
                pytest.fail(f"reserve exited {process.returncode}: {process.communicate()[1][-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("timed out waiting for the pod's GPU annotation")
            time.sleep(0.05)
        # Published, and still running: the pod holds the GPU.
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err[-2000:]
    assert "Traceback" not in err


def test_reserve_for_a_pod_that_does_not_exist_is_one_line(server: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    process = _reserve(
        kubeconfig, POD_NAME="gone", POD_NAMESPACE="default", NVIDIA_VISIBLE_DEVICES="GPU-1234"
    )
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kai-scheduler: error: reserve:")
    assert "default/gone" in lines[0]
    assert "404" in lines[0] or "NotFound" in lines[0]


def test_reserve_without_a_pod_name_is_one_line(server: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    process = _reserve(kubeconfig, POD_NAMESPACE=NAMESPACE, NVIDIA_VISIBLE_DEVICES="GPU-1234")
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kai-scheduler: error: reserve:")
    assert "--pod-name" in lines[0]


def test_reserve_without_a_discoverable_gpu_is_one_line(server: FakeApiServer, tmp_path: Path) -> None:
    _create_reservation_pod(server)
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    process = _reserve(kubeconfig, POD_NAME=POD, POD_NAMESPACE=NAMESPACE, NVIDIA_VISIBLE_DEVICES="all")
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kai-scheduler: error: reserve:")
    assert "NVIDIA_VISIBLE_DEVICES" in lines[0]
    assert _annotation(server) is None
