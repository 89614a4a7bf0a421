"""The CRDs a new store serves: KAI's are the chart's own (one definition, `kai_scheduler.api.crds`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from kai_fakeapi import Store

CHART_CRDS = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "kai-scheduler" / "crds"


def test_kai_crds_are_the_ones_the_chart_ships() -> None:
    store = Store()
    shipped = [yaml.safe_load(path.read_text()) for path in sorted(CHART_CRDS.glob("*.yaml"))]
    # Queue, AccountedResource, PodGroup, BindRequest, Topology, SchedulingShard, Config
    assert len(shipped) == 7
    for crd in shipped:
        served = store.get("customresourcedefinitions", crd["metadata"]["name"])
        assert served["spec"] == crd["spec"], crd["metadata"]["name"]
        assert served["metadata"]["labels"] == crd["metadata"]["labels"]


def test_printer_columns_and_subresources_follow_the_chart() -> None:
    store = Store()
    pod_groups = store.resource("podgroups")
    assert [column.name for column in pod_groups.printer_columns] == [
        "Queue",
        "MinMember",
        "Priority",
        "Phase",
        "Age",
    ]
    assert [column.name for column in store.resource("bindrequests").printer_columns] == [
        "Pod",
        "Node",
        "Phase",
        "Attempts",
        "Age",
    ]
    assert store.resource("queues").has_status and not store.resource("topologies").has_status
