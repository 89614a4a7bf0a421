"""The human summary of a simulation (`--output text`): queues, pods, why pods wait, the reservations held
and the jobs backfilled (with the `reservation` plugin), cycle timings."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table

from kai_scheduler.model.accounted import shown

_MAX_WAITING_ROWS = 25


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f}Gi"


def _num(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def render(
    document: dict[str, Any], console: Console, *, title: str, ran: dict[str, Any] | None = None
) -> None:
    """The text report; `ran` (`summary.what_ran`) ends a run that completed with what it ran."""
    summary = document["summary"]
    pods = summary["pods"]
    gpu = summary["gpu"]
    state = "steady" if summary["steady"] else "stopped before the steady state"
    if "steadySince" in summary:
        state = f"steady from {summary['steadySince']:g}s"
    console.print(f"[bold]{title}[/bold]")
    console.print(
        f"{summary['cycles']} cycles, {summary['time']:g}s simulated ({state}); "
        f"pods: {pods['Running']} running, {pods['Pending']} pending, {pods['Succeeded']} succeeded, "
        f"{pods['Failed']} failed; GPUs: {_num(gpu['allocated'])} of {_num(gpu['capacity'])} allocated"
    )
    shards = _shards_table(document)
    if shards is not None:
        console.print(shards)
    others = _other_schedulers_line(document)
    if others:
        console.print(others)
    console.print(_queues_table(document))
    accounted = _accounted_table(document)
    if accounted is not None:
        console.print(accounted)
    timeline = _timeline_table(document)
    if timeline is not None:
        console.print(timeline)
    waiting = _waiting_table(document)
    if waiting is not None:
        console.print(waiting)
    reservations = _reservations_table(document)
    if reservations is not None:
        console.print(reservations)
    if "backfilled" in document:
        console.print(_backfilled_line(document["backfilled"]))
    console.print(_decisions_line(document))
    if ran is not None:
        console.print(_ran_line(ran))
    console.print(_timings_line(document))


def _shards_table(document: dict[str, Any]) -> Table | None:
    """The scheduling shards of a partitioned run (node pools): each schedules its own nodes and queues."""
    shards = document.get("shards")
    if not shards:
        return None
    table = Table(title="Scheduling shards (node pools)", title_justify="left")
    for column in ("shard", "node pool", "nodes", "GPUs allocated", "queues"):
        table.add_column(column, justify="right" if column in ("nodes", "GPUs allocated") else "left")
    for shard in shards:
        gpu = shard["gpu"]
        table.add_row(
            shard["name"],
            shard["nodePool"],
            str(shard["nodes"]),
            f"{_num(gpu['allocated'])} of {_num(gpu['capacity'])}",
            ", ".join(shard["queues"]),
        )
    return table


def _other_schedulers_line(document: dict[str, Any]) -> str | None:
    """How many pods the input leaves to other schedulers, by scheduler, and how many of them wait unbound
    (the simulation never places them): none should vanish without a word."""
    others = document.get("otherSchedulerPods") or []
    if not others:
        return None
    names = Counter(pod["schedulerName"] for pod in others)
    unbound = sum(1 for pod in others if pod["node"] is None)
    by_name = ", ".join(f"{name} {count}" for name, count in sorted(names.items()))
    return (
        f"left to other schedulers: {len(others)} pod{'s' if len(others) != 1 else ''} ({by_name}); "
        f"{unbound} unbound (never placed here), {len(others) - unbound} on nodes (holding their resources)"
    )


def _queues_table(document: dict[str, Any]) -> Table:
    sharded = "shards" in document
    table = Table(title="Queues", title_justify="left")
    for column in (
        "queue",
        *(("shard",) if sharded else ()),
        "parent",
        "GPU fair share",
        "GPU allocated",
        "GPU requested",
        "CPU alloc/fair",
        "memory alloc/fair",
    ):
        table.add_column(column, justify="left" if column in ("queue", "shard", "parent") else "right")
    for queue in document["queues"]:
        fair, allocated, requested = queue["fairShare"], queue["allocated"], queue["requested"]
        table.add_row(
            queue["name"],
            *((queue["shard"] or "(none)",) if sharded else ()),
            queue["parent"] or "",
            _num(fair["gpu"]),
            _num(allocated["gpu"]),
            _num(requested["gpu"]),
            f"{_num(allocated['cpu'])}/{_num(fair['cpu'])}",
            f"{_gib(allocated['memory'])}/{_gib(fair['memory'])}",
        )
    return table


def _accounted_table(document: dict[str, Any]) -> Table | None:
    """Each queue's use of each AccountedResource against its limit (only where there are any)."""
    rows = [
        (queue["name"], resource, amounts)
        for queue in document["queues"]
        for resource, amounts in (queue.get("accountedResources") or {}).items()
    ]
    if not rows:
        return None
    table = Table(title="Accounted resources (used / limit)", title_justify="left")
    for column in ("queue", "resource", "used", "limit"):
        table.add_column(column, justify="left" if column in ("queue", "resource") else "right")
    for queue, resource, amounts in rows:
        limit = amounts["limit"]
        table.add_row(queue, resource, shown(amounts["used"]), "unlimited" if limit < 0 else shown(limit))
    return table


