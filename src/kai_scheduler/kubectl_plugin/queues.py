"""`kubectl kai queues`: the queue tree, each queue under its parent (indented two spaces a level),
children by name, with one resource's quota, limit, fair share, allocated and requested. Quota and limit
come from the spec; allocated and requested from the status the queue status controller writes (a
queue's own pods and all its descendants'); fair share from the status the scheduler writes
(`status.fairShare`: "-" until it has, or on a cluster with KAI's own Queue CRD, which does not keep it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kai_scheduler.k8s.runtime.client import QUEUES, JsonObject
from kai_scheduler.kubectl_plugin.amounts import RESOURCES, resource_list, show, spec_amount
from kai_scheduler.kubectl_plugin.api_client import Cluster
from kai_scheduler.kubectl_plugin.table import render

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
            )
        )
        for child in sorted(children.get(name, [])):
            if len(rows) <= len(by_name):  # a parent cycle cannot recurse forever
                visit(child, depth + 1)

    for root in sorted(children.get(None, [])):
        visit(root, 0)
    return rows


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


__all__ = ["QueueRow", "fetch", "queue_tree", "table"]
