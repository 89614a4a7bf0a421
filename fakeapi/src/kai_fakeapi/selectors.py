"""Label and field selectors with the Kubernetes syntax (`a=b,c!=d,e in (x,y),!f`; `spec.nodeName=n1`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import ApiError, bad_request

Matcher = Callable[[dict[str, Any]], bool]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_OP_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=|>|<)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> Matcher:
    """A predicate on an object's `metadata.labels`; raises a 400 `ApiError` on bad syntax."""
    if not text or not text.strip():
        return lambda _obj: True
    reqs: list[Callable[[dict[str, str]], bool]] = []
    for part in _split_top_level(text):
        reqs.append(_label_requirement(part))

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in reqs)

    return match


def _label_requirement(part: str) -> Callable[[dict[str, str]], bool]:
    m = _SET_RE.match(part)
    if m:
        key, op = m.group(1), m.group(2)
        values = {v.strip() for v in m.group(3).split(",") if v.strip()}
        if op == "in":
            return lambda labels: key in labels and labels[key] in values
        return lambda labels: key not in labels or labels[key] not in values
    m = _OP_RE.match(part)
    if m:
        key, op, value = m.group(1), m.group(2), m.group(3)
        if op in ("=", "=="):
            return lambda labels: labels.get(key) == value
        if op == "!=":
            return lambda labels: labels.get(key) != value
        try:
            bound = int(value)
        except ValueError:
            raise bad_request(
                f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an "
                f"integer: {part.strip()!r}"
            ) from None
        if op == ">":
            return lambda labels: _int_or_none(labels.get(key)) is not None and _int(labels[key]) > bound
        return lambda labels: _int_or_none(labels.get(key)) is not None and _int(labels[key]) < bound
    m = _EXISTS_RE.match(part)
    if m:
        negate, key = m.group(1) == "!", m.group(2)
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: invalid label selector: {part.strip()!r}")


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _int(value: str) -> int:
    return int(value)


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _split_unescaped(text: str, sep: str) -> list[str]:
    out: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return out


def field_value(obj: dict[str, Any], path: str) -> str:
    """The string form of a field, as field selectors compare it: missing → "", booleans lower-case."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            cur = None
            break
        cur = cur.get(part)
    if cur is None:
        return "false" if path in ("spec.unschedulable", "spec.hostNetwork") else ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, dict):
        if path == "source":
            return str(cur.get("component", ""))
        return ""
    return str(cur)


def _field_terms(text: str) -> list[tuple[str, str, str]]:
    """A field selector's (field, operator, value) terms; a 400 `ApiError` on bad syntax."""
    terms: list[tuple[str, str, str]] = []
    for raw in _split_unescaped(text, ","):
        part = raw.strip()
        if not part:
            continue
        m = re.match(r"^([^=!]+?)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        terms.append((m.group(1).strip(), m.group(2), _unescape(m.group(3).strip())))
    return terms


def parse_field_selector(text: str | None, allowed: tuple[str, ...]) -> Matcher:
    """A predicate on the object's selectable fields; unknown fields are a 400 as on the real server."""
    if not text or not text.strip():
        return lambda _obj: True
    reqs = _field_terms(text)
    for key, _, _ in reqs:
        if key not in allowed:
            raise ApiError(400, f"field label not supported: {key}")

    def match(obj: dict[str, Any]) -> bool:
        for key, op, value in reqs:
            actual = field_value(obj, key)
            if (actual == value) != (op != "!="):
                return False
        return True

    return match


def required_field_value(text: str | None, field: str) -> str | None:
    """The value a field selector requires `field` to equal (`metadata.name=p`), as the API server's
    `RequiresExactMatch` finds it; None when no term does, or when the selector does not parse."""
    if not text:
        return None
    try:
        terms = _field_terms(text)
    except ApiError:
        return None
    return next((value for key, op, value in terms if key == field and op != "!="), None)


def label_selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """A `LabelSelector` object (`matchLabels`, `matchExpressions`) against labels: every requirement
    holds; `{}` selects everything. A malformed selector selects nothing."""
    if not isinstance(selector, dict):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, op = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        if op == "In":
            held = key in labels and labels[key] in values
        elif op == "NotIn":
            held = key not in labels or labels[key] not in values
        elif op == "Exists":
            held = key in labels
        elif op == "DoesNotExist":
            held = key not in labels
        else:
            return False
        if not held:
            return False
    return True
