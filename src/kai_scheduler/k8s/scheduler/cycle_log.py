"""What the scheduler says about a cycle in its log: at info, one line for a cycle that decided something
(its binds, pipelines and evictions, and the pod groups that wait, by reason); at debug, one line per
decision with its reason. Both carry structured fields for `--log-format json`."""

from __future__ import annotations

import logging
from collections import Counter

from kai_scheduler.api.reasons import code_of
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.k8s.runtime.logs import fields

_NOUNS = {
    "bind": ("bind", "binds"),
    "pipeline": ("pipeline", "pipelines"),
    "evict": ("eviction", "evictions"),
}


def log_cycle(log: logging.Logger, cycle: int, result: SessionResult) -> None:
    if not result.decisions:
        return
    counts = Counter(decision.type for decision in result.decisions)
    waiting = Counter(code_of(message) for message in result.unschedulable.values())
    done = ", ".join(
        f"{counts[kind]} {_NOUNS[kind][counts[kind] != 1]}"
        for kind in ("bind", "pipeline", "evict")
        if counts[kind]
    )
    waits = ", ".join(f"{reason} {n}" for reason, n in sorted(waiting.items()))
    line = f"{done}; {sum(waiting.values())} pod groups wait ({waits})" if waiting else done
    log.info(
        "cycle %d: %s",
        cycle,
        line,
        extra=fields(
            cycle=cycle,
            binds=counts["bind"],
            pipelines=counts["pipeline"],
            evictions=counts["evict"],
            waiting=dict(waiting),
        ),
    )
    if log.isEnabledFor(logging.DEBUG):
        for decision in result.decisions:
            log.debug(
                "cycle %d: %s %s %s on %s: %s",
                cycle,
                decision.action,
                decision.type,
                decision.pod,
                decision.node,
                decision.reason,
                extra=fields(
                    cycle=cycle,
                    action=decision.action,
                    decision=decision.type,
                    pod=decision.pod,
                    node=decision.node,
                    **({"for": decision.for_job} if decision.for_job else {}),
                ),
            )
