"""A running scheduler's shard settings from its SchedulingShard and kai-config (`shard_objects.py`), fed
by hand through its informers' caches: the object wins over --config while it exists, a bad one leaves the
last good settings, a node pool fixed at start stays; and which shard `run --shard` names."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kai_scheduler import cli
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.k8s.runtime.client import WatchEvent
from kai_scheduler.k8s.scheduler.shard_objects import ShardObjects, ShardSettings
from kai_scheduler.model.partition import Partition

POOL = "kai.scheduler/node-pool"
LOGGER = "kai_scheduler.k8s.scheduler.shard_objects"


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The shard objects' log lines (not those of other tests' threads still winding down)."""
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


def shard(name: str, version: str, **spec: Any) -> dict[str, Any]:
    metadata = {"name": name, "resourceVersion": version}
    return {"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard", "metadata": metadata, "spec": spec}


def objects(configured: bool = True) -> ShardObjects:
    fallback = ShardSettings(parse_config({"actions": "allocate"}), Partition(POOL))
    return ShardObjects(client=None, name="gpu", fallback=fallback, configured=configured)  # type: ignore[arg-type]


def nodeplacement(config: SchedulerConfig) -> dict[str, str]:
    (found,) = [p for tier in config.tiers for p in tier if p.name == "nodeplacement"]
    return dict(found.arguments)


def test_the_object_wins_over_config_while_it_exists(caplog: pytest.LogCaptureFixture) -> None:
    watched = objects()
    assert watched.changed() is None  # no object: --config's settings, already running
    watched.shards.apply_event(WatchEvent("ADDED", shard("gpu", "1", partitionLabelValue="a")))
    config = watched.changed()
    assert config is not None and config.actions[0] == "allocate" and "reclaim" in config.actions
    assert nodeplacement(config) == {"gpu": "binpack", "cpu": "binpack"}
    assert watched.current.partition == Partition(POOL, "a") and watched.from_object
    assert watched.changed() is None  # nothing new
    spread = {"gpu": "spread", "cpu": "spread"}
    event = WatchEvent("MODIFIED", shard("gpu", "2", partitionLabelValue="a", placementStrategy=spread))
    watched.shards.apply_event(event)
    config = watched.changed()
    assert config is not None and nodeplacement(config) == spread
    watched.shards.apply_event(WatchEvent("DELETED", shard("gpu", "2")))
    with caplog.at_level(logging.INFO, LOGGER):
        assert watched.changed() == watched.fallback.config
    assert "SchedulingShard gpu: deleted; --config's configuration applies" in said(caplog)


def test_a_bad_object_is_one_line_and_the_last_good_settings_stay(caplog: pytest.LogCaptureFixture) -> None:
    watched = objects()
    watched.shards.apply_event(WatchEvent("ADDED", shard("gpu", "1")))
    good = watched.changed()
    watched.shards.apply_event(WatchEvent("MODIFIED", shard("gpu", "2", queueDepthPerAction={"nope": 1})))
    with caplog.at_level(logging.WARNING, LOGGER):
        assert watched.changed() is None
    (line,) = said(caplog)
    assert line.startswith("SchedulingShard gpu: spec.queueDepthPerAction")
    assert line.endswith("; the scheduler keeps its last good configuration")
    assert watched.current.config == good


def test_the_node_pool_the_scheduler_started_on_stays_until_a_restart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watched = objects()
    watched.shards.apply_event(WatchEvent("ADDED", shard("gpu", "1", partitionLabelValue="a")))
    watched.changed()
    watched.started = True
    watched.shards.apply_event(WatchEvent("MODIFIED", shard("gpu", "2", partitionLabelValue="b")))
    with caplog.at_level(logging.WARNING, LOGGER):
        watched.changed()
    assert watched.current.partition == Partition(POOL, "a")
    assert said(caplog) == [
        f"SchedulingShard gpu: its node pool is now {POOL}=b (was {POOL}=a); the scheduler serves the new "
        "one after a restart"
    ]


def _run(*args: str) -> Any:
    return cli.run_options(
        cli.parser().parse_args(["run", "--component=scheduler", "--metrics-port=0", *args])
    )


def test_run_shard_names_an_object_when_the_configuration_lists_no_shards(tmp_path: Any) -> None:
    assert (_run().shard, _run().shard_configured) == ("default", True)
    assert (_run("--shard=default").shard, _run("--shard=default").shard_configured) == ("default", True)
    options = _run("--shard=gpu-a")
    assert (options.shard, options.shard_configured, options.partition) == ("gpu-a", False, Partition(POOL))
    with pytest.raises(cli.UsageError, match="--shard: expected a lowercase DNS label"):
        _run("--shard=GPU")
    config = tmp_path / "config.yaml"
    config.write_text("shards: [{name: a, partitionLabelValue: a}]\n")
    listed = _run(f"--config={config}", "--shard=a")
    assert (listed.shard, listed.shard_configured, listed.partition) == ("a", True, Partition(POOL, "a"))


def test_kai_config_alone_gives_the_node_pool_label() -> None:
    """No SchedulingShard: --config's configuration, with kai-config's node-pool label (as simulate)."""
    watched = objects()
    config = {"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"}}
    config["spec"] = {"global": {"nodePoolLabelKey": "example.com/pool"}}
    watched.configs.apply_event(
        WatchEvent("ADDED", {**config, "metadata": {"name": "kai-config", "resourceVersion": "1"}})
    )
    assert watched.changed() is not None
    assert watched.current.partition == Partition("example.com/pool")
    assert watched.current.config.actions == ("allocate",) and not watched.from_object
