"""The built-in demo and the manifests in examples/ run, and show what their comments say they show.

Each run goes through the CLI entry point (`kai_scheduler.cli.main`) with `--output json --out FILE`, the
way a user runs them, and the assertions read the result document of the simulate contract.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from kai_scheduler.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CONFIG = EXAMPLES / "scheduler-config.yaml"
# Scheduler configurations are named *config.yaml; every other file is a manifest example.
MANIFEST_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.yaml") if not p.name.endswith("config.yaml"))


def simulate(out_dir: Path, *args: str) -> dict[str, Any]:
    """Run `kai-scheduler simulate ARGS --output json --out FILE` and return the result document."""
    out = out_dir / "result.json"
    status = main(["simulate", *args, "--output", "json", "--out", str(out)])
    assert status == 0
    document: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return document


def pods_by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{p['namespace']}/{p['name']}": p for p in document["pods"]}


def groups_by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{g['namespace']}/{g['name']}": g for g in document["podGroups"]}


def queues_by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["name"]: q for q in document["queues"]}


def decisions(document: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [d for d in document["decisions"] if all(d[k] == v for k, v in match.items())]


# --- the built-in demo ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    started = time.perf_counter()
    document = simulate(tmp_path_factory.mktemp("demo"))
    document["_wall_seconds"] = time.perf_counter() - started
    return document


def test_demo_reaches_the_steady_state_quickly(demo: dict[str, Any]) -> None:
    summary = demo["summary"]
    assert summary["steady"] is True
    assert summary["gpu"]["capacity"] == 128.0
    assert summary["pods"]["Failed"] == 0
    assert summary["pods"]["Succeeded"] > 0  # durations end jobs and free their GPUs
    assert len(demo["cycleSeconds"]) == summary["cycles"] < 100
    assert demo["_wall_seconds"] < 5.0  # loading, 20-odd cycles and the report: well under a second


def test_demo_binds_pods_of_all_three_teams(demo: dict[str, Any]) -> None:
    pods = pods_by_name(demo)
    bound_queues = {pods[d["pod"]]["queue"] for d in decisions(demo, type="bind")}
    assert bound_queues == {"vision", "language", "speech"}
    queues = queues_by_name(demo)
    assert queues["research"]["parent"] is None
    assert {queues[q]["parent"] for q in ("vision", "language", "speech")} == {"research"}


def test_demo_vision_borrows_above_its_quota_while_the_others_are_idle(demo: dict[str, Any]) -> None:
    pods = pods_by_name(demo)
    first_cycle = decisions(demo, cycle=1, type="bind")
    vision_gpus = sum(pods[d["pod"]]["gpu"] for d in first_cycle if pods[d["pod"]]["queue"] == "vision")
    assert vision_gpus > 40  # vision's quota is 40 GPUs


def test_demo_fractional_pods_share_one_gpu(demo: dict[str, Any]) -> None:
    binds = {d["pod"]: d for d in decisions(demo, type="bind")}
    alice, bob = binds["language/notebook-alice"], binds["language/notebook-bob"]
    assert alice["gpuGroups"] and alice["gpuGroups"] == bob["gpuGroups"]
    assert alice["node"] == bob["node"]
    pods = pods_by_name(demo)
    # gpu-memory: 16384 MiB of a GPU labelled 81920 MiB (counted as 81900, KAI's 100 MiB granularity).
    assert pods["language/notebook-bob"]["gpu"] == pytest.approx(16384 / 81900)
    assert pods["language/notebook-bob"]["phase"] == "Succeeded"
    # dave arrives after bob finished and takes his place on the same GPU, next to alice and carol.
    shared = pods["language/notebook-alice"]["gpuGroups"]
    for name in ("speech/notebook-carol", "vision/notebook-dave"):
        assert pods[name]["phase"] == "Running"
        assert pods[name]["gpuGroups"] == shared
    assert pods["vision/notebook-dave"]["scheduledAt"] >= 25 * 60


def test_demo_over_limit_job_waits_with_its_reason(demo: dict[str, Any]) -> None:
    tts = groups_by_name(demo)["speech/tts-train"]
    assert tts["running"] == 0 and tts["pending"] == 3
    assert "OverLimit" in tts["unschedulableReason"]
    assert "speech" in tts["unschedulableReason"]


def test_demo_gangs_start_whole(demo: dict[str, Any]) -> None:
    groups = groups_by_name(demo)
    bind_cycles: dict[str, set[int]] = defaultdict(set)
    binds_per_group: dict[str, int] = defaultdict(int)
    pods = pods_by_name(demo)
    for d in decisions(demo, type="bind"):
        group = pods[d["pod"]]["podGroup"]
        bind_cycles[group].add(d["cycle"])
        binds_per_group[group] += 1
    for name in ("vision/detr-train", "language/llm-pretrain", "speech/whisper-train"):
        minimum = groups[name]["minMember"]
        cycles = sorted(bind_cycles[name])
        assert cycles, name
        for cycle in cycles:  # every start of the gang binds at least minMember pods at once
            in_cycle = [
                d for d in decisions(demo, cycle=cycle, type="bind") if pods[d["pod"]]["podGroup"] == name
            ]
            assert len(in_cycle) >= minimum, (name, cycle)


def test_demo_language_reclaims_the_gpus_vision_borrowed(demo: dict[str, Any]) -> None:
    pods = pods_by_name(demo)
    reclaimed = decisions(demo, action="reclaim", type="evict")
    assert reclaimed
    assert {pods[d["pod"]]["queue"] for d in reclaimed} == {"vision"}
    assert all("language/llm-pretrain" in d["reason"] for d in reclaimed)
    pretrain = [p for p in demo["pods"] if p["podGroup"] == "language/llm-pretrain"]
    # Bound within seconds of its arrival at 2m, long before any of vision's jobs completes (15m).
    assert all(p["scheduledAt"] is not None and 120 <= p["scheduledAt"] < 180 for p in pretrain)
    # KAI shrinks the elastic job to its minimum before it evicts any job at its minimum (issue #9 rule
    # 5): vit-train's newest pods above its minMember go, one at a time; the gangs keep running.
    assert [d["pod"] for d in reclaimed] == [f"vision/vit-train-{i}" for i in (6, 5, 4, 3)]
    # The pods it gave back were recreated, waited, and ran again later.
    for d in reclaimed:
        assert pods[d["pod"]]["evictions"] == 1 and pods[d["pod"]]["scheduledAt"] > 120


def test_demo_with_evicted_pods_deleted_ends_as_a_cluster_would(demo: dict[str, Any], tmp_path: Path) -> None:
    # The demo's header and the README's tour say: pods no controller owns are gone once evicted, and
    # vit-train then ends with its 2 pods.
    deleted = simulate(tmp_path, "--evicted-unowned-pods", "delete")
    evicted = [d["pod"] for d in decisions(demo, type="evict")]
    assert [d["pod"] for d in decisions(deleted, type="evict")] == evicted
    pods = pods_by_name(deleted)
    assert {key: pods[key]["phase"] for key in evicted} == dict.fromkeys(evicted, "Failed")
    vit_train = [p["phase"] for p in deleted["pods"] if p["podGroup"] == "vision/vit-train"]
    assert vit_train.count("Running") == 2 and vit_train.count("Failed") == 5


def test_demo_inference_preempts_training_in_its_own_queue(demo: dict[str, Any]) -> None:
    pods = pods_by_name(demo)
    preempted = decisions(demo, action="preempt", type="evict")
    assert preempted
    assert {pods[d["pod"]]["podGroup"] for d in preempted} == {"vision/vit-train"}
    assert pods["vision/detector-serve"]["phase"] == "Running"
    assert 300 <= pods["vision/detector-serve"]["scheduledAt"] < 360


def test_demo_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "kai-scheduler demo" in captured.out
    assert "(steady)" in captured.out
    for queue in ("research", "vision", "language", "speech"):
        assert queue in captured.out
    assert "speech/tts-train" in captured.out and "OverLimit" in captured.out


# --- examples/ -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", MANIFEST_EXAMPLES, ids=lambda p: p.name)
def test_every_example_runs_to_the_steady_state(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in ([], ["--config", str(CONFIG)]):
        document = simulate(tmp_path, str(path), *extra)
        assert document["summary"]["steady"] is True
        pods = document["summary"]["pods"]
        # Something runs at the end, or (a run that completes) everything has ended.
        assert pods["Running"] > 0 or (pods["Pending"] == 0 and pods["Succeeded"] > 0)
        assert capsys.readouterr().err == ""  # no warning: examples write what they mean


def test_examples_folder_holds_the_documented_files() -> None:
    names = {p.name for p in EXAMPLES.iterdir()}
    expected = {"two-teams.yaml", "gang-training.yaml", "gpu-sharing.yaml", "queue-hierarchy.yaml"}
    assert expected | {"scheduler-config.yaml", "README.md"} <= names
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for name in expected | {"scheduler-config.yaml"}:
        assert name in readme


def test_two_teams_is_the_contract_worked_example(tmp_path: Path) -> None:
    document = simulate(tmp_path, str(EXAMPLES / "two-teams.yaml"))
    table = [(d["cycle"], d["action"], d["type"], d["pod"], d["node"]) for d in document["decisions"]]
    assert table == [
        (1, "reclaim", "evict", "default/a-3", "node0"),
        (1, "reclaim", "pipeline", "default/b-0", "node0"),
        (1, "reclaim", "evict", "default/a-2", "node0"),
        (1, "reclaim", "pipeline", "default/b-1", "node0"),
        (2, "allocate", "bind", "default/b-0", "node0"),
        (2, "allocate", "bind", "default/b-1", "node0"),
    ]
    pods = pods_by_name(document)
    for name in ("a-0", "a-1", "b-0", "b-1"):
        assert pods[f"default/{name}"]["phase"] == "Running"
    for name in ("a-2", "a-3"):
        assert pods[f"default/{name}"]["phase"] == "Pending"
        assert pods[f"default/{name}"]["evictions"] == 1
    queues = queues_by_name(document)
    assert queues["team-a"]["fairShare"]["gpu"] == queues["team-b"]["fairShare"]["gpu"] == 2.0
    assert document["summary"]["cycles"] == 3


def test_gang_training_waits_whole_then_starts_whole(tmp_path: Path) -> None:
    path = str(EXAMPLES / "gang-training.yaml")
    waiting = simulate(tmp_path, path, "--until", "15m")
    gpt = groups_by_name(waiting)["ml/gpt-train"]
    assert gpt["running"] == 0 and gpt["pending"] == 3
    assert gpt["unschedulableReason"].startswith("gang of 3 pods")
    assert waiting["summary"]["gpu"]["allocated"] == 16.0  # 16 GPUs idle, yet none of gpt-train runs

    final = simulate(tmp_path, path)
    pods = pods_by_name(final)
    llama = [p for p in final["pods"] if p["podGroup"] == "ml/llama-finetune"]
    assert len(llama) == 4 and all(p["scheduledAt"] == 0.0 for p in llama)
    gpt_pods = [pods[f"ml/gpt-train-{i}"] for i in range(3)]
    assert {p["scheduledAt"] for p in gpt_pods} == {20 * 60.0}  # together, when llama-finetune ends
    assert all(p["phase"] == "Running" for p in gpt_pods)
    assert len({p["node"] for p in gpt_pods}) == 3


def test_gpu_sharing_packs_fractions(tmp_path: Path) -> None:
    path = str(EXAMPLES / "gpu-sharing.yaml")
    document = simulate(tmp_path, path)
    pods = pods_by_name(document)

    def group(name: str) -> list[str]:
        groups: list[str] = pods[f"default/{name}"]["gpuGroups"]
        return groups

    assert pods["default/llm-serve"]["node"] == "node-a" and group("llm-serve") == []
    assert group("embed-serve") == group("nb-3") == group("nb-5") != []
    assert group("nb-2") == group("nb-4") != []
    assert group("nb-2") != group("nb-3")
    assert pods["default/nb-5"]["scheduledAt"] == 600.0  # when nb-1 completes
    assert pods["default/embed-serve"]["gpu"] == pytest.approx(20000 / 81900)

    waiting = simulate(tmp_path, path, "--until", "6m")
    nb5 = groups_by_name(waiting)["default/pg-nb-5"]
    assert nb5["pending"] == 1 and "does not fit" in nb5["unschedulableReason"]

    spread = simulate(tmp_path, path, "--config", str(CONFIG))
    binds = {d["pod"]: d for d in decisions(spread, type="bind")}
    embed, nb1 = binds["default/embed-serve"]["gpuGroups"], binds["default/nb-1"]["gpuGroups"]
    assert embed and nb1 and embed != nb1  # gpuspread: a GPU of its own while whole GPUs are free


def test_queue_hierarchy_divides_by_quota_and_weight(tmp_path: Path) -> None:
    document = simulate(tmp_path, str(EXAMPLES / "queue-hierarchy.yaml"))
    queues = queues_by_name(document)
    expected = {"eng": 20, "search": 12, "ads": 8, "science": 12, "bio": 8, "climate": 4}
    assert {name: queues[name]["fairShare"]["gpu"] for name in expected} == expected
    assert {name: queues[name]["allocated"]["gpu"] for name in expected} == expected
    assert queues["search"]["parent"] == "eng" and queues["climate"]["parent"] == "science"
    groups = groups_by_name(document)
    assert groups["eng/pg-ads-serve"]["unschedulableReason"].startswith("NonPreemptibleOverQuota")
    finetune = groups["science/bio-finetune"]["unschedulableReason"]
    assert finetune.startswith("OverLimit") and "science" in finetune


def test_demo_detr_train_runs_in_one_rack(demo: dict[str, Any]) -> None:
    # Nodes are named r<rack>-n<node>; the gang's topologyConstraint asks for one rack.
    binds = [d for d in demo["decisions"] if d["pod"].startswith("vision/detr-train") and d["type"] == "bind"]
    assert len(binds) == 4  # bound at 0s, never a victim (the elastic vit-train gives first)
    assert len({d["node"].split("-")[0] for d in binds}) == 1


def test_topology_example_tells_its_story(tmp_path: Path) -> None:
    path = str(EXAMPLES / "topology.yaml")
    final = simulate(tmp_path, path)
    nodes = {p["name"]: p["node"] for p in final["pods"]}
    binds = {d["pod"].split("/")[1]: d for d in final["decisions"] if d["type"] == "bind"}
    # allreduce: one rack (z1/r2); pipeline: zone z2, over its two racks; nothing was ever moved.
    assert {binds[f"allreduce-{i}"]["node"] for i in range(2)} == {"z1-r2-a", "z1-r2-b"}
    assert {nodes[f"pipeline-{i}"][:2] for i in range(3)} == {"z2"}
    assert {nodes[f"pipeline-{i}"][:5] for i in range(3)} == {"z2-r1", "z2-r2"}
    assert {d["type"] for d in final["decisions"]} == {"bind"}
    # sweep waits for a whole rack although GPUs are free, then takes z1/r2 when allreduce ends.
    assert {binds[f"sweep-{i}"]["time"] for i in range(2)} == {600.0}
    assert {nodes[f"sweep-{i}"] for i in range(2)} == {"z1-r2-a", "z1-r2-b"}
    waiting = simulate(tmp_path, path, "--until", "5m")
    reason = groups_by_name(waiting)["default/sweep"]["unschedulableReason"]
    assert reason.startswith("topology datacenter, requirement example.com/rack couldn't be satisfied")
    assert waiting["summary"]["gpu"]["capacity"] - waiting["summary"]["gpu"]["allocated"] >= 16


def test_time_based_fairness_example_favours_the_queue_that_used_less(tmp_path: Path) -> None:
    path = str(EXAMPLES / "time-based-fairness.yaml")
    config = str(EXAMPLES / "time-based-fairness-config.yaml")

    def gpus(document: dict[str, Any]) -> dict[str, float]:
        return {name: q["allocated"]["gpu"] for name, q in queues_by_name(document).items()}

    plain = simulate(tmp_path, path, "--until", "3h")
    assert gpus(plain) == {"research": 4.0, "product": 4.0}
    assert not decisions(plain, action="reclaim")
    # With the usage history: product first gets all 8 GPUs (research used the cluster for the first
    # hour), then research reclaims some back as the usages even out.
    early = simulate(tmp_path, path, "--until", "65m", "--config", config)
    assert gpus(early) == {"research": 0.0, "product": 8.0}
    later = simulate(tmp_path, path, "--until", "3h", "--config", config)
    reclaimed = decisions(later, action="reclaim", type="evict")
    assert reclaimed and all(d["pod"].startswith("default/product-") for d in reclaimed)
    assert 0 < gpus(later)["research"] < 4


def test_fragmentation_example_tells_its_story(tmp_path: Path) -> None:
    path = str(EXAMPLES / "fragmentation.yaml")
    binpack = simulate(tmp_path, path)
    evictions = [d for d in binpack["decisions"] if d["type"] == "evict"]
    assert [(d["action"], d["pod"]) for d in evictions] == [("consolidation", "default/r1")]
    fragmentation = simulate(tmp_path, path, "--config", str(EXAMPLES / "gpu-fragmentation-config.yaml"))
    assert [(d["cycle"], d["type"], d["pod"], d["node"]) for d in fragmentation["decisions"]] == [
        (1, "bind", "default/small", "a"),
        (1, "bind", "default/w0", "a"),
        (1, "bind", "default/w1", "b"),
    ]
    steering = simulate(tmp_path, path, "--config", str(EXAMPLES / "cpu-steering-config.yaml"))
    assert steering["summary"]["gpu"]["allocated"] == 8.0


def test_node_pools_example_schedules_each_pool_on_its_own(tmp_path: Path) -> None:
    path = str(EXAMPLES / "node-pools.yaml")
    document = simulate(tmp_path, path, "--config", str(EXAMPLES / "node-pools-config.yaml"))
    queues = queues_by_name(document)
    # Fair share divided on the training pool's 16 GPUs: research asks for 12, product for 8, both get 8.
    assert {name: q["fairShare"]["gpu"] for name, q in queues.items()} == {
        "research": 8.0,
        "product": 8.0,
        "serving": 2.0,
        "batch": 0.0,
    }
    pools = {"train": "training", "infer": "inference", "cpu": "default"}
    shard_of_node = {node: pool for prefix, pool in pools.items() for node in (f"{prefix}-0", f"{prefix}-1")}
    for pod in document["pods"]:
        if pod["node"] is not None:  # every pod runs in its queue's pool
            assert shard_of_node[pod["node"]] == queues[pod["queue"]]["shard"]
    pods = pods_by_name(document)
    assert pods["default/serve-0"]["node"] != pods["default/serve-1"]["node"]  # the inference pool spreads
    assert [p["name"] for p in document["pods"] if p["phase"] == "Pending"] == ["research-4", "research-5"]
    # Without the shards only the default shard runs: the labelled pools wait, saying why.
    plain = simulate(tmp_path, path)
    reasons = {g["name"]: g["unschedulableReason"] for g in plain["podGroups"] if g["pending"]}
    assert reasons["pg-serve-0"] == "no scheduling shard serves node pool 'inference'"


def test_backfill_example_starts_the_gang_that_kais_default_starves(tmp_path: Path) -> None:
    path = str(EXAMPLES / "backfill.yaml")
    config = str(EXAMPLES / "backfill-config.yaml")
    kai = simulate(tmp_path, path)
    # Every freed GPU goes to a job that waits, the notebook keeps one for good: the gang never starts.
    assert groups_by_name(kai)["default/train"]["running"] == 0
    assert "backfilled" not in kai and "reservation" not in groups_by_name(kai)["default/train"]
    held = simulate(tmp_path, path, "--config", config, "--until", "30m")
    train = groups_by_name(held)["default/train"]
    assert train["reservation"] == {"nodes": ["node-a", "node-b"], "gpus": 8.0, "expectedStart": 2700.0}
    assert train["estimatedStart"] == 2700.0
    # The small jobs that end by 45m are backfilled; the others and the notebook wait for the gang.
    backfilled = [(b["time"], b["podGroup"]) for b in held["backfilled"]]
    assert backfilled == [
        (600.0, "default/pg-small-01"),
        (900.0, "default/pg-small-02"),
        (1200.0, "default/pg-small-04"),
    ]
    final = simulate(tmp_path, path, "--config", config)
    binds = {d["pod"]: d["time"] for d in decisions(final, type="bind")}
    assert binds["default/train-0"] == binds["default/train-1"] == 2700.0
    assert binds["default/notebook"] == binds["default/small-03"] == 6300.0  # when the gang ends
    assert final["backfilled"] == held["backfilled"]
    assert all(g["reservation"] is None for g in final["podGroups"])  # the gang let it go as it started
