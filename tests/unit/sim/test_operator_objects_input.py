"""`simulate` with KAI's operator objects in the input: SchedulingShard and Config (`kai.scheduler/v1`)
define the shards and their configuration, as KAI's operator renders them, and win over `--config`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import kai_config_manifest as kai_config
from helpers import node_manifest, pod_manifest, queue_manifest
from helpers import scheduling_shard_manifest as shard
from kai_scheduler.cli import main

POOL = "kai.scheduler/node-pool"


def two_pools(label: str = POOL) -> list[dict[str, Any]]:
    """Two 4-GPU nodes without the pool label and two labelled `spread`; a queue and two 1-GPU pods each."""
    objects: list[dict[str, Any]] = [node_manifest(f"plain-{i}", gpus=4) for i in (1, 2)]
    objects += [node_manifest(f"spread-{i}", gpus=4, labels={label: "spread"}) for i in (1, 2)]
    objects += [queue_manifest("q"), _labelled(queue_manifest("qs"), label)]
    objects += [pod_manifest(f"plain-{i}", "q", gpus=1) for i in (1, 2)]
    objects += [_labelled(pod_manifest(f"spread-{i}", "qs", gpus=1), label) for i in (1, 2)]
    return objects


def _labelled(manifest: dict[str, Any], label: str) -> dict[str, Any]:
    manifest["metadata"].setdefault("labels", {})[label] = "spread"
    return manifest


def run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], objects: list[dict[str, Any]], *args: str
) -> tuple[int, dict[str, Any] | None, str]:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    status = main(["simulate", str(path), "--output", "json", *args])
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if status == 0 else None, captured.err


def nodes(document: dict[str, Any]) -> dict[str, str | None]:
    return {p["name"]: p["node"] for p in document["pods"]}


def test_two_shards_schedule_their_pools_apart_and_each_its_own_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        shard("default", placementStrategy={"gpu": "binpack", "cpu": "binpack"}),
        shard(
            "spread-pool", partitionLabelValue="spread", placementStrategy={"gpu": "spread", "cpu": "spread"}
        ),
        *two_pools(),
    ]
    status, document, err = run(tmp_path, capsys, objects)
    assert status == 0 and err == ""
    assert document is not None
    placed = nodes(document)
    # the default shard packs both pods onto one of its nodes; the spread shard puts one on each of its own
    assert placed["plain-1"] == placed["plain-2"] and str(placed["plain-1"]).startswith("plain-")
    assert {placed["spread-1"], placed["spread-2"]} == {"spread-1", "spread-2"}
    assert [(s["name"], s["nodePool"], s["queues"]) for s in document["shards"]] == [
        ("default", "default", ["q"]),
        ("spread-pool", "spread", ["qs"]),
    ]


def test_the_config_names_the_node_pool_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [
        kai_config(**{"global": {"nodePoolLabelKey": "example.com/pool"}}),
        shard("default"),
        shard("spread-pool", partitionLabelValue="spread", placementStrategy={"gpu": "spread"}),
        *two_pools("example.com/pool"),
    ]
    status, document, _ = run(tmp_path, capsys, objects)
    assert status == 0 and document is not None
    assert {nodes(document)["spread-1"], nodes(document)["spread-2"]} == {"spread-1", "spread-2"}


def test_a_shard_queue_depth_per_action_takes_effect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # KAI's queueDepthPerAction: at most that many of a queue's jobs are tried per action and cycle
    cluster = [
        node_manifest("n", gpus=8),
        queue_manifest("q"),
        *(pod_manifest(f"p{i}", gpus=1) for i in range(3)),
    ]
    _, free, _ = run(tmp_path, capsys, [shard("default"), *cluster], "--cycles", "1")
    _, limited, _ = run(
        tmp_path, capsys, [shard("default", queueDepthPerAction={"allocate": 1}), *cluster], "--cycles", "1"
    )
    assert free is not None and limited is not None
    assert sum(1 for node in nodes(free).values() if node) == 3
    assert sum(1 for node in nodes(limited).values() if node) == 1


def test_a_shard_args_take_effect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --schedule-period (KAI's scheduler flag) is the time between cycles
    cluster = [node_manifest("n", gpus=1), queue_manifest("q"), pod_manifest("p", gpus=1)]
    _, document, _ = run(
        tmp_path, capsys, [shard("default", args={"schedule-period": "5s"}), *cluster], "--cycles", "3"
    )
    assert document is not None and document["summary"]["time"] == 10.0


def test_kai_charts_default_shard_alone_is_kais_default_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # KAI's chart installs one SchedulingShard `default` with an empty partitionLabelValue
    # (deployments/kai-scheduler/templates/default-shard.yaml); its goMemLimitRatio means nothing here
    cluster = two_pools()
    chart_shard = shard("default", partitionLabelValue="", goMemLimitRatio=0.9)
    status, with_shard, err = run(tmp_path, capsys, [chart_shard, *cluster])
    _, without, _ = run(tmp_path, capsys, cluster, "--config", str(_write(tmp_path, _kai_default_config())))
    assert status == 0 and err == "" and with_shard is not None and without is not None
    for document in (with_shard, without):
        document.pop("cycleSeconds")
    assert with_shard == without
    assert nodes(with_shard)["spread-1"] is None  # the labelled pool has no shard
    unlabelled = [node_manifest("n", gpus=4), queue_manifest("q"), pod_manifest("p", gpus=1)]
    _, alone, _ = run(tmp_path, capsys, [chart_shard, *unlabelled])
    assert alone is not None and "shards" not in alone  # one scheduler for everything, as without shards


def _kai_default_config() -> dict[str, Any]:
    """KAI v0.17's operator render of a default shard (resources_test.go "basic binpack strategy")."""
    plugins = [
        "predicates", "proportion", "priority", "nodeavailability", "resourcetype", "podaffinity", "elastic",
        "kubeflow", "ray", "subgrouporder", "taskorder", "nominatednode", "dynamicresources", "minruntime",
        "topology", "snapshot", "sg-nodelocalgreedy", "sg-multinodegang", "gpupack", "nodeplacement",
        "gpusharingorder",
    ]  # fmt: skip
    tiers = [
        {"name": n, "arguments": {"gpu": "binpack", "cpu": "binpack"}}
        if n == "nodeplacement"
        else {"name": n}
        for n in plugins
    ]
    return {
        "actions": "allocate, consolidation, reclaim, preempt, stalegangeviction",
        "tiers": [{"plugins": tiers}],
    }


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_objects_win_over_the_config_files_shards_and_say_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _write(
        tmp_path, {"period": "2s", "shards": [{"name": "only-spread", "partitionLabelValue": "spread"}]}
    )
    objects = [shard("default"), shard("spread-pool", partitionLabelValue="spread"), *two_pools()]
    status, document, err = run(tmp_path, capsys, objects, "--config", str(config), "--cycles", "2")
    assert status == 0 and document is not None
    assert err.splitlines() == [
        f"kai-scheduler: warning: {config}: shards not used: the input's SchedulingShard objects (default, "
        "spread-pool) define the shards and each one's configuration, as KAI's operator does"
    ]
    assert [s["name"] for s in document["shards"]] == ["default", "spread-pool"]
    assert document["summary"]["time"] == 2.0  # the file's other options still apply


