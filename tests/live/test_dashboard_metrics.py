"""The chart's Grafana dashboard (issue #13): Helm renders it into a ConfigMap that Grafana's dashboard
sidecar picks up, and every metric its queries read is one the components serve. The components run as
the chart runs them, a process each (`kai-scheduler run --component ...`), against the fake API server
with a pod that binds and one that waits, and their `/metrics` are read over HTTP."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from child_process import running
from identities import kubeconfig_as, refusals, run_as, strict_server
from ports import free_port

from chart_support import RELEASE, render_chart
from helpers import pod_manifest, queue_manifest
from kai_fakeapi.seed import try_it_seed

DEADLINE_SECONDS = 90.0
DASHBOARD_KEY = "kai-scheduler.json"

# What a PromQL expression names that is not a metric: functions and aggregations (followed by "("),
# keywords, and Grafana's own functions in variable queries.
PROMQL_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NUMBER_SUFFIX = re.compile(r"(?<=[0-9.])e[0-9]+")  # 1e9


def metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression (or Grafana's `label_values(metric, label)`) reads."""
    grafana = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,.*\)\s*", expression)
    if grafana:
        return {grafana.group(1)}
    text = _STRINGS.sub(" ", expression)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _NUMBER_SUFFIX.sub("", text)
    names = set()
    for match in _NAME.finditer(text):
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or match.group() in PROMQL_KEYWORDS:
            continue
        names.add(match.group())
    return names


def test_metric_names_of_promql() -> None:
    assert metric_names('sum by (queue_name, reason) (kai_a{queue_name=~"$queue"})') == {"kai_a"}
    assert metric_names("histogram_quantile(0.95, sum by (le) (rate(kai_h_bucket[5m])))") == {"kai_h_bucket"}
    assert metric_names('kai_b{q=~"x"} * 1e9 / on(queue_name) (kai_c > 0)') == {"kai_b", "kai_c"}
    assert metric_names("label_values(kai_queue_info, queue_name)") == {"kai_queue_info"}
    assert metric_names('sum(kai_d{placement!="idle_node"}) / sum(kai_d)') == {"kai_d"}


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every query of the dashboard: its panels' targets (rows' nested panels too) and its variables'."""
    queries: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            queries.extend(target["expr"] for target in panel.get("targets", []))
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            queries.append(query["query"] if isinstance(query, dict) else query)
    return queries


def rendered_dashboard(overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        document
        for template, document in render_chart(overrides)
        if template == "dashboard.yaml" and document["kind"] == "ConfigMap"
    ]


def test_the_chart_renders_the_dashboard_for_grafanas_sidecar() -> None:
    (config_map,) = rendered_dashboard()
    assert config_map["metadata"]["name"] == f"{RELEASE}-dashboard"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"][DASHBOARD_KEY])
    assert dashboard["uid"] == "kai-scheduler"
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"GPUs per queue", "Pending pods by queue and reason", "Bind failures", "Fragmentation"} <= titles

    (relabelled,) = rendered_dashboard(
        {
            "dashboards": {
                "label": "dashboards",
                "labelValue": "kai",
                "namespace": "monitoring",
                "folder": "GPU",
            }
        }
    )
    meta = relabelled["metadata"]
    assert meta["labels"]["dashboards"] == "kai" and "grafana_dashboard" not in meta["labels"]
    assert meta["namespace"] == "monitoring"
    assert meta["annotations"] == {"grafana_folder": "GPU"}
    assert rendered_dashboard({"dashboards": {"enabled": False}}) == []


# --- the components' /metrics ------------------------------------------------------------------------


def exposed_names(text: str) -> set[str]:
    """The series names a Prometheus scrape of this exposition stores: every sample's name, and for a
    family without samples yet (a labelled metric nothing has set), the names its type gives it."""
    names: set[str] = set()
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_sum", "_count"),
        "summary": ("_sum", "_count"),
    }
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(maxsplit=3)
            if kind == "counter":  # the text format names a counter's family with its `_total`
                family = family.removesuffix("_total")
            names.update(family + suffix for suffix in suffixes.get(kind, ("",)))
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def scrape(port: int) -> str | None:
    url = f"http://127.0.0.1:{port}/metrics"
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as answer:
        return str(answer.read().decode())
    return None


def test_every_metric_the_dashboard_reads_is_served_by_a_component(tmp_path: Path) -> None:
    (config_map,) = rendered_dashboard()
    queries = dashboard_queries(json.loads(config_map["data"][DASHBOARD_KEY]))
    wanted = set().union(*(metric_names(query) for query in queries))
    assert len(queries) >= 25 and len(wanted) >= 25, (queries, wanted)
    assert all(name.startswith("kai_") for name in wanted), wanted

    with strict_server(kubelet=True) as server:
        server.store.load(try_it_seed())
        server.store.create(queue_manifest("team", gpu=1, parent="default-parent-queue"))
        server.store.create(pod_manifest("fits", "team", gpus=1, cpu=None, memory=None))
        server.store.create(pod_manifest("waits", "team", gpus=64, cpu=None, memory=None))
        # The pod grouper makes the pods' PodGroups (the scheduler waits for them, as in a cluster).
        components = {"scheduler": ["scheduler"], "binder": ["binder"]}
        components["status-controllers"] = ["status-controllers", "podgrouper"]
        ports = {name: free_port() for name in components}
        with contextlib.ExitStack() as stack:
            for name, port in ports.items():
                kubeconfig = kubeconfig_as(server, tmp_path / name, run_as(components[name]))
                command = [
                    *(sys.executable, "-m", "kai_scheduler", "run"),
                    *(word for component in components[name] for word in ("--component", component)),
                    *("--kubeconfig", str(kubeconfig), "--metrics-port", str(port)),
                    *("--plugin-server-port", "0", "--no-gpu-reservation"),
                ]
                stack.enter_context(running(command))
            # The dashboard's numbers are there, not only their names: the waiting pod by its queue and
            # reason, the GPUs of the two seeded 8-GPU nodes, the binder's bind, the queue's allocation.
            expected = {
                "scheduler": [
                    'kai_queue_pending_pods{queue_name="team",reason="Unschedulable"} 1.0',
                    "kai_cluster_capacity_gpus 16.0",
                    "kai_cluster_allocated_gpus 1.0",
                ],
                "binder": ["kai_binder_binds_total 1.0"],
                "status-controllers": ['kai_queue_allocated_gpus{queue_name="team"} 1.0'],
            }
            deadline = time.monotonic() + DEADLINE_SECONDS
            while True:
                texts = {name: scrape(port) or "" for name, port in ports.items()}
                served = set().union(*(exposed_names(text) for text in texts.values()))
                missing = [
                    line for name, lines in expected.items() for line in lines if line not in texts[name]
                ]
                if wanted <= served and not missing:
                    break
                assert time.monotonic() < deadline, f"not served: {sorted(wanted - served)}, {missing}"
                time.sleep(0.3)
        assert refusals(server) == []
