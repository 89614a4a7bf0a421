"""Keys under KAI's prefix `kai.scheduler/` that no component reads: a warning naming the closest key KAI
reads, on pods, PodGroups, Queues, nodes and workloads' pod templates; KAI's v0.17 keys are no warning."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_scheduler.api.kai_keys import KNOWN_KAI_KEYS, unknown_kai_key
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.strict import near_miss_keys_in, notices

SOURCE_ROOT = Path(__file__).resolve().parents[3] / "src" / "kai_scheduler"


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("kai.scheduler/preemtion-delay", "kai.scheduler/preemption-delay"),
        ("kai.scheduler/staleness-grace", "kai.scheduler/staleness-grace-period"),
        ("kai.scheduler/batch-minmember", "kai.scheduler/batch-min-member"),
        ("kai.scheduler/queue-name", "kai.scheduler/queue"),
        ("kai.scheduler/skip-pod-grouper", "kai.scheduler/skip-podgrouper"),
    ],
)
def test_an_unknown_kai_key_names_the_closest_known_one(key: str, meant: str) -> None:
    assert unknown_kai_key(key) == meant


def test_an_unknown_kai_key_far_from_every_known_one_still_gets_a_suggestion() -> None:
    assert unknown_kai_key("kai.scheduler/xyz") in KNOWN_KAI_KEYS


@pytest.mark.parametrize(
    "key",
    [
        "kai.scheduler/preemption-delay",
        "kai.scheduler/last-eviction-timestamp",
        "kai.scheduler/staleness-grace-period",
        "kai.scheduler/skip-podgrouper",
        "kai.scheduler/batch-min-member",
        "kai.scheduler/numa-placement-predicted",
        "kai.scheduler/segment-size",
        "kai.scheduler/queue",
        "kai.scheduler/estimated-start",
        "simulation.kai.scheduler/duration",  # the simulator's, under its own prefix
        "example.com/kai.scheduler-ish",
        "team",
    ],
)
def test_known_keys_and_keys_under_other_prefixes_are_no_warning(key: str) -> None:
    assert unknown_kai_key(key) is None
    pod = parse_object(pod_manifest("p", annotations={key: "1"}), "in.yaml", 1)
    assert notices(pod) == []


def test_every_kai_key_this_project_names_in_its_code_is_known() -> None:
    # A key one component writes and another reads must never be warned about.
    written = set()
    for path in SOURCE_ROOT.rglob("*.py"):
        written.update(re.findall(r'"(kai\.scheduler/[a-z][a-z0-9.-]*)"', path.read_text()))
    api_versions = {key for key in written if re.fullmatch(r"kai\.scheduler/v\d+(alpha\d+|beta\d+)?", key)}
    assert written - api_versions - KNOWN_KAI_KEYS == set()


def _labelled(manifest: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {**manifest, "metadata": {**manifest["metadata"], "labels": labels}}


@pytest.mark.parametrize(
    "manifest",
    [pod_manifest("p", queue=None), pod_group_manifest("g", "q"), queue_manifest("q"), node_manifest("n")],
    ids=["pod", "podgroup", "queue", "node"],
)
def test_each_kind_kai_reads_keys_from_warns(manifest: dict[str, Any]) -> None:
    obj = parse_object(_labelled(manifest, {"kai.scheduler/preemption-dly": "1m"}), "in.yaml", 1)
    assert [(n.path, n.message) for n in notices(obj) if "labels" in n.path] == [
        (
            "metadata.labels.kai.scheduler/preemption-dly",
            '"kai.scheduler/preemption-dly" is not a key KAI reads; '
            'did you mean "kai.scheduler/preemption-delay"?',
        )
    ]


def test_a_workload_pod_template_key_warns_with_its_path() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "annotations": {"kai.scheduler/batch-min-membr": "2"}},
        "spec": {"template": {"metadata": {"annotations": {"kai.scheduler/preemption_delay": "1m"}}}},
    }
    found = [(n.path, n.message.rsplit(" ", 1)[1]) for n in near_miss_keys_in(job)]
    assert found == [
        ("metadata.annotations.kai.scheduler/batch-min-membr", '"kai.scheduler/batch-min-member"?'),
        (
            "spec.template.metadata.annotations.kai.scheduler/preemption_delay",
            '"kai.scheduler/preemption-delay"?',
        ),
    ]
