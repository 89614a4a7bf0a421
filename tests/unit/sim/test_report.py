"""`simulate --report DIR`: the page and summary.json (docs/reports.md).

The runs go through the real command line on manifests in a temporary folder; the summary's numbers are
checked by hand on small deterministic runs and against what the result document (`--output json`) of the
same run says.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from helpers import START, node_manifest, pod_manifest, queue_manifest
from kai_scheduler.cli import main
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.sim.engine import CycleRecord, Simulation, SimulationOptions
from kai_scheduler.sim.loader import load_manifests
from kai_scheduler.sim.progress import ProgressBar, progress_bar
from kai_scheduler.sim.results import result_document
from kai_scheduler.sim.summary import jain_index, summary
from kai_scheduler.sim.timeline import NO_QUEUE, fragmented_gpus, replay
from kai_scheduler.sim.timeseries import FairShareRecorder, run_facts

TWO_TEAMS = [
    queue_manifest("team-a", gpu=2),
    queue_manifest("team-b", gpu=2),
]


def run_report(
    tmp_path: Path, documents: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """The summary, the result document and the report folder of one run."""
    manifests = tmp_path / "input.yaml"
    manifests.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    report = tmp_path / "report"
    result = tmp_path / "result.json"
    status = main(
        ["simulate", str(manifests), "--report", str(report), "--output", "json", "--out", str(result)]
    )
    assert status == 0
    summary = json.loads((report / "summary.json").read_text())
    return summary, json.loads(result.read_text()), report


def test_two_jobs_on_one_gpu_wait_and_complete_as_computed_by_hand(tmp_path: Path) -> None:
    # One GPU; a 10 s job and a 20 s job arrive at 0. The first runs 0-10, the second waits 10 s and runs
    # 10-30: waits 0 and 10, completion times 10 and 30, the GPU busy the whole 30 s.
    summary, _, report = run_report(
        tmp_path,
        [
            node_manifest("node0", gpus=1),
            queue_manifest("q"),
            pod_manifest("first", gpus=1, duration="10s"),
            pod_manifest("second", gpus=1, duration="20s"),
        ],
    )
    assert summary["time"] == 30.0
    assert summary["waitSeconds"] == {"count": 2, "mean": 5.0, "p50": 5.0, "p99": 9.9}
    assert summary["jctSeconds"] == {"count": 2, "mean": 20.0, "p50": 20.0, "p99": 29.8}
    assert summary["gpuAllocationRatio"] == 1.0
    assert summary["evictions"] == 0
    assert summary["gpuHoursLostToPreemption"] == 0.0
    assert summary["podGroups"] == {"total": 2, "started": 2, "completed": 2, "runningFromInput": 0}
    # One queue that held what it was owed: perfectly fair.
    assert summary["jainFairness"] == 1.0
    assert (report / "index.html").is_file()


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    _, _, report = run_report(
        tmp_path,
        [
            node_manifest("node0", gpus=2),
            queue_manifest("q"),
            pod_manifest("a", gpus=1, duration="10s"),
            pod_manifest("b", gpus=2, duration="5s"),
        ],
    )
    page = (report / "index.html").read_text()
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page
    sources = re.findall(r'src="([^"]*)"', page)
    # Five plots: allocation against fair share, pending pods, the two distributions, fragmentation,
    # evictions; every one embedded.
    assert len(sources) == 5
    assert all(source.startswith("data:image/png;base64,") for source in sources)
    assert sorted(p.name for p in report.iterdir()) == ["index.html", "summary.json"]


def reclaim_run() -> list[dict[str, Any]]:
    """The contract's worked example with times: team A runs four 100 s pods on a 4-GPU node from second 0
    (bound in the input); team B's two 30 s pods arrive at 10, reclaim evicts two of A's, B runs 11-41,
    A's evicted pods run again 41-141."""
    a = [
        pod_manifest(f"a-{i}", "team-a", gpus=1, node_name="node0", duration="100s", priority_class="train")
        for i in range(4)
    ]
    b = [pod_manifest(f"b-{i}", "team-b", gpus=1, arrival=10, duration="30s") for i in range(2)]
    return [node_manifest("node0", gpus=4), *TWO_TEAMS, *a, *b]


