"""Kubernetes' CEL library for quantities and semantic versions, as DRA device selectors call it.

Kubernetes' DRA CEL environment adds `quantity(...)` (a device's capacity is one) and `semver(...)` (a
`version` attribute is one) with their methods (`k8s.io/apiserver/pkg/cel/library`). CEL has no such
types and the runtime takes no opaque Python values, so each is a one-entry map the methods read back: a
quantity `{"kai.quantity": exact value as a fraction's text}` (so equal amounts are equal values: `1Gi`
is `1024Mi`), a version `{"kai.semver": its text without build metadata}`. Maps cross into the Python
methods at half the cost of protobuf messages, and each text is parsed once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Final

from cel_expr_python import cel

from kai_scheduler.api.quantity import parse_quantity


@dataclass(frozen=True, slots=True)
class SemVer:
    """A semantic version (`1.2.3`, optionally with a pre-release), ordered as semver orders them."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    @staticmethod
    def parse(text: str) -> SemVer:
        match = _SEMVER.fullmatch(text)
        if match is None:
            raise ValueError(f"not a semantic version: {text!r}")
        pre = tuple(int(p) if p.isdigit() else p for p in (match["pre"] or "").split(".") if p)
        return SemVer(int(match["major"]), int(match["minor"]), int(match["patch"]), pre)

    def order(self) -> tuple[object, ...]:
        # A release sorts after its pre-releases; numeric identifiers before alphanumeric ones.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 1 if not self.pre else 0, pre)

    def text(self) -> str:
        pre = ".".join(str(p) for p in self.pre)
        return f"{self.major}.{self.minor}.{self.patch}" + (f"-{pre}" if pre else "")


_SEMVER: Final = re.compile(
    r"(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)

_QUANTITY_KEY: Final = "kai.quantity"
_SEMVER_KEY: Final = "kai.semver"
_VALUE: Final = cel.Type.Map(cel.Type.STRING, cel.Type.STRING)
# Selectors compare every device's few distinct amounts and versions with the same literals.
_CACHED: Final = 4096

Value = dict[str, str]


def quantity_value(amount: Fraction) -> Value:
    """The CEL value of a capacity."""
    return {_QUANTITY_KEY: str(amount)}


def semver_value(version: SemVer) -> Value:
    """The CEL value of a `version` attribute."""
    return {_SEMVER_KEY: version.text()}


@lru_cache(maxsize=_CACHED)
def _fraction(text: str) -> Fraction:
    return Fraction(text)


@lru_cache(maxsize=_CACHED)
def _version(text: str) -> SemVer:
    return SemVer.parse(text)


def _amount(value: Value) -> Fraction:
    text = value.get(_QUANTITY_KEY)
    if text is None:
        raise ValueError(f"no such overload: a quantity's method on {_kind(value)}")
    return _fraction(text)


def _semver(value: Value) -> SemVer:
    text = value.get(_SEMVER_KEY)
    if text is None:
        raise ValueError(f"no such overload: a semver's method on {_kind(value)}")
    return _version(text)


def _kind(value: object) -> str:
    if isinstance(value, dict):
        if _QUANTITY_KEY in value:
            return "quantity"
        if _SEMVER_KEY in value:
            return "semver"
        return "map"
    return type(value).__name__


@lru_cache(maxsize=_CACHED)
def _parse_quantity(text: str) -> Value:
    try:
        return quantity_value(parse_quantity(text))
    except ValueError as error:
        raise ValueError(f"quantity({text!r}): {error}") from None


@lru_cache(maxsize=_CACHED)
def _parse_semver(text: str) -> Value:
    return semver_value(SemVer.parse(text))  # its ValueError names the text


def _valid(parse: Callable[[str], object]) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True

    return check


@lru_cache(maxsize=_CACHED)
def _order(kind: str, left: str, right: str) -> int:
    if kind == "quantity":
        a, b = _fraction(left), _fraction(right)
        return (a > b) - (a < b)
    x, y = _version(left).order(), _version(right).order()
    return (x > y) - (x < y)


def _compare(a: Value, b: Value) -> int:
    kind, other = _kind(a), _kind(b)
    if kind != other or kind not in ("quantity", "semver"):
        raise ValueError(f"no such overload: {kind}.compareTo({other})")
    key = _QUANTITY_KEY if kind == "quantity" else _SEMVER_KEY
    return _order(kind, a[key], b[key])


def _as_integer(value: Value) -> int:
    amount = _amount(value)
    if amount.denominator != 1 or not -(2**63) <= amount < 2**63:
        raise ValueError(f"asInteger() of {amount}: not an int64")
    return int(amount)


def _is_integer(value: Value) -> bool:
    amount = _amount(value)
    return amount.denominator == 1 and -(2**63) <= amount < 2**63


def _sign(value: Value) -> int:
    amount = _amount(value)
    return (amount > 0) - (amount < 0)


def _overloads() -> list[tuple[str, cel.Overload]]:
    value, string, integer, boolean = _VALUE, cel.Type.STRING, cel.Type.INT, cel.Type.BOOL
    dyn = cel.Type.DYN

    def method(
        name: str, result: cel.Type, parameters: list[cel.Type], impl: object
    ) -> tuple[str, cel.Overload]:
        return name, cel.Overload(
            f"k8s_{name}_{len(parameters)}_{parameters[-1].name()}", result, parameters, True, impl
        )

    def function(name: str, result: cel.Type, impl: object) -> tuple[str, cel.Overload]:
        return name, cel.Overload(f"k8s_{name}_string", result, [string], False, impl)

    return [
        function("quantity", value, _parse_quantity),
        function("isQuantity", boolean, _valid(_parse_quantity)),
        function("semver", value, _parse_semver),
        function("isSemver", boolean, _valid(_parse_semver)),
        method("sign", integer, [value], _sign),
        method("isInteger", boolean, [value], _is_integer),
        method("asInteger", integer, [value], _as_integer),
        method("asApproximateFloat", cel.Type.DOUBLE, [value], lambda a: float(_amount(a))),
        method("add", value, [value, value], lambda a, b: quantity_value(_amount(a) + _amount(b))),
        method("add", value, [value, integer], lambda a, b: quantity_value(_amount(a) + b)),
        method("sub", value, [value, value], lambda a, b: quantity_value(_amount(a) - _amount(b))),
        method("sub", value, [value, integer], lambda a, b: quantity_value(_amount(a) - b)),
        method("major", integer, [value], lambda a: _semver(a).major),
        method("minor", integer, [value], lambda a: _semver(a).minor),
        method("patch", integer, [value], lambda a: _semver(a).patch),
        # Quantities and versions are both maps to the runtime: one overload each, over dyn so that a
        # device's value (dyn) and a literal's type check alike, sorts the two out by value.
        method("compareTo", integer, [dyn, dyn], _compare),
        method("isGreaterThan", boolean, [dyn, dyn], lambda a, b: _compare(a, b) > 0),
        method("isLessThan", boolean, [dyn, dyn], lambda a, b: _compare(a, b) < 0),
    ]


def library() -> cel.CelExtension:
    """The extension: every function above, one declaration per name with all its overloads."""
    overloads: dict[str, list[cel.Overload]] = {}
    for name, overload in _overloads():
        overloads.setdefault(name, []).append(overload)
    return cel.CelExtension(
        "kubernetes", [cel.FunctionDecl(name, group) for name, group in overloads.items()]
    )
