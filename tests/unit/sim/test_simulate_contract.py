"""`kai-scheduler simulate`: the public contract (the team's design note `simulate-contract.md`).

Every test drives the real command line (`kai_scheduler.cli.main`) on manifests written to a temporary
folder, and reads the JSON result document back, as benchmarks and users do.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import (
    node_manifest,
    pod_group_manifest,
    pod_manifest,
    priority_class_manifest,
    queue_manifest,
)
from kai_scheduler.cli import main

ALLOCATE_ONLY = {"actions": "allocate"}


def write(folder: Path, name: str, documents: list[dict[str, Any]]) -> str:
    path = folder / name
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return str(path)


class Sim:
    """Runs `kai-scheduler simulate` on documents; returns the result document."""

    def __init__(self, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.folder = folder
        self.capsys = capsys
        self.count = 0
        self.warnings: list[str] = []  # stderr of the last successful run

    def __call__(
        self, documents: list[dict[str, Any]], *flags: str, config: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self.count += 1
        path = write(self.folder, f"input{self.count}.yaml", documents)
        args = ["simulate", path, *flags, "--output", "json"]
        if config is not None:
            config_path = self.folder / f"config{self.count}.yaml"
            config_path.write_text(yaml.safe_dump(config))
            args += ["--config", str(config_path)]
        assert main(args) == 0, self.capsys.readouterr().err
        captured = self.capsys.readouterr()
        self.warnings = captured.err.splitlines()
        return json.loads(captured.out)  # type: ignore[no-any-return]

    def fails(self, args: list[str]) -> str:
        """Runs and expects exit status 2 with exactly one line on stderr; returns that line."""
        self.capsys.readouterr()
        assert main(args) == 2
        captured = self.capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.splitlines()
        assert len(lines) == 1, captured.err
        assert lines[0].startswith("kai-scheduler: error: ")
        assert "Traceback" not in captured.err
        return lines[0]


@pytest.fixture
def sim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Sim:
    return Sim(tmp_path, capsys)


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in items}


def decision_rows(document: dict[str, Any]) -> list[tuple[int, str, str, str]]:
    return [(d["cycle"], d["type"], d["pod"].split("/")[1], d["node"]) for d in document["decisions"]]


# --- the result document -------------------------------------------------------------------------


def test_every_field_of_the_result_document(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=4, cpu="16", memory="64Gi"),
        queue_manifest("dept", gpu=4),
        queue_manifest("team", gpu=3, parent="dept"),
        queue_manifest("idle", gpu=1, parent="dept"),
        pod_manifest("whole", "team", gpus=2, cpu="2", memory="4Gi"),
        pod_manifest("frac", "team", fraction=0.5, cpu="500m", memory="1Gi"),
        pod_group_manifest("g", "team", min_member=2),
        pod_manifest("g-0", "team", group="g", gpus=1),
        pod_manifest("g-1", "team", group="g", gpus=1),
    ]
    doc = sim(documents)
    assert set(doc) == {"summary", "pods", "podGroups", "queues", "decisions", "cycleSeconds"}

    summary = doc["summary"]
    assert set(summary) == {"cycles", "time", "steady", "pods", "gpu"}
    assert summary["cycles"] == 2
    assert summary["time"] == 1.0
    assert summary["steady"] is True
    assert summary["pods"] == {"Running": 2, "Pending": 2, "Succeeded": 0, "Failed": 0}
    assert summary["gpu"] == {"capacity": 4.0, "allocated": 2.5}

    pods = by_name(doc["pods"])
    assert set(pods) == {"whole", "frac", "g-0", "g-1"}
    for entry in doc["pods"]:
        assert set(entry) == {
            "namespace",
            "name",
            "podGroup",
            "queue",
            "phase",
            "node",
            "gpuGroups",
            "gpu",
            "scheduledAt",
            "evictions",
        }
    assert pods["whole"] == {
        "namespace": "default",
        "name": "whole",
        "podGroup": pods["whole"]["podGroup"],
        "queue": "team",
        "phase": "Running",
        "node": "n0",
        "gpuGroups": [],
        "gpu": 2.0,
        "scheduledAt": 0.0,
        "evictions": 0,
    }
    assert pods["frac"]["gpu"] == 0.5
    assert len(pods["frac"]["gpuGroups"]) == 1
    # the gang of 2 does not fit next to 2.5 GPUs: pending, no node
    assert pods["g-0"]["phase"] == "Pending"
    assert pods["g-0"]["node"] is None
    assert pods["g-0"]["gpuGroups"] == []
    assert pods["g-0"]["scheduledAt"] is None
    assert pods["g-0"]["podGroup"] == "default/g"

    groups = by_name(doc["podGroups"])
    for entry in doc["podGroups"]:
        # (unschedulableCode: only beside a reason)
        assert set(entry) - {"unschedulableCode"} == {
            "namespace",
            "name",
            "queue",
            "minMember",
            "running",
            "pending",
            "unschedulableReason",
            "estimatedStart",
        }
    assert groups["g"]["minMember"] == 2
    # The gang waits behind pods that run for good (no duration): no estimate; the others started at 0.
    assert groups["g"]["estimatedStart"] is None
    assert (groups["g"]["running"], groups["g"]["pending"]) == (0, 2)
    assert isinstance(groups["g"]["unschedulableReason"], str) and groups["g"]["unschedulableReason"]
    assert groups["g"]["unschedulableCode"] == "Unschedulable"
    whole_group = pods["whole"]["podGroup"].split("/")[1]
    assert groups[whole_group]["unschedulableReason"] is None
    assert groups[whole_group]["minMember"] == 1
    assert groups[whole_group]["estimatedStart"] == 0.0

    queues = by_name(doc["queues"])
    assert [q["name"] for q in doc["queues"]] == ["dept", "team", "idle"]  # parents and idle ones too
    for entry in doc["queues"]:
        assert set(entry) == {"name", "parent", "fairShare", "allocated", "requested"}
        for key in ("fairShare", "allocated", "requested"):
            assert set(entry[key]) == {"gpu", "cpu", "memory"}
    assert queues["dept"]["parent"] is None
    assert queues["team"]["parent"] == "dept"
    team = queues["team"]
    assert team["allocated"] == {"gpu": 2.5, "cpu": 2.5, "memory": 5 * 2**30}  # cores, bytes
    assert team["requested"]["gpu"] == 4.5
    assert team["requested"]["cpu"] == pytest.approx(2.5 + 2 * 1)
    assert queues["dept"]["allocated"]["gpu"] == 2.5
    assert queues["idle"]["allocated"]["gpu"] == 0.0
    assert team["fairShare"]["gpu"] == pytest.approx(4.0)  # quota 3 + the 1 GPU that idle does not ask for

    for decision in doc["decisions"]:
        assert set(decision) == {"cycle", "time", "action", "type", "pod", "node", "gpuGroups", "reason"}
        assert decision["reason"]
    assert decision_rows(doc) == [(1, "bind", "whole", "n0"), (1, "bind", "frac", "n0")]
    assert doc["decisions"][0]["action"] == "allocate"
    assert doc["decisions"][1]["gpuGroups"] == pods["frac"]["gpuGroups"]

    assert len(doc["cycleSeconds"]) == summary["cycles"]
    assert all(isinstance(s, float) and s >= 0 for s in doc["cycleSeconds"])


def test_namespaces_default_to_default_and_are_kept_otherwise(sim: Sim) -> None:
    doc = sim(
        [
            node_manifest("n0"),
            queue_manifest("q"),
            pod_manifest("a", gpus=1),
            pod_manifest("b", gpus=1, namespace="research"),
        ]
    )
    pods = by_name(doc["pods"])
    assert pods["a"]["namespace"] == "default"
    assert pods["b"]["namespace"] == "research"
    assert {d["pod"] for d in doc["decisions"]} == {"default/a", "research/b"}


def test_a_pod_group_wins_over_its_pods_queue(sim: Sim) -> None:
    doc = sim(
        [
            node_manifest("n0"),
            queue_manifest("a"),
            queue_manifest("b"),
            pod_group_manifest("g", "a"),
            pod_manifest("g-0", "b", group="g", gpus=1),
        ]
    )
    assert doc["pods"][0]["queue"] == "a"
    assert by_name(doc["queues"])["a"]["allocated"]["gpu"] == 1.0


# --- creation order ------------------------------------------------------------------------------


def _one_gpu_race(first: str, second: str) -> list[dict[str, Any]]:
    return [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        pod_manifest(first, gpus=1),
        pod_manifest(second, gpus=1),
    ]


def test_an_earlier_document_is_older_and_wins_ties(sim: Sim) -> None:
    assert decision_rows(sim(_one_gpu_race("x", "y"))) == [(1, "bind", "x", "n0")]
    assert decision_rows(sim(_one_gpu_race("y", "x"))) == [(1, "bind", "y", "n0")]


def test_files_of_a_folder_are_read_in_sorted_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "input"
    folder.mkdir()
    write(folder, "b-pods.yaml", [pod_manifest("from-b", gpus=1)])
    write(folder, "a-pods.yaml", [pod_manifest("from-a", gpus=1)])
    write(folder, "0-cluster.yaml", [node_manifest("n0", gpus=1), queue_manifest("q")])
    assert main(["simulate", str(folder), "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert decision_rows(doc) == [(1, "bind", "from-a", "n0")]


def test_creation_timestamps_order_objects_on_the_start_clock(sim: Sim) -> None:
    # "stamped" is created exactly at 2026-01-01T00:00:00Z; "plain" has no timestamp, so it is created just
    # before second 0. With the default start, plain is older; with a start an hour later, stamped is.
    documents = [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        pod_manifest("stamped", gpus=1, created="2026-01-01T00:00:00Z"),
        pod_manifest("plain", gpus=1),
    ]
    assert decision_rows(sim(documents)) == [(1, "bind", "plain", "n0")]
    later = sim(documents, "--start", "2026-01-01T01:00:00Z")
    assert decision_rows(later) == [(1, "bind", "stamped", "n0")]


# --- priority classes ----------------------------------------------------------------------------


def test_the_four_shipped_priority_classes(sim: Sim) -> None:
    # A queue with no GPU quota: preemptible jobs (priority < 100) may borrow, non-preemptible may not.
    documents = [
        node_manifest("n0", gpus=8),
        queue_manifest("q", gpu=0),
        pod_manifest("train", gpus=1, priority_class="train"),
        pod_manifest("build-preemptible", gpus=1, priority_class="build-preemptible"),
        pod_manifest("build", gpus=1, priority_class="build"),
        pod_manifest("inference", gpus=1, priority_class="inference"),
    ]
    doc = sim(documents, config=ALLOCATE_ONLY)
    phases = {p["name"]: p["phase"] for p in doc["pods"]}
    assert phases == {
        "train": "Running",
        "build-preemptible": "Running",
        "build": "Pending",
        "inference": "Pending",
    }
    reasons = {g["name"]: g["unschedulableReason"] for g in doc["podGroups"]}
    assert [r for r in reasons.values() if r is not None] and all(
        r.startswith("NonPreemptibleOverQuota") for r in reasons.values() if r is not None
    )
    # priority order: inference (125) > build (100) > build-preemptible (75) > train (50)
    order_doc = sim([node_manifest("n0", gpus=1), queue_manifest("q"), *documents[2:]], config=ALLOCATE_ONLY)
    assert decision_rows(order_doc) == [(1, "bind", "inference", "n0")]


def test_a_redefined_priority_class_replaces_the_shipped_one(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=8),
        queue_manifest("q", gpu=0),
        priority_class_manifest("train", 150),
        pod_manifest("train", gpus=1, priority_class="train"),
    ]
    doc = sim(documents, config=ALLOCATE_ONLY)
    assert doc["pods"][0]["phase"] == "Pending"  # now non-preemptible, and the queue has no quota
    assert doc["podGroups"][0]["unschedulableReason"].startswith("NonPreemptibleOverQuota")


def test_custom_and_global_default_priority_classes(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        priority_class_manifest("urgent", 1000),
        priority_class_manifest("everyone", 90, global_default=True),
        pod_manifest("unclassed", gpus=1),  # gets the global default, 90 > train's 50
        pod_manifest("trainee", gpus=1, priority_class="train"),
    ]
    assert decision_rows(sim(documents, config=ALLOCATE_ONLY)) == [(1, "bind", "unclassed", "n0")]
    documents.append(pod_manifest("vip", gpus=1, priority_class="urgent"))
    assert decision_rows(sim(documents, config=ALLOCATE_ONLY)) == [(1, "bind", "vip", "n0")]


# --- how long to run -----------------------------------------------------------------------------


def _chain(n: int, duration: str = "10s") -> list[dict[str, Any]]:
    """One GPU and n pods that each run `duration`: one bind per completion."""
    return [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        *[pod_manifest(f"p{i}", gpus=1, duration=duration) for i in range(n)],
    ]


def test_cycles_runs_exactly_n_cycles(sim: Sim) -> None:
    doc = sim(_chain(5), "--cycles", "3")
    assert doc["summary"]["cycles"] == 3
    assert len(doc["cycleSeconds"]) == 3
    assert {d["cycle"] for d in doc["decisions"]} <= {1, 2, 3}
    one = sim([node_manifest("n0"), queue_manifest("q")], "--cycles", "1")
    assert one["summary"]["cycles"] == 1


def test_cycles_keeps_running_after_the_steady_state(sim: Sim) -> None:
    doc = sim([node_manifest("n0"), queue_manifest("q"), pod_manifest("p", gpus=1)], "--cycles", "4")
    assert doc["summary"]["cycles"] == 4
    assert doc["summary"]["steady"] is True


def test_steady_state_ends_the_run(sim: Sim) -> None:
    doc = sim(_chain(3))
    assert doc["summary"]["steady"] is True
    assert doc["summary"]["pods"] == {"Running": 0, "Pending": 0, "Succeeded": 3, "Failed": 0}
    binds = [(d["pod"], d["time"]) for d in doc["decisions"] if d["type"] == "bind"]
    assert binds == [("default/p0", 0.0), ("default/p1", 10.0), ("default/p2", 20.0)]
    assert doc["summary"]["time"] >= 30.0  # p2 completes at 30


def test_max_cycles_reached_is_reported_as_not_steady(sim: Sim) -> None:
    doc = sim(_chain(10, duration="1s"), "--max-cycles", "3")
    assert doc["summary"]["cycles"] == 3
    assert doc["summary"]["steady"] is False


def test_until_stops_at_the_simulated_time(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=2),
        queue_manifest("q"),
        pod_manifest("short", gpus=1, duration="10s"),
        pod_manifest("mid", gpus=1, arrival="20s"),
        pod_manifest("late", gpus=1, arrival="2m"),
    ]
    doc = sim(documents, "--until", "60s")
    assert all(d["time"] <= 60.0 for d in doc["decisions"])
    pods = by_name(doc["pods"])
    assert pods["short"]["phase"] == "Succeeded"
    assert pods["mid"]["phase"] == "Running"
    assert pods["mid"]["scheduledAt"] == 20.0
    assert "late" not in pods or pods["late"]["phase"] == "Pending"
    assert doc["summary"]["time"] <= 60.0


def test_until_and_period(sim: Sim) -> None:
    doc = sim(_chain(20, duration="1s"), "--until", "9s", config={"period": "3s"})
    times = [d["time"] for d in doc["decisions"]]
    assert times == [0.0, 3.0, 6.0, 9.0]


# --- arrivals and durations ----------------------------------------------------------------------


def test_arrivals_and_durations(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        pod_manifest("first", gpus=1, arrival="10s", duration="5s"),
        pod_manifest("second", gpus=1, arrival=12, duration="1m"),
    ]
    doc = sim(documents)
    pods = by_name(doc["pods"])
    assert pods["first"]["scheduledAt"] == 10.0
    assert pods["first"]["phase"] == "Succeeded"
    assert pods["second"]["scheduledAt"] == 15.0  # waits for the GPU until first completes at 15
    assert pods["second"]["phase"] == "Succeeded"
    assert doc["summary"]["steady"] is True
    assert doc["summary"]["time"] >= 75.0


def test_a_pod_group_arrival_applies_to_all_its_pods(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=4),
        queue_manifest("q"),
        {**pod_group_manifest("g", min_member=2, arrival="30s")},
        pod_manifest("g-0", group="g", gpus=1),
        pod_manifest("g-1", group="g", gpus=1),
    ]
    doc = sim(documents)
    assert [(d["pod"], d["time"]) for d in doc["decisions"]] == [("default/g-0", 30.0), ("default/g-1", 30.0)]


def test_a_pod_without_duration_runs_until_the_end(sim: Sim) -> None:
    doc = sim([node_manifest("n0"), queue_manifest("q"), pod_manifest("forever", gpus=1)], "--until", "1h")
    assert doc["pods"][0]["phase"] == "Running"


# --- the cluster's starting state ----------------------------------------------------------------


def test_bound_pods_hold_their_resources_and_other_schedulers_pods_too(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=4),
        queue_manifest("q"),
        pod_manifest("already", gpus=1, node_name="n0", phase=None),
        pod_manifest("bound-pending", gpus=1, node_name="n0", phase="Pending"),
        pod_manifest("theirs", None, gpus=1, node_name="n0", scheduler="default-scheduler"),
        pod_manifest("theirs-unbound", None, gpus=4, scheduler="default-scheduler"),
        pod_manifest("done", gpus=4, node_name="n0", phase="Succeeded"),
        pod_manifest("new", gpus=1),
        pod_manifest("too-many", gpus=1),
    ]
    doc = sim(documents, config=ALLOCATE_ONLY)
    pods = by_name(doc["pods"])
    assert pods["already"]["phase"] == "Running" and pods["already"]["node"] == "n0"
    assert pods["bound-pending"]["phase"] == "Running"
    assert pods["done"]["phase"] == "Succeeded"
    assert pods["new"]["phase"] == "Running"
    assert pods["too-many"]["phase"] == "Pending"


def test_another_schedulers_pod_in_phase_unknown_still_occupies_its_node(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        pod_manifest("theirs", None, gpus=1, node_name="n0", phase="Unknown", scheduler="default-scheduler"),
        pod_manifest("mine", gpus=1),
    ]
    doc = sim(documents, config=ALLOCATE_ONLY)
    assert by_name(doc["pods"])["mine"]["phase"] == "Pending"


def test_a_running_shared_gpu_pod_keeps_its_gpu_group_id_and_others_can_join_it(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        pod_manifest("old", fraction=0.5, node_name="n0", labels={"runai-gpu-group": "my-gpu"}),
        pod_manifest("new", fraction=0.5),
    ]
    doc = sim(documents)
    pods = by_name(doc["pods"])
    assert pods["old"]["gpuGroups"] == ["my-gpu"]
    assert pods["new"]["gpuGroups"] == ["my-gpu"]
    assert doc["decisions"][0]["gpuGroups"] == ["my-gpu"]


def test_a_terminating_pod_is_gone_after_the_next_cycle_and_not_recreated(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        pod_manifest("leaving", gpus=1, node_name="n0", terminating=True),
    ]
    doc = sim(documents, "--cycles", "2")
    assert "leaving" not in by_name(doc["pods"])


def test_a_pod_pipelined_onto_a_terminating_pod_is_bound_before_the_steady_state(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        pod_manifest("leaving", gpus=1, node_name="n0", terminating=True),
        pod_manifest("next", gpus=1),
    ]
    doc = sim(documents)
    assert decision_rows(doc)[-1] == (2, "bind", "next", "n0")
    assert by_name(doc["pods"])["next"]["phase"] == "Running"


# --- output --------------------------------------------------------------------------------------


def test_output_json_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "in.yaml", [node_manifest("n0"), queue_manifest("q"), pod_manifest("p", gpus=1)])
    out = tmp_path / "result.json"
    assert main(["simulate", path, "--output", "json", "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    doc = json.loads(out.read_text())
    assert doc["summary"]["pods"]["Running"] == 1


def test_text_output_is_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "in.yaml", [node_manifest("n0"), queue_manifest("q"), pod_manifest("p", gpus=1)])
    assert main(["simulate", path]) == 0
    text = capsys.readouterr().out
    assert "1 running" in text
    out = tmp_path / "report.txt"
    assert main(["simulate", path, "--out", str(out)]) == 0
    assert "1 running" in out.read_text()


def test_pending_pods_still_exit_zero(sim: Sim) -> None:
    doc = sim([node_manifest("n0", gpus=1), queue_manifest("q"), pod_manifest("big", gpus=4)])
    assert doc["summary"]["pods"]["Pending"] == 1


# --- bad input -----------------------------------------------------------------------------------


def test_missing_file(sim: Sim, tmp_path: Path) -> None:
    line = sim.fails(["simulate", str(tmp_path / "nope.yaml")])
    assert "nope.yaml" in line


def test_bad_quantity_names_file_document_and_field(sim: Sim, tmp_path: Path) -> None:
    bad = pod_manifest("p", cpu="1x")
    path = write(tmp_path, "bad.yaml", [node_manifest("n0"), queue_manifest("q"), bad])
    line = sim.fails(["simulate", path])
    assert "bad.yaml" in line
    assert "document 3" in line
    assert "spec.containers[0].resources.requests.cpu" in line


@pytest.mark.parametrize(
    "flags",
    [
        ["--bogus"],
        ["--cycles", "0"],
        ["--cycles", "many"],
        ["--max-cycles", "0"],
        ["--until", "soon"],
        ["--until", "-5s"],
        ["--start", "yesterday"],
        ["--output", "xml"],
    ],
)
def test_bad_flags(sim: Sim, tmp_path: Path, flags: list[str]) -> None:
    path = write(tmp_path, "ok.yaml", [node_manifest("n0"), queue_manifest("q")])
    sim.fails(["simulate", path, *flags])


@pytest.mark.parametrize(
    ("config_text", "words"),
    [
        ("actoins: allocate\n", "actoins"),
        ("period: fast\n", "period"),
        ("tiers:\n- plugins:\n  - name: nosuchplugin\n", "nosuchplugin"),
        ("actions: allocate, nosuchaction\n", "nosuchaction"),
        ("tiers:\n- plugins:\n  - name: nodeplacement\n    arguments: {gpu: diagonal}\n", "nodeplacement"),
        ("actions: [unclosed\n", "invalid YAML"),
    ],
)
def test_bad_config(sim: Sim, tmp_path: Path, config_text: str, words: str) -> None:
    path = write(tmp_path, "ok.yaml", [node_manifest("n0"), queue_manifest("q")])
    config = tmp_path / "scheduler.yaml"
    config.write_text(config_text)
    line = sim.fails(["simulate", path, "--config", str(config)])
    assert words in line
    assert "scheduler.yaml" in line


def test_missing_config_file(sim: Sim, tmp_path: Path) -> None:
    path = write(tmp_path, "ok.yaml", [node_manifest("n0"), queue_manifest("q")])
    line = sim.fails(["simulate", path, "--config", str(tmp_path / "none.yaml")])
    assert "none.yaml" in line


# Strict input (issue #14): each typo a cluster refuses stops the run with the field named.
def _typo(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node = doc
    *parents, last = path.split(".")
    for step in parents:
        node = node.setdefault(step, {})
    node[last] = value
    return doc


@pytest.mark.parametrize(
    ("document", "field", "meant"),
    [
        (_typo(queue_manifest("q"), "spec.resources.gpu.qouta", 8), "spec.resources.gpu.qouta", "quota"),
        (_typo(pod_group_manifest("g"), "spec.minMembers", 3), "spec.minMembers", "minMember"),
        (
            _typo(pod_manifest("p"), "spec.schedulername", "kai-scheduler"),
            "spec.schedulername",
            "schedulerName",
        ),
        (_typo(pod_manifest("p"), "metadata.lables", {}), "metadata.lables", "labels"),
        (_typo(node_manifest("n1"), "status.allocateble", {}), "status.allocateble", "allocatable"),
        (
            _typo(priority_class_manifest("urgent", 200), "globalDefualt", True),
            "globalDefualt",
            "globalDefault",
        ),
        (
            {
                "apiVersion": "kai.scheduler/v1alpha1",
                "kind": "Topology",
                "metadata": {"name": "net"},
                "spec": {"levels": [{"nodeLable": "zone"}]},
            },
            "spec.levels[0].nodeLable",
            "nodeLabel",
        ),
    ],
)
def test_an_unknown_field_stops_the_run_naming_file_document_and_field(
    sim: Sim, tmp_path: Path, document: dict[str, Any], field: str, meant: str
) -> None:
    path = write(tmp_path, "typo.yaml", [node_manifest("n0"), queue_manifest("q"), document])
    line = sim.fails(["simulate", path])
    assert f"{path}: document 3 at line " in line
    assert f'{field}: unknown field "{field.rsplit(".", 1)[-1]}"; did you mean "{meant}"?' in line


def test_a_pod_naming_a_priority_class_that_does_not_exist_is_refused(sim: Sim, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "pods.yaml",
        [node_manifest("n0"), queue_manifest("q"), pod_manifest("p", priority_class="inferance")],
    )
    line = sim.fails(["simulate", path])
    assert line == (
        f"kai-scheduler: error: {path}: document 3 at line 33 (Pod default/p): spec.priorityClassName: "
        'no PriorityClass with name "inferance" was found; did you mean "inference"?'
    )


def test_a_priority_class_defined_anywhere_in_the_input_exists(sim: Sim) -> None:
    doc = sim(
        [
            node_manifest("n0"),
            queue_manifest("q"),
            pod_manifest("p", gpus=1, priority_class="urgent"),
            priority_class_manifest("urgent", 1000),
        ]
    )
    assert by_name(doc["pods"])["p"]["phase"] == "Running"
    assert sim.warnings == []


def test_a_pod_group_naming_a_priority_class_that_does_not_exist_is_a_warning(sim: Sim) -> None:
    # The API server accepts such a PodGroup; KAI gives the job the default priority (train, 50).
    doc = sim(
        [
            node_manifest("n0"),
            queue_manifest("q"),
            pod_group_manifest("g", priority_class="inferance"),
            pod_manifest("g-0", group="g", gpus=1),
        ]
    )
    assert by_name(doc["pods"])["g-0"]["phase"] == "Running"
    assert len(sim.warnings) == 1
    assert sim.warnings[0].endswith(
        '(PodGroup default/g): spec.priorityClassName: no PriorityClass with name "inferance" was found; '
        'did you mean "inference"?; KAI gives the job the default priority'
    )


def test_a_queue_without_resources_is_refused(sim: Sim, tmp_path: Path) -> None:
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"}}
    line = sim.fails(["simulate", write(tmp_path, "q.yaml", [queue])])
    assert "(Queue q): spec.resources: required field is missing" in line


@pytest.mark.parametrize(
    ("section", "key", "meant"),
    [
        ("annotations", "gpu-fractoin", "gpu-fraction"),
        ("labels", "kai.scheduler/queeu", "kai.scheduler/queue"),
    ],
)
def test_a_key_one_edit_from_a_kai_key_is_a_warning_naming_both(
    sim: Sim, section: str, key: str, meant: str
) -> None:
    pod = pod_manifest("p", None, **{section: {key: "0.5"}})  # type: ignore[arg-type]
    sim([node_manifest("n0"), queue_manifest("default-queue"), pod])
    path = sim.folder / f"input{sim.count}.yaml"
    assert sim.warnings == [
        f"kai-scheduler: warning: {path}: document 3 at line 33 (Pod default/p): metadata.{section}.{key}: "
        f'"{key}" is not a key KAI reads; did you mean "{meant}"?'
    ]


def test_a_queue_limit_left_out_blocks_the_resource_as_in_kai_and_says_so(sim: Sim) -> None:
    queue = queue_manifest("q")
    del queue["spec"]["resources"]["gpu"]["limit"]
    doc = sim([node_manifest("n0", gpus=4), queue, pod_manifest("p", gpus=1)])
    assert by_name(doc["pods"])["p"]["phase"] == "Pending"
    assert (doc["podGroups"][0]["unschedulableReason"] or "").startswith("OverLimit")
    assert len(sim.warnings) == 1
    assert sim.warnings[0].endswith(
        "(Queue q): spec.resources.gpu.limit: not set: KAI reads 0, which blocks gpu for this queue "
        "(write -1 for no limit)"
    )


def test_pods_left_to_other_schedulers_are_counted_listed_and_warned_about(
    sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_scheduler = pod_manifest("plain", gpus=1)
    del no_scheduler["spec"]["schedulerName"]
    documents = [
        node_manifest("n0", gpus=4),
        queue_manifest("q"),
        pod_manifest("mine", gpus=1),
        no_scheduler,
        pod_manifest("theirs", None, gpus=1, node_name="n0", scheduler="volcano"),
    ]
    doc = sim(documents, config=ALLOCATE_ONLY)
    assert set(by_name(doc["pods"])) == {"mine"}
    assert doc["summary"]["otherSchedulers"] == 2
    assert doc["otherSchedulerPods"] == [
        {
            "namespace": "default",
            "name": "plain",
            "schedulerName": "default-scheduler",
            "phase": "Pending",
            "node": None,
        },
        {
            "namespace": "default",
            "name": "theirs",
            "schedulerName": "volcano",
            "phase": "Running",
            "node": "n0",
        },
    ]
    assert len(sim.warnings) == 1
    assert sim.warnings[0].startswith(
        "kai-scheduler: warning: unbound pods left to other schedulers, never placed here: 1 "
        "(default-scheduler: 1); the first is Pod default/plain in "
    )
    assert "the first is Pod default/plain in " in sim.warnings[0]

    path = write(tmp_path, "others.yaml", documents)
    assert main(["simulate", path]) == 0
    text = capsys.readouterr().out
    assert (
        "left to other schedulers: 2 pods (default-scheduler 1, volcano 1); 1 unbound (never placed here), "
        "1 on nodes (holding their resources)"
    ) in text


def _job(template_metadata: dict[str, Any], requests: dict[str, str], **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "labels": {"kai.scheduler/queue": "q", **labels}},
        "spec": {
            "completions": 1,
            "template": {
                "metadata": template_metadata,
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "restartPolicy": "Never",
                    "containers": [{"name": "m", "resources": requests}],
                },
            },
        },
    }


def test_a_typo_in_a_workloads_pod_template_is_refused(sim: Sim, tmp_path: Path) -> None:
    job = _job({}, {"request": {"nvidia.com/gpu": "1"}})
    path = write(tmp_path, "job.yaml", [node_manifest("n0"), queue_manifest("q"), job])
    line = sim.fails(["simulate", path])
    assert f"{path}: document 3 at line " in line
    assert "(Job default/train): makes an invalid Pod default/train-" in line
    assert (
        'at spec.containers[0].resources.request: unknown field "request"; did you mean "requests"?' in line
    )


def test_near_miss_keys_of_a_workload_and_its_pod_templates_are_warnings(sim: Sim) -> None:
    job = _job(
        {"annotations": {"gpu-fractoin": "0.5"}}, {"requests": {"cpu": "1"}}, **{"kai.scheduler/queeu": "q"}
    )
    sim([node_manifest("n0"), queue_manifest("q"), job])
    assert [line.split("(Job default/train): ")[1].split(":")[0] for line in sim.warnings] == [
        "metadata.labels.kai.scheduler/queeu",
        "spec.template.metadata.annotations.gpu-fractoin",
    ]


def test_a_workload_whose_pods_are_another_schedulers_is_a_warning(sim: Sim) -> None:
    job = _job({}, {"requests": {"cpu": "1"}})
    del job["spec"]["template"]["spec"]["schedulerName"]
    doc = sim([node_manifest("n0"), queue_manifest("q"), job])
    assert doc["summary"]["otherSchedulers"] == 1
    assert [line.split("(Job default/train): ")[1] for line in sim.warnings] == [
        "spec.template.spec.schedulerName: not set: the pods made from this template are "
        "default-scheduler's, never placed here"
    ]


def test_a_flood_of_warnings_is_cut_short_with_a_count(sim: Sim) -> None:
    typos = [pod_manifest(f"p{i}", annotations={"gpu-fractoin": "0.5"}) for i in range(25)]
    sim([node_manifest("n0"), queue_manifest("q"), *typos])
    assert len(sim.warnings) == 20
    assert all("gpu-fractoin" in line for line in sim.warnings[:19])
    assert sim.warnings[19] == "kai-scheduler: warning: ... and 6 more warnings"


def test_bad_input_from_the_real_command_prints_no_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", [pod_manifest("p", cpu="lots")])
    completed = subprocess.run(
        [sys.executable, "-m", "kai_scheduler", "simulate", path, "--output", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert len(completed.stderr.splitlines()) == 1
    assert "Traceback" not in completed.stderr


# --- configuration keys of the contract ----------------------------------------------------------


def _stale_gang() -> list[dict[str, Any]]:
    return [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        pod_group_manifest("g", min_member=2),
        pod_manifest("g-0", group="g", gpus=1, node_name="n0"),
        pod_manifest("g-1", group="g", gpus=1),
    ]


@pytest.mark.parametrize(("grace", "evicted_at"), [("10s", 10.0), (None, 60.0), ("-1s", None)])
def test_default_staleness_grace_period(sim: Sim, grace: str | None, evicted_at: float | None) -> None:
    config = {} if grace is None else {"defaultStalenessGracePeriod": grace}
    doc = sim(_stale_gang(), "--until", "2m", config=config)
    evictions = [d["time"] for d in doc["decisions"] if d["type"] == "evict"]
    assert evictions == ([] if evicted_at is None else [evicted_at])


def test_use_scheduling_signatures_false_changes_no_outcome(sim: Sim) -> None:
    documents = [
        node_manifest("n0", gpus=1),
        queue_manifest("q"),
        *[pod_manifest(f"big{i}", gpus=2) for i in range(3)],
        pod_manifest("small", gpus=1),
    ]
    with_signatures = sim(documents)
    without = sim(documents, config={"useSchedulingSignatures": False})
    assert decision_rows(with_signatures) == decision_rows(without) == [(1, "bind", "small", "n0")]


# --- evictedUnownedPods: the project's extension of the contract ----------------------------------


def _worked_example() -> list[dict[str, Any]]:
    """The contract's worked example: team A borrowed all four GPUs of node0, team B then asks for two."""
    return [
        node_manifest("node0", gpus=4, cpu="32", memory="256Gi"),
        queue_manifest("team-a", gpu=2),
        queue_manifest("team-b", gpu=2),
        *[
            pod_manifest(f"a-{i}", "team-a", gpus=1, priority_class="train", node_name="node0")
            for i in range(4)
        ],
        *[pod_manifest(f"b-{i}", "team-b", gpus=1, priority_class="train") for i in range(2)],
    ]


