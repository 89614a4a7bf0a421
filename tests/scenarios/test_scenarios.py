"""Scenario tests: each folder under tests/scenarios holds `input.yaml` (Kubernetes/KAI manifests) and
`expected.yaml` (what the reference says must happen, with a comment saying why). Every scenario runs
through the real command line (`kai-scheduler simulate ... --output json --out FILE`).

expected.yaml keys (all optional except where noted):

- `flags`: extra command-line flags, e.g. ["--cycles", "3"]
- `config`: a scheduler configuration document (written to a file and passed with --config)
- `summary`: a subset of the result's summary (nested mappings compared key by key)
- `decisions`: the complete list of decisions, in order; each entry gives the fields to compare
  (any of cycle, time, action, type, pod, node)
- `pods`: pod name -> subset of its fields (e.g. {phase: Running, node: node0})
- `podGroups`: pod group name -> subset of its fields; `reason` matches when the
  unschedulableReason starts with it (null: no reason)
- `queues`: queue name -> subset of its fields (numbers compared with a small tolerance)
- `moves`: pod name -> node: the pod gets an evict decision followed, in the same cycle, by a pipeline
  decision naming that node (contract: "A pod that an action moves ...")
- `absent`: pod names that must not be in the final `pods` (gone for good)
- `sameGpu`: lists of pod names; the pods of a list share exactly one GPU group, and different
  lists use different GPU groups
- `resourceClaims`: claim name -> subset of its fields (`allocated`, `devices` as "pool/device"
  strings, `reservedFor`)
- `ungates`: the complete list of the `ungate` action's decisions (queue admission gating), in order; each
  entry gives the fields to compare (any of cycle, time, podGroup, queue, pods)
- `midway`: a list of checks of the run stopped early, each `until` (a simulated time, as the `--until`
  flag takes it) with any of the keys above: the same input, configuration and flags run until then (for
  what holds only for a while, e.g. a waiting job's reason)
- `xfail`: a reason; the scenario is expected to fail (a known bug)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai_scheduler.cli import main
from kai_scheduler.sim.input_checks import warnings as input_warnings
from kai_scheduler.sim.loader import load_manifests

HERE = Path(__file__).parent
SCENARIOS = sorted(p.parent.name for p in HERE.glob("*/expected.yaml"))


def _params() -> list[Any]:
    params = []
    for name in SCENARIOS:
        expected = yaml.safe_load((HERE / name / "expected.yaml").read_text())
        marks = [pytest.mark.xfail(strict=True, reason=expected["xfail"])] if "xfail" in expected else []
        params.append(pytest.param(name, id=name, marks=marks))
    return params


def run_scenario(
    name: str, tmp_path: Path, until: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    folder = HERE / name
    expected = yaml.safe_load((folder / "expected.yaml").read_text())
    out = tmp_path / "result.json"
    args = ["simulate", str(folder / "input.yaml"), "--output", "json", "--out", str(out)]
    args += [str(flag) for flag in expected.get("flags", [])]
    if until is not None:
        args += ["--until", until]
    if "config" in expected:
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump(expected["config"]))
        args += ["--config", str(config)]
    assert main(args) == 0
    return json.loads(out.read_text()), expected


def assert_subset(actual: Any, expected: Any, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected a mapping, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{where}: no field {key!r} in {actual!r}"
            assert_subset(actual[key], value, f"{where}.{key}")
    elif isinstance(expected, float) or (isinstance(expected, int) and not isinstance(expected, bool)):
        assert actual == pytest.approx(expected, rel=1e-6, abs=1e-6), f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def check(document: dict[str, Any], expected: dict[str, Any]) -> None:
    if "summary" in expected:
        assert_subset(document["summary"], expected["summary"], "summary")
    if "decisions" in expected:
        wanted = expected["decisions"]
        actual = [
            {key: d[key] for key in want} for d, want in zip(document["decisions"], wanted, strict=False)
        ]
        table = "\n".join(
            f"  {d['cycle']} {d['time']:g}s {d['action']} {d['type']} {d['pod']} {d['node']}"
            for d in document["decisions"]
        )
        assert len(document["decisions"]) == len(wanted), f"decisions differ; actual:\n{table}"
        assert actual == wanted, f"decisions differ; actual:\n{table}"
    if "ungates" in expected:
        wanted, got = expected["ungates"] or [], document.get("ungates", [])
        actual = [{key: u[key] for key in want} for u, want in zip(got, wanted, strict=False)]
        assert len(got) == len(wanted) and actual == wanted, f"ungates differ; actual: {got}"
    pods = {p["name"]: p for p in document["pods"]}
    for name, fields in (expected.get("pods") or {}).items():
        assert name in pods, f"pod {name} missing from the result"
        assert_subset(pods[name], fields, f"pods.{name}")
    for name, target in (expected.get("moves") or {}).items():
        mine = [d for d in document["decisions"] if d["pod"].split("/")[1] == name]
        evicts = [i for i, d in enumerate(mine) if d["type"] == "evict"]
        assert evicts, f"{name} was not evicted"
        after = [
            d
            for d in mine[evicts[0] + 1 :]
            if d["type"] == "pipeline" and d["cycle"] == mine[evicts[0]]["cycle"]
        ]
        assert after and after[0]["node"] == target, f"{name} was not moved to {target}: {mine}"
    for name in expected.get("absent") or []:
        assert name not in pods, f"pod {name} should be gone"
    groups = {g["name"]: g for g in document["podGroups"]}
    for name, fields in (expected.get("podGroups") or {}).items():
        assert name in groups, f"pod group {name} missing from the result"
        fields = dict(fields)
        if "reason" in fields:
            want = fields.pop("reason")
            got = groups[name]["unschedulableReason"]
            if want is None:
                assert got is None, f"podGroups.{name}: unexpected reason {got!r}"
            else:
                assert got is not None and got.startswith(want), f"podGroups.{name}: reason {got!r}"
        assert_subset(groups[name], fields, f"podGroups.{name}")
    queues = {q["name"]: q for q in document["queues"]}
    for name, fields in (expected.get("queues") or {}).items():
        assert name in queues, f"queue {name} missing from the result"
        assert_subset(queues[name], fields, f"queues.{name}")
    claims = {c["name"]: c for c in document.get("resourceClaims", [])}
    for name, fields in (expected.get("resourceClaims") or {}).items():
        assert name in claims, f"resource claim {name} missing from the result"
        actual = dict(claims[name])
        actual["devices"] = [f"{d['pool']}/{d['device']}" for d in actual["devices"]]
        assert_subset(actual, fields, f"resourceClaims.{name}")
    sets = expected.get("sameGpu") or []
    groups_of = {p["name"]: tuple(p["gpuGroups"]) for p in document["pods"]}
    seen: list[tuple[str, ...]] = []
    for names in sets:
        shared = {groups_of[n] for n in names}
        assert len(shared) == 1, f"{names} do not share one GPU: {shared}"
        (group,) = shared
        assert len(group) == 1, f"{names}: expected one GPU group each, got {group}"
        assert group not in seen, f"{names} share a GPU with another list"
        seen.append(group)


@pytest.mark.parametrize("name", _params())
def test_scenario(name: str, tmp_path: Path) -> None:
    document, expected = run_scenario(name, tmp_path)
    check(document, expected)
    for point in expected.get("midway") or []:
        until = str(point["until"])
        early, _ = run_scenario(name, tmp_path, until)
        try:
            check(early, point)
        except AssertionError as error:
            raise AssertionError(f"midway, until {until}: {error}") from None


def test_every_scenario_explains_itself() -> None:
    assert len(SCENARIOS) >= 10
    for name in SCENARIOS:
        text = (HERE / name / "expected.yaml").read_text()
        assert text.lstrip().startswith("#"), f"{name}/expected.yaml must start with a comment saying why"
        assert "§" in text or "contract" in text, f"{name}/expected.yaml must cite the reference"


def test_every_scenario_input_needs_no_warning() -> None:
    # A scenario says what it means: every Queue field written (KAI reads a left-out one as 0, and a
    # limit of 0 blocks the resource), no key one edit from KAI's, no pod silently left to another
    # scheduler. `simulate` would warn about each.
    for name in SCENARIOS:
        assert input_warnings(load_manifests([str(HERE / name / "input.yaml")])) == [], name
