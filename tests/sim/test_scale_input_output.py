"""`simulate --cycles 3 --output json` on a small cluster of the scale benchmark's steady shape (written
as YAML, as the 20,000-node row reads it): the bytes written are the standard library's JSON of the
document, and the document is the one this input has always given, so that work on the loader, the cache
build or the writer changes no decision and no byte. The cycles' own durations are the only part that
varies between runs; they are left out of the comparison."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from kai_scheduler.cli.entry import main

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import run  # the benchmarks folder is not a package
import scale_workload

NODES = 40
PENDING = 30
SEED = 20260108
# The document with its cycleSeconds zeroed, as written by the code of issue #23's loading and writing
# work (and unchanged by it). A change to the scheduler's decisions, reasons or the document's fields
# moves it: check that the change is meant, then put the new digest here.
EXPECTED_SHA256 = "14d79098e2614188e12e82eff843e813e8ddef73144186c0e07a4aa7444d67ac"


def test_the_steady_input_gives_the_same_document_as_json_writes_it(tmp_path: Path) -> None:
    docs = scale_workload.steady(NODES, SEED, PENDING)
    run.write_yaml(docs, tmp_path / "input")
    out = tmp_path / "out.json"
    code = main(["simulate", str(tmp_path / "input"), "--cycles", "3", "--output", "json", "--out", str(out)])
    assert code == 0
    text = out.read_text(encoding="ascii")
    document = json.loads(text)
    assert text == json.dumps(document, indent=2) + "\n"
    assert document["summary"]["pods"] == {
        "Pending": PENDING,
        "Running": NODES * 14,
        "Succeeded": 0,
        "Failed": 0,
    }
    document["cycleSeconds"] = [0.0] * len(document["cycleSeconds"])
    digest = hashlib.sha256((json.dumps(document, indent=2) + "\n").encode()).hexdigest()
    assert digest == EXPECTED_SHA256
