"""`simulate --explain-fairshare QUEUE` (issue #25, section 3): the last cycle's own division down to the
queue, as text after the tables and as the JSON document's `fairShareExplanation`; its result is the
fair share the document reports for the queue; a queue not in the input is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kai_scheduler.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_json_explanation_ends_in_the_queue_s_fair_share(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    assert main(["simulate", "--explain-fairshare", "vision", "--output", "json", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    queues = {q["name"]: q for q in document["queues"]}
    explained = document["fairShareExplanation"]
    assert explained["queue"] == "vision"
    for resource, entry in explained["resources"].items():
        assert entry["fairShare"] == pytest.approx(queues["vision"]["fairShare"][resource], rel=1e-12)
        # From the top down: the cluster's total among the top queues, then research's share among its
        # children, vision among them with its quota, limit and weight as the cycle read them.
        top, children = entry["levels"]
        assert top["parent"] is None and top["total"] == entry["total"]
        assert children["parent"] == "research"
        assert children["total"] == pytest.approx(queues["research"]["fairShare"][resource], rel=1e-12)
        assert [q["name"] for q in children["queues"]] == ["vision", "language", "speech"]
    vision = explained["resources"]["gpu"]["levels"][1]["queues"][0]
    assert (vision["quota"], vision["limit"], vision["overQuotaWeight"]) == (40, -1, 2)
    # Without the flag the document is as the contract has it.
    plain = tmp_path / "plain.json"
    assert main(["simulate", "--output", "json", "--out", str(plain)]) == 0
    assert "fairShareExplanation" not in json.loads(plain.read_text())


def test_the_text_explanation_follows_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "two-teams.yaml"), "--explain-fairshare", "team-b"]) == 0
    text = capsys.readouterr().out
    explanation = text[text.index("Fair share of queue team-b") :]
    assert "GPU: fair share" in explanation and "Level 1: the cluster's" in explanation
    assert "Result: team-b's gpu fair share is" in explanation


def test_an_unknown_queue_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--explain-fairshare", "nobody", "--cycles", "1"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "--explain-fairshare nobody: no such queue in the input (queues: language, research" in error
