"""Reading a file through its documents' skeletons gives PyYAML's documents exactly, or is not done.

Each case reads the same text both ways, through `loader._file_documents` (skeletons first) and through
PyYAML alone (`loader._documents`), and compares every document: its data (types included: `repr` tells
`1`, `'1'`, `True` and `1.0` apart), its place, its line and its list items' lines.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.sim import loader, yaml_templates
from kai_scheduler.sim.loader import load_manifests
from kai_scheduler.sim.yaml_templates import Document
from kai_scheduler.sim.yaml_templates import documents as templated

Read = list[tuple[str, int, int, tuple[int, ...]]] | str  # the documents, or the error's message


def read_both(text: str) -> Read:
    """What both ways read of `text` (they must agree): the documents, or the error's message."""
    through_skeletons = read(text, loader._file_documents)
    assert through_skeletons == read(text, loader._documents)
    return through_skeletons


def read(text: str, documents: Callable[[str, bytes], Iterator[Document]]) -> Read:
    try:
        return [(repr(d.data), d.index, d.line, d.item_lines) for d in documents("x.yaml", text.encode())]
    except ManifestError as error:
        return str(error)


def all_through_skeletons(text: str) -> bool:
    """Whether every document of `text` was read through skeletons (none left to PyYAML)."""
    found = templated(text, lambda b: loader._documents("x.yaml", b), loader._Loader(b""))
    return None not in list(found)


def pod(n: int, **values: str) -> str:
    fields = {
        "name": f"run-{n:05d}",
        "namespace": f"team-{n % 3}",
        "cpu": f"'{n % 4 + 1}'",
        "memory": "64Gi",
        "gpu": f"'{n % 8}'",
        "node": f"node-{n % 7:04d}",
    } | values
    return textwrap.dedent(
        """\
        apiVersion: v1
        kind: Pod
        metadata:
          name: {name}
          namespace: {namespace}
          labels:
            kai.scheduler/queue: {namespace}
        spec:
          schedulerName: kai-scheduler
          containers:
          - name: main
            image: registry.example.com/bench:1
            resources:
              requests:
                cpu: {cpu}
                memory: {memory}
                nvidia.com/gpu: {gpu}
          nodeName: {node}
        status:
          phase: Running
        """
    ).format(**fields)


def indented(document: str) -> str:
    return document.replace("\n", "\n  ").rstrip(" ")


def dump(*documents: str) -> str:
    return "---\n".join(documents)


def test_a_dump_of_pods_of_one_shape_is_read_through_its_skeleton() -> None:
    text = dump(*(pod(n) for n in range(50)))
    documents = read_both(text)
    assert isinstance(documents, list)
    assert all_through_skeletons(text)
    assert [(index, line) for _, index, line, _ in documents[:3]] == [(1, 1), (2, 22), (3, 43)]
    assert len(documents) == 50


