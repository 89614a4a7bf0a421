"""DRA claims in the simulated cluster (sim/claims.py): what Kubernetes' resourceclaim controller and
KAI's binder do to them between cycles."""

from __future__ import annotations

from helpers import (
    claim_template_manifest,
    device_class_manifest,
    groups_by_name,
    node,
    objects_of,
    pod_manifest,
    queue,
    resource_claim_manifest,
    resource_slice_manifest,
    run,
    simulate,
)
from kai_scheduler.api.objects import ApiObject


def _cluster(*manifests: dict[str, object], devices: int = 2) -> list[ApiObject]:
    return [
        node("n0", gpus=0),
        queue("q"),
        *objects_of(device_class_manifest(), resource_slice_manifest("n0-gpus", "n0", devices), *manifests),
    ]


def test_a_template_claim_is_named_after_the_pod_and_never_takes_an_existing_name() -> None:
    objects = _cluster(
        claim_template_manifest("one"),
        resource_claim_manifest("p-gpu", queue="q"),  # the name the pod's claim would get
        pod_manifest("p", claim_templates={"gpu": "one"}),
    )
    document = simulate(objects)
    claims = {c["name"]: c for c in document["resourceClaims"]}
    assert set(claims) == {"p-gpu", "p-gpu-2"}
    assert claims["p-gpu-2"]["reservedFor"] == ["p"] and claims["p-gpu"]["allocated"] is False


def test_a_pod_whose_template_is_missing_waits_with_kais_reason() -> None:
    document = simulate(_cluster(pod_manifest("p", claim_templates={"gpu": "nowhere"})))
    reason = groups_by_name(document)["pg-p"]["unschedulableReason"]
    assert (
        reason == "pod p does not fit: no resource claim name found for pod default/p and claim reference gpu"
    )


def test_a_pod_that_is_gone_takes_its_own_claims_with_it_and_releases_shared_ones() -> None:
    objects = _cluster(
        claim_template_manifest("one"),
        resource_claim_manifest("shared", queue="q", allocated=["gpu-1"], node="n0", reserved_for=["old"]),
        pod_manifest("old", node_name="n0", claims={"gpu": "shared"}, terminating=True),
        pod_manifest("new", claim_templates={"gpu": "one"}, arrival=5),
    )
    result = run(objects)
    claims = {c.metadata.name: c for c in result.cluster.claims.claims.values()}
    assert claims["shared"].status.allocation is None and claims["shared"].status.reserved_for == []
    assert claims["new-gpu"].status.allocation is not None
    # A pod made from a template owns its claim: when it is gone for good, so is the claim.
    objects = _cluster(
        claim_template_manifest("one"),
        pod_manifest("short", claim_templates={"gpu": "one"}, terminating=True),
    )
    assert "short-gpu" not in {c.metadata.name for c in run(objects, cycles=2).cluster.claims.claims.values()}