ARRIVAL = {"default/a-0": 0.0, "default/a-1": 0.0, "default/a-2": 0.0, "default/a-3": 0.0}
ARRIVAL |= {"default/b-0": 10.0, "default/b-1": 10.0}
DURATION = dict.fromkeys(ARRIVAL, 100.0) | {"default/b-0": 30.0, "default/b-1": 30.0}
BOUND_IN_INPUT = {"default/a-0", "default/a-1", "default/a-2", "default/a-3"}


def from_document(document: dict[str, Any]) -> dict[str, Any]:
    """The summary's numbers computed from the result document alone (plus the input's arrivals and
    durations), independently of the report's code: every pod here is its own group of one whole-GPU pod."""
    gpu = {f"{p['namespace']}/{p['name']}": p["gpu"] for p in document["pods"]}
    phase = {f"{p['namespace']}/{p['name']}": p["phase"] for p in document["pods"]}
    start = {pod: ARRIVAL[pod] for pod in BOUND_IN_INPUT}
    first_start: dict[str, float] = {}
    changes: list[tuple[float, float]] = [(0.0, sum(gpu[p] for p in BOUND_IN_INPUT))]
    lost = 0.0
    evictions = 0
    for decision in document["decisions"]:
        pod, time = decision["pod"], decision["time"]
        if decision["type"] == "bind":
            start[pod] = time
            first_start.setdefault(pod, time)
            changes.append((time, gpu[pod]))
        elif decision["type"] == "evict" and pod in start:
            lost += (time - start.pop(pod)) * gpu[pod]
            evictions += 1
            changes.append((time, -gpu[pod]))
    completions = {pod: start[pod] + DURATION[pod] for pod in start if phase[pod] == "Succeeded"}
    changes += [(time, -gpu[pod]) for pod, time in completions.items()]
    end = document["summary"]["time"]
    changes.sort()
    area, level, last = 0.0, 0.0, 0.0
    for time, delta in changes:
        area += level * (time - last)
        level, last = level + delta, time
    area += level * (end - last)
    waits = [first_start[p] - ARRIVAL[p] for p in first_start if p not in BOUND_IN_INPUT]
    jcts = [completions[p] - ARRIVAL[p] for p in completions if p not in BOUND_IN_INPUT]
    return {
        "evictions": evictions,
        "gpuHoursLostToPreemption": lost / 3600,
        "gpuAllocationRatio": area / (end * document["summary"]["gpu"]["capacity"]),
        "waits": waits,
        "jcts": jcts,
        "gpuCapacity": document["summary"]["gpu"]["capacity"],
        "time": end,
    }


def test_summary_numbers_equal_the_result_documents(tmp_path: Path) -> None:
    summary, document, _ = run_report(tmp_path, reclaim_run())
    derived = from_document(document)
    # By hand: A's two evicted pods had run 10 s each; allocation 4 GPUs for 0-10, 2 for 10-11, 4 for
    # 11-100, 2 for 100-141 (480 GPU-seconds of 4 x 141); B's pods wait 1 s and complete after 31 s.
    assert derived["evictions"] == 2
    assert derived["gpuHoursLostToPreemption"] == pytest.approx(20 / 3600)
    assert derived["gpuAllocationRatio"] == pytest.approx(480 / (4 * 141))
    assert sorted(derived["waits"]) == [1.0, 1.0] and sorted(derived["jcts"]) == [31.0, 31.0]

    assert summary["evictions"] == derived["evictions"] == sum(p["evictions"] for p in document["pods"])
    assert summary["gpuHoursLostToPreemption"] == pytest.approx(derived["gpuHoursLostToPreemption"])
    assert summary["gpuAllocationRatio"] == pytest.approx(derived["gpuAllocationRatio"])
    assert summary["gpuCapacity"] == derived["gpuCapacity"] and summary["time"] == derived["time"]
    for key, values in (("waitSeconds", derived["waits"]), ("jctSeconds", derived["jcts"])):
        assert summary[key]["count"] == len(values)
        assert summary[key]["mean"] == pytest.approx(np.mean(values))
        assert summary[key]["p50"] == pytest.approx(np.percentile(values, 50))
        assert summary[key]["p99"] == pytest.approx(np.percentile(values, 99))
    # A's pods ran from the input: they did not wait in this run.
    assert summary["podGroups"] == {"total": 6, "started": 2, "completed": 2, "runningFromInput": 4}
    # Jain's index is over the queues' allocated / fair share as the summary lists them.
    ratios = [q["allocatedOverFairShare"] for q in summary["queues"]]
    assert summary["jainFairness"] == pytest.approx(jain_index(ratios))
    # Every leaf queue is listed.
    assert {q["name"] for q in summary["queues"]} == {"team-a", "team-b"}


