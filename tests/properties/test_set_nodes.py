"""`ClusterInputs.set_nodes` finds the nodes an informer's list replaced by walking it against the nodes
held, in order, without reading the names of the nodes it still holds; under random lists (the objects
held, equal copies, edited nodes, other orders, names added, dropped or twice) it answers as the plain
comparison of the lists by name does, and holds the same objects in the same order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import node
from kai_scheduler.api.objects import Node
from kai_scheduler.model.cache.inputs import ClusterInputs, NodesSet

NAMES = ("n1", "n2", "n3", "n4")

# Each step is a list of (name, what): the object held, an equal copy, a cordoned node, a node with
# more GPUs, or a node read afresh.
entries = st.lists(
    st.tuples(st.sampled_from(NAMES), st.sampled_from(("held", "copy", "cordon", "gpus", "fresh"))),
    max_size=6,
)


def _made(name: str, what: str, held: dict[str, Node]) -> Node:
    current = held.get(name)
    if what == "held" and current is not None:
        return current
    if what == "copy" and current is not None:
        return current.model_copy()
    if what == "cordon":
        return node(name, gpus=4, unschedulable=True)
    if what == "gpus":
        return node(name, gpus=8)
    return node(name, gpus=4)


def _plain(held: dict[str, Node], nodes: list[Node]) -> tuple[NodesSet | None, dict[str, Node]]:
    by_name = {n.metadata.name: n for n in nodes}
    if by_name == held:
        return None, held
    if by_name.keys() != held.keys():
        return NodesSet(same_names=False, replaced={}), by_name
    return NodesSet(
        same_names=True, replaced={name: held[name] for name, n in by_name.items() if n is not held[name]}
    ), by_name


@settings(max_examples=300, deadline=None)
@given(st.lists(entries, min_size=1, max_size=8))
def test_set_nodes_answers_as_the_plain_comparison(steps: list[list[tuple[str, str]]]) -> None:
    inputs = ClusterInputs(None)
    for step in steps:
        held = inputs.nodes
        nodes = [_made(name, what, held) for name, what in step]
        expected, holds = _plain(held, nodes)
        got = inputs.set_nodes(nodes)
        assert got == expected
        if got is not None and expected is not None:
            assert list(got.replaced) == list(expected.replaced)
            assert all(got.replaced[name] is was for name, was in expected.replaced.items())
        assert list(inputs.nodes) == list(holds)
        assert all(inputs.nodes[name] is n for name, n in holds.items())


def test_a_cordon_in_an_informers_list_replaces_that_node_alone() -> None:
    inputs = ClusterInputs(None)
    nodes = [node(name, gpus=4) for name in NAMES]
    inputs.set_nodes(nodes)
    cordoned = node("n2", gpus=4, unschedulable=True)
    assert inputs.set_nodes([nodes[0], cordoned, *nodes[2:]]) == NodesSet(
        same_names=True, replaced={"n2": nodes[1]}
    )
    assert inputs.nodes["n2"] is cordoned
    assert inputs.set_nodes([nodes[0], cordoned.model_copy(), *nodes[2:]]) is None  # equal: kept
    assert inputs.nodes["n2"] is cordoned
