"""`kubectl kai fairshare QUEUE` and `kubectl kai usage QUEUE` (issue #25, KAI issues #2056-#2058): why a
queue has the fair share it has, and who holds its resources. Both come from the scheduler itself, its
plugin server's answers about its last cycle (`scheduler_client.py`), not from a re-computation here:
`fairshare` is the division that cycle recorded as it took it (rendered by `model/fair_share_text.py`),
`usage` the cycle's state as the scheduler accounts it (`controlplane/queue_usage.py`)."""

from __future__ import annotations

from typing import Any

from kai_scheduler.kubectl_plugin.amounts import RESOURCES, show
from kai_scheduler.kubectl_plugin.api_client import PluginError
from kai_scheduler.kubectl_plugin.scheduler_client import get_json
from kai_scheduler.kubectl_plugin.table import render
from kai_scheduler.model.fair_share_record import from_json
from kai_scheduler.model.fair_share_text import explanation_text

FAIR_SHARE_PATH = "/get-fair-share"
QUEUE_USAGE_PATH = "/get-queue-usage"


def fair_share(scheduler: str, queue: str) -> dict[str, Any]:
    document: dict[str, Any] = get_json(scheduler, FAIR_SHARE_PATH, queue=queue)
    return document


def fair_share_text(document: dict[str, Any]) -> str:
    try:
        record = from_json(document)
        return explanation_text(record, str(document["queue"]))
    except (KeyError, TypeError, ValueError) as error:
        raise PluginError(
            f"the scheduler's fair-share answer is not one this plugin reads ({error})"
        ) from None


def usage(scheduler: str, queue: str) -> dict[str, Any]:
    document: dict[str, Any] = get_json(scheduler, QUEUE_USAGE_PATH, queue=queue)
    return document


def usage_text(document: dict[str, Any]) -> str:
    """The queue's numbers, its pod groups in reclaim order, and the sums per user."""

    def amounts(values: dict[str, float]) -> list[str]:
        return [show(resource, values.get(resource, 0.0)) for resource in RESOURCES]

    queue = document["queue"]
    head = [
        f"Queue {queue} in scheduling cycle {document['cycle']} "
        f"(leaf queues: {', '.join(document['leafQueues'])}):",
        *(
            f"  {resource}: quota {show(resource, document['quota'][resource])}, fair share "
            f"{show(resource, document['fairShare'][resource])}, allocated "
            f"{show(resource, document['allocated'][resource])}"
            for resource in RESOURCES
        ),
    ]
    groups = document["podGroups"]
    if not groups:
        return "\n".join([*head, "No pod group holds any of its resources."]) + "\n"
    rows = [
        (
            "-" if group["reclaimOrder"] is None else str(group["reclaimOrder"]),
            group["podGroup"],
            group["queue"],
            group["user"] or "-",
            str(group["priority"]),
            str(group["pods"]),
            *amounts(group["allocated"]),
            group["standing"],
        )
        for group in groups
    ]
    headers = (
        "RECLAIM",
        "POD GROUP",
        "QUEUE",
        "USER",
        "PRIORITY",
        "PODS",
        "GPU",
        "CPU",
        "MEMORY",
        "STANDING",
    )
    users = [(entry["user"], *amounts(entry["allocated"])) for entry in document["users"]]
    return "\n".join(
        [
            *head,
            "",
            "Held by, in the order reclaim would take them (1 first: while the queue holds more than its",
            "fair share, or more than its quota when the reclaiming queue is within its own):",
            render(headers, rows),
            "By user:",
            render(("USER", "GPU", "CPU", "MEMORY"), users),
        ]
    )


__all__ = ["fair_share", "fair_share_text", "usage", "usage_text"]
