"""KAI v0.17.0 docs/fairness/README.md: the fair-share algorithm (deserved quota first, the rest by
over-quota weight) and fair-share reclaim. The doc has no manifests:
the queues, pods and node are the test's, set up to show what the doc states.

The doc's setting is `pluginArguments: proportion: reclaimerUtilizationMultiplier: "1.2"`. Neither the
key `pluginArguments` (a SchedulingShard has `plugins.<name>.arguments`) nor `reclaimerUtilizationMultiplier`
is read by KAI v0.17's code: its proportion plugin reads `relcaimerSaturationMultiplier`, and only for a
reclaimer that would end above its fair share while its victim's queue is further above. The tests below
cover the algorithm and the reclaim; the setting is left out."""

from __future__ import annotations

from pathlib import Path

from docs_support import DocRun, applied_at, fake_gpu_nodes, simulate


def queue(name: str, quota: int, weight: int) -> str:
    return f"""
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {{name: {name}}}
spec:
  resources:
    gpu: {{quota: {quota}, limit: -1, overQuotaWeight: {weight}}}
    cpu: {{quota: -1, limit: -1, overQuotaWeight: 1}}
    memory: {{quota: -1, limit: -1, overQuotaWeight: 1}}
"""


def gpu_pods(queue_name: str, count: int) -> str:
    return "---".join(
        f"""
apiVersion: v1
kind: Pod
metadata: {{name: {queue_name}-{i}, labels: {{kai.scheduler/queue: {queue_name}}}}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: main, image: trainer, resources: {{limits: {{nvidia.com/gpu: "1"}}}}}}]
"""
        for i in range(count)
    )


def scenario(tmp_path: Path) -> DocRun:
    """8 GPUs; team-a (quota 2, weight 1) took all of them while team-b (quota 2, weight 3) was idle; then
    team-b asks for 8."""
    return simulate(
        tmp_path,
        fake_gpu_nodes(1, 8),
        queue("team-a", 2, 1),
        queue("team-b", 2, 3),
        gpu_pods("team-a", 8),
        applied_at(10, gpu_pods("team-b", 8)),
    )


def test_fair_share_is_deserved_quota_then_the_rest_by_weight(tmp_path: Path) -> None:
    run = scenario(tmp_path)
    # 2 + 2 deserved; the remaining 4 split 1:3.
    assert run.queues["team-a"]["fairShare"]["gpu"] == 3.0
    assert run.queues["team-b"]["fairShare"]["gpu"] == 5.0


def test_the_queue_below_its_fair_share_reclaims_from_the_one_above(tmp_path: Path) -> None:
    run = scenario(tmp_path)
    assert {d["action"] for d in run.decisions(type="evict")} == {"reclaim"}
    assert run.queues["team-a"]["allocated"]["gpu"] == 3.0
    assert run.queues["team-b"]["allocated"]["gpu"] == 5.0
