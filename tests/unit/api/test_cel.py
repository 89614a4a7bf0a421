"""DRA device selectors: the CEL subset the scheduler evaluates (api/cel.py), and one-line errors for the
rest."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kai_scheduler.api.cel import CelError, CelUnsupported, DeviceView, SemVer, compile_selector

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
        # && needs bools.
        'device.driver && device.attributes["gpu.nvidia.com"].mig',
    ],
)
def test_evaluation_errors_are_errors_not_mismatches(expression: str) -> None:
    with pytest.raises(CelError):
        compile_selector(expression)(H100)


def test_an_unknown_domain_is_an_empty_map() -> None:
    assert compile_selector('"x" in device.attributes["unknown.domain"]')(H100) is False
    with pytest.raises(CelError, match="no such key: x"):
        compile_selector('device.attributes["unknown.domain"].x == 1')(H100)


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("device.attributes['gpu.nvidia.com'].productName.matches('H100')", "unknown method 'matches'"),
        ("size(device.attributes) > 0", "unknown name 'size'"),
        ("device.driver = 'x'", "unexpected character '='"),
        ("device.capacity['gpu.nvidia.com'].memory > 1.5", "floating-point numbers are not supported"),
        ("device.driver ==", "unexpected 'end of expression'"),
        ("quantity('lots')", "quantity('lots')"),
    ],
)
def test_unsupported_expressions_are_named_in_one_line(expression: str, words: str) -> None:
    with pytest.raises(CelUnsupported) as raised:
        compile_selector(expression)
    assert words in str(raised.value)
    assert "\n" not in str(raised.value)
