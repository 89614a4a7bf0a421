"""A webhook's `matchConditions` (Kubernetes 1.30+): CEL expressions over `object`, `oldObject` and
`request` that must all hold for the webhook to be called.

This reads the part of CEL such conditions are written in: field selection (`object.spec.schedulerName`),
indexing, `has(...)`, literals (strings, numbers, booleans, null, lists), `==` `!=` `<` `<=` `>` `>=`
`in`, `!` `&&` `||`, `? :`, and `size()`, `startsWith`, `endsWith`, `contains`. As in the API server, a
condition that is false skips the webhook; one that fails (a missing field, or here also an expression
outside this part of CEL) refuses the request (403) under `failurePolicy: Fail` and skips the webhook
under `Ignore`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .admission_request import Attributes
from .errors import ApiError
from .meta import Obj

Node = Callable[[dict[str, Any]], Any]

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].,?:]))"
)


class CelError(Exception):
    pass


def hold(hook: Obj, attrs: Attributes, obj: Obj | None, old: Obj | None, request: Obj) -> bool:
    """Whether every match condition of `hook` holds for the request (see the module's doc)."""
    conditions = [c for c in hook.get("matchConditions") or [] if isinstance(c, dict)]
    if not conditions:
        return True
    variables = {"object": obj, "oldObject": old, "request": request}
    errors: list[str] = []
    for condition in conditions:
        expression = str(condition.get("expression", ""))
        try:
            result = _Parser(expression).parse()(variables)
        except CelError as exc:
            errors.append(f"expression '{expression}' resulted in error: {exc}")
            continue
        if result is False:
            return False
        if result is not True:
            errors.append(f"expression '{expression}' resulted in error: no matching overload (not a bool)")
    if not errors:
        return True
    if hook.get("failurePolicy") == "Ignore":
        return False
    group = f".{attrs.rt.group}" if attrs.rt.group else ""
    named = f' "{attrs.name}"' if attrs.name else ""
    raise ApiError(403, f"{attrs.rt.plural}{group}{named} is forbidden: {'; '.join(errors)}")


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if m is None:
                raise CelError(f"Syntax error: token recognition error at: '{text[pos:].strip()[:1]}'")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.at = 0

    def parse(self) -> Node:
        node = self.ternary()
        if self.at < len(self.tokens):
            raise CelError(f"Syntax error: unexpected '{self.tokens[self.at][1]}'")
        return node

    def peek(self) -> str:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens) or (expected is not None and self.tokens[self.at][1] != expected):
            raise CelError(f"Syntax error: expected '{expected or 'more'}' at '{self.peek()}'")
        self.at += 1
        return self.tokens[self.at - 1]

    def ternary(self) -> Node:
        cond = self.logical("||")
        if self.peek() != "?":
            return cond
        self.take("?")
        yes = self.ternary()
        self.take(":")
        no = self.ternary()
        return lambda v: yes(v) if _bool(cond(v)) else no(v)

    def logical(self, op: str) -> Node:
        node = self.logical("&&") if op == "||" else self.relation()
        while self.peek() == op:
            self.take()
            right = self.logical("&&") if op == "||" else self.relation()
            node = _logic(op, node, right)
        return node

    def relation(self) -> Node:
        node = self.unary()
        while self.peek() in ("==", "!=", "<", "<=", ">", ">=", "in"):
            op = self.take()[1]
            node = _relation(op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.peek() == "!":
            self.take()
            inner = self.unary()
            return lambda v: not _bool(inner(v))
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while self.peek() in (".", "["):
            if self.take()[1] == "[":
                index = self.ternary()
                self.take("]")
                node = _index(node, index)
                continue
            name = self.take()[1]
            node = _method(name, node, self.arguments()) if self.peek() == "(" else _field(node, name)
        return node

    def arguments(self) -> list[Node]:
        self.take("(")
        args: list[Node] = []
        while self.peek() != ")":
            args.append(self.ternary())
            if self.peek() == ",":
                self.take()
        self.take(")")
        return args

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "num":
            value: Any = float(text) if "." in text else int(text)
            return lambda _v: value
        if kind == "str":
            literal = bytes(text[1:-1], "utf-8").decode("unicode_escape")
            return lambda _v: literal
        if text == "(":
            node = self.ternary()
            self.take(")")
            return node
        if text == "[":
            items: list[Node] = []
            while self.peek() != "]":
                items.append(self.ternary())
                if self.peek() == ",":
                    self.take()
            self.take("]")
            return lambda v: [item(v) for item in items]
        if kind != "name":
            raise CelError(f"Syntax error: unexpected '{text}'")
        constants = {"true": True, "false": False, "null": None}
        if text in constants:
            constant = constants[text]
            return lambda _v: constant
        if self.peek() == "(":
            return self.call(text)
        return lambda v: _variable(v, text)

    def call(self, name: str) -> Node:
        if name == "has":
            self.take("(")
            target = self.member()
            self.take(")")
            return lambda v: _present(target, v)
        args = self.arguments()
        if name == "size" and len(args) == 1:
            return lambda v: _size(args[0](v))
        raise CelError(f"undeclared reference to '{name}' (in this fake's part of CEL)")


def _variable(variables: dict[str, Any], name: str) -> Any:
    if name not in variables:
        raise CelError(f"undeclared reference to '{name}'")
    return variables[name]


def _field(node: Node, name: str) -> Node:
    def get(v: dict[str, Any]) -> Any:
        value = node(v)
        if not isinstance(value, dict):
            raise CelError(f"no such key: {name}")
        if name not in value:
            raise CelError(f"no such key: {name}")
        return value[name]

    get.field = (node, name)  # type: ignore[attr-defined]  # for has()
    return get


def _present(target: Node, v: dict[str, Any]) -> bool:
    selection = getattr(target, "field", None)
    if selection is None:
        raise CelError("invalid argument to has() macro")
    parent, name = selection
    value = parent(v)
    return isinstance(value, dict) and name in value


def _index(node: Node, index: Node) -> Node:
    def get(v: dict[str, Any]) -> Any:
        value, key = node(v), index(v)
        try:
            return value[key]
        except (KeyError, IndexError, TypeError):
            raise CelError(f"no such key: {key}") from None

    return get


def _method(name: str, node: Node, args: list[Node]) -> Node:
    def call(v: dict[str, Any]) -> Any:
        target, values = node(v), [a(v) for a in args]
        if name == "size" and not values:
            return _size(target)
        if name in ("startsWith", "endsWith", "contains") and isinstance(target, str) and len(values) == 1:
            arg = values[0]
            if isinstance(arg, str):
                return {"startsWith": target.startswith, "endsWith": target.endswith}.get(
                    name, target.__contains__
                )(arg)
        raise CelError(f"found no matching overload for '{name}'")

    return call


def _size(value: Any) -> int:
    if isinstance(value, (str, list, dict)):
        return len(value)
    raise CelError("found no matching overload for 'size'")


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelError("no such overload: a condition must be a bool")
    return value


def _logic(op: str, left: Node, right: Node) -> Node:
    """`&&` and `||` as CEL has them: an error on one side is absorbed when the other decides."""
    decisive = op == "||"

    def evaluate(v: dict[str, Any]) -> bool:
        failure: CelError | None = None
        for side in (left, right):
            try:
                if _bool(side(v)) is decisive:
                    return decisive
            except CelError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        return not decisive

    return evaluate


def _relation(op: str, left: Node, right: Node) -> Node:
    def evaluate(v: dict[str, Any]) -> bool:
        a, b = left(v), right(v)
        if op == "==":
            return bool(a == b)
        if op == "!=":
            return bool(a != b)
        if op == "in":
            if not isinstance(b, (list, dict)):
                raise CelError("found no matching overload for '@in'")
            return a in b
        try:
            return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])
        except TypeError:
            raise CelError(f"found no matching overload for '_{op}_'") from None

    return evaluate
