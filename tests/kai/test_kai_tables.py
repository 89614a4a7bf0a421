"""KAI's own action test tables, run against this project's actions.

Each file of `tables/` is one KAI test file (`pkg/scheduler/actions/<action>/*_test.go`, converted by
`convert_go_tables.py`); each case builds the cluster its `TestTopologyBasic` describes, the way KAI's test
harness does (`pkg/scheduler/test_utils`), opens a session with the default configuration (or the case's),
runs the one action the file tests, and checks every expected job's and task's pods as KAI's
`MatchExpectedAndRealTasks` does: status and node, and no more binds, evictions and pipelines than the
case's cache mock allows (none where it names no number).

Cases that do not pass here are listed in `not_ported.yaml` with the reason (strict xfails), cases the
converter could not read are skipped with theirs, unless `built_cases.py` builds them; `README.md` has the
counts per file.

How a case's cluster is built (KAI's harness defaults) is said in `table_cluster.py`. Besides status and
node, a pod bound in the session has its `NUMAZones` (the indices of its node's NUMA zones it takes)
compared with the zones its bind decision predicts; a pipelined pod's and a pod's left where it ran are
not (nothing here shows them: a pipelined pod's zones are predicted when it is bound). Not compared, as
before: GPU amounts, GPU groups, error messages and nodes' resources (idle, releasing, NUMA zones'
available).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from built_cases import BUILT
from table_cluster import run_case

from kai_scheduler.framework.decisions import Decision
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskInfo, TaskStatus

HERE = Path(__file__).parent
TABLES = sorted((HERE / "tables").glob("*.yaml"))
NOT_PORTED: dict[str, dict[str, str]] = yaml.safe_load((HERE / "not_ported.yaml").read_text()) or {}

# KAI's pod statuses, as the classes the tests compare: a pod placed in this session is "Binding" in
# KAI (Allocated until the statement commits), ALLOCATED here.
_PLACED = {"Allocated", "Binding", "Bound"}


def _cases() -> list[Any]:
    params = []
    for path in TABLES:
        document = yaml.safe_load(path.read_text())
        left_out = NOT_PORTED.get(path.stem, {})
        built = BUILT.get(path.stem, {})
        for index, case in enumerate(document["cases"]):
            name = case.get("Name", f"case {index}")
            if "unreadable" in case and name in built:
                case = built[name]()
            marks = []
            if "unreadable" in case:
                marks.append(pytest.mark.skip(reason=f"not ported: {case['unreadable']}"))
            elif name in left_out:
                marks.append(pytest.mark.xfail(strict=True, reason=left_out[name]))
            params.append(
                pytest.param(document["action"], case, id=f"{path.stem}[{index}] {name}", marks=marks)
            )
    return params


@pytest.mark.parametrize(("action", "case"), _cases())
def test_kai_case(action: str, case: dict[str, Any]) -> None:
    check(case, run_case(action, case))


# --- the check -----------------------------------------------------------------------------------------


def _status(task: TaskInfo, initial: str) -> str:
    """The task's status in KAI's words, with a pod placed in this session called Allocated."""
    status = task.status
    if status is TaskStatus.ALLOCATED or (status is TaskStatus.RUNNING and initial in _PLACED):
        return "Allocated"
    return str(status.value)


def _expected_status(status: str) -> str:
    return "Allocated" if status in _PLACED else status


def _zone_indices(case: dict[str, Any], node: str, decision: Decision) -> list[int]:
    """The NUMA zones a decision predicts, as KAI's tests name them: indices into the node's zones."""
    order = [zone["id"] for zone in case["Nodes"][node]["NumaTopology"]["zones"]]
    return sorted(order.index(zone.zone) for zone in getattr(decision, "numa_zones", ()))


def check(case: dict[str, Any], session: Session) -> None:
    tasks = {task.name: task for task in session.snapshot.tasks.values()}
    names = session.snapshot.nodes.names
    initial = {
        f"{job['Name']}-{index}": task.get("State", "Pending")
        for job in case.get("Jobs") or []
        for index, task in enumerate(job.get("Tasks") or [])
    }
    expected: dict[str, dict[str, Any]] = {}
    for job_name, result in (case.get("JobExpectedResults") or {}).items():
        members = [name for name in tasks if name.rsplit("-", 1)[0] == job_name]
        assert members, f"no pods of job {job_name}"
        for name in members:
            expected[name] = result
    # (KAI looks up each pod in the tasks' expectations: an expectation naming no pod checks nothing.)
    expected.update({k: v for k, v in (case.get("TaskExpectedResults") or {}).items() if k in tasks})
    bound = {d.pod: d for d in session.decisions if d.type == "bind"}
    problems = []
    for name, result in expected.items():
        task = tasks.get(name)
        if task is None:
            problems.append(f"{name}: no such pod")
            continue
        want = _expected_status(result["Status"])
        got = _status(task, initial.get(name, "Pending"))
        node = names[task.node] if task.node >= 0 else ""
        if got != want:
            problems.append(f"{name}: {got} on {node or '-'}, expected {want}")
        elif result.get("NodeName") and want != "Pending" and node != result["NodeName"]:
            problems.append(f"{name}: on {node}, expected on {result['NodeName']}")
        elif result.get("NUMAZones") is not None and f"{task.namespace}/{name}" in bound:
            zones = _zone_indices(case, node, bound[f"{task.namespace}/{name}"])
            if zones != sorted(result["NUMAZones"]):
                problems.append(f"{name}: on NUMA zones {zones}, expected {result['NUMAZones']}")
    # (KAI's check of GPUGroups applies only to pods whose groups equal the expected labels already, so
    # it holds whenever it applies; the tables' labels for newly placed pods are not meant literally.)
    counts = {
        kind: sum(1 for d in session.decisions if d.type == kind) for kind in ("bind", "evict", "pipeline")
    }
    mock = (case.get("Mocks") or {}).get("CacheRequirements") or {}
    bounds = {
        "bind": mock.get("NumberOfCacheBinds", 0),
        "evict": mock.get("NumberOfCacheEvictions", 0),
        "pipeline": mock.get("NumberOfPipelineActions", 0),
    }
    problems += [
        f"{counts[kind]} {kind} decisions, at most {bound} expected"
        for kind, bound in bounds.items()
        if counts[kind] > bound
    ]
    table = "\n".join(f"  {d.action} {d.type} {d.pod} {d.node}" for d in session.decisions)
    assert not problems, "\n".join(problems) + f"\ndecisions:\n{table}"
