"""The `kai-scheduler` process ends without freeing what `simulate` built (`cli.process_end`): what it wrote
is all there first, and it ends with the command's exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_scheduler.cli.entry import main

# Output block-buffered, as when nothing asks otherwise (a pipe, a file).
BUFFERED = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


def test_the_program_writes_its_whole_document_before_it_ends(tmp_path: Path) -> None:
    # More pods than fit: a document larger than a pipe's and a stream's buffer.
    docs = [node_manifest("n1", gpus=8), queue_manifest("q")]
    docs += [pod_manifest(f"p{i:03}", "q", gpus=1) for i in range(300)]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-m", "kai_scheduler", "simulate", str(path), "--cycles", "2", "--output", "json"],
        capture_output=True,
        check=False,
        env=BUFFERED,
    )
    assert completed.returncode == 0
    assert completed.stderr == b""
    ended = json.loads(completed.stdout)

    out = tmp_path / "in-process.json"
    assert main(["simulate", str(path), "--cycles", "2", "--output", "json", "--out", str(out)]) == 0
    expected = json.loads(out.read_text(encoding="utf-8"))
    assert len(ended["pods"]) == 300
    assert {**ended, "cycleSeconds": None} == {**expected, "cycleSeconds": None}


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, env=BUFFERED
    )


def test_output_still_buffered_is_written_and_the_status_kept() -> None:
    script = (
        "import sys\n"
        "from kai_scheduler.cli import process_end\n"
        "process_end.keep_what_is_left()\n"
        "sys.stdout.write('no newline, so still buffered')\n"
        "process_end.leave_behind(object())\n"
        "process_end.end(3)\n"
        "print('not reached')\n"
    )
    completed = _run(script)
    assert (completed.returncode, completed.stdout) == (3, "no newline, so still buffered")


def test_nothing_left_behind_ends_as_usual() -> None:
    script = (
        "import atexit\n"
        "from kai_scheduler.cli import process_end\n"
        "atexit.register(print, 'atexit ran')\n"
        "process_end.keep_what_is_left()\n"
        "process_end.end(3)\n"
        "print('went on')\n"
    )
    completed = _run(script)
    assert (completed.returncode, completed.stdout) == (0, "went on\natexit ran\n")
