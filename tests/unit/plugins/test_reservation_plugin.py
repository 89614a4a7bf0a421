"""The `reservation` plugin's arguments (issue #24): a bad value is a one-line error naming the argument,
as `simulate --config` shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_scheduler.cli import main
from kai_scheduler.plugins.reservation import ReservationPlugin


def test_max_reservations_defaults_to_one_and_takes_kais_strings() -> None:
    assert ReservationPlugin({}).max_reservations == 1
    assert ReservationPlugin({"maxReservations": "3"}).max_reservations == 3
    assert ReservationPlugin({"maxReservations": 2}).max_reservations == 2


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "many", True])
def test_a_bad_max_reservations_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"^reservation\.arguments\.maxReservations: expected"):
        ReservationPlugin({"maxReservations": value})


def test_simulate_names_the_bad_argument_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text('tiers:\n- plugins:\n  - name: reservation\n    arguments: {maxReservations: "0"}\n')
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\n"
        'status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "1"}}\n'
    )
    assert main(["simulate", str(cluster), "--config", str(config)]) != 0
    error = capsys.readouterr().err.strip()
    assert "reservation.arguments.maxReservations: expected a whole number of at least 1, got '0'" in error
    assert "\n" not in error and "Traceback" not in error
