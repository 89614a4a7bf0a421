"""Reading manifests from files and folders: order, multi-document files, lists, and located errors."""

from __future__ import annotations

import os
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.objects import Node, Pod, Queue
from kai_scheduler.sim import loader as loader_module
from kai_scheduler.sim.loader import LoadedObject, load_manifests


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return str(path)


def pod_doc(name: str, namespace: str = "default", cpu: str = "1") -> str:
    return textwrap.dedent(
        f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}, namespace: {namespace}}}
        spec:
          schedulerName: kai-scheduler
          containers: [{{name: main, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
        """
    )


def names(loaded: list[LoadedObject]) -> list[str]:
    return [entry.obj.metadata.name for entry in loaded]


def load_error(paths: list[str]) -> str:
    with pytest.raises(ManifestError) as caught:
        load_manifests(paths)
    text = str(caught.value)
    assert "\n" not in text
    return text


# --- what is loaded, in which order -------------------------------------------------------------


def test_multi_document_file_keeps_document_order_and_positions(tmp_path: Path) -> None:
    source = write(
        tmp_path / "cluster.yaml",
        textwrap.dedent(
            """
        # the cluster
        apiVersion: v1
        kind: Node
        metadata: {name: node0}
        status: {allocatable: {cpu: "32", nvidia.com/gpu: "4"}}
        ---
        apiVersion: scheduling.run.ai/v2
        kind: Queue
        metadata: {name: team-a}
        spec: {resources: {}}
        ---
        """
        )
        + pod_doc("a-0"),
    )
    loaded = load_manifests([source])
    assert [type(entry.obj) for entry in loaded] == [Node, Queue, Pod]
    assert [(entry.source, entry.index, entry.item) for entry in loaded] == [
        (source, 1, None),
        (source, 2, None),
        (source, 3, None),
    ]
    assert [entry.line for entry in loaded] == [2, 7, 12]


def test_empty_documents_are_skipped_but_still_counted(tmp_path: Path) -> None:
    source = write(tmp_path / "x.yaml", "---\n# nothing here\n---\n" + pod_doc("a-0") + "---\n---\n")
    loaded = load_manifests([source])
    assert names(loaded) == ["a-0"]
    assert loaded[0].index == 2  # the number a user counts by `---` separators


def test_empty_file_loads_nothing(tmp_path: Path) -> None:
    assert load_manifests([write(tmp_path / "empty.yaml", "# just a comment\n")]) == []


def test_kind_list_items_are_separate_objects(tmp_path: Path) -> None:
    source = write(
        tmp_path / "list.yaml",
        """
        apiVersion: v1
        kind: List
        items:
        - apiVersion: scheduling.run.ai/v2
          kind: Queue
          metadata: {name: q0}
          spec: {resources: {}}
        - apiVersion: scheduling.run.ai/v2
          kind: Queue
          metadata: {name: q1}
          spec: {resources: {}}
        """,
    )
    loaded = load_manifests([source])
    assert names(loaded) == ["q0", "q1"]
    assert [(entry.index, entry.item, entry.line) for entry in loaded] == [(1, 1, 4), (1, 2, 8)]


def test_typed_list_items_inherit_kind_and_api_version(tmp_path: Path) -> None:
    # What `GET /api/v1/pods` returns: the items carry no apiVersion or kind of their own.
    source = write(
        tmp_path / "pods.yaml",
        """
        apiVersion: v1
        kind: PodList
        items:
        - metadata: {name: a-0}
        - metadata: {name: a-1}
        """,
    )
    loaded = load_manifests([source])
    assert names(loaded) == ["a-0", "a-1"]
    assert all(isinstance(entry.obj, Pod) for entry in loaded)


def test_empty_list_loads_nothing(tmp_path: Path) -> None:
    assert load_manifests([write(tmp_path / "list.yaml", "apiVersion: v1\nkind: List\nitems: []\n")]) == []


def test_files_keep_the_given_order(tmp_path: Path) -> None:
    second = write(tmp_path / "b.yaml", pod_doc("from-b"))
    first = write(tmp_path / "a.yaml", pod_doc("from-a"))
    assert names(load_manifests([second, first])) == ["from-b", "from-a"]


def test_folders_are_read_recursively_in_sorted_order(tmp_path: Path) -> None:
    folder = tmp_path / "workload"
    write(folder / "b.yaml", pod_doc("b"))
    write(folder / "a.yml", pod_doc("a"))
    write(folder / "c" / "d.yaml", pod_doc("c-d"))
    write(folder / "c" / "a.yaml", pod_doc("c-a"))
    write(folder / "notes.txt", "not a manifest: {")
    write(folder / "README.md", "# ignored")
    assert names(load_manifests([str(folder)])) == ["a", "b", "c-a", "c-d"]


def test_files_and_folders_mix_in_the_given_order(tmp_path: Path) -> None:
    write(tmp_path / "pods" / "p.yaml", pod_doc("p"))
    nodes = write(tmp_path / "nodes.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\n")
    assert names(load_manifests([str(tmp_path / "pods"), nodes])) == ["p", "n0"]


def test_a_file_with_another_extension_is_read_when_named_explicitly(tmp_path: Path) -> None:
    assert names(
        load_manifests(
            [write(tmp_path / "pods.json", '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}')]
        )
    ) == ["n"]


def test_yaml_anchors_and_merge_keys_work(tmp_path: Path) -> None:
    source = write(
        tmp_path / "x.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata:
          name: a-0
          labels: &labels {kai.scheduler/queue: team-a}
          annotations:
            <<: {pod-group-name: job}
        spec:
          containers:
          - &main {name: main, resources: {requests: {cpu: 500m}}}
          - *main
        """,
    )
    (entry,) = load_manifests([source])
    assert isinstance(entry.obj, Pod)
    assert entry.obj.metadata.labels == {"kai.scheduler/queue": "team-a"}
    assert entry.obj.metadata.annotations == {"pod-group-name": "job"}
    assert entry.obj.resource_requests() == {"cpu": 1}


def test_same_name_in_different_namespaces_or_kinds_is_not_a_duplicate(tmp_path: Path) -> None:
    source = write(
        tmp_path / "x.yaml",
        pod_doc("a", "ns1")
        + "---\n"
        + pod_doc("a", "ns2")
        + "---\napiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\n"
        + "metadata: {name: a, namespace: ns1}\n",
    )
    assert len(load_manifests([source])) == 3


# --- errors -------------------------------------------------------------------------------------


def test_validation_error_names_file_document_line_object_and_field(tmp_path: Path) -> None:
    source = write(tmp_path / "x.yaml", pod_doc("a-0") + "---\n" + pod_doc("a-1", cpu="abc"))
    text = load_error([source])
    assert text.startswith(
        f"{source}: document 2 at line 8 (Pod default/a-1): spec.containers[0].resources.requests.cpu: "
        "'abc' is not a valid quantity"
    )


def test_error_in_a_list_item_names_the_item(tmp_path: Path) -> None:
    source = write(
        tmp_path / "x.yaml",
        """
        apiVersion: scheduling.run.ai/v2
        kind: Queue
        metadata: {name: q}
        spec: {resources: {}}
        ---
        apiVersion: v1
        kind: List
        items:
        - {apiVersion: v1, kind: Node, metadata: {name: n0}}
        - {apiVersion: v1, kind: Node, metadata: {name: n1}}
        - {apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: lots}}}
        """,
    )
    text = load_error([source])
    assert text.startswith(
        f"{source}: document 2, item 3 at line 11 (Node n2): status.allocatable.cpu: 'lots'"
    )


def test_list_items_that_are_not_a_list_are_rejected(tmp_path: Path) -> None:
    source = write(tmp_path / "x.yaml", "apiVersion: v1\nkind: List\nitems: {a: 1}\n")
    assert load_error([source]) == f"{source}: document 1 at line 1 (List): items: expected a list of objects"


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: a\nspec: {}\n", 4, 5),
        ("apiVersion: v1\nkind: Pod\n  metadata: x\n", 3, 11),
        ("apiVersion: v1\n\tkind: Pod\n", 2, 1),
    ],
)
def test_yaml_syntax_error_names_line_and_column(tmp_path: Path, text: str, line: int, column: int) -> None:
    source = write(tmp_path / "x.yaml", text)
    message = load_error([source])
    assert message.startswith(f"{source}: line {line}, column {column}: "), message


