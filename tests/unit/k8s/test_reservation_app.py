"""The app inside a GPU reservation pod: which GPU it was given, and publishing it on its own pod."""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import Any, cast

import pytest

from kai_scheduler.k8s.binder.reservation_app import GpuDiscoveryError, discover_gpu_uuid, publish_gpu
from kai_scheduler.k8s.runtime.backoff import Backoff
from kai_scheduler.k8s.runtime.client import PODS, ApiStatusError, ResourceKind

LIBRARY_NOT_FOUND = 12
DRIVER_NOT_LOADED = 9
FAST = Backoff(initial=0.001, maximum=0.01)
ANNOTATION = "run.ai/reserve_for_gpu_index"


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNVML:
    """Just the part of pynvml the reservation app uses."""

    NVMLError = FakeNVMLError
    NVML_ERROR_LIBRARY_NOT_FOUND = LIBRARY_NOT_FOUND

    def __init__(self, uuids: list[Any] | None = None, init_error: int | None = None) -> None:
        self.uuids = uuids or []
        self.init_error = init_error
        self.calls: list[str] = []

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error is not None:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> Any:
        return self.uuids[handle]


def _discover(nvml: FakeNVML, environment: dict[str, str] | None = None) -> str:
    return discover_gpu_uuid(environment or {}, cast(ModuleType, nvml))


# ------------------------------------------------------------------------------------------ discovery


@pytest.mark.parametrize("uuid", [b"GPU-1111-2222", "GPU-1111-2222"], ids=["bytes", "str"])
def test_the_one_gpu_nvml_sees_is_the_reserved_one(uuid: Any) -> None:
    nvml = FakeNVML([uuid])
    # NVML wins over the environment when it works.
    assert _discover(nvml, {"NVIDIA_VISIBLE_DEVICES": "GPU-other"}) == "GPU-1111-2222"
    assert nvml.calls == ["init", "shutdown"]


def test_two_gpus_are_an_error_naming_the_count_and_nvml_is_shut_down() -> None:
    nvml = FakeNVML([b"GPU-a", b"GPU-b"])
    with pytest.raises(GpuDiscoveryError, match=r"\b2 GPUs"):
        _discover(nvml, {"NVIDIA_VISIBLE_DEVICES": "GPU-a"})
    assert nvml.calls == ["init", "shutdown"]


def test_no_gpu_is_an_error() -> None:
    with pytest.raises(GpuDiscoveryError, match=r"\b0 GPUs"):
        _discover(FakeNVML([]))


@pytest.mark.parametrize("visible", ["GPU-abc", " GPU-abc ", "MIG-abc-1"])
def test_without_the_nvml_library_the_one_visible_uuid_is_used(visible: str) -> None:
    nvml = FakeNVML(init_error=LIBRARY_NOT_FOUND)
    assert _discover(nvml, {"NVIDIA_VISIBLE_DEVICES": visible}) == visible.strip()


@pytest.mark.parametrize(
    "environment",
    [
        {"NVIDIA_VISIBLE_DEVICES": "all"},
        {"NVIDIA_VISIBLE_DEVICES": ""},
        {"NVIDIA_VISIBLE_DEVICES": "0"},
        {"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b"},
        {},
    ],
    ids=["all", "empty", "index", "two-uuids", "unset"],
)
def test_without_the_nvml_library_anything_but_one_uuid_is_an_error(environment: dict[str, str]) -> None:
    with pytest.raises(GpuDiscoveryError, match="NVIDIA_VISIBLE_DEVICES"):
        discover_gpu_uuid(environment, cast(ModuleType, FakeNVML(init_error=LIBRARY_NOT_FOUND)))


def test_another_nvml_error_is_not_covered_up_by_the_environment() -> None:
    nvml = FakeNVML(init_error=DRIVER_NOT_LOADED)
    with pytest.raises(GpuDiscoveryError, match=f"NVML error {DRIVER_NOT_LOADED}"):
        _discover(nvml, {"NVIDIA_VISIBLE_DEVICES": "GPU-abc"})


