"""`make bench` times the simulator by wrapping its snapshot build and session (`benchmarks/instrument.py`).
Those wrappers must follow the simulator's own signatures; when they drift, every benchmark stops with a
TypeError, and nothing else in the suite would notice."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import node_manifest, objects_of, pod_manifest, queue_manifest
from kai_scheduler.framework.config import SchedulerConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import instrument  # the benchmarks folder is not a package


def test_measure_times_every_cycle_the_simulator_runs() -> None:
    objects = objects_of(
        queue_manifest("q"),
        node_manifest("n1", gpus=2),
        pod_manifest("a", gpus=1),
        pod_manifest("b", gpus=1),
    )

    measured = instrument.measure(objects, SchedulerConfig(), cycles=3, budget=None, quiet=0)

    assert len(measured.build_times) == len(measured.session_times) == len(measured.decisions) == 3
    assert instrument.placed(measured.decisions[0]) == 2
    assert measured.stopped_by == "cycle cap"
