"""The incrementally maintained cluster state (`ClusterCache`) equals one rebuilt from scratch.

Issue #8: "a test replays the same inputs through a rebuilt state and through the incrementally maintained
one and compares every decision". Every scenario, example and the demo run twice: once as the simulator
runs them (one cache kept current by deltas: arrivals, binds, pipelines, evictions, completions,
terminations), once with a cache built from scratch from the whole state before every cycle. The
decisions must be the same, cycle by cycle; and before every cycle of the incremental run, its snapshot
must equal the one built from scratch, field by field (so a difference is caught where it starts, not
cycles later when it changes a decision).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import fingerprint, node, pod, pod_group, queue
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.controlplane.driver import CycleDriver, CycleOutcome
from kai_scheduler.controlplane.shards import ShardRun
from kai_scheduler.framework.config import SchedulerConfig, config_document, parse_config
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.partition import Partition
from kai_scheduler.sim.engine import Simulation, SimulationOptions
from kai_scheduler.sim.loader import load_manifests

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "src" / "kai_scheduler" / "sim" / "demo"


def inputs() -> Iterator[Any]:
    yield pytest.param(DEMO, None, id="demo")
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        if path.name.endswith("-config.yaml"):
            continue
        config = path.with_name(path.stem + "-config.yaml")
        yield pytest.param(path, config if config.exists() else None, id=f"examples/{path.name}")
    for folder in sorted((ROOT / "tests" / "scenarios").iterdir()):
        if (folder / "input.yaml").exists():
            config = folder / "config.yaml"
            if not config.exists() and "config" in yaml.safe_load((folder / "expected.yaml").read_text()):
                config = folder / "expected.yaml"
            yield pytest.param(
                folder / "input.yaml", config if config.exists() else None, id=f"scenarios/{folder.name}"
            )


class CheckingDriver(CycleDriver):
    """Before each cycle, the incremental snapshot must equal a snapshot built from scratch (of the shard's
    partition, for a shard's driver)."""

    def __init__(
        self, driver: CycleDriver, simulation: Simulation, partition: Partition | None = None
    ) -> None:
        super().__init__(driver.scheduler.config, driver.cache, driver.usage)
        self.simulation = simulation
        self.partition = partition
        self.compared = 0

    def run(self, cycle: int, now: float) -> CycleOutcome:
        incremental = fingerprint(self.cache.snapshot())
        rebuilt = fingerprint(ClusterCache.of(self.simulation.cluster.state(), self.partition).snapshot())
        for part, value in rebuilt.items():
            assert incremental[part] == value, f"cycle {cycle}: {part} differs"
        self.compared += 1
        return super().run(cycle, now)


class RebuildingDriver(CycleDriver):
    """Each cycle on a cache built from scratch from the whole state (the cluster's own cache still gets
    the cycle's outcome, as its deltas)."""

    def __init__(
        self, driver: CycleDriver, simulation: Simulation, partition: Partition | None = None
    ) -> None:
        super().__init__(driver.scheduler.config, driver.cache, driver.usage)
        self.simulation = simulation
        self.partition = partition

    def run(self, cycle: int, now: float) -> CycleOutcome:
        own = self.cache
        self.cache = ClusterCache.of(self.simulation.cluster.state(), self.partition)
        try:
            outcome = super().run(cycle, now)
        finally:
            self.cache = own
        own.after_cycle(decision.pod for decision in outcome.result.decisions)
        return CycleOutcome(
            outcome.snapshot, outcome.result, own.running_jobs, outcome.seconds, outcome.usage_seconds
        )


def simulation(path: Path, config_path: Path | None) -> Simulation:
    document = yaml.safe_load(config_path.read_text()) if config_path is not None else None
    if config_path is not None and config_path.name == "expected.yaml":
        document = document["config"]  # a scenario's configuration
    config = parse_config(document) if document is not None else SchedulerConfig()
    options = SimulationOptions(start=datetime(2026, 1, 1, tzinfo=UTC), max_cycles=200)
    return Simulation([loaded.obj for loaded in load_manifests([path])], config, options)


def decisions(sim: Simulation) -> list[tuple[int, float, str, str, str, str, tuple[str, ...], str]]:
    result = sim.run()
    return [
        (r.cycle, r.time, d.action, d.type, d.pod, d.node, d.gpu_groups, d.reason)
        for r in result.cycles
        for d in r.decisions
    ]


def wrap(sim: Simulation, driver: type[CheckingDriver] | type[RebuildingDriver]) -> list[CycleDriver]:
    """Put `driver` around the simulation's driver, or around each shard's (node pools)."""
    if sim.sharded is None:
        sim.driver = driver(sim.driver, sim)
        return [sim.driver]
    sim.sharded.shards = [
        ShardRun(s.name, s.partition, driver(s.driver, sim, s.partition)) for s in sim.sharded.shards
    ]
    return [s.driver for s in sim.sharded.shards]


@pytest.mark.parametrize(("path", "config"), list(inputs()))
def test_incremental_state_decides_as_a_rebuilt_one(path: Path, config: Path | None) -> None:
    incremental = simulation(path, config)
    checking = wrap(incremental, CheckingDriver)
    rebuilt = simulation(path, config)
    wrap(rebuilt, RebuildingDriver)
    assert decisions(incremental) == decisions(rebuilt)
    assert all(isinstance(d, CheckingDriver) and d.compared > 0 for d in checking)


def busy_cluster(seed: int) -> list[ApiObject]:
    """A small cluster that keeps changing: arrivals, completions, gangs, shared GPUs, running pods of
    every priority (so reclaim, preempt and consolidation act), node selectors."""
    rng = random.Random(seed)
    objects: list[ApiObject] = [
        node(f"n{i:02d}", gpus=8, gpu_memory=40000, labels={"zone": f"z{i % 2}"}) for i in range(8)
    ]
    objects += [queue("dept"), queue("a", gpu=24, parent="dept"), queue("b", gpu=40, parent="dept")]
    for i in range(16):  # running from the start, spread over the nodes
        fraction = rng.random() < 0.3
        objects.append(
            pod(
                f"run-{i}",
                rng.choice("ab"),
                gpus=0 if fraction else rng.choice((1, 2)),
                fraction=0.5 if fraction else None,
                node_name=f"n{i % 8:02d}",
                labels={"runai-gpu-group": f"n{i % 8:02d}-g{i}"} if fraction else None,
                priority_class=rng.choice(("train", "build", "inference")),
                duration=f"{rng.randint(60, 300)}s",
            )
        )
    for g in range(5):
        size = rng.randint(2, 4)
        objects.append(
            pod_group(
                f"gang-{g}", rng.choice("ab"), min_member=size, priority_class=rng.choice(("train", "build"))
            )
        )
        arrival = rng.randint(0, 200)
        for i in range(size):
            objects.append(
                pod(
                    f"gang-{g}-{i}",
                    None,
                    gpus=rng.choice((2, 4)),
                    group=f"gang-{g}",
                    arrival=f"{arrival}s",
                    duration=f"{rng.randint(60, 300)}s",
                )
            )
    for i in range(40):
        fraction = rng.random() < 0.2
        objects.append(
            pod(
                f"single-{i}",
                rng.choice("ab"),
                gpus=0 if fraction else rng.choice((1, 1, 2, 4, 8)),
                fraction=0.25 if fraction else None,
                priority_class=rng.choice(("train", "build", "inference")),
                arrival=f"{rng.randint(0, 200)}s",
                duration=f"{rng.randint(30, 300)}s",
                node_selector={"zone": "z1"} if rng.random() < 0.1 else None,
            )
        )
    return objects


@pytest.mark.parametrize("seed", range(3))
def test_busy_cluster_decides_as_a_rebuilt_one(seed: int) -> None:
    def make() -> Simulation:
        options = SimulationOptions(start=datetime(2026, 1, 1, tzinfo=UTC), max_cycles=400)
        return Simulation(busy_cluster(seed), SchedulerConfig(), options)

    incremental = make()
    checking = CheckingDriver(incremental.driver, incremental)
    incremental.driver = checking
    rebuilt = make()
    rebuilt.driver = RebuildingDriver(rebuilt.driver, rebuilt)
    ours = decisions(incremental)
    assert ours == decisions(rebuilt)
    kinds = {(d[2], d[3]) for d in ours}
    assert ("allocate", "bind") in kinds and any(action != "allocate" for action, _ in kinds), kinds
    assert checking.compared > 20


@pytest.mark.parametrize(("path", "config"), [p for p in inputs() if "node-pools" not in str(p.values[0])])
def test_one_default_shard_decides_as_one_scheduler(path: Path, config: Path | None) -> None:
    """KAI's default shard holds every object that carries no node-pool label: on such inputs, the sharded
    simulator (one shard on its own cache) decides exactly as the unpartitioned one."""
    plain = simulation(path, config)
    document = config_document(plain.config)
    document["shards"] = [{"name": "default"}]
    objects = [loaded.obj for loaded in load_manifests([path])]
    sharded = Simulation(objects, parse_config(document), plain.options)
    assert sharded.sharded is not None
    assert decisions(sharded) == decisions(plain)
