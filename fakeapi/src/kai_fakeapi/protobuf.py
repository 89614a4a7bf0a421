"""Decoding the protobuf bodies kubectl sends for a few built-in kinds (`kubectl create namespace`,
`create configmap`, `create secret generic`, `create serviceaccount`, `create priorityclass`, `create
role`/`clusterrole`/`rolebinding`/`clusterrolebinding`, the Eviction of `kubectl drain`, and the reviews
and TokenRequest of `kubectl auth can-i`, `auth whoami` and `create token`). Everything else answers 415,
which tells the user to use `apply -f`.

Wire format: the magic `k8s\\0`, then a `runtime.Unknown` {1: typeMeta {1: apiVersion, 2: kind}, 2: raw,
3: contentEncoding, 4: contentType}, where `raw` is the object's own message. Field numbers are those of
the Kubernetes `generated.proto` files.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from .errors import ApiError

MAGIC = b"k8s\x00"
Obj = dict[str, Any]
Fields = dict[int, list[Any]]  # field number → values (ints for varints, bytes for length-delimited)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def parse(data: bytes) -> Fields:
    """One message, without a schema: wire types 0 (varint), 1 (64-bit), 2 (bytes), 5 (32-bit)."""
    out: Fields = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif wire == 1:
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _str(f: Fields, n: int) -> str | None:
    return f[n][-1].decode() if n in f else None


def _int(f: Fields, n: int, bits: int = 64) -> int | None:
    if n not in f:
        return None
    v = int(f[n][-1])
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _bool(f: Fields, n: int) -> bool | None:
    return bool(f[n][-1]) if n in f else None


def _strings(f: Fields, n: int) -> list[str]:
    return [v.decode() for v in f.get(n, [])]


def _map(f: Fields, n: int, binary: bool = False) -> dict[str, str] | None:
    if n not in f:
        return None
    out: dict[str, str] = {}
    for entry in f[n]:
        kv = parse(entry)
        key = _str(kv, 1) or ""
        raw = kv.get(2, [b""])[-1]
        out[key] = base64.b64encode(raw).decode() if binary else raw.decode()
    return out


def _put(obj: Obj, key: str, value: Any) -> None:
    if value is not None and value != [] and value != {} and value != "":
        obj[key] = value


def _owner_reference(data: bytes) -> Obj:
    f = parse(data)
    ref: Obj = {}
    for key, n in (("kind", 1), ("name", 3), ("uid", 4), ("apiVersion", 5)):
        _put(ref, key, _str(f, n))
    _put(ref, "controller", _bool(f, 6))
    _put(ref, "blockOwnerDeletion", _bool(f, 7))
    return ref


def object_meta(data: bytes) -> Obj:
    f = parse(data)
    meta: Obj = {}
    for key, n in (("name", 1), ("generateName", 2), ("namespace", 3), ("uid", 5), ("resourceVersion", 6)):
        _put(meta, key, _str(f, n))
    _put(meta, "labels", _map(f, 11))
    _put(meta, "annotations", _map(f, 12))
    _put(meta, "ownerReferences", [_owner_reference(r) for r in f.get(13, [])])
    _put(meta, "finalizers", _strings(f, 14))
    return meta


def _with_meta(f: Fields) -> Obj:
    return {"metadata": object_meta(f[1][-1]) if 1 in f else {}}


def _namespace(f: Fields) -> Obj:
    obj = _with_meta(f)
    if 2 in f:
        obj["spec"] = {}
        _put(obj["spec"], "finalizers", _strings(parse(f[2][-1]), 1))
    return obj


def _configmap(f: Fields) -> Obj:
    obj = _with_meta(f)
    _put(obj, "data", _map(f, 2))
    _put(obj, "binaryData", _map(f, 3, binary=True))
    _put(obj, "immutable", _bool(f, 4))
    return obj


def _secret(f: Fields) -> Obj:
    obj = _with_meta(f)
    _put(obj, "data", _map(f, 2, binary=True))
    _put(obj, "type", _str(f, 3))
    _put(obj, "stringData", _map(f, 4))
    _put(obj, "immutable", _bool(f, 5))
    return obj


def _service_account(f: Fields) -> Obj:
    obj = _with_meta(f)
    _put(obj, "automountServiceAccountToken", _bool(f, 4))
    return obj


def _priority_class(f: Fields) -> Obj:
    obj = _with_meta(f)
    _put(obj, "value", _int(f, 2, 32))
    _put(obj, "globalDefault", _bool(f, 3))
    _put(obj, "description", _str(f, 4))
    _put(obj, "preemptionPolicy", _str(f, 5))
    return obj


def delete_options(data: bytes) -> Obj:
    f = parse(data)
    out: Obj = {}
    _put(out, "gracePeriodSeconds", _int(f, 1))
    if 2 in f:
        pre = parse(f[2][-1])
        out["preconditions"] = {
            k: v for k, v in (("uid", _str(pre, 1)), ("resourceVersion", _str(pre, 2))) if v
        }
    _put(out, "orphanDependents", _bool(f, 3))
    _put(out, "propagationPolicy", _str(f, 4))
    _put(out, "dryRun", _strings(f, 5))
    return out


def _eviction(f: Fields) -> Obj:
    obj = _with_meta(f)
    if 2 in f:
        obj["deleteOptions"] = delete_options(f[2][-1])
    return obj


def _fields(data: bytes, keys: tuple[str, ...]) -> Obj:
    """A message of string fields numbered 1, 2, ... in the order of `keys` (unset ones left out)."""
    f = parse(data)
    out: Obj = {}
    for n, key in enumerate(keys, start=1):
        _put(out, key, _str(f, n))
    return out


def _policy_rule(data: bytes) -> Obj:
    f = parse(data)
    keys = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
    return {key: _strings(f, n) for n, key in enumerate(keys, start=1) if n in f}


def _label_selector(data: bytes) -> Obj:
    f = parse(data)
    out: Obj = {}
    _put(out, "matchLabels", _map(f, 1))
    expressions = []
    for raw in f.get(2, []):
        e = parse(raw)
        expressions.append({"key": _str(e, 1) or "", "operator": _str(e, 2) or "", "values": _strings(e, 3)})
    _put(out, "matchExpressions", expressions)
    return out


def _role(f: Fields) -> Obj:
    obj = _with_meta(f)
    obj["rules"] = [_policy_rule(r) for r in f.get(2, [])]
    if 3 in f:
        selectors = parse(f[3][-1]).get(1, [])
        obj["aggregationRule"] = {"clusterRoleSelectors": [_label_selector(s) for s in selectors]}
    return obj


def _role_binding(f: Fields) -> Obj:
    obj = _with_meta(f)
    _put(obj, "subjects", [_fields(s, ("kind", "apiGroup", "name", "namespace")) for s in f.get(2, [])])
    if 3 in f:
        obj["roleRef"] = _fields(f[3][-1], ("apiGroup", "kind", "name"))
    return obj


def _access_review(f: Fields) -> Obj:
    """A (Self)SubjectAccessReview: the spec's attributes, and the subject of a SubjectAccessReview."""
    obj = _with_meta(f)
    spec: Obj = {}
    s = parse(f[2][-1]) if 2 in f else {}
    if 1 in s:
        keys = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
        spec["resourceAttributes"] = _fields(s[1][-1], keys)
    if 2 in s:
        spec["nonResourceAttributes"] = _fields(s[2][-1], ("path", "verb"))
    _put(spec, "user", _str(s, 3))
    _put(spec, "groups", _strings(s, 4))
    _put(spec, "uid", _str(s, 6))
    obj["spec"] = spec
    return obj


