"""DRA device selectors: CEL as Kubernetes evaluates it for DRA (api/cel.py with Kubernetes' quantity and
semver library, api/cel_k8s.py), and one-line errors for what does not compile or evaluate."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kai_scheduler.api.cel import CelError, CelUnsupported, DeviceView, compile_selector
from kai_scheduler.api.cel_k8s import SemVer

H100 = DeviceView(
    "gpu.nvidia.com",
    {
        "gpu.nvidia.com": {
            "type": "gpu",
            "productName": "NVIDIA H100 80GB HBM3",
            "index": 3,
            "mig": False,
            "driverVersion": SemVer.parse("550.54.14"),
        },
        "example.com": {"rack": "r1"},
    },
    {"gpu.nvidia.com": {"memory": Fraction(80 * 2**30)}},
)


@pytest.mark.parametrize(
    ("expression", "selected"),
    [
        # The NVIDIA DRA driver's own DeviceClass selector.
        ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'", True),
        ('device.driver == "gpu.nvidia.com"', True),
        ('device.driver != "gpu.nvidia.com"', False),
        ('device.attributes["gpu.nvidia.com"]["productName"] == "NVIDIA H100 80GB HBM3"', True),
        (
            'device.attributes["gpu.nvidia.com"].index >= 2 && device.attributes["gpu.nvidia.com"].index < 4',
            True,
        ),
        ('device.attributes["gpu.nvidia.com"].mig', False),
        ('!device.attributes["gpu.nvidia.com"].mig', True),
        ('device.attributes["gpu.nvidia.com"].mig == false || device.driver == "x"', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.isLessThan(quantity("40Gi"))', False),
        ('device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("535.0.0"))', True),
        ('"rack" in device.attributes["example.com"]', True),
        ('has(device.attributes["example.com"].zone)', False),
        ('has(device.attributes["unknown.domain"].zone)', False),
        ('device.attributes["example.com"].rack in ["r0", "r1"]', True),
        ('device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")', True),
        ('device.attributes["gpu.nvidia.com"].productName.lowerAscii().contains("h100")', True),
        ("(device.driver == 'a' || device.driver == 'gpu.nvidia.com') && true", True),
        # Beyond the subset the scheduler once parsed itself: CEL's standard functions and macros, the
        # strings extension, and the rest of Kubernetes' quantity and semver library.
        ('device.attributes["gpu.nvidia.com"].productName.matches("H1[0-9]0")', True),
        ('device.attributes["gpu.nvidia.com"].productName.split(" ")[1] == "H100"', True),
        ('["r0", "r2"].exists(r, r == device.attributes["example.com"].rack)', False),
        ('size(device.attributes["example.com"]) == 1', True),
        ('device.attributes["gpu.nvidia.com"].index > 1 ? device.driver.endsWith(".com") : false', True),
        (
            'device.capacity["gpu.nvidia.com"].memory.add(quantity("1Gi")).compareTo(quantity("81Gi")) == 0',
            True,
        ),
        ('device.capacity["gpu.nvidia.com"].memory == quantity("81920Mi")', True),
        ('device.capacity["gpu.nvidia.com"].memory.asInteger() == 85899345920', True),
        ('device.capacity["gpu.nvidia.com"].memory.sub(quantity("80Gi")).sign() == 0', True),
        ('isQuantity("40Gi") && !isQuantity("lots")', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion == semver("550.54.14")', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.major() == 550', True),
        ('isSemver("1.2.3") && !isSemver("1.2")', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        # cel.bind, which Kubernetes' DRA environment adds so that a domain is named once.
        ('cel.bind(gpu, device.attributes["gpu.nvidia.com"], gpu.type == "gpu" && gpu.index == 3)', True),
    ],
)
def test_supported_selectors_select_as_cel_does(expression: str, selected: bool) -> None:
    assert compile_selector(expression)(H100) is selected


@pytest.mark.parametrize(
    "expression",
    [
        # An unknown name in a known domain is CEL's "no such key": Kubernetes aborts the allocation.
        'device.attributes["gpu.nvidia.com"].serial == "x"',
        # Ordering values of different types has no overload.
        'device.attributes["gpu.nvidia.com"].index < "4"',
        # A selector must evaluate to a bool.
        "device.driver",
        # && needs bools (CEL's && is commutative: a false operand would decide it despite the error).
        "device.driver && true",
        # A quantity is compared with a quantity, and a literal that is none is an error as it evaluates.
        'device.capacity["gpu.nvidia.com"].memory.compareTo(semver("1.0.0")) == 0',
        'device.capacity["gpu.nvidia.com"].memory > 1.5',
        "quantity('lots').sign() == 1",
    ],
)
def test_evaluation_errors_are_errors_not_mismatches(expression: str) -> None:
    with pytest.raises(CelError):
        compile_selector(expression)(H100)


def test_an_unknown_domain_is_an_empty_map() -> None:
    assert compile_selector('"x" in device.attributes["unknown.domain"]')(H100) is False
    with pytest.raises(CelError, match='"x"'):
        compile_selector('device.attributes["unknown.domain"].x == 1')(H100)


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("device.attributes['gpu.nvidia.com'].productName.glob('H100')", "undeclared reference to 'glob'"),
        ("device.driver = 'x'", "at 1:15: Syntax error"),
        ("device.driver ==", "at 1:17: Syntax error"),
        ("semver(1)", "found no matching overload for 'semver'"),
    ],
)
def test_unsupported_expressions_are_named_in_one_line(expression: str, words: str) -> None:
    with pytest.raises(CelUnsupported) as raised:
        compile_selector(expression)
    assert words in str(raised.value)
    assert "\n" not in str(raised.value)


def _gpu(**attributes: object) -> DeviceView:
    return DeviceView("gpu.nvidia.com", {"gpu.nvidia.com": attributes}, {})  # type: ignore[dict-item]


def test_devices_that_read_alike_answer_alike_and_others_do_not() -> None:
    # Results are kept by the values an expression reads: a device differing only in what it does not read
    # (its uuid) answers as the first did, and one whose value is equal in Python but not in CEL (true is
    # not 1) is evaluated for itself.
    select = compile_selector('device.attributes["gpu.nvidia.com"].index == 1')
    assert select(_gpu(index=1, uuid="GPU-a")) is True
    assert select(_gpu(index=1, uuid="GPU-b")) is True
    assert select(_gpu(index=2, uuid="GPU-c")) is False
    assert select(_gpu(index=True, uuid="GPU-d")) is False
    with pytest.raises(CelError, match="index"):
        select(_gpu(uuid="GPU-e"))
    with pytest.raises(CelError, match="index"):
        select(_gpu(uuid="GPU-f"))  # a kept error is raised again


def test_a_selector_reading_the_device_as_a_whole_sees_each_device() -> None:
    select = compile_selector('"index" in device.attributes["gpu.nvidia.com"]')
    assert select(_gpu(index=1)) is True
    assert select(_gpu(uuid="GPU-a")) is False