@pytest.mark.parametrize(
    "value",
    [
        # YAML 1.1 as PyYAML resolves plain scalars: booleans, integers in every base, sexagesimal,
        # floats, special floats, timestamps, null; and strings that only look like some of them.
        *("yes", "No", "on", "OFF", "true", "False", "y", "n", "null", "Null"),
        *("1", "-1", "017", "0o17", "0x1F", "0b101", "1_000", "1:30", "190:20:30", "+1"),
        *("1.5", "-0.5", "1e3", "1.0e+3", ".5", ".inf", ".NaN", "6.8523015e+5"),
        *("2026-01-01", "2026-01-01T10:00:00Z", "2026-01-01 10:00:00.5 +02:00"),
        *("500m", "64Gi", "a:b", "node-0001", "v1.2.3", "x/y", "a@b", "/path", "_x", ".hidden"),
        *("'8'", "'yes'", "''", "'a b # c'", '"8"', '""', '"a: b"', "'it''s'", '"tab\\t"'),
        *("~", "-", "- x", "a #c", "'unclosed", "[1, 2]", "{a: 1}", "&a x", "*a", "!!str 1", "|"),
    ],
)
def test_values_read_as_pyyaml_reads_them(value: str) -> None:
    text = dump(pod(0), pod(1, memory=value), pod(2, memory=value), pod(3))
    read_both(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# only a comment\n",
        "---\n",
        "---\n" + pod(0) + "---\n" + pod(1),  # `---` first
        pod(0) + "---\n",  # `---` last: a null document
        pod(0) + "---\n# nothing\n---\n" + pod(1),  # a document of comments: null, counted
        "# a heading\n\n" + pod(0) + "---\n" + pod(1),
        pod(0).rstrip("\n") + "\n---\n" + pod(1).rstrip("\n"),  # no newline at the end
        pod(0) + "---\n" + pod(1) + "---",
        # A key given twice: the later value wins, at the first one's place.
        pod(0) + "---\n" + pod(1).replace("status:\n", "status:\n  phase: Pending\n"),
        # A value continued on the next line is one string (`node-0001 - more`), not holes.
        *(
            pod(0) + "---\n" + pod(1).replace("  nodeName: node-0001\n", f"  nodeName: node-0001\n{more}")
            for more in ("    more\n", "    - more\n", "    -\n")
        ),
        pod(0) + "---\n" + pod(1).replace("memory: 64Gi\n", "memory: 64Gi # a comment\n"),
        pod(0) + "---\n" + pod(1).replace("phase: Running", "phase: Running\r"),
        pod(0) + "---\n" + pod(1).replace("  phase", "\tphase"),
        pod(0) + "---\n" + pod(1).replace("team-1", "équipe"),
        pod(0) + "---\n" + pod(1).replace("team-1", "kai-template-hole"),
        pod(0) + "---\n" + pod(1).replace("labels:\n", "labels: &l\n") + "  extra: *l\n",
        "apiVersion: v1\nkind: List\nitems:\n" + "".join(f"- {indented(pod(n))}" for n in range(2)),
        dump(*(pod(n) for n in range(3))) + "---\nkind: List\nitems:\n- a: 1\n-\n  b: 2\n",
    ],
    ids=lambda text: repr(text[:30]),
)
def test_documents_that_only_look_alike_read_as_pyyaml_reads_them(text: str) -> None:
    read_both(text)


def test_a_syntax_error_after_documents_read_through_skeletons_is_pyyaml_s() -> None:
    text = dump(*(pod(n) for n in range(5))) + "---\n" + pod(5).replace("  namespace:", " namespace:")
    problem = "did not find expected key (while parsing a block mapping)"
    assert read_both(text) == f"x.yaml: line 110, column 2: {problem}"


def test_an_error_in_a_skeleton_s_value_is_reported_at_its_document(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(dump(pod(0), pod(1, cpu="'lots'")))
    with pytest.raises(ManifestError) as caught:
        load_manifests([str(path)])
    assert str(caught.value).startswith(f"{path}: document 2 at line 22 (Pod team-1/run-00001): ")


def test_a_day_that_does_not_exist_is_a_one_line_error() -> None:
    text = dump(pod(0), pod(1), "apiVersion: v1\nkind: Node\nmetadata:\n  creationTimestamp: 2026-13-01\n")
    assert read_both(text) == "x.yaml: document 3 at line 43: not a date: month must be in 1..12"


def test_a_file_of_many_shapes_is_left_to_pyyaml_past_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yaml_templates, "MAX_SKELETONS", 2)
    shapes = [pod(n).replace("phase:", f"phase{n}:") for n in range(4)]
    text = dump(*shapes)
    found = list(templated(text, lambda b: loader._documents("x.yaml", b), loader._Loader(b"")))
    assert [d.index if d else None for d in found] == [1, 2, None]
    read_both(text)


def test_fields_are_checked_once_per_shape_and_kind(tmp_path: Path) -> None:
    # One skeleton (`kind` is one of its holes): a pod's spec.nodeName is known, a node's is not.
    pods = [f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{n}\nspec:\n  nodeName: n0\n" for n in range(3)]
    node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n0\nspec:\n  nodeName: n0\n"
    path = tmp_path / "x.yaml"
    path.write_text(dump(*pods[:2], node, pods[2]))
    with pytest.raises(ManifestError) as caught:
        load_manifests([str(path)])
    assert (
        str(caught.value)
        == f'{path}: document 3 at line 15 (Node n0): spec.nodeName: unknown field "nodeName"'
    )