def test_syntax_error_in_a_later_document_is_reported_with_its_line(tmp_path: Path) -> None:
    source = write(tmp_path / "x.yaml", pod_doc("a-0") + "---\nkind: [Pod\n")
    assert load_error([source]).startswith(f"{source}: line 9, column 1: ")


def test_python_tags_are_refused_by_the_safe_loader(tmp_path: Path) -> None:
    source = write(tmp_path / "x.yaml", "!!python/object/apply:os.system ['true']\n")
    assert load_error([source]).startswith(f"{source}: line 1, column 1: ")


def test_bytes_that_are_not_text_are_a_manifest_error(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(b"apiVersion: v1\nkind: \xff\xfe\x00Pod\n")
    assert load_error([str(path)]) == f"{path}: not a text file: invalid leading UTF-8 octet at byte 21"


def test_self_referencing_alias_is_a_manifest_error(tmp_path: Path) -> None:
    source = write(tmp_path / "x.yaml", "apiVersion: v1\nkind: Pod\nmetadata: &m {name: a, labels: *m}\n")
    assert load_error([source]).startswith(f"{source}: ")


def test_missing_path_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    assert load_error([missing]) == f"{missing}: no such file or folder"


def test_folder_without_manifests_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "notes.txt", "hello")
    assert load_error([str(tmp_path)]) == f"{tmp_path}: folder holds no *.yaml or *.yml files"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
