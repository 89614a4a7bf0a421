"""The subset of CEL that DRA device selectors are written in, as the scheduler reads it.

A DeviceClass (and a claim's request) selects devices with CEL expressions over `device`: its `driver`,
its `attributes` and `capacity` (maps of domain -> name -> value; an attribute named without a domain
belongs to the driver's). `compile_selector` turns one expression into a predicate over a `DeviceView`,
or raises `CelUnsupported` with a one-line reason for anything outside the subset:

* literals: strings ('...' or "..."), integers, `true`, `false`, lists `[a, b]`;
  `quantity("40Gi")` and `semver("1.2.3")`;
* `device.driver`, `device.attributes["domain"].name` (or `["name"]`), `device.capacity["domain"].name`,
  `device.allowMultipleAllocations`;
* `==`, `!=`, `<`, `<=`, `>`, `>=` (integers and strings), `in` (a list, or a domain's names), `!`,
  `&&`, `||`, parentheses, `has(device.attributes["domain"].name)`;
* methods: `compareTo`, `isGreaterThan`, `isLessThan` (quantities and versions), `asInteger` (quantities),
  `startsWith`, `endsWith`, `contains`, `lowerAscii` (strings).

Evaluation follows CEL: an unknown domain is an empty map, but an unknown name in it is an error
(`CelError`), and so is comparing values of different types with `<`; `&&` and `||` are evaluated left
to right and stop early. DRA aborts an allocation on such an error; the allocator does the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Union

from kai_scheduler.api.quantity import parse_quantity

SUPPORTED: Final = (
    "supported: device.driver, device.attributes[...] and device.capacity[...] values, literals, "
    "quantity(), semver(), ==, !=, <, <=, >, >=, in, !, &&, ||, has(), compareTo()"
)


class CelUnsupported(ValueError):
    """An expression the scheduler cannot evaluate (syntax, or outside the supported subset)."""


class CelError(Exception):
    """A runtime error while evaluating an expression for one device (CEL's "no such key", ...)."""


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


_SEMVER = re.compile(
    r"(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)

AttributeValue = int | bool | str | SemVer
Value = Union[AttributeValue, Fraction, list["Value"], "_Domain", "_Domains", "_DeviceRef"]


@dataclass(frozen=True, slots=True)
class DeviceView:
    """A device as selectors see it: attributes and capacities by (domain, name)."""

    driver: str
    attributes: Mapping[str, Mapping[str, AttributeValue]]
    capacity: Mapping[str, Mapping[str, Fraction]]
    allow_multiple_allocations: bool = False


@dataclass(frozen=True, slots=True)
class _DeviceRef:
    device: DeviceView


@dataclass(frozen=True, slots=True)
class _Domains:
    what: str  # "attributes" or "capacity"
    values: Mapping[str, Mapping[str, AttributeValue]] | Mapping[str, Mapping[str, Fraction]]


@dataclass(frozen=True, slots=True)
class _Domain:
    what: str
    domain: str
    values: Mapping[str, AttributeValue] | Mapping[str, Fraction]


Evaluator = Callable[[DeviceView], Value]


def compile_selector(expression: str) -> Callable[[DeviceView], bool]:
    """A predicate over devices for `expression`; raises CelUnsupported (see the module doc)."""
    evaluate = _Parser(expression).parse()

    def selects(device: DeviceView) -> bool:
        result = evaluate(device)
        if not isinstance(result, bool):
            raise CelError(f"the expression must evaluate to a bool, got {_type(result)}")
        return result

    return selects


# --- tokens --------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<number>\d+(?:\.\d+)?)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].,-])
    )""",
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # string, number, name, op, end
    text: str
    at: int


def _tokens(expression: str) -> list[_Token]:
    tokens = []
    position = 0
    while position < len(expression):
        if expression[position:].strip() == "":
            break
        match = _TOKEN.match(expression, position)
        if match is None or match.end() == position:
            raise CelUnsupported(f"unexpected character {expression[position:].lstrip()[:1]!r} at {position}")
        kind = match.lastgroup or ""
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        position = match.end()
    tokens.append(_Token("end", "", len(expression)))
    return tokens


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


# --- parsing: each rule returns an evaluator (a closure over its operands) ------------------------

_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


class _Parser:
    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _tokens(expression)
        self.position = 0

    def parse(self) -> Evaluator:
        evaluate = self._or()
        if self._peek().kind != "end":
            self._fail(f"unexpected {self._peek().text!r}")
        return evaluate

    # helpers

    def _peek(self) -> _Token:
        return self.tokens[self.position]

    def _take(self) -> _Token:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def _accept(self, text: str) -> bool:
        token = self._peek()
        if token.kind in ("op", "name") and token.text == text:
            self.position += 1
            return True
        return False

    def _expect(self, text: str) -> None:
        if not self._accept(text):
            self._fail(f"expected {text!r}, got {self._peek().text or 'the end'!r}")

    def _fail(self, reason: str) -> None:
        raise CelUnsupported(f"{reason} at {self._peek().at}")

    # grammar

    def _or(self) -> Evaluator:
        left = self._and()
        while self._accept("||"):
            right = self._and()
            left = _or(left, right)
        return left

    def _and(self) -> Evaluator:
        left = self._relation()
        while self._accept("&&"):
            right = self._relation()
            left = _and(left, right)
        return left

    def _relation(self) -> Evaluator:
        left = self._unary()
        token = self._peek()
        if token.kind == "op" and token.text in _COMPARISONS:
            self._take()
            return _compare(token.text, left, self._unary())
        if token.kind == "name" and token.text == "in":
            self._take()
            return _membership(left, self._unary())
        return left

    def _unary(self) -> Evaluator:
        if self._accept("!"):
            operand = self._unary()
            return lambda device: not _boolean(operand(device), "!")
        if self._accept("-"):
            token = self._take()
            if token.kind != "number" or "." in token.text:
                self._fail("'-' is supported before integers only")
            value = -int(token.text)
            return lambda device: value
        return self._member()

    def _member(self) -> Evaluator:
        value = self._primary()
        while True:
            if self._accept("."):
                name = self._take()
                if name.kind != "name":
                    self._fail("expected a name after '.'")
                if self._accept("("):
                    value = _method(self, value, name.text, self._arguments())
                else:
                    value = _select(value, name.text)
            elif self._accept("["):
                key = self._take()
                if key.kind != "string":
                    self._fail("expected a string key in '[...]'")
                self._expect("]")
                value = _select(value, _unquote(key.text))
            else:
                return value

    def _arguments(self) -> list[Evaluator]:
        arguments: list[Evaluator] = []
        if self._accept(")"):
            return arguments
        while True:
            arguments.append(self._or())
            if self._accept(")"):
                return arguments
            self._expect(",")

    def _primary(self) -> Evaluator:
        token = self._take()
        if token.kind == "string":
            text = _unquote(token.text)
            return lambda device: text
        if token.kind == "number":
            if "." in token.text:
                self.position -= 1
                self._fail("floating-point numbers are not supported")
            number = int(token.text)
            return lambda device: number
        if token.kind == "op" and token.text == "(":
            inner = self._or()
            self._expect(")")
            return inner
        if token.kind == "op" and token.text == "[":
            items: list[Evaluator] = []
            if not self._accept("]"):
                while True:
                    items.append(self._or())
                    if self._accept("]"):
                        break
                    self._expect(",")
            return lambda device: [item(device) for item in items]
        if token.kind != "name":
            self.position -= 1
            self._fail(f"unexpected {token.text or 'end of expression'!r}")
        if token.text in ("true", "false"):
            truth = token.text == "true"
            return lambda device: truth
        if token.text == "device":
            return lambda device: _DeviceRef(device)
        if token.text in ("quantity", "semver") and self._accept("("):
            return self._literal_call(token.text)
        if token.text == "has" and self._accept("("):
            return self._has()
        self.position -= 1
        self._fail(f"unknown name {token.text!r} ({SUPPORTED})")
        raise AssertionError  # _fail raised

    def _literal_call(self, function: str) -> Evaluator:
        argument = self._take()
        if argument.kind != "string":
            self._fail(f"{function}() takes a string literal")
        self._expect(")")
        text = _unquote(argument.text)
        try:
            parsed: Fraction | SemVer = parse_quantity(text) if function == "quantity" else SemVer.parse(text)
        except ValueError as error:
            raise CelUnsupported(f"{function}({argument.text}): {error}") from None
        return lambda device: parsed

    def _has(self) -> Evaluator:
        """`has(x.name)` / `has(x["name"])`: whether the last selection exists, not an error when not."""
        start = self.position
        container = self._primary()
        selections: list[str] = []
        while self._peek().text in (".", "["):
            if self._accept("."):
                name = self._take()
                if name.kind != "name":
                    self._fail("expected a name after '.'")
                selections.append(name.text)
            else:
                self._take()
                key = self._take()
                if key.kind != "string":
                    self._fail("expected a string key in '[...]'")
                self._expect("]")
                selections.append(_unquote(key.text))
        self._expect(")")
        if not selections:
            self.position = start
            self._fail("has() needs a field selection")
        for selection in selections[:-1]:
            container = _select(container, selection)
        last = selections[-1]

        def present(device: DeviceView) -> bool:
            value = container(device)
            if isinstance(value, _Domain):
                return last in value.values
            if isinstance(value, _Domains):
                return True  # an unknown domain is an empty map, never an error
            if isinstance(value, _DeviceRef):
                return last in _DEVICE_FIELDS
            raise CelError(f"has() of {_type(value)}")

        return present


_DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")


def _select(container: Evaluator, name: str) -> Evaluator:
    def select(device: DeviceView) -> Value:
        value = container(device)
        if isinstance(value, _DeviceRef):
            view = value.device
            if name == "driver":
                return view.driver
            if name == "attributes":
                return _Domains("attributes", view.attributes)
            if name == "capacity":
                return _Domains("capacity", view.capacity)
            if name == "allowMultipleAllocations":
                return view.allow_multiple_allocations
            raise CelError(f"no such key: {name}")
        if isinstance(value, _Domains):
            return _Domain(value.what, name, value.values.get(name, {}))
        if isinstance(value, _Domain):
            if name not in value.values:
                raise CelError(f"no such key: {name} (in device.{value.what}[{value.domain!r}])")
            return value.values[name]
        raise CelError(f"cannot select {name!r} from {_type(value)}")

    return select


_METHODS: Final = {
    "compareTo",
    "isGreaterThan",
    "isLessThan",
    "asInteger",
    "startsWith",
    "endsWith",
    "contains",
    "lowerAscii",
}


def _method(parser: _Parser, target: Evaluator, name: str, arguments: Sequence[Evaluator]) -> Evaluator:
    if name not in _METHODS:
        parser._fail(f"unknown method {name!r} ({SUPPORTED})")
    wanted = 0 if name in ("asInteger", "lowerAscii") else 1
    if len(arguments) != wanted:
        parser._fail(f"{name}() takes {wanted} argument(s)")

    def call(device: DeviceView) -> Value:
        value = target(device)
        args = [argument(device) for argument in arguments]
        if isinstance(value, Fraction | SemVer) and name in ("compareTo", "isGreaterThan", "isLessThan"):
            other = args[0]
            if type(other) is not type(value):
                raise CelError(f"{name}() of {_type(value)} with {_type(other)}")
            a, b = (value, other) if isinstance(value, Fraction) else (value.order(), other.order())  # type: ignore[union-attr]
            order = (a > b) - (a < b)  # type: ignore[operator]
            if name == "compareTo":
                return order
            return order > 0 if name == "isGreaterThan" else order < 0
        if isinstance(value, Fraction) and name == "asInteger":
            if value.denominator != 1:
                raise CelError(f"asInteger() of a fractional quantity {value}")
            return int(value)
        if isinstance(value, str) and name in ("startsWith", "endsWith", "contains", "lowerAscii"):
            if name == "lowerAscii":
                return value.lower()
            other = args[0]
            if not isinstance(other, str):
                raise CelError(f"{name}() with {_type(other)}")
            if name == "startsWith":
                return value.startswith(other)
            return value.endswith(other) if name == "endsWith" else other in value
        raise CelError(f"no method {name}() on {_type(value)}")

    return call


def _boolean(value: Value, where: str) -> bool:
    if not isinstance(value, bool):
        raise CelError(f"{where} needs a bool, got {_type(value)}")
    return value


def _and(left: Evaluator, right: Evaluator) -> Evaluator:
    return lambda device: _boolean(left(device), "&&") and _boolean(right(device), "&&")


def _or(left: Evaluator, right: Evaluator) -> Evaluator:
    return lambda device: _boolean(left(device), "||") or _boolean(right(device), "||")


def _compare(operator: str, left: Evaluator, right: Evaluator) -> Evaluator:
    def compare(device: DeviceView) -> bool:
        a, b = left(device), right(device)
        if operator in ("==", "!="):
            equal = type(a) is type(b) and a == b
            return equal if operator == "==" else not equal
        if type(a) is not type(b) or not isinstance(a, int | str) or isinstance(a, bool):
            raise CelError(f"no overload for {_type(a)} {operator} {_type(b)}")
        assert isinstance(b, int | str)
        if operator == "<":
            return a < b  # type: ignore[operator]
        if operator == "<=":
            return a <= b  # type: ignore[operator]
        if operator == ">":
            return a > b  # type: ignore[operator]
        return a >= b  # type: ignore[operator]

    return compare


def _membership(element: Evaluator, collection: Evaluator) -> Evaluator:
    def member(device: DeviceView) -> bool:
        item, within = element(device), collection(device)
        if isinstance(within, list):
            return any(type(item) is type(other) and item == other for other in within)
        if isinstance(within, _Domain):
            if not isinstance(item, str):
                raise CelError(f"'in' a map needs a string key, got {_type(item)}")
            return item in within.values
        raise CelError(f"'in' needs a list or a map, got {_type(within)}")

    return member


def _type(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Fraction):
        return "quantity"
    if isinstance(value, SemVer):
        return "semver"
    if isinstance(value, list):
        return "list"
    return "map"
