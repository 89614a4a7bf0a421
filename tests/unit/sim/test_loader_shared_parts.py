"""Objects loaded from one template share what they repeat (`api/shared_parts.py`, the loader's strings),
and sharing never changes what is loaded or how an error in a repeated part is reported."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.objects import Container, Node, Pod
from kai_scheduler.api.shared_parts import SharedParts
from kai_scheduler.sim.loader import load_manifests


def pod(name: str, cpu: str, *, queue: str = "team-a", phase: str = "Running", limits: str = "") -> str:
    return textwrap.dedent(
        f"""\
        apiVersion: v1
        kind: Pod
        metadata:
          name: {name}
          labels: {{kai.scheduler/queue: {queue}}}
        spec:
          schedulerName: kai-scheduler
          containers:
          - name: main
            resources: {{requests: {{cpu: {cpu}, memory: 1Gi}}{limits}}}
        status: {{phase: {phase}}}
        """
    )


def load_pods(tmp_path: Path, *docs: str) -> list[Pod]:
    path = tmp_path / "pods.yaml"
    path.write_text("---\n".join(docs))
    pods = [entry.obj for entry in load_manifests([str(path)])]
    assert all(isinstance(p, Pod) for p in pods)
    return pods  # type: ignore[return-value]


def load_error(tmp_path: Path, *docs: str) -> str:
    path = tmp_path / "pods.yaml"
    path.write_text("---\n".join(docs))
    with pytest.raises(ManifestError) as caught:
        load_manifests([str(path)])
    return str(caught.value)


def test_pods_of_one_template_share_their_containers_status_and_strings(tmp_path: Path) -> None:
    a, b, other = load_pods(tmp_path, pod("a", "'2'"), pod("b", "'2'"), pod("c", "'4'", phase="Pending"))
    assert a.spec.containers[0] is b.spec.containers[0]
    assert a.status is b.status
    assert a.metadata.labels["kai.scheduler/queue"] is b.metadata.labels["kai.scheduler/queue"]
    # What differs is not shared, and each pod reads as its own manifest says.
    assert other.spec.containers[0] is not a.spec.containers[0]
    assert other.status is not a.status
    assert [p.spec.containers[0].resources.requests["cpu"] for p in (a, b, other)] == [2, 2, 4]
    assert [p.status.phase for p in (a, b, other)] == ["Running", "Running", "Pending"]
    assert [p.metadata.name for p in (a, b, other)] == ["a", "b", "c"]


def test_nodes_of_one_type_share_their_status(tmp_path: Path) -> None:
    node = "apiVersion: v1\nkind: Node\nmetadata: {{name: {}}}\nstatus: {{allocatable: {{cpu: '8'}}}}\n"
    path = tmp_path / "nodes.yaml"
    path.write_text("---\n".join(node.format(name) for name in ("n0", "n1")))
    first, second = (entry.obj for entry in load_manifests([str(path)]))
    assert isinstance(first, Node) and isinstance(second, Node)
    assert first.status is second.status
    assert first.metadata.name == "n0" and second.metadata.name == "n1"


def test_values_python_holds_equal_are_not_one_part(tmp_path: Path) -> None:
    # `1` (an int) is a valid quantity; `true` (equal to 1 in Python) is not, and is still refused after a
    # pod with `1` in the same place.
    message = load_error(tmp_path, pod("a", "1"), pod("b", "true"))
    assert message == (
        f"{tmp_path / 'pods.yaml'}: document 2 at line 13 (Pod default/b): "
        "spec.containers[0].resources.requests.cpu: expected a quantity, got True"
    )


def test_an_invalid_repeated_part_is_reported_at_its_full_path(tmp_path: Path) -> None:
    limits = ", limits: {cpu: '1'}"
    message = load_error(tmp_path, pod("a", "'2'", limits=limits), pod("b", "'2'", limits=limits))
    assert (
        "document 1 at line 1 (Pod default/a): spec.containers[0].resources.requests.cpu: must not "
        in message
    )


def test_a_part_invalid_on_its_own_is_reported_by_the_whole_object(tmp_path: Path) -> None:
    message = load_error(tmp_path, pod("a", "'2'"), pod("b", "two"))
    assert "document 2 at line 13 (Pod default/b): spec.containers[0].resources.requests.cpu: " in message


def test_only_a_shared_container_counts_as_checked_once_noted() -> None:
    shared = SharedParts()
    container = {"name": "main", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}
    made = shared.substitute(Pod, {"spec": {"containers": [container]}})["spec"]["containers"][0]
    own = Container.model_validate(container)
    shared.note_checked(own)  # not a shared part: another object may later have its id
    shared.note_checked(made)
    assert not shared.checked(own)
    assert shared.checked(made)


def test_a_container_unlike_one_checked_before_is_checked_itself(tmp_path: Path) -> None:
    limits = ", limits: {cpu: '1'}"
    message = load_error(tmp_path, pod("a", "'1'", limits=limits), pod("b", "'2'", limits=limits))
    assert "document 2 at line 13 (Pod default/b): spec.containers[0].resources.requests.cpu: must not " in (
        message
    )