def test_jain_index_on_hand_made_cases() -> None:
    assert jain_index([1.0, 1.0, 1.0]) == 1.0
    assert jain_index([1.0, 0.0]) == 0.5  # one has everything: 1/n
    assert jain_index([2.0, 1.0]) == pytest.approx(9 / 10)  # (2+1)^2 / (2 * (4+1))
    assert jain_index([0.5, 1.0, 1.5, 1.0]) == pytest.approx(16 / (4 * 4.5))
    assert jain_index([]) is None


def test_fragmentation_counts_idle_gpus_no_waiting_request_can_use() -> None:
    free = np.array([1.0, 3.0, 4.0])
    shared = np.array([0.25, 0.5])
    # A 4-GPU request waits: the 1 and 3 idle GPUs are stranded, the whole idle node is not; the idle
    # parts of shared GPUs are no use to whole-GPU requests.
    assert fragmented_gpus(free, shared, Counter({4: 1}), Counter()) == 4.75
    # A half-GPU request also waits: it fits on any idle GPU and on the half-free shared one.
    assert fragmented_gpus(free, shared, Counter({4: 1}), Counter({0.5: 2})) == 0.25
    # Nothing waits: idle capacity is slack, not fragmentation.
    assert fragmented_gpus(free, shared, Counter(), Counter()) == 0.0


def test_fragmentation_over_a_run(tmp_path: Path) -> None:
    # Two 2-GPU nodes, each with one 1-GPU pod running for 60 s (non-preemptible: consolidation may not
    # move it); a 2-GPU pod waits until they end: for those 60 s, the two idle GPUs (one per node) are
    # fragmented.
    summary, _, _ = run_report(
        tmp_path,
        [
            node_manifest("node0", gpus=2),
            node_manifest("node1", gpus=2),
            queue_manifest("q"),
            pod_manifest("small-0", gpus=1, node_name="node0", duration="60s", priority_class="build"),
            pod_manifest("small-1", gpus=1, node_name="node1", duration="60s", priority_class="build"),
            pod_manifest("big", gpus=2, duration="30s"),
        ],
    )
    assert summary["time"] == 90.0
    assert summary["fragmentedGpus"]["max"] == 2.0
    assert summary["fragmentedGpus"]["mean"] == pytest.approx(2.0 * 60 / 90)
    assert summary["waitSeconds"]["mean"] == 60.0


def test_no_progress_bar_when_stderr_is_not_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_report(tmp_path, [node_manifest("node0", gpus=1), queue_manifest("q"), pod_manifest("p", gpus=1)])
    assert capsys.readouterr().err == ""
    assert progress_bar(io.StringIO(), SimulationOptions(start=START)) is None


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_progress_bar_on_a_terminal_once_a_run_is_long() -> None:
    terminal = _Terminal()
    clock = iter([0.0, 0.5, 2.0, 3.0])
    bar = ProgressBar(terminal, SimulationOptions(start=START, until=100.0), clock=lambda: next(clock))
    record = CycleRecord(1, 10.0, [], 0.001)
    bar(record, None)  # type: ignore[arg-type]  # half a second in: nothing shown yet
    assert bar.progress is None
    bar(record, None)  # type: ignore[arg-type]
    assert bar.progress is not None
    bar.close()
    assert "simulating" in terminal.getvalue()


