"""KAI's `scenarioSearchBudgets` (v0.16+): how long the victim search may look for scenarios, per action,
per pending job and per generator. The section of the configuration document and of a SchedulingShard's
spec is the same:

```yaml
scenarioSearchBudgets:
  maxActionSearchDuration: {default: 5m, reclaim: 3s}     # keys: default, reclaim, preempt, consolidation
  maxJobSearchDuration: 4m
  minJobSearchDuration: 0s                                 # below maxJobSearchDuration unless that is 0s
  maxGeneratorSearchDuration: {default: 2m, NodeLocalGreedy: 30s, MultiNodeGang: 2m}
```

Durations are Go's (`75ms`, `2m`, `1h30m`); 0s on a maximum means no limit. Keys left out take KAI's
defaults (its `DefaultScenarioSearchBudgets`, which both its operator and its scheduler apply), so a
`ScenarioSearchBudgets` always holds the `default` key of both maps and both named generators.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kai_scheduler.api.durations import go_duration_text
from kai_scheduler.framework.config_values import ConfigError, go_duration

DEFAULT_KEY: Final = "default"
NODE_LOCAL_GREEDY: Final = "NodeLocalGreedy"
MULTI_NODE_GANG: Final = "MultiNodeGang"
# The keys `maxActionSearchDuration` accepts, in the order KAI's message lists them.
ACTION_KEYS: Final = (DEFAULT_KEY, "reclaim", "preempt", "consolidation")
SECTION_KEYS: Final = (
    "maxActionSearchDuration",
    "maxJobSearchDuration",
    "minJobSearchDuration",
    "maxGeneratorSearchDuration",
)

_DEFAULT_ACTION: Final = 300.0
_DEFAULT_JOB: Final = 240.0
_DEFAULT_MIN_JOB: Final = 0.0
_DEFAULT_GENERATORS: Final = {DEFAULT_KEY: 120.0, NODE_LOCAL_GREEDY: 30.0, MULTI_NODE_GANG: 120.0}


@dataclass(frozen=True, slots=True)
class ScenarioSearchBudgets:
    """The budgets in seconds (0 on a maximum: no limit), KAI's defaults filled in."""

    max_action: dict[str, float] = field(default_factory=lambda: {DEFAULT_KEY: _DEFAULT_ACTION})
    max_job: float = _DEFAULT_JOB
    min_job: float = _DEFAULT_MIN_JOB
    max_generator: dict[str, float] = field(default_factory=lambda: dict(_DEFAULT_GENERATORS))

    def action_limit(self, action: str) -> float:
        """The budget of one action's whole search (its own key, else `default`)."""
        return self.max_action.get(action, self.max_action[DEFAULT_KEY])

    def generator_limit(self, generator: str) -> float:
        """The budget of one generator's attempt (its own key, else `default`)."""
        return self.max_generator.get(generator, self.max_generator[DEFAULT_KEY])


def parse_search_budgets(value: Any, where: str = "scenarioSearchBudgets") -> ScenarioSearchBudgets:
    """The section as KAI's operator validates it (`validateScenarioSearchBudgets`), defaults filled in;
    errors name `where` and the key."""
    if value is None:
        return ScenarioSearchBudgets()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping with {', '.join(SECTION_KEYS)}")
    unknown = sorted(str(k) for k in value if k not in SECTION_KEYS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(SECTION_KEYS)})")
    actions = _duration_map(value, "maxActionSearchDuration", where)
    for key in actions:
        if key not in ACTION_KEYS:
            raise ConfigError(
                f"{where}.maxActionSearchDuration contains invalid action key {key!r}; "
                f"valid action keys: {', '.join(ACTION_KEYS)}"
            )
    generators = _duration_map(value, "maxGeneratorSearchDuration", where)
    max_job = _duration(value, "maxJobSearchDuration", where)
    min_job = _duration(value, "minJobSearchDuration", where)
    # KAI compares the two only when both are given; a maximum of 0s is no limit, so any minimum is below it.
    if max_job is not None and min_job is not None and max_job != 0 and min_job >= max_job:
        raise ConfigError(
            f"{where}: minJobSearchDuration ({go_duration_text(min_job)}) must be less than "
            f"maxJobSearchDuration ({go_duration_text(max_job)})"
        )
    return ScenarioSearchBudgets(
        max_action={DEFAULT_KEY: _DEFAULT_ACTION, **actions},
        max_job=_DEFAULT_JOB if max_job is None else max_job,
        min_job=_DEFAULT_MIN_JOB if min_job is None else min_job,
        max_generator={**_DEFAULT_GENERATORS, **generators},
    )


def search_budgets_document(budgets: ScenarioSearchBudgets) -> dict[str, Any]:
    """The section as `parse_search_budgets` reads it back."""
    return {
        "maxActionSearchDuration": {k: go_duration_text(v) for k, v in budgets.max_action.items()},
        "maxJobSearchDuration": go_duration_text(budgets.max_job),
        "minJobSearchDuration": go_duration_text(budgets.min_job),
        "maxGeneratorSearchDuration": {k: go_duration_text(v) for k, v in budgets.max_generator.items()},
    }


def _duration_map(section: Mapping[str, Any], key: str, where: str) -> dict[str, float]:
    value = section.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}.{key}: expected a mapping of name to duration")
    return {str(name): go_duration(text, f"{where}.{key}[{str(name)!r}]") for name, text in value.items()}


def _duration(section: Mapping[str, Any], key: str, where: str) -> float | None:
    value = section.get(key)
    return None if value is None else go_duration(value, f"{where}.{key}")
