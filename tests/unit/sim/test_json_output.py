"""The result document's JSON text is the standard library's `json.dumps(document, indent=2)`, whichever
encoder writes it: the values where orjson would write something else go to the standard library."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from kai_scheduler.sim.json_output import document_json


def _document(**extra: Any) -> dict[str, Any]:
    return {
        "summary": {"cycles": 3, "time": 2.0, "steady": True, "gpu": {"capacity": 16.0, "allocated": 12.5}},
        "pods": [
            {"name": "a-0", "node": "node0", "gpuGroups": ["g-1"], "gpu": 0.5, "scheduledAt": 0.0},
            {"name": "a-1", "node": None, "gpuGroups": [], "gpu": 1.0, "scheduledAt": None},
        ],
        "queues": [{"name": "q0", "parent": None, "fairShare": {"memory": 3.2e10, "cpu": 1 / 3}}],
        "decisions": [],
        "empty": {},
        "cycleSeconds": [0.0012, 1e16, 123456789.125],
        **extra,
    }


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"small": [1e-05, 9.5e-05, -2.5e-07, 1e-4, 5e-324]},  # json writes exponents below 1e-4
        {"special": [float("nan"), float("inf"), -float("inf")]},  # json: NaN, Infinity
        {"reason": "queue équipe below its fair share"},  # json escapes non-ASCII
        {"reason": "delete \x7f and control \x01\n\t"},
        {"numpy": np.float64(0.5)},  # orjson refuses numpy scalars without an option
        {"tuple": (0.5, 1e-06)},
        {"nested": [[{"a": [0.1, 0.2]}], []]},
        {"big": 2**70},
    ],
    ids=[
        "plain",
        "small-floats",
        "nan-inf",
        "non-ascii",
        "del-and-controls",
        "numpy",
        "tuple",
        "nested",
        "bigint",
    ],
)
def test_the_text_is_the_standard_librarys(extra: dict[str, Any]) -> None:
    document = _document(**extra)
    assert document_json(document) == json.dumps(document, indent=2) + "\n"