def test_unreadable_file_is_named(tmp_path: Path) -> None:
    source = write(tmp_path / "x.yaml", pod_doc("a"))
    os.chmod(source, 0)
    assert load_error([source]).startswith(f"{source}: cannot read: ")


def test_a_folder_given_where_a_file_is_expected_is_not_read_as_yaml(tmp_path: Path) -> None:
    (tmp_path / "pods.yaml").mkdir()  # a folder that looks like a file: searched, and found empty
    assert load_error([str(tmp_path / "pods.yaml")]).endswith("folder holds no *.yaml or *.yml files")


def test_duplicate_objects_name_both_places(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", pod_doc("a-0"))
    second = write(
        tmp_path / "b.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\n" + pod_doc("a-0")
    )
    assert load_error([first, second]) == (
        f"{second}: document 2 at line 5 (Pod default/a-0): "
        f"duplicate Pod default/a-0: already defined in {first} document 1 (line 1)"
    )


def test_duplicate_cluster_scoped_objects_are_detected(tmp_path: Path) -> None:
    source = write(
        tmp_path / "x.yaml",
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: q}\nspec: {resources: {}}\n---\n"
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: q, namespace: other}\n"
        "spec: {resources: {}}\n",
    )
    assert "duplicate Queue q" in load_error([source])


def test_pods_without_namespace_collide_with_pods_in_default(tmp_path: Path) -> None:
    source = write(
        tmp_path / "x.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n" + pod_doc("a", "default"),
    )
    assert "duplicate Pod default/a" in load_error([source])


# --- scale --------------------------------------------------------------------------------------


def test_loads_thousands_of_documents(tmp_path: Path) -> None:
    source = write(tmp_path / "pods.yaml", "---\n".join(pod_doc(f"p-{i}") for i in range(2000)))
    loaded = load_manifests([source])
    assert len(loaded) == 2000
    assert loaded[-1].index == 2000
    assert names(loaded)[:3] == ["p-0", "p-1", "p-2"]


def test_read_failures_become_manifest_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write(tmp_path / "x.yaml", pod_doc("a"))

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(loader_module, "open", refuse, raising=False)
    assert load_error([source]) == f"{source}: cannot read: Permission denied"


def test_scalars_resolve_as_in_any_yaml_1_1_tool(tmp_path: Path) -> None:
    # Kubernetes reads YAML 1.1 too: `yes` is a boolean, 0x10 is 16, an unquoted timestamp is a time,
    # and quoting keeps a string.
    source = write(
        tmp_path / "x.yaml",
        """
        apiVersion: v1
        kind: Node
        metadata: {name: n0, creationTimestamp: 2026-01-01T00:00:10Z, labels: {zone: "yes"}}
        spec: {unschedulable: yes}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p, annotations: {gpu-fraction: "0.5"}}
        spec: {priority: 0x10, nodeName: null}
        """,
    )
    node, pod = (entry.obj for entry in load_manifests([source]))
    assert isinstance(node, Node)
    assert isinstance(pod, Pod)
    assert node.spec.unschedulable is True
    assert node.metadata.labels == {"zone": "yes"}
    assert node.metadata.creation_timestamp == datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert pod.spec.priority == 16
    assert pod.spec.node_name is None
