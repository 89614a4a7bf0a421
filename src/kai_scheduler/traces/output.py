"""Writing the manifests: one multi-document YAML file, a folder of three files, or stdout.

The output is a function of the input and the options alone (no time stamps, no random order), so an
import can be diffed against another and checked in.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from kai_scheduler.api.errors import ManifestError

try:
    from yaml import CSafeDumper as _Dumper
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]

_YAML_SUFFIXES = (".yaml", ".yml")
# A folder's files, named so that the simulator's sorted reading creates nodes, then queues, then jobs.
FOLDER_FILES = ("nodes.yaml", "queues.yaml", "jobs.yaml")


@dataclass(frozen=True, slots=True)
class Manifests:
    header: list[str]  # comment lines for the top of each file
    nodes: list[dict[str, Any]]
    queues: list[dict[str, Any]]
    jobs: list[dict[str, Any]]  # PodGroups and pods, in arrival order


def write(manifests: Manifests, target: str | None) -> list[str]:
    """Write to `target` (a `.yaml`/`.yml` file, else a folder; None: stdout); the files written."""
    parts = (manifests.nodes, manifests.queues, manifests.jobs)
    if target is None:
        _dump(sys.stdout, manifests.header, [doc for part in parts for doc in part])
        return []
    path = Path(target)
    try:
        if path.suffix in _YAML_SUFFIXES:
            if path.parent != Path():
                path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8") as handle:
                _dump(handle, manifests.header, [doc for part in parts for doc in part])
            return [str(path)]
        path.mkdir(parents=True, exist_ok=True)
        written = []
        for name, part in zip(FOLDER_FILES, parts, strict=True):
            with (path / name).open("w", encoding="utf-8") as handle:
                _dump(handle, manifests.header, part)
            written.append(str(path / name))
        return written
    except OSError as exc:
        raise ManifestError(target, f"cannot write: {exc.strerror or exc}") from None


def _dump(stream: TextIO, header: Sequence[str], documents: Sequence[dict[str, Any]]) -> None:
    stream.writelines(f"# {line}\n" if line else "#\n" for line in header)
    yaml.dump_all(documents, stream, Dumper=_Dumper, sort_keys=False, width=1 << 16, explicit_start=True)
