"""gpupack vs gpuspread: which physical GPU of the chosen node a fractional pod shares.

Reference: kai-reference §4.4 (`gpupack` / `gpuspread`: "pick device inside node (pack: most-used shared
GPU first; spread: least used)"), §6 (a fractional task goes on an existing shared GPU with enough free
portion, else a new group that consumes one idle whole GPU; gpu-fraction-num-devices allocates N groups).
"""

from __future__ import annotations

from typing import Any

from helpers import config, config_with, node, one_cycle, pod, queue, simulate
from kai_scheduler.framework.config import DEFAULT_PLUGINS

PACK = config(actions="allocate")


def spread_config() -> Any:
    plugins = [{"name": "gpuspread" if n == "gpupack" else n} for n in DEFAULT_PLUGINS]
    return config(actions="allocate", tiers=[{"plugins": plugins}])


def _node_with_two_shared_gpus(gpus: int) -> list[Any]:
    return [
        node("n0", gpus=gpus),
        queue("q"),
        pod("half", fraction=0.5, node_name="n0", labels={"runai-gpu-group": "g-half"}),
        pod("quarter", fraction=0.25, node_name="n0", labels={"runai-gpu-group": "g-quarter"}),
    ]


def test_gpupack_joins_the_most_used_shared_gpu_with_room() -> None:
    decisions = one_cycle([*_node_with_two_shared_gpus(4), pod("f", fraction=0.25)], PACK)
    assert [(d.pod, d.gpu_groups) for d in decisions] == [("default/f", ("g-half",))]


def test_gpupack_skips_shared_gpus_without_room() -> None:
    decisions = one_cycle([*_node_with_two_shared_gpus(4), pod("f", fraction=0.75)], PACK)
    assert decisions[0].gpu_groups == ("g-quarter",)


def test_gpupack_opens_a_new_gpu_when_no_shared_one_has_room() -> None:
    document = simulate([*_node_with_two_shared_gpus(4), pod("f", fraction=0.8)], PACK, cycles=1)
    (decision,) = document["decisions"]
    (group,) = decision["gpuGroups"]
    assert group not in ("g-half", "g-quarter")
    assert document["pods"][-1]["gpuGroups"] == [group]


def test_gpuspread_takes_a_gpu_of_its_own_while_whole_gpus_are_free() -> None:
    decisions = one_cycle([*_node_with_two_shared_gpus(4), pod("f", fraction=0.25)], spread_config())
    (group,) = decisions[0].gpu_groups
    assert group not in ("g-half", "g-quarter")


def test_gpuspread_joins_the_least_used_shared_gpu_when_no_whole_gpu_is_free() -> None:
    decisions = one_cycle([*_node_with_two_shared_gpus(2), pod("f", fraction=0.25)], spread_config())
    assert decisions[0].gpu_groups == ("g-quarter",)


def test_fractions_pack_onto_one_gpu_then_open_the_next() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q"),
        *[pod(f"f{i}", fraction=0.5) for i in range(4)],
        pod("x", fraction=0.5),
    ]
    document = simulate(objects, PACK, cycles=1)
    groups = {p["name"]: tuple(p["gpuGroups"]) for p in document["pods"]}
    assert groups["f0"] == groups["f1"]
    assert groups["f2"] == groups["f3"]
    assert groups["f0"] != groups["f2"]
    assert groups["x"] == ()
    assert {p["name"]: p["phase"] for p in document["pods"]}["x"] == "Pending"
    assert document["summary"]["gpu"]["allocated"] == 2.0


def test_multi_device_fraction_gets_that_many_gpu_groups() -> None:
    objects = [node("n0", gpus=4), queue("q"), pod("f", fraction=0.5, num_devices=3)]
    document = simulate(objects, PACK, cycles=1)
    (pod_doc,) = document["pods"]
    assert len(set(pod_doc["gpuGroups"])) == 3
    assert pod_doc["gpu"] == 1.5


def test_gpu_group_ids_are_unique_across_nodes_and_cycles() -> None:
    objects = [
        node("a", gpus=2),
        node("b", gpus=2),
        queue("q"),
        *[pod(f"f{i}", fraction=0.75, duration="2s") for i in range(4)],
        *[pod(f"late{i}", fraction=0.75, arrival="5s") for i in range(2)],
    ]
    document = simulate(objects, spread_config())
    binds = [d for d in document["decisions"] if d["type"] == "bind"]
    assert len(binds) == 6
    # No two 0.75 pods can share a GPU, so every bind names a GPU group of its own.
    groups = [g for d in binds for g in d["gpuGroups"]]
    assert len(groups) == len(set(groups)) == 6


def test_config_with_helper_builds_spread() -> None:
    assert any(p.name == "gpuspread" for p in config_with({"gpuspread": {}}).plugins())
