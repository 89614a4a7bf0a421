"""The patch flavours of the API server: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge
patch (merge keys of the built-in types, with the `$patch`/`$retainKeys`/`$setElementOrder`/
`$deleteFromPrimitiveList` directives kubectl sends) and an approximation of server-side apply."""

from __future__ import annotations

from typing import Any

from .errors import ApiError
from .jsoncopy import clone

# List fields that strategic merge patch merges element-wise, by this key (from the built-in Go types).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "webhooks": "name",  # Mutating/ValidatingWebhookConfiguration
}
# Lists of scalars that strategic merge patch unions instead of replacing.
MERGE_PRIMITIVE_LISTS: frozenset[str] = frozenset({"finalizers"})


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, message)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# ----------------------------------------------------------------------------------------------- JSON patch


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _unprocessable(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if token == "-" and for_add:
        return len(container)
    try:
        idx = int(token)
    except ValueError:
        raise _unprocessable(f"invalid array index {token!r}") from None
    limit = len(container) if for_add else len(container) - 1
    if idx < 0 or idx > limit:
        raise _unprocessable(f"array index {idx} out of bounds")
    return idx


def _walk(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for tok in tokens:
        if isinstance(cur, dict):
            if tok not in cur:
                raise _unprocessable(f"doc is missing path: /{'/'.join(tokens)}")
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, for_add=False)]
        else:
            raise _unprocessable(f"doc is missing path: /{'/'.join(tokens)}")
    return cur


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise _unprocessable("add target is not a container")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise _unprocessable("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"unable to remove nonexistent key: {last}: missing value")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, for_add=False))
    raise _unprocessable("remove target is not a container")


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 (add, remove, replace, move, copy, test); a failing operation is a 422."""
    if not isinstance(operations, list):
        raise ApiError(400, "json patch must be a list of operations")
    result = clone(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, f"invalid json patch operation: {op!r}")
        kind, tokens = op["op"], _pointer(str(op["path"]))
        if kind == "add":
            result = _add(result, tokens, clone(op.get("value")))
        elif kind == "remove":
            _remove(result, tokens)
        elif kind == "replace":
            _walk(result, tokens)
            if tokens:
                parent = _walk(result, tokens[:-1])
                if isinstance(parent, list):
                    parent[_index(parent, tokens[-1], for_add=False)] = clone(op.get("value"))
                else:
                    parent[tokens[-1]] = clone(op.get("value"))
            else:
                result = clone(op.get("value"))
        elif kind in ("move", "copy"):
            source = _pointer(str(op.get("from", "")))
            value = clone(_walk(result, source))
            if kind == "move":
                _remove(result, source)
            result = _add(result, tokens, value)
        elif kind == "test":
            if _walk(result, tokens) != op.get("value"):
                raise _unprocessable(f"testing value {op['path']} failed")
        else:
            raise ApiError(400, f"unknown json patch operation {kind!r}")
    return result


# ----------------------------------------------------------------------------------- strategic merge patch


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        for item in items:
            if isinstance(item, dict):
                return "containerPort" if "containerPort" in item else "port"
        return None
    return MERGE_KEYS.get(field)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch on plain dicts, using the merge keys of the built-in types."""
    return _smp(clone(target), clone(patch))


def _smp(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    directive = patch.pop("$patch", None)
    if directive == "replace":
        return patch
    if directive == "delete":
        return None
    result: dict[str, Any] = target if isinstance(target, dict) else {}
    retain = patch.pop("$retainKeys", None)
    orders: dict[str, list[Any]] = {}
    deletions: dict[str, list[Any]] = {}
    for key in [k for k in patch if k.startswith("$")]:
        value = patch.pop(key)
        if key.startswith("$setElementOrder/"):
            orders[key.partition("/")[2]] = value
        elif key.startswith("$deleteFromPrimitiveList/"):
            deletions[key.partition("/")[2]] = value
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, list):
            result[key] = _smp_list(key, current, value)
        elif isinstance(value, dict):
            merged = _smp(current, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    for key, values in deletions.items():
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _apply_order(key, result[key], order)
    if isinstance(retain, list):
        for key in [k for k in result if k not in retain]:
            del result[key]
    return result


def _smp_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if not isinstance(current, list):
        current = []
    if field in MERGE_PRIMITIVE_LISTS:
        out = list(current)
        for v in patch:
            if v not in out:
                out.append(v)
        return out
    key = _merge_key(field, patch + current)
    if key is None or not all(isinstance(x, dict) for x in patch):
        if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
            return [x for x in patch if not (isinstance(x, dict) and "$patch" in x)]
        return patch
    out = [x for x in current]
    for item in patch:
        directive = item.get("$patch")
        if directive == "replace":
            return [x for x in patch if "$patch" not in x]
        idx = next(
            (i for i, x in enumerate(out) if isinstance(x, dict) and key in item and x.get(key) == item[key]),
            None,
        )
        if directive == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(_smp({}, item))
        else:
            out[idx] = _smp(out[idx], item)
    return out


def _apply_order(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = _merge_key(field, items)
    if key is None:
        return items

    def ident(x: Any) -> Any:
        return x.get(key) if isinstance(x, dict) else x

    wanted = [ident(o) for o in order]
    ordered = [x for w in wanted for x in items if ident(x) == w]
    rest = [x for x in items if ident(x) not in wanted]
    return ordered + rest


# ------------------------------------------------------------------------------------- server-side apply


def server_side_apply(live: dict[str, Any], applied: dict[str, Any], previous: dict[str, Any] | None) -> Any:
    """Approximate server-side apply: merge the applied configuration into the live object (lists of maps
    by their merge keys, other lists replaced), then drop fields the same manager applied last time but no
    longer applies. Field ownership across managers (and apply conflicts) is not modelled."""
    merged = _apply_merge(clone(live), clone(applied))
    if previous is not None:
        merged = _prune(merged, previous, applied)
    return merged


def _apply_merge(target: Any, applied: Any) -> Any:
    if not isinstance(applied, dict) or not isinstance(target, dict):
        return applied
    for key, value in applied.items():
        current = target.get(key)
        if isinstance(value, dict):
            target[key] = _apply_merge(current, value) if isinstance(current, dict) else value
        elif isinstance(value, list) and isinstance(current, list):
            mk = _merge_key(key, value + current)
            if mk and all(isinstance(x, dict) for x in value):
                out = list(current)
                for item in value:
                    idx = next(
                        (i for i, x in enumerate(out) if isinstance(x, dict) and x.get(mk) == item.get(mk)),
                        None,
                    )
                    if idx is None:
                        out.append(item)
                    else:
                        out[idx] = _apply_merge(out[idx], item)
                target[key] = out
            elif key in MERGE_PRIMITIVE_LISTS:
                target[key] = list(dict.fromkeys([*current, *value]))
            else:
                target[key] = value
        else:
            target[key] = value
    return target


def _prune(live: Any, previous: Any, applied: Any) -> Any:
    if not isinstance(live, dict) or not isinstance(previous, dict):
        return live
    applied = applied if isinstance(applied, dict) else {}
    for key, prev_value in previous.items():
        if key in ("apiVersion", "kind") or key not in live:
            continue
        if key not in applied:
            if key == "metadata":
                continue
            del live[key]
        elif isinstance(prev_value, dict):
            live[key] = _prune(live[key], prev_value, applied[key])
        elif isinstance(prev_value, list) and isinstance(live[key], list):
            mk = _merge_key(key, prev_value)
            if mk and all(isinstance(x, dict) for x in prev_value):
                now = (
                    {x.get(mk) for x in applied[key] if isinstance(x, dict)}
                    if isinstance(applied[key], list)
                    else set()
                )
                gone = {x.get(mk) for x in prev_value} - now
                live[key] = [x for x in live[key] if not (isinstance(x, dict) and x.get(mk) in gone)]
            elif key in MERGE_PRIMITIVE_LISTS and isinstance(applied[key], list):
                gone_values = [v for v in prev_value if v not in applied[key]]
                live[key] = [v for v in live[key] if v not in gone_values]
    return live
