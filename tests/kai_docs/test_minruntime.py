"""KAI v0.17.0 docs/plugins/minruntime.md: the queue `production` (preemptMinRuntime 20s, reclaimMinRuntime
30s), the plugin's arguments, and the doc's "Example Workflow" (a reclaim attempt at 20 s of runtime is
refused until 30 s).

The doc's queue sets only the two runtimes: KAI's Queue webhook refuses a Queue without `spec.resources`,
and so does the simulator. For the workflow the test gives the queue resources (no quota, no limit)
beside the doc's runtimes. The second
queue, the pods and the node are the test's."""

from __future__ import annotations

from pathlib import Path

import yaml
from docs_support import applied_at, fake_gpu_nodes, refused, simulate

from kai_scheduler.framework.config import DEFAULT_PLUGIN_ARGUMENTS, DEFAULT_PLUGINS

PRODUCTION = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: production
spec:
  preemptMinRuntime: "20s"
  reclaimMinRuntime: "30s"
"""

# The plugin's arguments as the doc gives them (in the scheduler configuration's `tiers`).
MINRUNTIME_ARGUMENTS = {
    "defaultPreemptMinRuntime": "10m",
    "defaultReclaimMinRuntime": "10m",
    "reclaimResolveMethod": "lca",
}

RESOURCES = """
  resources:
    gpu: {quota: 0, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
"""

# The test's: a queue owed the GPU, and a pod in each queue.
RESEARCH = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: research
spec:
  resources:
    gpu: {quota: 1, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
"""


def gpu_pod(name: str, queue: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{kai.scheduler/queue: {queue}}}}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: main, image: trainer, resources: {{limits: {{nvidia.com/gpu: "1"}}}}}}]
"""


def config_with_minruntime(arguments: dict[str, str]) -> str:
    plugins = [
        {
            "name": name,
            "arguments": arguments if name == "minruntime" else DEFAULT_PLUGIN_ARGUMENTS.get(name, {}),
        }
        for name in DEFAULT_PLUGINS
    ]
    return yaml.safe_dump({"tiers": [{"plugins": plugins}]})


def test_as_written_the_queue_is_refused(tmp_path: Path) -> None:
    # KAI's Queue webhook refuses a Queue without spec.resources; so does the simulator, in one line.
    error = refused(tmp_path, fake_gpu_nodes(1, 1), PRODUCTION, gpu_pod("job", "production"))
    assert "Queue production" in error
    assert "spec.resources: required field is missing" in error


def test_reclaim_waits_for_the_queues_30s_reclaim_min_runtime(tmp_path: Path) -> None:
    run = simulate(
        tmp_path,
        fake_gpu_nodes(1, 1),
        PRODUCTION + RESOURCES,
        RESEARCH,
        gpu_pod("job", "production"),
        applied_at(20, gpu_pod("reclaimer", "research")),
    )
    [evict] = run.decisions(type="evict")
    assert (evict["pod"], evict["action"], evict["time"]) == ("default/job", "reclaim", 30.0)
    assert set(run.running()) == {"reclaimer"}


def test_the_plugins_default_applies_to_a_queue_without_its_own(tmp_path: Path) -> None:
    # defaultReclaimMinRuntime 10m: a victim in a queue without reclaimMinRuntime is protected 10 minutes.
    bare = PRODUCTION.replace('  preemptMinRuntime: "20s"\n  reclaimMinRuntime: "30s"\n', RESOURCES)
    run = simulate(
        tmp_path,
        fake_gpu_nodes(1, 1),
        bare,
        RESEARCH,
        gpu_pod("job", "production"),
        applied_at(20, gpu_pod("reclaimer", "research")),
        config=config_with_minruntime(MINRUNTIME_ARGUMENTS),
    )
    [evict] = run.decisions(type="evict")
    assert (evict["pod"], evict["time"]) == ("default/job", 600.0)