_MAX_TIMELINE_ROWS = 20
_NAMES_SHOWN = 3  # pod names a timeline line shows before "(+N more)"


def _timeline_table(document: dict[str, Any]) -> Table | None:
    """What each cycle that acted did, in a line: the story of the run."""
    by_cycle: dict[int, list[dict[str, Any]]] = {}
    for decision in document["decisions"]:
        by_cycle.setdefault(decision["cycle"], []).append(decision)
    if not by_cycle:
        return None
    table = Table(title="Timeline (cycles that decided something)", title_justify="left")
    table.add_column("cycle", justify="right")
    table.add_column("time", justify="right")
    table.add_column("what happened")
    for cycle in sorted(by_cycle)[:_MAX_TIMELINE_ROWS]:
        decisions = by_cycle[cycle]
        table.add_row(str(cycle), f"{decisions[0]['time']:g}s", _story(decisions))
    if len(by_cycle) > _MAX_TIMELINE_ROWS:
        table.caption = f"... and {len(by_cycle) - _MAX_TIMELINE_ROWS} more cycles (see --output json)"
    return table


def _story(decisions: list[dict[str, Any]]) -> str:
    """One cycle's decisions in words, one line per action and pod group it acted for: "reclaim for
    speech/asr: evicted vision/train-3, vision/train-4; pipelined speech/asr-0"."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for decision in decisions:
        groups.setdefault((decision["action"], decision.get("for", "")), []).append(decision)
    lines = []
    for (action, for_job), group in groups.items():
        evicted = [d["pod"] for d in group if d["type"] == "evict"]
        placed = [d for d in group if d["type"] != "evict"]
        moved = [d["pod"] for d in placed if d["pod"] in evicted]
        stopped = [pod for pod in evicted if pod not in moved]
        parts = [f"evicted {_names(stopped)}"] if stopped else []
        for verb, kind in (("bound", "bind"), ("pipelined", "pipeline")):
            pods = [d["pod"] for d in placed if d["type"] == kind and d["pod"] not in moved]
            if pods:
                parts.append(f"{verb} {_names(pods)}")
        if moved:
            parts.append(f"moved {_names(moved)}")
        head = f"{action} for {for_job}" if for_job else action
        lines.append(f"{head}: " + "; ".join(parts))
    return "\n".join(lines)


def _names(pods: list[str]) -> str:
    """At most _NAMES_SHOWN pod names, then how many more."""
    shown = ", ".join(pods[:_NAMES_SHOWN])
    return shown if len(pods) <= _NAMES_SHOWN else f"{shown} (+{len(pods) - _NAMES_SHOWN} more)"


def _waiting_table(document: dict[str, Any]) -> Table | None:
    """Pod groups that wait, one row per queue, pending count and reason: jobs of one shape that wait
    for the same reason read as one row with their count, not as near-identical rows."""
    waiting = [g for g in document["podGroups"] if g["pending"]]
    if not waiting:
        return None
    estimated = any("estimatedStart" in g for g in waiting)
    rows: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for group in waiting:
        reason = group["unschedulableReason"] or "not considered yet"
        rows.setdefault((group["queue"], group["pending"], reason), []).append(group)
    table = Table(title=f"Waiting pod groups ({len(waiting)})", title_justify="left")
    table.add_column("pod groups")
    table.add_column("queue")
    table.add_column("pending each", justify="right")
    if estimated:
        table.add_column("starts (estimate)", justify="right")
    table.add_column("why they wait")
    for (queue, pending, reason), groups in list(rows.items())[:_MAX_WAITING_ROWS]:
        names = [f"{g['namespace']}/{g['name']}" for g in groups]
        label = names[0] if len(names) == 1 else f"{len(names)}: {_names(names)}"
        starts = (_starts(groups),) if estimated else ()
        table.add_row(label, queue, str(pending), *starts, reason)
    if len(rows) > _MAX_WAITING_ROWS:
        table.caption = f"... and {len(rows) - _MAX_WAITING_ROWS} more rows (see --output json)"
    return table


def _reservations_table(document: dict[str, Any]) -> Table | None:
    """The capacity held, as the run leaves it, for pod groups that cannot start yet (the `reservation`
    plugin): where and when each is expected to start."""
    held = [g for g in document["podGroups"] if g.get("reservation")]
    if not held:
        return None
    table = Table(title=f"Reservations at the end of the run ({len(held)})", title_justify="left")
    for column in ("pod group", "queue", "nodes", "GPUs", "expected start"):
        table.add_column(column, justify="right" if column in ("GPUs", "expected start") else "left")
    for group in held[:_MAX_WAITING_ROWS]:
        reservation = group["reservation"]
        table.add_row(
            f"{group['namespace']}/{group['name']}",
            group["queue"],
            _names(reservation["nodes"]),
            _num(reservation["gpus"]),
            f"{reservation['expectedStart']:g}s",
        )
    if len(held) > _MAX_WAITING_ROWS:
        table.caption = f"... and {len(held) - _MAX_WAITING_ROWS} more (see --output json)"
    return table


def _backfilled_line(backfilled: list[dict[str, Any]]) -> str:
    """The pod groups placed on reserved capacity because they were expected to end before it was due,
    with when."""
    if not backfilled:
        return "backfilled onto reserved capacity: none"
    shown = ", ".join(f"{b['podGroup']} at {b['time']:g}s" for b in backfilled[:_NAMES_SHOWN])
    more = f" (+{len(backfilled) - _NAMES_SHOWN} more)" if len(backfilled) > _NAMES_SHOWN else ""
    count = f"{len(backfilled)} pod group{'s' if len(backfilled) != 1 else ''}"
    return f"backfilled onto reserved capacity: {count}: {shown}{more}"


def _starts(groups: list[dict[str, Any]]) -> str:
    """When a row's pod groups start: the estimate (a range for several), "unknown" where there is none,
    and "started at" for groups that run and only wait for pods above their minMember."""
    started = [g for g in groups if g["running"] >= g["minMember"] and g.get("estimatedStart") is not None]
    if len(started) == len(groups):
        return "started at " + _span([g["estimatedStart"] for g in started])
    times = [g["estimatedStart"] for g in groups if g not in started and g.get("estimatedStart") is not None]
    unknown = len(groups) - len(started) - len(times)
    parts = [_span(times)] if times else []
    if unknown:
        parts.append("unknown" if not parts else f"{unknown} unknown")
    return ", ".join(parts)


def _span(times: list[float]) -> str:
    low, high = min(times), max(times)
    return f"{low:g}s" if low == high else f"{low:g}-{high:g}s"


def _ran_line(ran: dict[str, Any]) -> str:
    waited = (
        f"waited {ran['waitMean']:.0f}s on average, {ran['waitLongest']:.0f}s at most"
        if ran["waitMean"] is not None
        else "none waited"
    )
    evictions = ran["evictions"]
    return (
        f"what ran: {ran['podGroups']} pod groups ({waited}); {evictions} "
        f"{'eviction' if evictions == 1 else 'evictions'}; {ran['gpuHours']:.1f} GPU-hours used"
    )


def _decisions_line(document: dict[str, Any]) -> str:
    counts = Counter((d["action"], d["type"]) for d in document["decisions"])
    if not counts and not document.get("ungates"):
        return "decisions: none"
    parts = [f"{n} {kind} ({action})" for (action, kind), n in sorted(counts.items())]
    ungates = document.get("ungates") or []
    if ungates:  # queue admission gating: the gates the cycles removed
        pods = sum(len(u["pods"]) for u in ungates)
        parts.append(f"{pods} pods of {len(ungates)} pod groups ungated (ungate)")
    return "decisions: " + ", ".join(parts)


def _timings_line(document: dict[str, Any]) -> str:
    seconds = document["cycleSeconds"]
    if not seconds:
        return "cycle timings: no cycles"
    ms = [s * 1000 for s in seconds]
    return (
        f"cycle timings: mean {statistics.fmean(ms):.1f}ms, median {statistics.median(ms):.1f}ms, "
        f"max {max(ms):.1f}ms over {len(ms)} cycles"
    )
