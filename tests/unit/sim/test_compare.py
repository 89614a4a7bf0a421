"""`simulate --compare A.yaml B.yaml`: two runs of one input side by side (docs/what-if.md).

Through the real command line on a small deterministic input: team A runs four 100 s pods on a 4-GPU
node from second 0 (bound in the input); team B's 50 s pod arrives at 10. With KAI's default actions,
reclaim evicts one of A's pods at 10 and B's pod starts at 11; with allocate alone, B's pod waits until
A's pods end at 100.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_scheduler.cli import main

DEFAULT_ACTIONS = 'actions: "allocate, consolidation, reclaim, preempt, stalegangeviction"\n'
ALLOCATE_ONLY = 'actions: "allocate"\n'


def reclaim_input() -> list[dict[str, Any]]:
    a = [
        pod_manifest(f"a-{i}", "team-a", gpus=1, node_name="node0", duration="100s", priority_class="train")
        for i in range(4)
    ]
    b = pod_manifest("b-0", "team-b", gpus=1, arrival=10, duration="50s", priority_class="train")
    return [
        node_manifest("node0", gpus=4),
        queue_manifest("team-a", gpu=2),
        queue_manifest("team-b", gpu=2),
        *a,
        b,
    ]


def write_inputs(tmp_path: Path, a: str = DEFAULT_ACTIONS, b: str = ALLOCATE_ONLY) -> tuple[Path, Path, Path]:
    manifests = tmp_path / "input.yaml"
    manifests.write_text(yaml.safe_dump_all(reclaim_input(), sort_keys=False))
    config_a, config_b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    config_a.write_text(a)
    config_b.write_text(b)
    return manifests, config_a, config_b


def compare_json(
    tmp_path: Path, *extra: str, a: str = DEFAULT_ACTIONS, b: str = ALLOCATE_ONLY
) -> dict[str, Any]:
    manifests, config_a, config_b = write_inputs(tmp_path, a, b)
    out = tmp_path / "compare.json"
    args = ["simulate", "--compare", str(config_a), str(config_b), str(manifests), "--output", "json"]
    assert main([*args, "--out", str(out), *extra]) == 0
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def figures(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["figure"]: row for row in document["figures"]}


def test_without_reclaim_team_bs_pod_starts_when_as_pods_end(tmp_path: Path) -> None:
    document = compare_json(tmp_path)
    changed = {row["podGroup"]: row for row in document["podGroups"]["changed"]}
    # B's pod: reclaimed for at 10, bound at 11 under A; under B it waits for A's pods to end at 100.
    b = changed["default/pg-b-0"]
    assert b["queue"] == "team-b"
    assert b["a"] == {"start": 11.0, "fate": "completed", "evictions": 0}
    assert b["b"] == {"start": 100.0, "fate": "completed", "evictions": 0}
    assert b["startDelta"] == 89.0
    # The pod reclaim took (A's newest) was evicted under A only; it still ran (from the input) and
    # completed in both.
    a3 = changed["default/pg-a-3"]
    assert a3["a"] == {"start": 0.0, "fate": "completed", "evictions": 1}
    assert a3["b"] == {"start": 0.0, "fate": "completed", "evictions": 0}
    assert a3["startDelta"] == 0.0
    # A's other pods ran undisturbed in both: not listed.
    assert set(changed) == {"default/pg-b-0", "default/pg-a-3"}
    assert document["podGroups"]["total"] == 5
    rows = figures(document)
    assert rows["waitSeconds.mean"] == {"figure": "waitSeconds.mean", "a": 1.0, "b": 90.0, "delta": 89.0}
    assert rows["jctSeconds.p99"] == {"figure": "jctSeconds.p99", "a": 51.0, "b": 140.0, "delta": 89.0}
    assert rows["evictions"] == {"figure": "evictions", "a": 1, "b": 0, "delta": -1.0}
    assert rows["podGroups.started"]["delta"] == 0.0
    # Every figure is the run's own summary number.
    for row in document["figures"]:
        for side in ("a", "b"):
            value: Any = document[side]["summary"]
            for key in row["figure"].split("."):
                value = value[key]
            assert row[side] == value


def test_each_side_is_the_single_run_of_its_configuration(tmp_path: Path) -> None:
    document = compare_json(tmp_path)
    manifests, config_a, config_b = tmp_path / "input.yaml", tmp_path / "a.yaml", tmp_path / "b.yaml"
    for side, config in (("a", config_a), ("b", config_b)):
        report = tmp_path / f"single-{side}"
        args = ["simulate", str(manifests), "--config", str(config), "--report", str(report)]
        assert main([*args, "--output", "json", "--out", str(tmp_path / f"{side}.json")]) == 0
        assert document[side]["summary"] == json.loads((report / "summary.json").read_text())
        assert document[side]["config"] == str(config)


def test_the_same_configuration_on_both_sides_changes_nothing(tmp_path: Path) -> None:
    document = compare_json(tmp_path, b=DEFAULT_ACTIONS)
    assert document["podGroups"]["changed"] == []
    assert all(row["delta"] in (0.0, None) for row in document["figures"])
    assert document["a"]["summary"] == document["b"]["summary"]


def test_text_shows_the_numbers_and_the_changed_groups_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests, config_a, config_b = write_inputs(tmp_path)
    assert main(["simulate", "--compare", str(config_a), str(config_b), str(manifests)]) == 0
    out = capsys.readouterr().out
    assert f"A = {config_a}, B = {config_b}" in out
    assert re.search(r"wait seconds, mean\s*│\s*1 │\s*90 │\s*\+89 │", out)
    assert re.search(r"default/pg-b-0 │ team-b │\s*11s │\s*100s │\s*\+89s │ completed\s*│ completed", out)
    assert re.search(r"default/pg-a-3 .* completed, 1 eviction │ completed", out)
    assert "(2 of 5)" in out


def test_report_is_one_self_contained_page_and_a_summary_of_both(tmp_path: Path) -> None:
    report = tmp_path / "report"
    document = compare_json(tmp_path, "--report", str(report))
    assert sorted(p.name for p in report.iterdir()) == ["index.html", "summary.json"]
    # summary.json is the comparison document itself: both runs' summaries, the differences, the groups.
    assert json.loads((report / "summary.json").read_text()) == document
    page = (report / "index.html").read_text()
    assert "http://" not in page and "https://" not in page and "<script" not in page
    sources = re.findall(r'src="([^"]*)"', page)
    assert len(sources) == 4 and all(s.startswith("data:image/png;base64,") for s in sources)
    # The numbers and the changed pod group, as the document has them.
    assert "<td>default/pg-b-0</td><td>team-b</td><td>11s</td><td>100s</td><td>+89</td>" in page
    assert "<td>wait seconds, mean</td><td>1</td><td>90</td><td>+89</td>" in page


def run_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("kai-scheduler: error: ")
    return error


def test_a_missing_configuration_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests, config_a, _ = write_inputs(tmp_path)
    missing = tmp_path / "nope.yaml"
    error = run_error(["simulate", "--compare", str(config_a), str(missing), str(manifests)], capsys)
    assert f"--compare {missing}: No such file or directory" in error


def test_an_unknown_plugin_is_a_one_line_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = "tiers:\n- plugins:\n  - name: proportion\n  - name: binpackk\n"
    manifests, config_a, config_b = write_inputs(tmp_path, b=bad)
    error = run_error(["simulate", "--compare", str(config_a), str(config_b), str(manifests)], capsys)
    assert f"{config_b}: tiers: unknown plugin 'binpackk'" in error


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config", "x.yaml"], "--config: not with --compare"),
        (["--workers", "2"], "--workers: only with --sweep"),
        (["--sweep", "s.yaml"], "--compare and --sweep: give one of them"),
    ],
)
def test_flags_that_do_not_go_with_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    manifests, config_a, config_b = write_inputs(tmp_path)
    error = run_error(["simulate", "--compare", str(config_a), str(config_b), str(manifests), *extra], capsys)
    assert message in error


ROOT = Path(__file__).resolve().parents[3]


def test_the_what_if_pages_comparison_is_what_the_command_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the page's paths are from the checkout's root
    page = (ROOT / "docs" / "what-if.md").read_text(encoding="utf-8")
    block = page[page.index("```\n$ kai-scheduler simulate --compare") + 4 :]
    block = block[: block.index("\n```\n")]
    command = block.splitlines()[0].removeprefix("$ kai-scheduler ").split()
    assert main(command) == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    shown = [line for line in block.splitlines()[1:] if line.startswith(("│", "kai-scheduler", "Pod groups"))]
    assert len(shown) >= 10
    for line in shown:
        assert line in printed, line


def test_the_example_sweep_file_reads_on_the_demo() -> None:
    from kai_scheduler.sim.loader import load_manifests
    from kai_scheduler.sim.sweep_file import load_sweep

    demo = ROOT / "src" / "kai_scheduler" / "sim" / "demo"
    objects = [entry.obj for entry in load_manifests([str(demo)])]
    sweep = load_sweep(str(ROOT / "examples" / "what-if" / "sweep.yaml"), objects)
    assert sweep.base == "kai-default-config.yaml"
    assert len(sweep.variants) == 4


def test_a_report_path_that_is_a_file_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests, config_a, config_b = write_inputs(tmp_path)
    taken = tmp_path / "taken"
    taken.write_text("")
    args = ["simulate", "--compare", str(config_a), str(config_b), str(manifests), "--report", str(taken)]
    assert f"--report {taken}: not a directory" in run_error(args, capsys)


def test_a_shards_unknown_plugin_is_a_one_line_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A shard's own configuration is checked with the rest, before the runs.
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "shards:\n- name: default\n- name: training\n  partitionLabelValue: training\n"
        "  config: {tiers: [{plugins: [{name: binpackk}]}]}\n"
    )
    good = ROOT / "examples" / "node-pools-config.yaml"
    manifests = ROOT / "examples" / "node-pools.yaml"
    error = run_error(["simulate", "--compare", str(good), str(bad), str(manifests)], capsys)
    assert f"{bad}: shards[1] (training): tiers: unknown plugin 'binpackk'" in error
