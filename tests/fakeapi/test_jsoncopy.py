"""`clone`: the store's copy of a JSON document."""

from __future__ import annotations

import datetime

from kai_fakeapi.jsoncopy import clone


def test_a_clone_is_equal_and_shares_nothing_mutable() -> None:
    doc = {
        "metadata": {"labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "ports": [1, 2]}]},
        "n": None,
    }
    copied = clone(doc)
    assert copied == doc
    copied["metadata"]["labels"]["a"] = "x"
    copied["spec"]["containers"][0]["ports"].append(3)
    assert doc["metadata"]["labels"] == {"a": "b"} and doc["spec"]["containers"][0]["ports"] == [1, 2]


def test_values_that_are_not_json_are_still_deep_copied() -> None:
    stamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)  # YAML reads unquoted timestamps so
    doc = {"when": stamp, "tags": {"a", "b"}}
    copied = clone(doc)
    assert copied == doc
    copied["tags"].add("c")
    assert doc["tags"] == {"a", "b"}