def test_flags_without_a_counterpart_are_warnings_naming_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/operator/scheduling-shards.md "Advanced Shard Configuration" (KAI v0.17.0), as written
    advanced = shard(
        "gpu-shard",
        partitionLabelValue="gpu-nodes",
        args={"leader-elect": "true", "v": "3"},
        placementStrategy={"gpu": "binpack", "cpu": "binpack"},
        queueDepthPerAction={"preempt": 15, "reclaim": 8, "allocate": 25},
        minRuntime={"preemptMinRuntime": "10m", "reclaimMinRuntime": "5m"},
    )
    status, _, err = run(tmp_path, capsys, [advanced, *two_pools()])
    assert status == 0
    where = f"{tmp_path / 'input.yaml'} document 1: SchedulingShard gpu-shard: spec.args"
    assert err.splitlines() == [
        f"kai-scheduler: warning: {where}.leader-elect: KAI's scheduler flag --leader-elect has no "
        "counterpart here; ignored",
        f"kai-scheduler: warning: {where}.v: KAI's scheduler flag --v has no counterpart here; ignored",
    ]


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        (
            [shard("gpu-a100", placementStrategy={"gpu": "pack"})],
            "document 1 (SchedulingShard gpu-a100): spec.placementStrategy.gpu: expected binpack or spread, "
            "got 'pack'",
        ),
        (
            [shard("default"), shard("default")],
            "document 2 (SchedulingShard default): duplicate SchedulingShard default: already defined in",
        ),
        (
            [{**shard("a"), "apiVersion": "kai.scheduler/v1alpha1"}],
            "document 1: apiVersion: unsupported apiVersion kai.scheduler/v1alpha1 for kind SchedulingShard; "
            "expected kai.scheduler/v1",
        ),
        (
            [shard("a", plugins={"myplugin": {"priority": 1050}})],
            "document 1 (SchedulingShard a): spec: the scheduler cannot run this shard's configuration: "
            "tiers: unknown plugin 'myplugin'",
        ),
        (
            [shard("a", args={"qps": 50})],
            "document 1 (SchedulingShard a): spec.args.qps: expected a string, got 50",
        ),
        (
            [kai_config(), kai_config()],
            "document 2 (Config kai-config): duplicate Config kai-config",
        ),
    ],
    ids=["bad placement", "twice", "wrong apiVersion", "unknown plugin", "unquoted flag", "two Configs"],
)
def test_bad_objects_stop_the_run_with_one_line_naming_file_document_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], objects: list[dict[str, Any]], message: str
) -> None:
    status, _, err = run(tmp_path, capsys, [*objects, *two_pools()])
    assert status == 2
    assert len(err.splitlines()) == 1
    assert re.sub(r" at line \d+", "", err).startswith(
        f"kai-scheduler: error: {tmp_path / 'input.yaml'}: {message}"
    )


def test_compare_applies_the_objects_to_both_configurations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump({"period": "1s"}))
    b.write_text(yaml.safe_dump({"period": "2s", "actions": "allocate"}))
    objects = [shard("default"), shard("spread-pool", partitionLabelValue="spread"), *two_pools()]
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    assert main(["simulate", str(path), "--compare", str(a), str(b), "--output", "json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    # both runs schedule both pools (B's `actions` gave way to the shards' own)
    assert document["a"]["summary"]["podGroups"]["started"] == 4
    assert document["b"]["summary"]["podGroups"]["started"] == 4
    assert captured.err.splitlines() == [
        f"kai-scheduler: warning: {b}: actions not used: the input's SchedulingShard objects (default, "
        "spread-pool) define the shards and each one's configuration, as KAI's operator does"
    ]
