"""`kubectl kai queues`: the queue tree, each queue under its parent (indented two spaces a level),
children by name, with one resource's quota, limit, fair share, allocated and requested. Quota and limit
come from the spec; allocated and requested from the status the queue status controller writes (a
queue's own pods and all its descendants'); fair share from the status the scheduler writes
(`status.fairShare`: "-" until it has, or on a cluster with KAI's own Queue CRD, which does not keep it).
On a cluster with AccountedResources, a second table gives each queue's use of each against its limit
(`status.accountedResources`, which the scheduler writes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kai_scheduler.api.objects import is_unlimited
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.k8s.runtime.client import QUEUES, JsonObject
from kai_scheduler.kubectl_plugin.amounts import RESOURCES, resource_list, show, spec_amount
from kai_scheduler.kubectl_plugin.api_client import Cluster
from kai_scheduler.kubectl_plugin.table import render
from kai_scheduler.model.accounted import shown

COLUMNS = ("QUOTA", "LIMIT", "FAIR SHARE", "ALLOCATED", "REQUESTED")


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    parent: str | None
    depth: int
    quota: dict[str, float | None]  # None: unlimited
    limit: dict[str, float | None]
    fair_share: dict[str, float]  # empty when the scheduler has not written it
    allocated: dict[str, float]
    requested: dict[str, float]
    # AccountedResource name -> (used, limit; None: unlimited), from the status the scheduler writes.
    accounted: dict[str, tuple[float, float | None]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        def resources(field: str) -> dict[str, float | None]:
            values: dict[str, Any] = getattr(self, field)
            return {resource: values.get(resource) for resource in RESOURCES}

        return {
            "name": self.name,
            "parent": self.parent,
            **{
                key: resources(field)
                for key, field in (
                    ("quota", "quota"),
                    ("limit", "limit"),
                    ("fairShare", "fair_share"),
                    ("allocated", "allocated"),
                    ("requested", "requested"),
                )
            },
            **(
                {
                    "accountedResources": {
                        n: {"used": u, "limit": lim} for n, (u, lim) in self.accounted.items()
                    }
                }
                if self.accounted
                else {}
            ),
        }


async def fetch(cluster: Cluster) -> list[JsonObject]:
    return await cluster.list(QUEUES)


def queue_tree(queues: list[JsonObject]) -> list[QueueRow]:
    """Depth first: each queue followed by its children by name; a queue whose parent does not exist is
    a root (the scheduler makes its pods wait: `why` says so)."""
    by_name = {str(q["metadata"]["name"]): q for q in queues}
    children: dict[str | None, list[str]] = {}
    for name, queue in by_name.items():
        parent = (queue.get("spec") or {}).get("parentQueue") or None
        children.setdefault(parent if parent in by_name and parent != name else None, []).append(name)
    rows: list[QueueRow] = []

    def visit(name: str, depth: int) -> None:
        queue = by_name[name]
        status = queue.get("status") or {}
        rows.append(
            QueueRow(
                name=name,
                parent=(queue.get("spec") or {}).get("parentQueue") or None,
                depth=depth,
                quota={r: spec_amount(queue, r, "quota") for r in RESOURCES},
                limit={r: spec_amount(queue, r, "limit") for r in RESOURCES},
                fair_share=resource_list(status.get("fairShare")),
                allocated=resource_list(status.get("allocated")),
                requested=resource_list(status.get("requested")),
                accounted=_accounted(status.get("accountedResources")),
            )
        )
        for child in sorted(children.get(name, [])):
            if len(rows) <= len(by_name):  # a parent cycle cannot recurse forever
                visit(child, depth + 1)

    for root in sorted(children.get(None, [])):
        visit(root, 0)
    return rows


def _accounted(entries: Any) -> dict[str, tuple[float, float | None]]:
    """`status.accountedResources` as numbers; unreadable entries are left out."""
    out: dict[str, tuple[float, float | None]] = {}
    if not isinstance(entries, Mapping):
        return out
    for name, entry in entries.items():
        try:
            used = float(parse_quantity(entry["used"]))
            limit = float(parse_quantity(entry["limit"]))
        except (KeyError, TypeError, ValueError):
            continue
        out[str(name)] = (used, None if is_unlimited(limit) else limit)
    return out


def accounted_table(rows: list[QueueRow]) -> str:
    """Each queue's use of each AccountedResource against its limit; empty when no queue has any."""
    body = [
        ("  " * row.depth + row.name, name, shown(used), "unlimited" if limit is None else shown(limit))
        for row in rows
        for name, (used, limit) in sorted(row.accounted.items())
    ]
    return render(("QUEUE", "ACCOUNTED RESOURCE", "USED", "LIMIT"), body) if body else ""


def table(rows: list[QueueRow], resource: str) -> str:
    headers = ("QUEUE", *(f"{resource.upper()} {column}" for column in COLUMNS))
    body = [
        (
            "  " * row.depth + row.name,
            show(resource, row.quota[resource]),
            show(resource, row.limit[resource]),
            show(resource, row.fair_share[resource]) if resource in row.fair_share else "-",
            show(resource, row.allocated.get(resource, 0.0)),
            show(resource, row.requested.get(resource, 0.0)),
        )
        for row in rows
    ]
    return render(headers, body)


__all__ = ["QueueRow", "accounted_table", "fetch", "queue_tree", "table"]
