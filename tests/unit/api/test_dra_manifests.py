"""DRA manifests: the resource.k8s.io/v1 kinds load, and what the API server (or the scheduler's CEL
subset) refuses is a one-line error naming the object and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import (
    claim_template_manifest,
    device_class_manifest,
    pod_manifest,
    resource_claim_manifest,
    resource_slice_manifest,
)
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import DeviceClass, Pod, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from kai_scheduler.cli import main


def test_the_four_kinds_load_with_their_fields() -> None:
    device_class = parse_object(
        device_class_manifest("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com'"), "t", 1
    )
    assert isinstance(device_class, DeviceClass)
    slice_ = parse_object(
        resource_slice_manifest("s", "node0", 2, attributes={"productName": {"string": "H100"}}), "t", 2
    )
    assert isinstance(slice_, ResourceSlice)
    assert slice_.spec.devices[1].attributes["productName"].string == "H100"
    claim = parse_object(
        resource_claim_manifest(
            "c", 2, queue="q", allocated=["gpu-0", "gpu-1"], node="node0", reserved_for=["a"]
        ),
        "t",
        3,
    )
    assert isinstance(claim, ResourceClaim)
    assert claim.key == "default/c"
    assert claim.status.allocation is not None and len(claim.status.allocation.devices.results) == 2
    assert [r.name for r in claim.status.reserved_for] == ["a"]
    template = parse_object(claim_template_manifest("t1", 4), "t", 4)
    assert isinstance(template, ResourceClaimTemplate)
    assert template.spec.spec.devices.requests[0].exactly is not None
    pod = parse_object(pod_manifest("p", claims={"gpu": "c"}, claim_templates={"more": "t1"}), "t", 5)
    assert isinstance(pod, Pod)
    assert [
        (c.name, c.resource_claim_name, c.resource_claim_template_name) for c in pod.spec.resource_claims
    ] == [
        ("gpu", "c", None),
        ("more", None, "t1"),
    ]


def _error(doc: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as raised:
        parse_object(doc, "input.yaml", 3)
    return str(raised.value)


def test_an_unsupported_cel_selector_names_the_device_class_and_field() -> None:
    message = _error(device_class_manifest("gpu.example.com", "device.attributes['x'].y.glob('a')"))
    assert "DeviceClass gpu.example.com" in message
    assert "spec.selectors[0].cel.expression" in message
    assert "undeclared reference to 'glob'" in message
    assert "\n" not in message


def test_an_unsupported_cel_selector_in_a_claim_request_is_named_too() -> None:
    claim = resource_claim_manifest("c", 1, "gpu.nvidia.com", "device.driver.glob('gpu')")
    message = _error(claim)
    assert "ResourceClaim default/c" in message
    assert "spec.devices.requests[0].exactly.selectors[0].cel.expression" in message


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (
            lambda d: d["spec"]["resourceClaims"].append({"name": "gpu", "resourceClaimName": "b"}),
            "spec.resourceClaims[1].name",
            "duplicate name 'gpu'",
        ),
        (
            lambda d: d["spec"]["resourceClaims"][0].update(resourceClaimTemplateName="t"),
            "spec.resourceClaims[0]",
            "exactly one of resourceClaimName and resourceClaimTemplateName",
        ),
    ],
)
def test_pod_claims_follow_the_api_servers_rules(mutate: Any, field: str, words: str) -> None:
    doc = pod_manifest("p", claims={"gpu": "a"})
    mutate(doc)
    message = _error(doc)
    assert field in message
    assert words in message


def test_a_slice_names_its_nodes_one_way_only() -> None:
    doc = resource_slice_manifest("s", "node0", 1)
    doc["spec"]["allNodes"] = True
    assert "exactly one of nodeName, nodeSelector, allNodes and perDeviceNodeSelection" in _error(doc)


def test_a_claim_request_needs_exactly_or_first_available() -> None:
    doc = resource_claim_manifest("c")
    del doc["spec"]["devices"]["requests"][0]["exactly"]
    assert "exactly one of exactly and firstAvailable must be set" in _error(doc)


def test_simulate_stops_on_an_unsupported_selector_with_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump(device_class_manifest("gpu.example.com", "device.driver == ")))
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "DeviceClass gpu.example.com" in err and "Syntax error" in err
