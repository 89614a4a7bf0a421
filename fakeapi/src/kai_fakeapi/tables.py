"""Server-side printing: the `meta.k8s.io` Table that `kubectl get` asks for, the PartialObjectMetadata
other clients ask for, and `Form`, which of them (or the objects themselves) a request's Accept header
asks for."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .meta import parse_time
from .resources import PrinterColumn, ResourceType

Obj = dict[str, Any]
Cell = Callable[[Obj, float], Any]


def human_duration(seconds: float) -> str:
    """kubectl's short duration format (`5s`, `3m2s`, `4h`, `12d`)."""
    s = int(seconds)
    if s < 0:
        return "0s" if s > -2 else "<invalid>"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 730:
        return f"{days}d"
    return f"{days // 365}y"


def _age(obj: Obj, now: float) -> str:
    ts = (obj.get("metadata") or {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    return human_duration(now - parse_time(str(ts)))


def _get(obj: Any, path: str) -> Any:
    """A simple JSONPath (`.spec.priority`, `.status.conditions[0].type`) as CRD printer columns use."""
    cur = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path.strip().lstrip("{").rstrip("}")):
        if part.startswith("["):
            idx = int(part[1:-1])
            cur = cur[idx] if isinstance(cur, list) and idx < len(cur) else None
        elif isinstance(cur, dict):
            cur = cur.get(part)
        else:
            return None
        if cur is None:
            return None
    return cur


def _pod_status(pod: Obj, _now: float) -> str:
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    reason = status.get("reason")
    if reason:
        return str(reason)
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return str(waiting["reason"])
    phase = str(status.get("phase") or "Pending")
    if phase == "Pending" and not (pod.get("spec") or {}).get("nodeName"):
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason"):
                return str(cond["reason"])
    return phase


def _pod_ready(pod: Obj, _now: float) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    ready = sum(1 for cs in (pod.get("status") or {}).get("containerStatuses") or [] if cs.get("ready"))
    return f"{ready}/{len(containers)}"


def _pod_restarts(pod: Obj, _now: float) -> int:
    return sum(
        int(cs.get("restartCount", 0)) for cs in (pod.get("status") or {}).get("containerStatuses") or []
    )


def _none(value: Any) -> str:
    return "<none>" if value in (None, "") else str(value)


def _int_or_percent(value: Any) -> str:
    return "N/A" if value is None else str(value)


def _node_status(node: Obj, _now: float) -> str:
    state = "Unknown"
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            state = "Ready" if cond.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    return state


def _node_roles(node: Obj, _now: float) -> str:
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.partition("/")[2] for k in labels if k.startswith("node-role.kubernetes.io/"))
    return ",".join(r for r in roles if r) or "<none>"


def _node_address(kind: str) -> Cell:
    def cell(node: Obj, _now: float) -> str:
        for addr in (node.get("status") or {}).get("addresses") or []:
            if addr.get("type") == kind:
                return str(addr.get("address"))
        return "<none>"

    return cell


Column = tuple[str, str, int, Cell]  # name, type, priority, cell

_NAME: Column = ("Name", "string", 0, lambda o, _n: (o.get("metadata") or {}).get("name", ""))
_AGE: Column = ("Age", "string", 0, _age)

BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "pods": [
        _NAME,
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        ("Restarts", "string", 0, _pod_restarts),
        _AGE,
        ("IP", "string", 1, lambda o, _n: _none((o.get("status") or {}).get("podIP"))),
        ("Node", "string", 1, lambda o, _n: _none((o.get("spec") or {}).get("nodeName"))),
        (
            "Nominated Node",
            "string",
            1,
            lambda o, _n: _none((o.get("status") or {}).get("nominatedNodeName")),
        ),
        ("Readiness Gates", "string", 1, lambda o, _n: "<none>"),
    ],
    "nodes": [
        _NAME,
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, _node_roles),
        _AGE,
        (
            "Version",
            "string",
            0,
            lambda o, _n: _none(((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")),
        ),
        ("Internal-IP", "string", 1, _node_address("InternalIP")),
        ("External-IP", "string", 1, _node_address("ExternalIP")),
    ],
    "namespaces": [
        _NAME,
        ("Status", "string", 0, lambda o, _n: (o.get("status") or {}).get("phase", "")),
        _AGE,
    ],
    "priorityclasses.scheduling.k8s.io": [
        _NAME,
        ("Value", "integer", 0, lambda o, _n: o.get("value")),
        ("Global-Default", "boolean", 0, lambda o, _n: bool(o.get("globalDefault", False))),
        _AGE,
    ],
    "poddisruptionbudgets.policy": [
        _NAME,
        (
            "Min Available",
            "string",
            0,
            lambda o, _n: _int_or_percent((o.get("spec") or {}).get("minAvailable")),
        ),
        (
            "Max Unavailable",
            "string",
            0,
            lambda o, _n: _int_or_percent((o.get("spec") or {}).get("maxUnavailable")),
        ),
        (
            "Allowed Disruptions",
            "integer",
            0,
            lambda o, _n: int((o.get("status") or {}).get("disruptionsAllowed", 0)),
        ),
        _AGE,
    ],
    "leases.coordination.k8s.io": [
        _NAME,
        ("Holder", "string", 0, lambda o, _n: (o.get("spec") or {}).get("holderIdentity", "")),
        _AGE,
    ],
    "events": [
        (
            "Last Seen",
            "string",
            0,
            lambda o, n: _age(
                {
                    "metadata": {
                        "creationTimestamp": o.get("lastTimestamp")
                        or o.get("eventTime")
                        or (o.get("metadata") or {}).get("creationTimestamp")
                    }
                },
                n,
            ),
        ),
        ("Type", "string", 0, lambda o, _n: o.get("type", "")),
        ("Reason", "string", 0, lambda o, _n: o.get("reason", "")),
        (
            "Object",
            "string",
            0,
            lambda o, _n: "{}/{}".format(
                str((o.get("involvedObject") or {}).get("kind", "")).lower(),
                (o.get("involvedObject") or {}).get("name", ""),
            ),
        ),
        ("Message", "string", 0, lambda o, _n: o.get("message", "")),
    ],
}


def _crd_cell(col: PrinterColumn) -> Cell:
    def cell(obj: Obj, now: float) -> Any:
        value = _get(obj, col.json_path)
        if value is None:
            return None
        if col.type == "date":
            try:
                return human_duration(now - parse_time(str(value)))
            except ValueError:
                return str(value)
        if isinstance(value, (list, dict)):
            import json

            return json.dumps(value, separators=(",", ":"))
        return value

    return cell


def columns_for(rt: ResourceType) -> list[Column]:
    if rt.custom:
        cols: list[Column] = [_NAME]
        if rt.printer_columns:
            cols += [
                (c.name, c.type if c.type != "date" else "string", c.priority, _crd_cell(c))
                for c in rt.printer_columns
            ]
        else:
            cols.append(_AGE)
        return cols
    return BUILTIN_COLUMNS.get(rt.key, [_NAME, _AGE])


def _partial(obj: Obj) -> Obj:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def to_table(
    rt: ResourceType,
    items: list[Obj],
    *,
    api_version: str = "meta.k8s.io/v1",
    include_object: str = "Metadata",
    list_meta: Obj | None = None,
    now: float | None = None,
) -> Obj:
    """Convert objects to a Table; `include_object` is `None`, `Metadata` (default) or `Object`."""
    when = time.time() if now is None else now
    cols = columns_for(rt)
    defs = [
        {
            "name": name,
            "type": typ,
            "format": "name" if name == "Name" else "",
            "description": name,
            "priority": prio,
        }
        for name, typ, prio, _ in cols
    ]
    rows = []
    for obj in items:
        row: Obj = {"cells": [cell(obj, when) for _, _, _, cell in cols]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = _partial(obj)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": list_meta or {},
        "columnDefinitions": defs,
        "rows": rows,
    }


def to_partial_list(items: list[Obj], list_meta: Obj) -> Obj:
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "items": [_partial(o) for o in items],
    }


@dataclass(frozen=True)
class Form:
    """The shape of a response: the objects (`json`), a `table` or `partial` object metadata, in
    meta.k8s.io `version`; a table's rows carry `include_object` (None, Metadata or Object)."""

    mode: str = "json"
    version: str = ""
    include_object: str = "Metadata"

    @classmethod
    def accepted(cls, accept: str, include_object: str) -> Form:
        """The first form of the Accept header this server offers (`as=Table;g=meta.k8s.io;v=v1`, ...)."""
        for part in accept.split(","):
            pieces = [p.strip() for p in part.split(";")]
            params = dict(p.split("=", 1) for p in pieces[1:] if "=" in p)
            if pieces[0] not in ("application/json", "*/*", "application/*"):
                continue
            as_ = params.get("as")
            if as_ == "Table" and params.get("g") == "meta.k8s.io":
                return cls("table", params.get("v", "v1"), include_object)
            if (
                as_ in ("PartialObjectMetadata", "PartialObjectMetadataList")
                and params.get("g") == "meta.k8s.io"
            ):
                return cls("partial", params.get("v", "v1"), include_object)
            if not as_:
                break
        return cls()

    def one(self, rt: ResourceType, obj: Obj) -> Obj:
        """One object (a get, or a watch event's object) in this form."""
        if self.mode == "table":
            list_meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            return self.many(rt, [obj], list_meta)
        if self.mode == "partial":
            return {**_partial(obj), "apiVersion": f"meta.k8s.io/{self.version}"}
        return obj

    def many(self, rt: ResourceType, items: list[Obj], list_meta: Obj) -> Obj:
        """A list in this form."""
        if self.mode == "table":
            return to_table(
                rt,
                items,
                api_version=f"meta.k8s.io/{self.version}",
                include_object=self.include_object,
                list_meta=list_meta,
            )
        if self.mode == "partial":
            return {**to_partial_list(items, list_meta), "apiVersion": f"meta.k8s.io/{self.version}"}
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": list_meta, "items": items}
