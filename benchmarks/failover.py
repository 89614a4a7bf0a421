"""The failover benchmark (issue #20): how long a busy cluster goes without binds when the leaders die.

The chart installed with two replicas of each of the scheduler, binder, pod grouper and status
controllers, each pod a process run exactly as its Deployment says (its args, its ServiceAccount's token;
only `--identity` and the `--leader-elect-*` timing added), against the strict fake API server (in this
process, with its kubelet stand-in and fake GPU devices), as the high-availability test runs them
(`tests/live/replicas.py`, `tests/live/failover_run.py`): work arrives in waves, and once pods are being
bound the leaders of the scheduler and of the binder are killed (SIGKILL, no Lease released); the rest of
the work arrives while nobody leads. Each run measures, from the kill:

* the seconds until each standby holds its component's Lease (polled every 50 ms);
* the seconds until the next bind the API server accepted (the request's arrival): the takeover as a
  user sees it, the Lease's expiry plus the new leaders' first cycle and bind.

Every run also checks what the test asserts (each pod bound once, no node over its GPUs, no BindRequest
given up, no request refused); a run that breaks one is reported and makes the benchmark fail.

    python benchmarks/failover.py                              # KAI's 15s / 10s / 2s, 3 runs
    python benchmarks/failover.py --timing 4s,3s,500ms --runs 5 --record short
    python benchmarks/failover.py --src /path/to/other/checkout/src --record before

The figures go into `benchmarks/results.json` under `failover.<--record>` (default `after`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results.json"
for _folder in (ROOT / "tests" / "live", ROOT / "tests"):  # the test's harness and workload
    sys.path.insert(0, str(_folder))

from failover_run import KILLED, busy_run_with_failover, problems, seed  # noqa: E402
from identities import refusals, strict_server  # noqa: E402
from replicas import KAI_TIMING, Replicas  # noqa: E402

from kai_fakeapi import Store  # noqa: E402


def measure_once(timing: tuple[str, str, str], src: Path | None) -> dict[str, Any]:
    store = Store(kubelet=True)
    seed(store)
    with (
        tempfile.TemporaryDirectory() as folder,
        strict_server(chart=False, store=store, bookmark_interval=1.0) as server,
    ):
        with Replicas(server, Path(folder), timing=timing, src=src) as replicas:

            async def body() -> Any:
                await replicas.until_ready()
                return await busy_run_with_failover(server, replicas)

            failover = asyncio.run(body())
        found = problems(store) + refusals(server)
    return {
        "killToLeaseSeconds": {c: round(failover.lease_taken[c], 2) for c in KILLED},
        "killToNextBindSeconds": round(failover.next_bind, 2) if failover.next_bind > 0 else None,
        "lateBindsOfTheKilledBinder": failover.late_binds,
        "pods": failover.pods,
        "boundBeforeKill": failover.bound_before,
        "problems": found,
        "loadAverageBefore": os.getloadavg(),
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    binds = [r["killToNextBindSeconds"] for r in runs if r["killToNextBindSeconds"] is not None]
    leases = {c: [r["killToLeaseSeconds"][c] for r in runs] for c in KILLED}
    return {
        "killToNextBindSeconds": _spread(binds),
        "killToLeaseSeconds": {c: _spread(values) for c, values in leases.items()},
    }


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _record(key: str, entry: dict[str, Any]) -> None:
    """Read-modify-write `results.json`: only `failover.<key>` changes."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results.setdefault("failover", {})[key] = entry
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


def _timing(text: str) -> tuple[str, str, str]:
    parts = tuple(text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("expected LEASE,RENEW,RETRY, e.g. 15s,10s,2s")
    return parts[0], parts[1], parts[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--timing",
        type=_timing,
        default=KAI_TIMING,
        metavar="LEASE,RENEW,RETRY",
        help="the --leader-elect-* durations (default: KAI's, 15s,10s,2s)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--src", type=Path, help="the kai_scheduler sources the components run")
    parser.add_argument("--record", default="after", help="key under `failover` in results.json ('': none)")
    args = parser.parse_args(argv)
    runs = []
    for _ in range(args.runs):
        run = measure_once(args.timing, args.src.resolve() if args.src else None)
        runs.append(run)
        print(json.dumps(run), flush=True)
    lease, renew, retry = args.timing
    entry = {
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "leaseDuration": lease,
        "renewDeadline": renew,
        "retryPeriod": retry,
        **summary(runs),
        "runs": runs,
    }
    print(json.dumps({k: v for k, v in entry.items() if k != "runs"}, indent=2))
    if args.record:
        _record(args.record, entry)
    broken = [p for r in runs for p in r["problems"]]
    if broken:
        print(f"{len(broken)} problems, e.g. {broken[0]}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
