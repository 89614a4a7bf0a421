"""The scheduler configuration's `queueAdmissionGating` section: KAI's design puts the switch in its Config
CR (`spec.global.queueAdmissionGating`) and has the operator fan it out to the webhook and the scheduler;
here the scheduler reads the same two keys from its own configuration.

```yaml
queueAdmissionGating:
  enabled: true            # the master switch (default off); queues opt in with spec.admissionGating
  reservationTimeout: 10m  # how long an admitted pod that still waits holds its queue's quota
```

Switched on, the `ungate` action runs last in every cycle (appended to `actions` when not named there).
Switched off, the scheduler removes its gate from every pod that still carries it (design: "feature
disabled with gated pods present"), so a rollback needs no one to clean up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kai_scheduler.framework.config_values import ConfigError, duration, duration_text

UNGATE_ACTION: Final = "ungate"
_KEYS: Final = ("enabled", "reservationTimeout")
# The design names the timeout without a default; ten minutes covers a cloud node's provisioning.
DEFAULT_RESERVATION_TIMEOUT: Final = 600.0


@dataclass(frozen=True, slots=True)
class AdmissionGating:
    enabled: bool = False
    reservation_timeout: float = DEFAULT_RESERVATION_TIMEOUT


def parse_admission_gating(value: Any) -> AdmissionGating:
    if value is None:
        return AdmissionGating()
    where = "queueAdmissionGating"
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping with enabled and reservationTimeout")
    unknown = sorted(str(k) for k in value if k not in _KEYS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(_KEYS)})")
    enabled = value.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}.enabled: expected true or false, got {enabled!r}")
    timeout = duration(value, "reservationTimeout", DEFAULT_RESERVATION_TIMEOUT, where=where)
    if timeout <= 0:
        raise ConfigError(
            f"{where}.reservationTimeout: must be positive, got {value['reservationTimeout']!r}"
        )
    return AdmissionGating(enabled, timeout)


def admission_gating_document(gating: AdmissionGating) -> dict[str, Any]:
    document: dict[str, Any] = {"enabled": gating.enabled}
    if gating.reservation_timeout != DEFAULT_RESERVATION_TIMEOUT:
        document["reservationTimeout"] = duration_text(gating.reservation_timeout)
    return document


def with_ungate_last(actions: tuple[str, ...], gating: AdmissionGating) -> tuple[str, ...]:
    """The actions a cycle runs: switched on, `ungate` last (as KAI's operator appends it), wherever the
    document put it, so that it sees the end of the cycle's allocations and evictions."""
    if not gating.enabled:
        return actions
    return (*(a for a in actions if a != UNGATE_ACTION), UNGATE_ACTION)