def _token_request(f: Fields) -> Obj:
    obj = _with_meta(f)
    spec: Obj = {}
    s = parse(f[2][-1]) if 2 in f else {}
    _put(spec, "audiences", _strings(s, 1))
    _put(spec, "expirationSeconds", _int(s, 4))
    if 3 in s:
        spec["boundObjectRef"] = _fields(s[3][-1], ("kind", "apiVersion", "name", "uid"))
    obj["spec"] = spec
    return obj


DECODERS: dict[tuple[str, str], Callable[[Fields], Obj]] = {
    ("v1", "Namespace"): _namespace,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Secret"): _secret,
    ("v1", "ServiceAccount"): _service_account,
    ("scheduling.k8s.io/v1", "PriorityClass"): _priority_class,
    ("policy/v1", "Eviction"): _eviction,
    ("policy/v1beta1", "Eviction"): _eviction,
    ("meta.k8s.io/v1", "DeleteOptions"): lambda f: {},
    ("rbac.authorization.k8s.io/v1", "Role"): _role,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): _role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _role_binding,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): _role_binding,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): _access_review,
    ("authorization.k8s.io/v1", "SubjectAccessReview"): _access_review,
    ("authentication.k8s.io/v1", "SelfSubjectReview"): _with_meta,
    ("authentication.k8s.io/v1", "TokenRequest"): _token_request,
}


def decode(body: bytes) -> Obj:
    """A protobuf request body as a JSON-shaped dict; 415 for kinds this server cannot read."""
    if not body.startswith(MAGIC):
        raise ApiError(400, "protobuf body without the k8s magic prefix")
    try:
        unknown = parse(body[len(MAGIC) :])
        type_meta = parse(unknown[1][-1]) if 1 in unknown else {}
        api_version, kind = _str(type_meta, 1) or "", _str(type_meta, 2) or ""
        raw = unknown.get(2, [b""])[-1]
        decoder = DECODERS.get((api_version, kind))
        if decoder is None:
            raise ApiError(
                415,
                f"the fake API server cannot read {kind} ({api_version}) as protobuf - accepted media types "
                "include: application/json, application/yaml (use kubectl apply -f or create -f)",
            )
        if kind == "DeleteOptions":
            return delete_options(raw)
        obj = decoder(parse(raw))
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body of the request could not be decoded: {exc}") from None
    return {"apiVersion": api_version, "kind": kind, **obj}
