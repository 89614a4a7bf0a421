"""What the scale benchmarks share at their edges: `results.json`, the tree under test, child processes.

* `benchmarks/results.json` (committed) holds one top-level key per benchmark (`scale`, `command`,
  `openb`, `live`, ...); under it, `after` (the tree of this checkout) and `before` (the session's starting
  commit, measured with `--tree`). `update` reads the file, replaces one of those and writes it back, so
  that benchmarks written by different people add their own keys without touching the others.
* A benchmark runs the code of a source tree (`--tree PATH`, a `src` folder; default this checkout's) in
  child processes with `PYTHONPATH=PATH`, so that the same benchmark measures the code before and after.
* `run_child` runs a command and reports its wall time and the peak memory (max RSS) of that very child,
  taken with `os.wait4` (so no other child's peak can leak into it).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
RESULTS_JSON = BENCHMARKS / "results.json"
DEFAULT_TREE = REPO / "src"
TRACES = REPO.parent / "shared" / "traces"
"""The shared public traces, `../shared/traces` relative to the repository (read, never copied here)."""


def machine() -> dict[str, Any]:
    """The machine and how busy it was (the load average over 1, 5 and 15 minutes) right now."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadAverage": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }


def shown_path(path: Path | str) -> str:
    """A path as results.json records it: relative to the repository (`src`, `../wt-baseline/src`,
    `../shared/traces/...`), so that no machine's folders end up in the repository."""
    return os.path.relpath(Path(path).resolve(), REPO)


def tree_info(tree: Path) -> dict[str, Any]:
    """Which code was measured: the source folder and the last commit that changed it (benchmark-only
    commits and rebases of them do not change this id), with `+dirty` if it has uncommitted changes."""
    info: dict[str, Any] = {"path": shown_path(tree)}
    try:
        commit = subprocess.run(
            ["git", "-C", str(tree), "log", "-1", "--format=%h", "--", "."],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain", "--", "."], capture_output=True, text=True
        ).stdout.strip()
        info["commit"] = commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        info["commit"] = None
    return info


def stamp(tree: Path) -> dict[str, Any]:
    """The header of every result: when, on what machine, with which code."""
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "tree": tree_info(tree),
    }


def load() -> dict[str, Any]:
    if not RESULTS_JSON.exists():
        return {}
    data: dict[str, Any] = json.loads(RESULTS_JSON.read_text(encoding="utf-8"))
    return data


def update(key: str, which: str, value: dict[str, Any], path: Path = RESULTS_JSON) -> None:
    """Set `results[key][which]` (which: "after" or "before") and write the file back; other keys stay."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data.setdefault(key, {})[which] = value
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def child_env(tree: Path) -> dict[str, str]:
    """The environment of a child that must import `kai_scheduler` from `tree`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(BENCHMARKS)])
    return env


def python_command(*args: str) -> list[str]:
    return [sys.executable, *args]


@dataclass
class ChildRun:
    returncode: int | None  # None: killed at the time limit
    seconds: float  # wall time, start to exit
    max_rss_bytes: int  # the child's peak resident memory
    cpu_seconds: float  # user + system CPU time of the child
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_child(command: list[str], env: dict[str, str], stdout: Path, timeout: float | None) -> ChildRun:
    """Run `command` with its output to `stdout`, killed after `timeout` seconds (None: no limit)."""
    err_path = stdout.with_suffix(".stderr")
    with stdout.open("wb") as out, err_path.open("wb") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=out, stderr=err)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            process.kill()

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer:
            timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            if timer:
                timer.cancel()
        seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    err_path.unlink()
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    rss = usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024
    cpu = usage.ru_utime + usage.ru_stime
    return ChildRun(None if killed.is_set() else process.returncode, seconds, rss, cpu, stderr)
