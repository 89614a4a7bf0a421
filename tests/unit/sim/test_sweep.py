"""`simulate --sweep FILE`: every combination of the values a sweep file varies, each run's summary numbers
in a row (docs/what-if.md). The runs go through the real command line in a pool of two worker
processes; each row must be the run `simulate --config ... --report` makes of the same combination.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import START, node_manifest, pod_manifest, queue_manifest
from kai_scheduler.api.objects import Queue
from kai_scheduler.cli import main
from kai_scheduler.framework.config import ConfigError
from kai_scheduler.sim.engine import SimulationOptions
from kai_scheduler.sim.loader import load_manifests
from kai_scheduler.sim.sweep_file import load_sweep
from kai_scheduler.sim.variants import RAY_MISSING, RayError, run_variants

DEFAULT_ACTIONS = "allocate, consolidation, reclaim, preempt, stalegangeviction"


def reclaim_input(team_b_quota: float = 2) -> list[dict[str, Any]]:
    """Team A runs four 100 s pods on a 4-GPU node from second 0; team B's 50 s pod arrives at 10."""
    a = [
        pod_manifest(f"a-{i}", "team-a", gpus=1, node_name="node0", duration="100s", priority_class="train")
        for i in range(4)
    ]
    b = pod_manifest("b-0", "team-b", gpus=1, arrival=10, duration="50s", priority_class="train")
    return [
        node_manifest("node0", gpus=4),
        queue_manifest("team-a", gpu=2),
        queue_manifest("team-b", gpu=team_b_quota),
        *a,
        b,
    ]


def write(path: Path, documents: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def sweep_json(tmp_path: Path, sweep: dict[str, Any], *extra: str) -> dict[str, Any]:
    manifests = write(tmp_path / "input.yaml", reclaim_input())
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump(sweep, sort_keys=False))
    out = tmp_path / "sweep.json"
    args = ["simulate", "--sweep", str(sweep_file), str(manifests), "--output", "json", "--out", str(out)]
    assert main([*args, *extra]) == 0
    document: dict[str, Any] = json.loads(out.read_text())
    return document


SWEEP = {"vary": {"actions": [DEFAULT_ACTIONS, "allocate"], "queue.team-b.resources.gpu.quota": [2, 0]}}


def test_each_row_is_the_single_run_of_its_combination(tmp_path: Path) -> None:
    document = sweep_json(tmp_path, SWEEP, "--workers", "2")
    assert document["parameters"] == ["actions", "queue.team-b.resources.gpu.quota"]
    # Every combination, the first parameter's values outermost.
    assert [run["values"] for run in document["runs"]] == [
        {"actions": DEFAULT_ACTIONS, "queue.team-b.resources.gpu.quota": 2},
        {"actions": DEFAULT_ACTIONS, "queue.team-b.resources.gpu.quota": 0},
        {"actions": "allocate", "queue.team-b.resources.gpu.quota": 2},
        {"actions": "allocate", "queue.team-b.resources.gpu.quota": 0},
    ]
    for i, run in enumerate(document["runs"]):
        values = run["values"]
        config = tmp_path / f"config-{i}.yaml"
        config.write_text(yaml.safe_dump({"actions": values["actions"]}))
        manifests = write(
            tmp_path / f"input-{i}.yaml", reclaim_input(values["queue.team-b.resources.gpu.quota"])
        )
        report = tmp_path / f"report-{i}"
        args = [
            "simulate",
            str(manifests),
            "--config",
            str(config),
            "--report",
            str(report),
            "--output",
            "json",
        ]
        assert main([*args, "--out", str(tmp_path / f"run-{i}.json")]) == 0
        assert run["summary"] == json.loads((report / "summary.json").read_text())
    # The combinations differ where they should: with reclaim and its quota, B's pod waits 1 s (reclaim
    # at 10, bound at 11); without reclaim it waits for A's pods to end at 100.
    waits = [run["summary"]["waitSeconds"]["mean"] for run in document["runs"]]
    assert waits[0] == 1.0 and waits[2] == waits[3] == 90.0


def test_one_worker_and_two_give_the_same_rows(tmp_path: Path) -> None:
    pooled = sweep_json(tmp_path, SWEEP, "--workers", "2")
    alone = sweep_json(tmp_path, SWEEP, "--workers", "1")
    assert pooled == alone