def test_a_report_path_that_is_a_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "input.yaml"
    manifests.write_text(yaml.safe_dump_all([node_manifest("node0"), queue_manifest("q")]))
    taken = tmp_path / "taken"
    taken.write_text("")
    assert main(["simulate", str(manifests), "--report", str(taken)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--report" in error and "not a directory" in error


ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if not p.name.endswith("config.yaml"))
RUNS = [ROOT / "src/kai_scheduler/sim/demo", *EXAMPLES]


@pytest.mark.parametrize("path", RUNS, ids=[p.name for p in RUNS])
def test_the_replay_ends_where_the_result_document_does(path: Path) -> None:
    # The demo and every example (gangs, fractions, reclaim, preempt, consolidation, node pools): the
    # timeline's last state is the document's final state, queue by queue.
    objects = [loaded.obj for loaded in load_manifests([str(path)])]
    simulation = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, max_cycles=200))
    recorder = FairShareRecorder()
    simulation.observers.append(recorder)
    result = simulation.run()
    document = result_document(result)
    timeline = replay(document, run_facts(result, recorder))
    numbers = summary(timeline)
    pending = Counter(p["queue"] or NO_QUEUE for p in document["pods"] if p["phase"] == "Pending")
    for queue in timeline.queues:
        assert timeline.pending[queue][-1] == pending[queue], queue
    for queue in document["queues"]:
        if queue["name"] in timeline.leaf_queues:
            assert timeline.allocated[queue["name"]][-1] == pytest.approx(queue["allocated"]["gpu"])
            # The fair shares recorded last are the last cycle's, which the document has.
            assert timeline.fair_share[queue["name"]][-1] == pytest.approx(queue["fairShare"]["gpu"])
    assert timeline.total_allocated[-1] == pytest.approx(document["summary"]["gpu"]["allocated"])
    assert numbers["evictions"] == sum(p["evictions"] for p in document["pods"])
    started = {g.key for g in timeline.groups if g.start is not None}
    running = {
        f"{g['namespace']}/{g['name']}" for g in document["podGroups"] if g["running"] >= g["minMember"]
    }
    assert running <= started


def job(name: str, spec: dict[str, Any], duration: str) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    template = {
        "metadata": {"annotations": {"simulation.kai.scheduler/duration": duration}},
        "spec": {"schedulerName": "kai-scheduler", "restartPolicy": "Never", "containers": [container]},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {"kai.scheduler/queue": "q"}},
        "spec": {**spec, "template": template},
    }


def test_workloads_pods_made_mid_run_and_deleted_unfinished(tmp_path: Path) -> None:
    # Two GPUs. A Job of two 10 s pods one after the other: its second pod is made when the first
    # succeeds at 10 (KAI v0.15+'s pod grouper gives the Job's pods one PodGroup: it completes at 20, 20 s
    # after it arrived). A Job whose 100 s pod passes its 15 s deadline: the controller deletes the pod
    # at 15 (it ends Failed), and its GPU is free from then on.
    summary, document, _ = run_report(
        tmp_path,
        [
            node_manifest("node0", gpus=2),
            queue_manifest("q"),
            job("steps", {"parallelism": 1, "completions": 2}, "10s"),
            job("late", {"activeDeadlineSeconds": 15}, "100s"),
        ],
    )
    phases = Counter(p["phase"] for p in document["pods"])
    assert phases == {"Succeeded": 2, "Failed": 1}
    assert summary["time"] == 20.0
    assert summary["jctSeconds"] == {"count": 1, "mean": 20.0, "p50": 20.0, "p99": 20.0}
    assert summary["podGroups"] == {"total": 2, "started": 2, "completed": 1, "runningFromInput": 0}
    # 2 GPUs for 0-15, 1 for 15-20, of 2 x 20.
    assert summary["gpuAllocationRatio"] == pytest.approx(35 / 40)
