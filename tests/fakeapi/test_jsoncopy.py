"""`clone`: the store's copy of a JSON document."""

from __future__ import annotations

import datetime

from kai_fakeapi.jsoncopy import clone, json_text


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


class Labels(dict[str, str]):
    pass


def test_what_json_would_change_is_kept_as_it_was() -> None:
    """NaN and infinities (JSON has none), tuples, integers beyond 64 bits, keys that are not strings and
    subclasses of the builtin types come back as they were, not as JSON would write them; each in a
    document of its own (one of them would send the whole document the slow way)."""
    nan = clone({"x": [float("nan")]})["x"][0]
    assert nan != nan
    assert clone({"x": [float("inf"), -float("inf")]}) == {"x": [float("inf"), -float("inf")]}
    pair = clone({"x": (1, 2)})["x"]
    assert pair == (1, 2) and type(pair) is tuple
    assert clone({"x": 2**70}) == {"x": 2**70}
    assert clone({"x": {1: "one"}}) == {"x": {1: "one"}}
    original = Labels(a="b")
    labels = clone({"x": original})["x"]
    assert type(labels) is Labels and labels == {"a": "b"} and labels is not original
    assert str(clone([-0.0])[0]) == "-0.0" and clone([0.1 + 0.2]) == [0.1 + 0.2]
    assert [type(x) for x in clone([True, 1, 1.0])] == [bool, int, float]


def test_json_text_is_given_only_for_json_and_tells_its_types_apart() -> None:
    texts = {json_text({"n": n}) for n in (1, 1.0, True, "1")}
    assert None not in texts and len(texts) == 4
    for not_json in ({"t": (1, 2)}, {"x": float("nan")}, {"when": datetime.date(2026, 1, 1)}):
        assert json_text(not_json) is None, not_json
