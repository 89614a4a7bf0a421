"""`config_document`: a configuration written back in KAI's format (the plugin server's
`/get-snapshot?format=config`, for `simulate --config`) reads back as the same configuration."""

from __future__ import annotations

from typing import Any

import pytest

from kai_scheduler.framework.config import (
    SchedulerConfig,
    config_document,
    parse_config,
    with_placement_strategy,
)

EVERYTHING: dict[str, Any] = {
    "actions": "allocate, reclaim",
    "tiers": [
        {"plugins": [{"name": "proportion", "arguments": {"kValue": "2"}}, {"name": "priority"}]},
        {"plugins": [{"name": "nodeplacement", "arguments": {"gpu": "spread", "cpu": "binpack"}}]},
    ],
    "period": "0.25s",
    "evictedUnownedPods": "delete",
    "defaultStalenessGracePeriod": "-1s",
    "maxConsolidationPreemptees": 0,
    "useSchedulingSignatures": False,
    "fullHierarchyFairness": False,
    "allowConsolidatingReclaim": False,
    "queueDepthPerAction": {"allocate": 3},
    "usageDBConfig": {
        "clientType": "fake",
        "connectionString": "http://prometheus:9090",
        "usageParams": {
            "windowSize": "2h",
            "windowType": "tumbling",
            "halfLifePeriod": "30m",
            "tumblingWindowStartTime": "2026-01-01T00:00:00Z",
            "fetchInterval": "30s",
            "stalenessPeriod": "2m",
            "waitTimeout": "0s",
            "extraParams": {
                "queryResolution": "15s",
                "usageQueryTimeout": "2s",
                "gpuAllocationMetric": "max by (queue_name) (kai_queue_allocated_gpus)",
            },
        },
    },
}


@pytest.mark.parametrize(
    "config",
    [SchedulerConfig(), with_placement_strategy(SchedulerConfig(), "spread"), parse_config(EVERYTHING)],
    ids=["default", "spread", "every-option"],
)
def test_a_configuration_reads_back_unchanged(config: SchedulerConfig) -> None:
    assert parse_config(config_document(config)) == config


def test_options_at_their_defaults_are_left_out() -> None:
    assert set(config_document(SchedulerConfig())) == {"actions", "tiers"}
    assert set(config_document(parse_config(EVERYTHING))) == set(EVERYTHING)