def test_the_table_has_a_row_per_combination(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifests = write(tmp_path / "input.yaml", reclaim_input())
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump(SWEEP))
    assert main(["simulate", "--sweep", str(sweep_file), str(manifests), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert f"--sweep {sweep_file}: 4 runs on KAI's default configuration" in out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 4
    # actions, quota, then GPU alloc, wait mean, wait p99, JCT mean, JCT p99, started, evictions, ...
    cells = [[cell.strip() for cell in row.strip("│").split("│")] for row in rows]
    assert [c[:2] for c in cells] == [
        [DEFAULT_ACTIONS, "2"],
        [DEFAULT_ACTIONS, "0"],
        ["allocate", "2"],
        ["allocate", "0"],
    ]
    assert [c[3] for c in cells] == ["1", cells[1][3], "90", "90"]


def test_a_plugin_argument_and_the_placement_strategy_are_varied_on_the_base_configuration(
    tmp_path: Path,
) -> None:
    base = tmp_path / "configs" / "base.yaml"
    base.parent.mkdir()
    base.write_text("actions: allocate, consolidation, reclaim\n")
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(
        yaml.safe_dump(
            {
                "config": "configs/base.yaml",  # relative to the sweep file
                "vary": {"plugin.proportion.kValue": [0.5], "placementStrategy": ["binpack", "spread"]},
            },
            sort_keys=False,
        )
    )
    objects = [entry.obj for entry in load_manifests([str(write(tmp_path / "in.yaml", reclaim_input()))])]
    sweep = load_sweep(str(sweep_file), objects)
    assert sweep.base == "configs/base.yaml"
    binpack, spread = (variant.config for variant in sweep.variants)
    assert binpack.actions == ("allocate", "consolidation", "reclaim")
    assert spread.actions == ("allocate", "reclaim")  # spread runs no consolidation, as KAI's operator
    for config in (binpack, spread):
        proportion = config.plugin("proportion")
        assert proportion is not None and proportion.arguments == {"kValue": 0.5}
    assert {p.name for p in spread.plugins()} >= {"gpuspread"}
    assert "gpupack" not in {p.name for p in spread.plugins()}
    assert sweep.variants[0].label == "plugin.proportion.kValue=0.5, placementStrategy=binpack"


def test_a_queue_field_replaces_the_queue_and_nothing_else(tmp_path: Path) -> None:
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump({"vary": {"queue.team-a.resources.gpu.limit": [3]}}))
    objects = [entry.obj for entry in load_manifests([str(write(tmp_path / "in.yaml", reclaim_input()))])]
    (variant,) = load_sweep(str(sweep_file), objects).variants
    (queue,) = variant.queues
    original = next(o for o in objects if isinstance(o, Queue) and o.metadata.name == "team-a")
    assert queue.spec.resources.gpu.limit == 3
    assert queue.spec.resources.gpu.quota == original.spec.resources.gpu.quota == 2
    assert queue.metadata == original.metadata


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "sweep.yaml: No such file or directory"),
        ("vary: {actions: [allocate\n", "sweep.yaml: line 2, column 1: invalid YAML"),
        ("varry: {actions: [allocate]}\n", "sweep.yaml: varry: unknown key (known: config, vary)"),
        ("vary: [1, 2]\n", "sweep.yaml: vary: expected a mapping of parameter to a list of values"),
        ("vary: {actions: allocate}\n", "sweep.yaml: vary.actions: expected a non-empty list of values"),
        ("config: base.yaml\nvary: {actions: [allocate]}\n", "sweep.yaml: config: base.yaml: No such file"),
        (
            "vary: {actions: [allocate, 'allocate, reclam']}\n",
            "sweep.yaml: vary.actions[1]: actions: unknown action 'reclam'",
        ),
        (
            "vary: {plugin.binpack.gpu: [1]}\n",
            "sweep.yaml: vary.plugin.binpack.gpu: no plugin 'binpack' in the base configuration's tiers",
        ),
        (
            "vary: {plugin.proportion.kValue: [high]}\n",
            "sweep.yaml: vary.plugin.proportion.kValue[0]: proportion.arguments.kValue: expected a number",
        ),
        (
            "vary: {queue.team-c.resources.gpu.quota: [1]}\n",
            "sweep.yaml: vary.queue.team-c.resources.gpu.quota: no Queue 'team-c' in the input",
        ),
        (
            "vary: {queue.team-a.resources.gpu.quotum: [1]}\n",
            "sweep.yaml: vary.queue.team-a.resources.gpu.quotum: a Queue's resources.gpu has no field "
            "'quotum'",
        ),
        (
            "vary: {queue.team-a.resources.gpu.quota: [two]}\n",
            "sweep.yaml: vary.queue.team-a.resources.gpu.quota[0]: value 'two'",
        ),
        (
            "vary: {placementStrategy: [pack]}\n",
            "sweep.yaml: vary.placementStrategy[0]: expected one of binpack, spread, got 'pack'",
        ),
        ("vary: {actoins: [allocate]}\n", "sweep.yaml: vary.actoins[0]: actoins: unknown key"),
    ],
)
def test_a_bad_sweep_file_is_a_one_line_error_naming_the_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    manifests = write(tmp_path / "input.yaml", reclaim_input())
    sweep_file = tmp_path / "sweep.yaml"
    if content is not None:
        sweep_file.write_text(content)
    assert main(["simulate", "--sweep", str(sweep_file), str(manifests)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith(f"kai-scheduler: error: {sweep_file.parent}/{message}")


def test_ray_not_installed_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, installed or not
    manifests = write(tmp_path / "input.yaml", reclaim_input())
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump(SWEEP))
    assert main(["simulate", "--sweep", str(sweep_file), str(manifests), "--ray", "auto"]) == 2
    assert capsys.readouterr().err == f"kai-scheduler: error: {RAY_MISSING}\n"


class _FakeRay(types.ModuleType):
    """Ray's API as `run_variants` uses it, running every task in this process: the address given, the
    input put once, each variant a task, the results in the variants' order."""

    def __init__(self, fail_init: bool = False) -> None:
        super().__init__("ray")
        self.fail_init = fail_init
        self.address: str | None = None
        self.put_count = 0
        self.shut_down = False

    def init(self, address: str, **_: Any) -> None:
        if self.fail_init:
            raise ConnectionError("could not connect to ray://nowhere:10001\nretrying is pointless")
        self.address = address

    def put(self, value: Any) -> Any:
        self.put_count += 1
        return value

    def remote(self, function: Callable[..., Any]) -> Any:
        return types.SimpleNamespace(remote=function)

    def get(self, refs: list[Any]) -> list[Any]:
        return refs

    def wait(self, refs: list[Any], num_returns: int) -> tuple[list[Any], list[Any]]:
        return refs[:num_returns], refs[num_returns:]

    def shutdown(self) -> None:
        self.shut_down = True


def test_ray_runs_every_variant_on_the_cluster_at_the_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump(SWEEP))
    objects = [entry.obj for entry in load_manifests([str(write(tmp_path / "in.yaml", reclaim_input()))])]
    variants = load_sweep(str(sweep_file), objects).variants
    options = SimulationOptions(start=START)
    counts: list[int] = []
    on_ray = run_variants(objects, variants, options, ray_address="ray://head:10001", done=counts.append)
    local = run_variants(objects, variants, options, workers=1)
    assert fake.address == "ray://head:10001" and fake.put_count == 1 and fake.shut_down
    assert counts == [1, 2, 3, 4]
    assert [o.summary for o in on_ray] == [o.summary for o in local]
    assert [o.label for o in on_ray] == [v.label for v in variants]