def _phases(document: dict[str, Any]) -> dict[str, tuple[str, int]]:
    return {p["name"]: (p["phase"], p["evictions"]) for p in document["pods"]}


def test_evicted_bare_pods_are_recreated_pending_by_default(sim: Sim) -> None:
    doc = sim(_worked_example())
    explicit = sim(_worked_example(), config={"evictedUnownedPods": "recreate"})
    assert (doc["pods"], doc["decisions"]) == (explicit["pods"], explicit["decisions"])
    assert [row[:3] for row in decision_rows(doc)] == [
        (1, "evict", "a-3"),
        (1, "pipeline", "b-0"),
        (1, "evict", "a-2"),
        (1, "pipeline", "b-1"),
        (2, "bind", "b-0"),
        (2, "bind", "b-1"),
    ]
    assert _phases(doc) == {
        **{f"a-{i}": ("Running", 0) for i in range(2)},
        **{f"a-{i}": ("Pending", 1) for i in (2, 3)},
        **{f"b-{i}": ("Running", 0) for i in range(2)},
    }


def test_evicted_bare_pods_stay_deleted_with_delete(sim: Sim) -> None:
    recreated = sim(_worked_example())
    doc = sim(_worked_example(), config={"evictedUnownedPods": "delete"})
    # The same decisions; the evicted pods end as on a cluster, deleted: in the record as Failed, with
    # their eviction, and nothing waits for them.
    assert decision_rows(doc) == decision_rows(recreated)
    assert _phases(doc) == {
        **{f"a-{i}": ("Running", 0) for i in range(2)},
        **{f"a-{i}": ("Failed", 1) for i in (2, 3)},
        **{f"b-{i}": ("Running", 0) for i in range(2)},
    }
    assert doc["summary"]["pods"] == {"Running": 4, "Pending": 0, "Succeeded": 0, "Failed": 2}
    queues = by_name(doc["queues"])
    assert queues["team-a"]["requested"]["gpu"] == queues["team-a"]["allocated"]["gpu"] == 2.0
    assert recreated["queues"][0]["requested"]["gpu"] == 4.0  # recreated, a-2 and a-3 still ask
    # The flag says the same as the key, and wins over the file.
    assert sim(_worked_example(), "--evicted-unowned-pods", "delete")["pods"] == doc["pods"]
    config = {"evictedUnownedPods": "delete"}
    flagged = sim(_worked_example(), "--evicted-unowned-pods", "recreate", config=config)
    assert flagged["pods"] == recreated["pods"]


