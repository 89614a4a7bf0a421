"""Bad trace input is one line naming the file (and the line of the row), exit status 2; the queue mapping
file (`--queues`) assigns queues by rules and sets quotas."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_scheduler.cli import main
from trace_files import OPENB_NODES, OPENB_PODS, POLLUX, imported, write

GOOD_POD = "p-0,6000,12288,1,460,,LS,Running,100,1000,105"


def error_of(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["trace", "import", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err.strip()


@pytest.fixture
def nodes(tmp_path: Path) -> Path:
    return write(tmp_path, "nodes.csv", OPENB_NODES, ["n-0,64000,262144,8,V100M32"])


def test_a_malformed_row_names_the_file_line_and_column(
    tmp_path: Path, nodes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = write(
        tmp_path, "pods.csv", OPENB_PODS, [GOOD_POD, "p-1,6000,12288,one,460,,LS,Running,100,1000,105"]
    )
    err = error_of(capsys, "openb", str(pods), "--nodes", str(nodes))
    assert err == f"kai-scheduler: error: {pods}: line 3: num_gpu: expected a whole number, got 'one'"


def test_a_row_with_missing_fields_is_refused(
    tmp_path: Path, nodes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = write(tmp_path, "pods.csv", OPENB_PODS, ["p-1,6000,12288"])
    assert f"{pods}: line 2: expected 11 fields as the header, got 3" in error_of(
        capsys, "openb", str(pods), "--nodes", str(nodes)
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("p-1,6000,12288,1,460,,LS,Running,100,50,105", "deletion_time: 50 is before scheduled_time 105"),
        ("p-1,6000,12288,1,460,,VIP,Running,100,1000,105", "qos: unknown QoS 'VIP'"),
        ("p-1,6000,12288,1,1500,,LS,Running,100,1000,105", "gpu_milli: expected at most 1000"),
        ("P_1,6000,12288,1,460,,LS,Running,100,1000,105", "name: 'P_1' cannot name a pod"),
        ("p-0,6000,12288,1,460,,LS,Running,100,1000,105", "name 'p-0' already used on line 2"),
    ],
)
def test_rows_that_make_no_sense_are_refused_where_they_are(
    tmp_path: Path, nodes: Path, capsys: pytest.CaptureFixture[str], row: str, message: str
) -> None:
    pods = write(tmp_path, "pods.csv", OPENB_PODS, [GOOD_POD, row])
    assert f"{pods}: line 3: {message}" in error_of(capsys, "openb", str(pods), "--nodes", str(nodes))


def test_a_missing_file_or_column_is_named(
    tmp_path: Path, nodes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.csv"
    assert error_of(capsys, "openb", str(missing), "--nodes", str(nodes)).endswith(f"{missing}: no such file")
    other = write(tmp_path, "other.csv", "name,time\n", ["a,1"])
    assert f"{other}: line 1: missing column(s) application, num_replicas, batch_size" in error_of(
        capsys, "pollux", str(other)
    )


def test_an_unknown_pollux_application_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = write(tmp_path, "w.csv", POLLUX, ["gpt-0,1,gpt,4,64"])
    assert f"{workload}: line 2: application: unknown application 'gpt'" in error_of(
        capsys, "pollux", str(workload)
    )


def test_bad_flags_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = write(tmp_path, "w.csv", POLLUX, ["ncf-0,1,ncf,1,64"])
    assert "expected 0 <= START < END" in error_of(capsys, "pollux", str(workload), "--window", "10:5")
    assert "expected NODESxGPUS" in error_of(capsys, "pollux", str(workload), "--cluster", "16")


def test_a_mapping_file_assigns_queues_by_rule_and_sets_quotas(tmp_path: Path, nodes: Path) -> None:
    pods = write(
        tmp_path,
        "pods.csv",
        OPENB_PODS,
        [
            GOOD_POD,
            "p-1,6000,12288,1,1000,,BE,Running,100,1000,105",
            "p-2,6000,12288,1,1000,,Burstable,Running,1,9,5",
        ],
    )
    mapping = tmp_path / "queues.yaml"
    mapping.write_text(
        "rules:\n"
        "- {match: {qos: LS}, queue: serving}\n"
        "- {match: {qos: [BE, Guaranteed]}, queue: batch}\n"
        "- queue: other\n"
        "queues:\n"
        "  serving: {quota: 5, overQuotaWeight: 2}\n"
    )
    docs = imported(
        ["openb", str(pods), "--nodes", str(nodes), "--queues", str(mapping)], tmp_path / "o.yaml"
    )
    queue_of = {
        name: doc["metadata"]["labels"]["kai.scheduler/queue"]
        for (kind, name), doc in docs.items()
        if kind == "Pod"
    }
    assert queue_of == {"p-0": "serving", "p-1": "batch", "p-2": "other"}
    gpu = {name: doc["spec"]["resources"]["gpu"] for (kind, name), doc in docs.items() if kind == "Queue"}
    assert gpu["serving"] == {"quota": 5, "limit": -1, "overQuotaWeight": 2}
    # the other 3 GPUs by GPU-seconds: batch 1 x 895, other 1 x 4
    assert (gpu["batch"]["quota"], gpu["other"]["quota"]) == (3, 0)


def test_a_row_no_rule_matches_and_a_bad_mapping_are_refused(
    tmp_path: Path, nodes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = write(tmp_path, "pods.csv", OPENB_PODS, [GOOD_POD])
    mapping = tmp_path / "queues.yaml"
    mapping.write_text("rules:\n- {match: {qos: BE}, queue: batch}\n")
    assert f"{pods}: line 2: no rule of {mapping} matches this row" in error_of(
        capsys, "openb", str(pods), "--nodes", str(nodes), "--queues", str(mapping)
    )
    mapping.write_text("rules:\n- {match: {qos: BE}, queue: Batch_Queue}\n")
    assert f"{mapping}: rules[0].queue: expected a queue name" in error_of(
        capsys, "openb", str(pods), "--nodes", str(nodes), "--queues", str(mapping)
    )


def test_a_mapping_file_of_quotas_alone_keeps_the_default_queues(tmp_path: Path, nodes: Path) -> None:
    pods = write(
        tmp_path, "pods.csv", OPENB_PODS, [GOOD_POD, "p-1,6000,12288,1,1000,,BE,Running,100,1000,105"]
    )
    mapping = tmp_path / "queues.yaml"
    mapping.write_text("queues:\n  ls: {quota: 1, limit: 2}\n")
    docs = imported(
        ["openb", str(pods), "--nodes", str(nodes), "--queues", str(mapping)], tmp_path / "o.yaml"
    )
    gpu = {name: doc["spec"]["resources"]["gpu"] for (kind, name), doc in docs.items() if kind == "Queue"}
    assert gpu == {
        "ls": {"quota": 1, "limit": 2, "overQuotaWeight": 1},
        "be": {"quota": 7, "limit": -1, "overQuotaWeight": 1},
    }