def test_an_unreachable_ray_cluster_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", _FakeRay(fail_init=True))
    with pytest.raises(RayError) as error:
        run_variants([], [], SimulationOptions(start=START), ray_address="ray://nowhere:10001")
    assert str(error.value) == "--ray ray://nowhere:10001: could not connect to ray://nowhere:10001"


def test_config_errors_are_config_errors(tmp_path: Path) -> None:
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text("vary: {}\n")
    with pytest.raises(ConfigError, match="vary: expected a mapping of parameter to a list of values"):
        load_sweep(str(sweep_file), [])


def test_the_pool_counts_runs_as_they_end(tmp_path: Path) -> None:
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump(SWEEP))
    objects = [entry.obj for entry in load_manifests([str(write(tmp_path / "in.yaml", reclaim_input()))])]
    variants = load_sweep(str(sweep_file), objects).variants
    counts: list[int] = []
    run_variants(objects, variants, SimulationOptions(start=START), workers=2, done=counts.append)
    assert counts == [1, 2, 3, 4]


def test_runs_done_is_one_line_on_a_terminal_and_gone_at_the_end() -> None:
    import io

    from kai_scheduler.sim.progress import RunsDone, runs_done

    assert runs_done(io.StringIO(), 3) is None  # not a terminal: nothing
    stream = io.StringIO()
    count = RunsDone(stream, 3)
    for done in (1, 2, 3):
        count(done)
    assert stream.getvalue() == "\r\033[K1 of 3 runs done\r\033[K2 of 3 runs done\r\033[K"


def test_a_run_that_fails_in_a_worker_is_the_error_of_its_variant(tmp_path: Path) -> None:
    from kai_scheduler.framework.config import SchedulerConfig, parse_config
    from kai_scheduler.sim.variants import Variant

    # Unchecked on purpose (the command checks every configuration first): the worker's error comes back.
    bad = parse_config({"tiers": [{"plugins": [{"name": "binpackk"}]}]})
    variants = [Variant("bad one", bad), *(Variant(f"good {i}", SchedulerConfig()) for i in range(3))]
    objects = [entry.obj for entry in load_manifests([str(write(tmp_path / "in.yaml", reclaim_input()))])]
    with pytest.raises(ConfigError, match=r"^bad one: tiers: unknown plugin 'binpackk'"):
        run_variants(objects, variants, SimulationOptions(start=START), workers=2)


def test_a_base_configuration_with_a_bad_shard_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "base.yaml").write_text(
        "shards:\n- name: default\n- name: gpu\n  partitionLabelValue: gpu\n"
        "  config: {actions: 'allocate, x'}\n"
    )
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text("config: base.yaml\nvary: {period: [1s, 2s]}\n")
    manifests = write(tmp_path / "input.yaml", reclaim_input())
    assert main(["simulate", "--sweep", str(sweep_file), str(manifests)]) == 2
    error = capsys.readouterr().err
    assert error == (
        f"kai-scheduler: error: {sweep_file}: config: base.yaml: shards[1] (gpu): "
        "actions: unknown action 'x' (known: allocate, consolidation, preempt, reclaim, stalegangeviction, "
        "ungate)\n"
    )
