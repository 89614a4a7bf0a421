"""No tracked file names a folder of the machine it was written on (a build machine's checkout, a work
tree, a home folder): such a path means nothing to a reader, and in a doc or a result it hides what was
meant (KAI's commit, a relative path). Paths a user would type (`/tmp/kubeconfig` in the README's try-it,
`/var/lib/kubelet`) are not machine folders and stay."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Built from parts, so that this file does not name them itself.
_ROOTS = ["/" + "work/", "/tmp/" + "wt", "/" + "root/", "/home/" + r"[a-z_][\w.-]*/", "/Users/" + r"[\w.-]+/"]
# A root at the start of a path: not inside a longer one (`docs/work/`, `src/root/`).
MACHINE_PATH = re.compile(r"(?<![\w.~/-])(?:" + "|".join(_ROOTS) + ")")


def _tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [REPO / name for name in listed.decode().split("\0") if name]


def _text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:  # listed but gone from the work tree
        return None
    return None if b"\0" in data[:8192] else data.decode("utf-8", errors="replace")


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("python benchmarks/scale.py --tree " + "/" + "work/wt-baseline/src", True),
        ('"path": "' + "/" + 'root/kai/src"', True),
        ("see `" + "/home/" + "alice/KAI-Scheduler`", True),
        ("kubectl --kubeconfig /tmp/kubeconfig get pods", False),
        ("--tree ../baseline/src and docs/work/notes.md", False),
        ("hostPath: /var/lib/kubelet/pod-resources", False),
    ],
)
def test_the_pattern_finds_machine_folders_and_not_user_paths(line: str, found: bool) -> None:
    assert bool(MACHINE_PATH.search(line)) is found


def test_no_tracked_file_names_a_machine_folder() -> None:
    hits = []
    for path in _tracked_files():
        text = _text(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line):
                hits.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert hits == []