def _reclaimed_replica_set() -> list[dict[str, Any]]:
    """Team A's two GPUs are a ReplicaSet's pods; team B reclaims one of them."""
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "labels": {"kai.scheduler/queue": "team-a"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web", "kai.scheduler/queue": "team-a"}},
                "spec": pod_manifest("x", gpus=1, priority_class="train")["spec"],
            },
        },
    }
    return [
        node_manifest("node0", gpus=2),
        queue_manifest("team-a", gpu=1),
        queue_manifest("team-b", gpu=1),
        replica_set,
        pod_manifest("b-0", "team-b", gpus=1, priority_class="train", arrival="10s"),
    ]


def test_pods_a_workload_owns_are_replaced_by_its_controller_with_delete_too(sim: Sim) -> None:
    outcomes = [
        sim(_reclaimed_replica_set(), config={"evictedUnownedPods": mode}) for mode in ("recreate", "delete")
    ]
    assert outcomes[0]["pods"] == outcomes[1]["pods"]
    phases = sorted((p["phase"], p["evictions"]) for p in outcomes[1]["pods"] if p["name"].startswith("web-"))
    # The evicted pod is Failed in the record; the ReplicaSet's new pod in its place waits.
    assert phases == [("Failed", 1), ("Pending", 0), ("Running", 0)]
    assert by_name(outcomes[1]["pods"])["b-0"]["phase"] == "Running"


@pytest.mark.parametrize("value", ["keep", True, ["delete"]])
def test_a_bad_evicted_unowned_pods_value_is_one_line_naming_the_key(
    sim: Sim, tmp_path: Path, value: Any
) -> None:
    path = write(tmp_path, "ok.yaml", [node_manifest("n0"), queue_manifest("q")])
    config = tmp_path / "scheduler.yaml"
    config.write_text(yaml.safe_dump({"evictedUnownedPods": value}))
    line = sim.fails(["simulate", path, "--config", str(config)])
    assert "scheduler.yaml: evictedUnownedPods: expected recreate or delete" in line
