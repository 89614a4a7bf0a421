"""A SchedulingShard's `args`: KAI's scheduler command-line flags, as configuration keys here.

KAI's operator passes each `args` entry that names a flag of its scheduler (`cmd/scheduler/app/options`,
v0.17.0) as `--<flag>=<value>`, after the flags it generates, so an entry overrides those too. Here a flag
that sets something this scheduler has becomes that configuration key; one that configures what this
scheduler does not have (logging, profiling, API client rates, ...) is a notice naming it; a name that is no
flag of KAI's scheduler is an error (KAI drops it without a word, which hides a typo).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kai_scheduler.api.durations import parse_go_duration
from kai_scheduler.api.strict import did_you_mean
from kai_scheduler.framework.config_values import ConfigError, duration_text

# Flags that place the shard rather than configure its cycle: the caller reads them.
PARTITION_FLAG: Final = "partition-label-value"
NODE_POOL_FLAG: Final = "nodepool-label-key"

# Flags of KAI's scheduler with nothing to set here: the process, its API client, logging, metrics,
# profiling, and labels this scheduler does not read.
_WITHOUT_COUNTERPART: Final = frozenset(
    {
        "burst",
        "cpu-worker-node-label-key",
        "detailed-fit-errors",
        "enable-profiler",
        "feature-gates",
        "gpu-worker-node-label-key",
        "leader-elect",
        "listen-address",
        "log-json",
        "metrics-namespace",
        "mig-worker-node-label-key",
        "namespace",
        "num-of-status-recording-workers",
        "plugin-server-port",
        "profiler-port",
        "pyroscope-address",
        "pyroscope-block-profiler-rate",
        "pyroscope-mutex-profiler-rate",
        "qps",
        "queue-label-key",
        "resource-reservation-app-label",
        "restrict-node-scheduling",
        "schedule-csi-storage",
        "scheduler-conf",
        "scheduler-name",
        "update-pod-eviction-condition",
        "v",
        "version",
    }
)

_GO_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_GO_INT: Final = re.compile(r"[+-]?\d+", re.ASCII)


def _go_bool(text: str) -> bool:
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _go_int(text: str) -> int:
    if not _GO_INT.fullmatch(text):
        raise ValueError(f"expected an integer, got {text!r}")
    return int(text)


def _go_duration(text: str) -> str:
    return duration_text(parse_go_duration(text))


@dataclass(frozen=True, slots=True)
class _Flag:
    key: str  # the configuration key it sets
    value: Callable[[str], Any]


_WITH_COUNTERPART: Final = {
    "default-staleness-grace-period": _Flag("defaultStalenessGracePeriod", _go_duration),
    "stuck-in-releasing-threshold": _Flag("stuckInReleasingThreshold", _go_duration),
    "max-consolidation-preemptees": _Flag("maxConsolidationPreemptees", _go_int),
    "allow-consolidating-reclaim": _Flag("allowConsolidatingReclaim", _go_bool),
    "full-hierarchy-fairness": _Flag("fullHierarchyFairness", _go_bool),
    "use-scheduling-signatures": _Flag("useSchedulingSignatures", _go_bool),
    "schedule-period": _Flag("period", _go_duration),
}
KAI_FLAGS: Final = frozenset(_WITH_COUNTERPART) | _WITHOUT_COUNTERPART | {PARTITION_FLAG, NODE_POOL_FLAG}


@dataclass(frozen=True, slots=True)
class ShardFlags:
    """What a shard's `args` say: configuration keys, the two placing flags when given, and notices."""

    keys: dict[str, Any]
    partition_label_value: str | None
    node_pool_label_key: str | None
    notices: tuple[str, ...]


def read_flags(args: Any, where: str) -> ShardFlags:
    """`args` (flag name -> value, as strings) read; errors and notices name `where` (`SchedulingShard x:
    spec.args`) and the flag."""
    if args is None:
        return ShardFlags({}, None, None, ())
    if not isinstance(args, Mapping):
        raise ConfigError(f"{where}: expected a mapping of scheduler flag to value")
    keys: dict[str, Any] = {}
    notices: list[str] = []
    for name, text in args.items():
        name = str(name)
        if name not in KAI_FLAGS:
            close = did_you_mean(name, KAI_FLAGS)
            hint = f" (did you mean {close}?)" if close else ""
            raise ConfigError(f"{where}.{name}: not a flag of KAI's scheduler{hint}")
        if not isinstance(text, str):
            raise ConfigError(f'{where}.{name}: expected a string, got {text!r} (quote it: "{text}")')
        flag = _WITH_COUNTERPART.get(name)
        if flag is not None:
            try:
                keys[flag.key] = flag.value(text)
            except ValueError as error:
                raise ConfigError(f"{where}.{name}: {error}") from None
        elif name in _WITHOUT_COUNTERPART:
            notices.append(f"{where}.{name}: KAI's scheduler flag --{name} has no counterpart here; ignored")
    return ShardFlags(
        keys,
        _text(args.get(PARTITION_FLAG)),
        _text(args.get(NODE_POOL_FLAG)),
        tuple(notices),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
