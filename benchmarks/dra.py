"""DRA benchmark: what DRA device selectors (CEL) cost, per selector and in placement, on 1,000 nodes.

Built in memory and deterministically (SEED below): 1,000 nodes x 8 GPUs published as DRA devices (one
ResourceSlice per node, driver `gpu.nvidia.com`: `type`, `productName` (a third each A100, H100, L4),
`index`, `driverVersion` (a version), `uuid`, capacity `memory`), four DeviceClasses with the selectors
NVIDIA's driver and its users write (`gpu.nvidia.com`; by product name; by memory, a quantity; by driver
version, a semver), one queue owed the cluster, and --pods pending pods (default 2,000), each with a
claim template of 1, 2, 4 or 8 devices of one class, some with a selector of their own. Pods ask for
about 0.8x the cluster's GPUs, more than the H100s alone hold.

Two measures, each the best of --repeat (3) (the cycle's after one warm-up run):

* `selectors`: every selector of the workload compiled (`compile_selector`, nothing compiled or kept
  before) and evaluated on all 8,000 devices (as the catalog builds them, so a device's first evaluation
  includes what it costs to present it to the evaluator): microseconds per compile and per evaluation;
* `first cycle`: the first cycle of `Simulation(...).run()` (snapshot build and session; the catalog's
  matches are built there), likewise from nothing compiled or kept: its wall time, pods placed and the
  placement rate.

Results are printed and written to `benchmarks/results/dra.json`.

    .venv/bin/python benchmarks/dra.py [--pods N] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kai_scheduler.api import cel
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework.config import DEFAULT_PLUGIN_ARGUMENTS, DEFAULT_PLUGINS, parse_config
from kai_scheduler.model.dra_devices import DeviceCatalog
from kai_scheduler.sim.engine import Simulation, SimulationOptions

SEED = 22
NODES = 1_000
GPUS_PER_NODE = 8
DRIVER = "gpu.nvidia.com"
DRA = "resource.k8s.io/v1"
START = datetime(2026, 1, 1, tzinfo=UTC)
RESULTS = Path(__file__).parent / "results" / "dra.json"
PRODUCTS = (("NVIDIA A100-SXM4-80GB", "80Gi"), ("NVIDIA H100 80GB HBM3", "80Gi"), ("NVIDIA L4", "24Gi"))
VERSIONS = ("535.161.8", "550.54.14", "560.35.3")
GPU = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
CLASSES = {
    "gpu.nvidia.com": (GPU,),
    "h100.nvidia.com": (GPU, f"device.attributes['{DRIVER}'].productName.lowerAscii().contains('h100')"),
    "big-memory.nvidia.com": (GPU, f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"),
    "recent-driver.nvidia.com": (
        GPU,
        f"device.attributes['{DRIVER}'].driverVersion.isGreaterThan(semver('540.0.0'))",
    ),
}
# A claim's own selectors: the lower half of a node's GPUs, or not an L4.
CLAIM_SELECTORS = (
    (),
    (f"device.attributes['{DRIVER}'].index < 4",),
    (f"!device.attributes['{DRIVER}'].productName.endsWith('L4')",),
)


def _node(index: int) -> dict[str, Any]:
    allocatable = {"cpu": "128", "memory": "1Ti", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{index:04d}"},
        "status": {"allocatable": allocatable},
    }


def _slice(index: int, rng: random.Random) -> dict[str, Any]:
    product, memory = rng.choice(PRODUCTS)
    version = rng.choice(VERSIONS)
    devices = [
        {
            "name": f"gpu-{g}",
            "attributes": {
                "type": {"string": "gpu"},
                "productName": {"string": product},
                "index": {"int": g},
                "driverVersion": {"version": version},
                "uuid": {"string": f"GPU-{index:04d}-{g}"},
            },
            "capacity": {"memory": {"value": memory}},
        }
        for g in range(GPUS_PER_NODE)
    ]
    node = f"node-{index:04d}"
    spec = {"driver": DRIVER, "pool": {"name": node, "generation": 0}, "nodeName": node, "devices": devices}
    return {"apiVersion": DRA, "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"}, "spec": spec}


def _template(index: int, rng: random.Random) -> dict[str, Any]:
    exactly: dict[str, Any] = {
        "deviceClassName": rng.choice(list(CLASSES)),
        "count": rng.choice((1, 1, 2, 4, 8)),
    }
    selectors = rng.choice(CLAIM_SELECTORS)
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    spec = {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}}
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"claim-{index:05d}"},
        "spec": spec,
    }


def _pod(index: int) -> dict[str, Any]:
    container = {"name": "main", "resources": {"requests": {"cpu": "4", "memory": "16Gi"}}}
    spec = {
        "schedulerName": "kai-scheduler",
        "containers": [container],
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": f"claim-{index:05d}"}],
    }
    metadata = {"name": f"pod-{index:05d}", "labels": {"kai.scheduler/queue": "team"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def workload(pods: int) -> list[ApiObject]:
    rng = random.Random(SEED)
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    queue = {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}}
    docs: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team"}, "spec": queue}
    ]
    docs += [
        {
            "apiVersion": DRA,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
        }
        for name, selectors in CLASSES.items()
    ]
    docs += [_node(i) for i in range(NODES)]
    docs += [_slice(i, rng) for i in range(NODES)]
    for i in range(pods):
        docs += [_template(i, rng), _pod(i)]
    return [parse_object(doc, "dra-benchmark", i + 1) for i, doc in enumerate(docs)]


def selectors(objects: list[ApiObject], repeat: int) -> dict[str, Any]:
    expressions = sorted(
        {e for group in CLASSES.values() for e in group} | {e for g in CLAIM_SELECTORS for e in g}
    )
    slices = [o for o in objects if o.kind == "ResourceSlice"]

    def measure() -> dict[str, Any]:
        cel.forget_compiled()
        began = time.perf_counter()
        programs = [cel.compile_selector(e) for e in expressions]
        compiled = time.perf_counter() - began
        views = DeviceCatalog(slices, [], [], {}).views
        began = time.perf_counter()
        selected = sum(program(view) for view in views for program in programs)
        evaluated = time.perf_counter() - began
        return {
            "selectors": len(programs),
            "devices": len(views),
            "selected": selected,
            "compile_us": compiled / len(programs) * 1e6,
            "evaluate_us": evaluated / (len(programs) * len(views)) * 1e6,
        }

    return min((measure() for _ in range(repeat)), key=lambda figures: figures["evaluate_us"])


def first_cycle(objects: list[ApiObject], repeat: int) -> dict[str, Any]:
    plugins = [{"name": n, "arguments": DEFAULT_PLUGIN_ARGUMENTS.get(n, {})} for n in DEFAULT_PLUGINS]
    config = parse_config({"tiers": [{"plugins": plugins}]})

    def measure() -> dict[str, Any]:
        cel.forget_compiled()  # every run starts with no selector compiled and no result kept
        simulation = Simulation(objects, config, SimulationOptions(start=START, cycles=1))
        began = time.perf_counter()
        result = simulation.run()
        wall = time.perf_counter() - began
        cycle = result.cycles[0]
        placed = sum(1 for d in cycle.decisions if d.type in ("bind", "pipeline"))
        rate = placed / cycle.seconds if cycle.seconds else 0.0
        return {
            "first_cycle_seconds": cycle.seconds,
            "run_seconds": wall,
            "placed": placed,
            "pods_per_second": rate,
        }

    return min((measure() for _ in range(repeat)), key=lambda figures: figures["first_cycle_seconds"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    objects = workload(args.pods)
    per_selector = selectors(objects, args.repeat)
    first_cycle(objects, 1)  # warm-up, not counted
    cycle = first_cycle(objects, args.repeat)
    print(
        f"selectors: {per_selector['selectors']} on {per_selector['devices']} devices: "
        f"compile {per_selector['compile_us']:.0f} us, evaluate {per_selector['evaluate_us']:.2f} us "
        f"({per_selector['selected']} selected)"
    )
    print(
        f"first cycle: {cycle['first_cycle_seconds']:.2f}s, {cycle['placed']} placed, "
        f"{cycle['pods_per_second']:.0f} pods/s"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {"nodes": NODES, "pods": args.pods, "selectors": per_selector, "first_cycle": cycle}
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
