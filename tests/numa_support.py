"""Builders for the numa plugin's tests: NodeResourceTopology manifests as NFD's topology updater writes
them, Guaranteed pods, placement annotations, and the default configuration with `numa` enabled."""

from __future__ import annotations

import json
from typing import Any

from helpers import pod_manifest
from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import NodeResourceTopology
from kai_scheduler.framework.config import DEFAULT_PLUGINS, SchedulerConfig, parse_config
from kai_scheduler.framework.session import Session
from kai_scheduler.plugins.numa.plugin import NumaLedger

Zone = tuple[str, dict[str, str], dict[str, str]]  # name, allocatable, available


def zone(name: str, allocatable: dict[str, str], available: dict[str, str] | None = None) -> Zone:
    """A zone whose room is its allocatable unless `available` says less (pods already there)."""
    return (name, allocatable, allocatable if available is None else available)


def nrt_manifest(node: str, policy: str, scope: str, *zones: Zone) -> dict[str, Any]:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node},
        "topologyPolicies": [],
        "attributes": [
            {"name": "topologyManagerPolicy", "value": policy},
            {"name": "topologyManagerScope", "value": scope},
        ],
        "zones": [
            {
                "name": name,
                "type": "Node",
                "resources": [
                    {
                        "name": resource,
                        "capacity": allocatable.get(resource, "0"),
                        "allocatable": allocatable.get(resource, "0"),
                        "available": available.get(resource, "0"),
                    }
                    for resource in sorted(allocatable.keys() | available.keys())
                ],
            }
            for name, allocatable, available in zones
        ],
    }


def nrt(node: str, policy: str, scope: str, *zones: Zone) -> NodeResourceTopology:
    return NodeResourceTopology.model_validate(nrt_manifest(node, policy, scope, *zones))


def guaranteed_pod_manifest(name: str, cpu: str, memory: str = "1Gi", **kwargs: Any) -> dict[str, Any]:
    """A pod whose limits equal its requests (Guaranteed QoS)."""
    manifest = pod_manifest(name, cpu=cpu, memory=memory, **kwargs)
    resources = manifest["spec"]["containers"][0]["resources"]
    resources["limits"] = dict(resources["requests"])
    return manifest


def observed(placement: dict[str, dict[str, str]]) -> dict[str, str]:
    """KAI's `NumaObservedPlacementAnnotation`: zone name -> amounts, as the placement exporter writes it."""
    record = [{"zone": zone_name, "amount": amounts} for zone_name, amounts in placement.items()]
    return {c.NUMA_PLACEMENT_OBSERVED_ANNOTATION: json.dumps(record)}


def numa_config(**arguments: Any) -> SchedulerConfig:
    """KAI's default plugins with `numa` enabled (as a SchedulingShard's `plugins.numa.enabled: true`)."""
    plugins: list[dict[str, Any]] = [{"name": name} for name in DEFAULT_PLUGINS]
    plugins.append({"name": "numa", "arguments": arguments} if arguments else {"name": "numa"})
    for entry in plugins:
        if entry["name"] == "nodeplacement":
            entry["arguments"] = {"gpu": "binpack", "cpu": "binpack"}
    return parse_config({"tiers": [{"plugins": plugins}]})


def ledger_of(session: Session) -> NumaLedger:
    """The numa plugin's ledger of an open session (it registered its allocate handler)."""
    for handler in session.points.on_allocate:
        owner = getattr(handler, "__self__", None)
        if isinstance(owner, NumaLedger):
            return owner
    raise AssertionError("the numa plugin registered nothing")


def zone_room(session: Session, node: str, resource: str) -> list[float]:
    """What each zone of `node` has free of `resource` now (CPU in cores), in zone order."""
    zones = ledger_of(session).by_node[session.snapshot.nodes.index[node]].zones
    scale = 1000.0 if resource == "cpu" else 1.0
    return [z.available.get(resource, 0.0) / scale for z in zones]


def cpu_zone_nrt_manifest(node: str, policy: str, cpus: list[str]) -> dict[str, Any]:
    """A node's NodeResourceTopology with one zone per entry of `cpus` (`node-0`, ...), reporting CPU only."""
    zones = [zone(f"node-{i}", {"cpu": amount}) for i, amount in enumerate(cpus)]
    return nrt_manifest(node, policy, "container", *zones)
