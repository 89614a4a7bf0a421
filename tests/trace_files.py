"""Small trace files written by the tests, and the manifests an import makes of them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from kai_scheduler.cli import main

OPENB_NODES = "sn,cpu_milli,memory_mib,gpu,model\n"
OPENB_PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n"
)
POLLUX = "name,time,application,num_replicas,batch_size\n"


def write(folder: Path, name: str, header: str, rows: Sequence[str]) -> Path:
    path = folder / name
    path.write_text(header + "".join(f"{row}\n" for row in rows), encoding="utf-8")
    return path


def imported(args: Sequence[str], out: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Run `trace import ARGS -o OUT` (must succeed); the documents written, by (kind, name)."""
    assert main(["trace", "import", *args, "-o", str(out)]) == 0
    files = sorted(out.glob("*.yaml")) if out.is_dir() else [out]
    documents = [doc for file in files for doc in yaml.safe_load_all(file.read_text(encoding="utf-8"))]
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}


def annotations(doc: dict[str, Any]) -> dict[str, str]:
    result: dict[str, str] = doc["metadata"].get("annotations", {})
    return result


def requests(doc: dict[str, Any]) -> dict[str, str]:
    result: dict[str, str] = doc["spec"]["containers"][0]["resources"]["requests"]
    return result
