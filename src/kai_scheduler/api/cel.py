"""DRA device selectors: CEL expressions over `device`, compiled and evaluated by cel-expr-python (the CEL
C++ runtime) in the environment Kubernetes gives them.

A DeviceClass (and a claim's request) selects devices with CEL expressions over `device`: its `driver`,
its `attributes` and `capacity` (maps of domain -> name -> value; an attribute named without a domain
belongs to the driver's) and `allowMultipleAllocations`. The environment has CEL's standard functions,
the strings extension (`lowerAscii`, `split`, `indexOf`, ...), `cel.bind` and Kubernetes' quantity and
semver libraries (`api/cel_k8s.py`). `compile_selector` turns one expression into a predicate over a
`DeviceView` (one compiled program per expression text, kept), or raises `CelUnsupported` with a
one-line reason.

Evaluation follows Kubernetes: an unknown domain is an empty map, but an unknown name in it is an error
(`CelError`), as are a result that is not a bool and a function's runtime error (`quantity('lots')`).
Kubernetes' allocator treats such an error as fatal to the allocation; the allocator here fails the
nodes that reach the device. `device` is dynamically typed here, so what Kubernetes' typed `device`
refuses as it compiles (`device.driver && true`) is refused as it evaluates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from typing import Any, Final

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_strings

from kai_scheduler.api.cel_k8s import SemVer, library, quantity_value, semver_value

AttributeValue = int | bool | str | SemVer


class CelUnsupported(ValueError):
    """An expression the scheduler cannot evaluate (syntax, or no such function or overload)."""


class CelError(Exception):
    """A runtime error while evaluating an expression for one device (CEL's "no such key", ...)."""


_ENV: Final = cel.NewEnv(
    variables={"device": cel.Type.DYN},
    extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings(), library()],
)

# Kubernetes reads an unknown domain as an empty map; a CEL map has no default, so every domain a compiled
# selector names (`.attributes["d"]`, `.capacity["d"]`) is an empty map on a device without it. Only
# counting a device's domains (`size`, `in`, macros over them) can tell these apart from its own.
_LITERAL: Final = r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
_DOMAIN: Final = re.compile(r"\.\s*(?:attributes|capacity)\s*\[\s*" + _LITERAL + r"\s*\]")
_domains: set[str] = set()


@dataclass(frozen=True, slots=True)
class DeviceView:
    """A device as selectors see it: attributes and capacities by (domain, name)."""

    driver: str
    attributes: Mapping[str, Mapping[str, AttributeValue]]
    capacity: Mapping[str, Mapping[str, Fraction]]
    allow_multiple_allocations: bool = False
    # The device's CEL activation, built once for the domains known when it is built.
    _activation: list[Any] = field(default_factory=list, compare=False, repr=False)

    def activation(self) -> Any:
        if not self._activation or self._activation[0] != len(_domains):
            self._activation[:] = [len(_domains), _ENV.Activation({"device": self._data()})]
        return self._activation[1]

    def _data(self) -> dict[str, object]:
        empty: dict[str, dict[str, object]] = {domain: {} for domain in _domains}
        attributes = empty | {
            domain: {name: semver_value(v) if isinstance(v, SemVer) else v for name, v in names.items()}
            for domain, names in self.attributes.items()
        }
        capacity = empty | {
            domain: {name: quantity_value(amount) for name, amount in names.items()}
            for domain, names in self.capacity.items()
        }
        return {
            "driver": self.driver,
            "attributes": attributes,
            "capacity": capacity,
            "allowMultipleAllocations": self.allow_multiple_allocations,
        }


def compile_selector(expression: str) -> Callable[[DeviceView], bool]:
    """A predicate over devices for `expression`; raises CelUnsupported (see the module doc)."""
    return _compile(expression).selects


# What a selector reads of a device, when every mention of `device` is one of these: `device.driver`,
# `device.allowMultipleAllocations`, `device.attributes["d"].name` (or `["name"]`), likewise capacity.
_READ: Final = re.compile(
    r"\bdevice\s*\.\s*(?:(driver|allowMultipleAllocations)\b|(attributes|capacity)\s*\[\s*"
    + _LITERAL
    + r"\s*\]\s*(?:\.\s*([A-Za-z_]\w*)\b(?!\s*\()|\[\s*"
    + _LITERAL
    + r"\s*\]))"
)
_MENTION: Final = re.compile(r"\bdevice\b")
_MISSING: Final = object()
_NO_DOMAIN: Final[Mapping[str, object]] = {}
# Results kept per expression, by the values it reads: many devices of a cluster read alike (the same
# product, memory and driver version), and CEL is pure, so those evaluate once.
_KEPT: Final = 1 << 16

Read = tuple[str, str, str]  # field, domain, name


class _Selector:
    """One compiled expression: its program, what it reads of a device, and its results so far."""

    def __init__(self, program: Any, reads: tuple[Read, ...] | None) -> None:
        self.program = program
        self.reads = reads
        self.results: dict[tuple[object, ...], bool | CelError] = {}

    def selects(self, device: DeviceView) -> bool:
        if self.reads is None:
            return self._evaluate(device)
        key = self._key(device)
        result = self.results.get(key)
        if result is None:
            try:
                result = self._evaluate(device)
            except CelError as error:
                result = error
            if len(self.results) >= _KEPT:
                self.results.clear()
            self.results[key] = result
        if isinstance(result, CelError):
            raise result
        return result

    def _key(self, device: DeviceView) -> tuple[object, ...]:
        key: list[object] = []
        for what, domain, name in self.reads or ():
            if what == "driver":
                value: object = device.driver
            elif what == "allowMultipleAllocations":
                value = device.allow_multiple_allocations
            else:
                values = device.attributes if what == "attributes" else device.capacity
                value = values.get(domain, _NO_DOMAIN).get(name, _MISSING)
            key.append(value.__class__)  # True == 1 == Fraction(1) in Python, not in CEL
            key.append(value)
        return tuple(key)

    def _evaluate(self, device: DeviceView) -> bool:
        result = self.program.eval(device.activation())
        value = result.value()
        if value is True or value is False:
            return value
        kind = result.type()
        if kind == cel.Type.ERROR:
            raise CelError(_one_line(str(value)))
        raise CelError(f"the expression must evaluate to a bool, got {kind.name()}")


def forget_compiled() -> None:
    """Forget every compiled program and the results kept with it (a benchmark's cold start)."""
    _compile.cache_clear()


def _reads(expression: str) -> tuple[Read, ...] | None:
    """What `expression` reads of a device (None: it reads it some other way, or as a whole)."""
    reads = []
    for match in _READ.finditer(expression):
        simple, what, domain, name, quoted = match.groups()
        if simple:
            reads.append((simple, "", ""))
        else:
            reads.append((what, _unquote(domain), name if name is not None else _unquote(quoted)))
    if len(reads) != len(_MENTION.findall(expression)):
        return None
    return tuple(reads)


@cache
def _compile(expression: str) -> _Selector:
    try:
        program = _ENV.compile(expression)
    except RuntimeError as error:
        raise CelUnsupported(_one_line(str(error))) from None
    _domains.update(_unquote(literal) for literal in _DOMAIN.findall(expression))
    return _Selector(program, _reads(expression))


def _unquote(literal: str) -> str:
    return re.sub(r"\\(.)", r"\1", literal[1:-1])


def _one_line(message: str) -> str:
    """The first line of a CEL status, without its status code and `<input>` prefix."""
    first = message.splitlines()[0] if message else "unknown error"
    first = re.sub(r"^[A-Z_]+: (ERROR: )?", "", first)
    return first.replace("<input>:", "at ")
