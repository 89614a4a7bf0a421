"""The result document's JSON text is the standard library's `json.dumps(document, indent=2)`, whichever
encoder writes it: the values where orjson would write something else go to the standard library, the
rest (long lists in batches) to orjson."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import numpy as np
import pytest

from kai_scheduler.sim import json_output
from kai_scheduler.sim.json_output import document_json, write_document


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


def _random_value(rng: random.Random, depth: int) -> Any:
    """Any value the document may hold, nested: floats both written alike and not, non-ASCII text,
    numpy scalars, big integers, tuples, keys json turns into strings, empty containers."""
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(
            [
                0.0,
                0.5,
                1e16,
                6.0653001128230244e-05,
                float("nan"),
                -float("inf"),
                np.float64(0.25),
                2**70,
                -3,
                True,
                None,
                "pod-a",
                "équipe",
                "\x7f",
            ]
        )
    size = rng.choice((0, 1, 2, 5, 9))
    shape = rng.random()
    if shape < 0.4:
        return [_random_value(rng, depth - 1) for _ in range(size)]
    if shape < 0.5:
        return tuple(_random_value(rng, depth - 1) for _ in range(size))
    if shape < 0.9:
        return {f"k{i}": _random_value(rng, depth - 1) for i in range(size)}
    return {rng.choice((1, 2.5, True, None, "s")): _random_value(rng, depth - 1) for _ in range(size)}


@pytest.mark.parametrize("seed", range(40))
def test_generated_documents_as_the_standard_library_writes_them(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batches of 3: lists longer than that go in batches, some written by orjson and some opened up.
    monkeypatch.setattr(json_output, "_BATCH", 3)
    rng = random.Random(seed)
    document = {f"part{i}": _random_value(rng, 4) for i in range(6)}
    document["long"] = [_random_value(rng, 2) for _ in range(20)]
    document["longClean"] = [{"name": f"p-{i}", "gpu": 0.5 * i} for i in range(10)]
    assert document_json(document) == json.dumps(document, indent=2) + "\n"


def test_a_long_list_with_a_tiny_float_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_output, "_BATCH", 4)
    pods = [{"name": f"p-{i}", "seconds": 0.5} for i in range(11)]
    pods[6]["seconds"] = 7e-05  # in the second batch: that batch opened up, the others orjson's
    document = _document(pods=pods, cycleSeconds=[1.5, 6e-05, 0.0])
    assert document_json(document) == json.dumps(document, indent=2) + "\n"


def test_written_piece_by_piece_the_same_bytes() -> None:
    document = _document(small=[1e-05], reason="équipe")
    handle = io.BytesIO()
    write_document(document, handle)
    assert handle.getvalue() == (json.dumps(document, indent=2) + "\n").encode("ascii")
