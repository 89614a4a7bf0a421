"""Shared DRA ResourceClaims within one queue (KAI's AccountedResource design, "Shared DRA ResourceClaims"):
with accounted resources configured, a pod naming a claim a pod of another queue holds waits with
SharedResourceClaimAcrossQueues, whether that pod held it before the cycle or was placed in it; with none
configured the rule is not KAI's and the pod runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from helpers import groups_by_name, pods_by_name, simulate
from kai_scheduler.api.manifests import parse_object

_INPUT = Path(__file__).parents[2] / "scenarios" / "accounted-shared-claim-across-queues" / "input.yaml"


def _documents() -> list[dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all(_INPUT.read_text()) if d]
    flat: list[dict[str, Any]] = []
    for document in documents:
        flat.extend(document["items"] if document["kind"] == "List" else [document])
    return flat


def _run(documents: list[dict[str, Any]]) -> dict[str, Any]:
    return simulate([parse_object(d, "test", i + 1) for i, d in enumerate(documents)])


def _without_holder(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The claim not yet allocated and no pod holding it: the first pod placed in the cycle takes it."""
    kept = []
    for document in documents:
        if document["kind"] == "Pod" and document["metadata"]["name"] == "holder":
            continue
        if document["kind"] == "ResourceClaim":
            document = {**document, "status": {}}
        kept.append(document)
    return kept


def test_a_pod_of_another_queue_waits_naming_the_claim_and_both_queues() -> None:
    document = _run(_documents())
    pods = pods_by_name(document)
    assert pods["mate"]["node"] == "node-0"
    assert pods["stranger"]["phase"] == "Pending"
    group = groups_by_name(document)["pg-stranger"]
    assert group["unschedulableCode"] == "SharedResourceClaimAcrossQueues"
    reason = group["unschedulableReason"]
    assert "test/shared-nics" in reason and "queue team-a" in reason and "queue team-b" in reason


def test_a_pod_placed_in_the_same_cycle_holds_the_claim_for_its_queue() -> None:
    # mate (team-a, created first) is placed first and allocates the claim; stranger comes after.
    document = _run(_without_holder(_documents()))
    pods = pods_by_name(document)
    assert pods["mate"]["node"] == "node-0"
    assert pods["stranger"]["phase"] == "Pending"
    assert groups_by_name(document)["pg-stranger"]["unschedulableCode"] == "SharedResourceClaimAcrossQueues"


def test_without_accounted_resources_the_claim_is_shared_as_kai_shares_it() -> None:
    documents = [d for d in _documents() if d["kind"] != "AccountedResource"]
    for document in documents:
        if document["kind"] == "Queue":
            document["spec"].pop("accountedResources", None)
    pods = pods_by_name(_run(documents))
    assert pods["mate"]["node"] == "node-0"
    assert pods["stranger"]["node"] == "node-0"