def test_the_real_pynvml_without_a_driver_falls_back_to_the_environment() -> None:
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        if error.value != pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
            pytest.skip(f"the NVML library is here but fails otherwise: {error}")
    else:
        pynvml.nvmlShutdown()
        pytest.skip("the NVML library is installed on this machine")
    assert discover_gpu_uuid({"NVIDIA_VISIBLE_DEVICES": "GPU-x"}) == "GPU-x"


# ------------------------------------------------------------------------------------------- publishing


class FakeClient:
    """Records `patch` calls; each call first takes the next scripted failure, if any."""

    def __init__(self, failures: list[BaseException] | None = None) -> None:
        self.failures = list(failures or [])
        self.calls: list[tuple[ResourceKind, str, Any, str | None]] = []
        self.on_failure: Any = None

    async def patch(self, kind: ResourceKind, name: str, patch: Any, namespace: str | None = None) -> Any:
        self.calls.append((kind, name, patch, namespace))
        if self.failures:
            failure = self.failures.pop(0)
            if self.on_failure is not None:
                self.on_failure()
            raise failure
        return {}


def _publish(client: FakeClient, stop: asyncio.Event | None = None) -> bool:
    async def go() -> bool:
        namespace, pod = "kai-resource-reservation", "gpu-reservation-1"
        return await publish_gpu(
            cast(Any, client), namespace, pod, "GPU-1234", stop or asyncio.Event(), backoff=FAST
        )

    return asyncio.run(asyncio.wait_for(go(), 10))


def test_publishing_patches_the_annotation_on_the_pod() -> None:
    client = FakeClient()
    assert _publish(client) is True
    assert client.calls == [
        (
            PODS,
            "gpu-reservation-1",
            {"metadata": {"annotations": {ANNOTATION: "GPU-1234"}}},
            "kai-resource-reservation",
        )
    ]


def test_passing_failures_are_retried() -> None:
    client = FakeClient(
        [ApiStatusError(500, "InternalError", "etcd is slow"), ConnectionError("connection refused")]
    )
    assert _publish(client) is True
    assert len(client.calls) == 3
    assert client.calls[0] == client.calls[2]


@pytest.mark.parametrize("failure", [ApiStatusError(409, "Conflict", "x"), ApiStatusError(429, "Too", "x")])
def test_conflicts_and_throttling_are_retried(failure: ApiStatusError) -> None:
    client = FakeClient([failure])
    assert _publish(client) is True
    assert len(client.calls) == 2


@pytest.mark.parametrize(("code", "reason"), [(404, "NotFound"), (403, "Forbidden"), (401, "Unauthorized")])
def test_errors_retrying_cannot_fix_are_raised_at_once(code: int, reason: str) -> None:
    client = FakeClient([ApiStatusError(code, reason, "no")] * 5)
    with pytest.raises(ApiStatusError) as raised:
        _publish(client)
    assert raised.value.code == code
    assert len(client.calls) == 1


def test_a_stop_while_failing_gives_up_without_publishing() -> None:
    async def go() -> tuple[bool, int]:
        stop = asyncio.Event()
        client = FakeClient([ConnectionError("refused")] * 1000)
        # A long backoff: only the stop can end the wait in time.
        slow = Backoff(initial=60, maximum=60)
        client.on_failure = stop.set
        published = await publish_gpu(cast(Any, client), "ns", "pod", "GPU-1", stop, backoff=slow)
        return published, len(client.calls)

    published, calls = asyncio.run(asyncio.wait_for(go(), 10))
    assert published is False
    assert calls == 1


def test_a_stop_before_publishing_does_not_patch() -> None:
    stop = asyncio.Event()
    stop.set()
    client = FakeClient()
    assert _publish(client, stop) is False
    assert client.calls == []
