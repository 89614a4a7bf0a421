"""The README as a newcomer follows it (issue #22): its two commands are the Makefile's, the demo output it
shows is what `kai-scheduler simulate` prints, the tour's mid-way command shows what its comment says, the
JSON document docs/simulate.md shows is the demo's, and every link of the README and of `docs/` names a file
(and a heading) that exists. The what-if comparison's output is checked by `sim/test_compare.py`, the
try-it walk-through by `live/test_readme_try_it.py`, the install command by `chart_support.py`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from markdown_support import code_blocks

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def simulate(*args: str) -> str:
    # The command a reader types, in a process of its own: its output is the terminal's, not pytest's.
    done = subprocess.run(
        [sys.executable, "-m", "kai_scheduler", "simulate", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_getting_started_shows_the_two_make_targets_and_demo_is_the_bare_simulate() -> None:
    (block, *_) = code_blocks(section(README.read_text(encoding="utf-8"), "## Getting started"))
    assert [line.split("#", 1)[0].strip() for line in block] == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile[makefile.index("\ndemo:") :].splitlines()[2]
    assert recipe.strip() == "$(BIN)/kai-scheduler simulate"


def without_timings(lines: list[str]) -> list[str]:
    """Cycle timings are wall-clock figures and differ from run to run; every other line is decided."""
    return [line for line in lines if not line.startswith("cycle timings:")]


def test_the_tours_output_is_what_the_demo_prints() -> None:
    tour = section(README.read_text(encoding="utf-8"), "## A tour: the demo")
    (shown,) = [block for block in code_blocks(tour) if block and block[0].startswith("kai-scheduler demo")]
    printed = [line.rstrip() for line in simulate().splitlines()]
    assert without_timings(shown) == without_timings(printed)
    assert any(line.startswith("cycle timings:") for line in shown)


def test_the_tours_mid_way_command_shows_vit_train_and_tts_train_waiting_with_a_reason() -> None:
    tour = section(README.read_text(encoding="utf-8"), "## A tour: the demo")
    (line,) = [line for block in code_blocks(tour) for line in block if "--until 10m" in line]
    assert "vit-train and tts-train wait, each with its reason" in line
    command = line.split("#", 1)[0].split()
    assert command[:2] == [".venv/bin/kai-scheduler", "simulate"]
    result = json.loads(simulate(*command[2:], "--output", "json"))
    waiting = {group["name"]: group for group in result["podGroups"] if group["pending"]}
    for name in ("vit-train", "tts-train"):
        assert waiting[name]["unschedulableReason"], name


def matches(shown: Any, actual: Any) -> bool:
    """`shown` is `actual` with parts left out: dicts by their shown keys, lists by an element each shown
    element matches, a string ending in "..." by its start."""
    if isinstance(shown, dict):
        return isinstance(actual, dict) and all(
            k in actual and matches(v, actual[k]) for k, v in shown.items()
        )
    if isinstance(shown, list):
        return isinstance(actual, list) and all(any(matches(s, a) for a in actual) for s in shown)
    if isinstance(shown, str) and shown.endswith("..."):
        return isinstance(actual, str) and actual.startswith(shown.removesuffix("..."))
    return bool(shown == actual)


def test_the_json_document_shown_in_docs_is_the_demos() -> None:
    text = (ROOT / "docs" / "simulate.md").read_text(encoding="utf-8")
    block = text[text.index("```json\n") + len("```json\n") :]
    block = block[: block.index("\n```")]
    shown = json.loads(block.replace(", ...}", "}").replace("{...}", "{}"))
    shown.pop("cycleSeconds")  # wall-clock figures
    actual = json.loads(simulate("--output", "json"))
    for key, value in shown.items():
        assert matches(value, actual[key]), key


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    headings = [line.lstrip("#") for line in text.splitlines() if re.match(r"#{1,6} ", line)]
    inside_code = {line.lstrip("#") for block in code_blocks(text) for line in block}
    return {slug(heading) for heading in headings if heading not in inside_code}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_names_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links to nothing: {broken}"


def test_the_sweep_file_shown_in_docs_is_the_example_file() -> None:
    text = (ROOT / "docs" / "what-if.md").read_text(encoding="utf-8")
    (shown,) = [block for block in code_blocks(text) if block and block[0] == "# examples/what-if/sweep.yaml"]
    example = (ROOT / "examples" / "what-if" / "sweep.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load("\n".join(shown)) == yaml.safe_load(example)
