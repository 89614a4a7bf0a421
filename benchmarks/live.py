"""The live benchmark (issue #8): `kai-scheduler run --all` against the fake API server, end to end.

Three processes, as a user would run them:

* the fake API server (`kai_fakeapi`, this clone's whatever `--src` runs, started by this file's `serve`
  mode so that it can report what it served): fake GPU nodes (`--nodes`, 8 GPUs each) and 10 queues are
  seeded before anything starts; its kubelet stand-in makes a bound pod Running;
* `kai-scheduler run --all --skip admission --no-gpu-reservation` with a kubeconfig on it;
* this driver: once `run` is ready, 16 HTTP clients (threads, one keep-alive connection each) create
  `--pods` single-GPU bare pods, round-robin over the queues, as fast as the server takes them.

It measures the time from the first create to the last pod bound (`spec.nodeName` set through the
binding subresource), pods bound per second, the API requests the `run` process made per pod (writes by
verb and resource; the benchmark's own creates are not counted), the events written by reason (and the
occurrences their counts stand for), and the CPU seconds of the `run` process (and of the fake API
server) per pod.

    python benchmarks/live.py                        # 500 nodes, 4,000 pods, then 1,000 nodes, 8,000 pods,
                                                     # then 1,250 nodes, 10,000 pods (issue #23's row)
    python benchmarks/live.py --nodes 200 --pods 1500 --no-double
    python benchmarks/live.py --src ../baseline/src --record before

The figures go into `benchmarks/results.json` under the key `live` (other benchmarks own other keys of
that file): `live.after` (or `live.<--record>`), one entry per size, in the order above.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results.json"
QUEUES = 10
CLIENTS = 16
GPUS_PER_NODE = 8
LARGE = (1250, 10_000)  # issue #23's live row: nodes, pods (exactly the cluster's GPUs)
NAMESPACE = "default"
SCHEDULER = "kai-scheduler"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the fake API server, in its own process ------------------------------------------------------


def _node(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i:04d}", "labels": {"nvidia.com/gpu.memory": "81920"}},
        "status": {
            "allocatable": {
                "cpu": "128",
                "memory": "1Ti",
                "pods": "110",
                "nvidia.com/gpu": str(GPUS_PER_NODE),
            }
        },
    }


def _queue(name: str, gpus: int, parent: str | None) -> dict[str, Any]:
    def resource(quota: float) -> dict[str, float]:
        return {"quota": quota, "limit": -1, "overQuotaWeight": 1}

    spec: dict[str, Any] = {"resources": {"gpu": resource(gpus), "cpu": resource(-1), "memory": resource(-1)}}
    if parent is not None:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def serve(nodes: int) -> None:
    """The server process: seed the store, serve, answer the driver's commands on stdin (one JSON line
    out per line in): `stats` -> what was served so far and the binds; `quit`."""
    from kai_fakeapi import FakeApiServer, Store

    store = Store(kubelet=True)
    for i in range(nodes):
        store.create(_node(i))
    gpus = nodes * GPUS_PER_NODE
    store.create(_queue("department", gpus, None))
    for q in range(QUEUES):
        store.create(_queue(f"queue-{q}", gpus // QUEUES, "department"))
    server = FakeApiServer(store=store, bookmark_interval=1.0)
    server._requests = _Unbounded()  # type: ignore[assignment]  # every request, not the last 100,000 (the benchmark tallies them all)
    server.start()
    print(json.dumps({"url": server.url}), flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "quit":
            break
        if command == "binds":  # cheap: polled while waiting
            print(json.dumps({"binds": len(store.binds)}), flush=True)
        if command == "stats":
            tally: Counter[str] = Counter()
            for record in server.requests():
                resource = (record.resource or "?").partition(".")[0]
                if record.subresource:
                    resource += "/" + record.subresource
                tally[f"{record.verb or record.method} {resource} {record.code}"] += 1
            last = store.binds[-1] if store.binds else None
            # Which events were written (reason, involved kind) and how many occurrences they stand for.
            events: Counter[str] = Counter()
            occurrences: Counter[str] = Counter()
            for event in store.list("events"):
                what = f"{event.get('reason')} on {(event.get('involvedObject') or {}).get('kind')}"
                events[what] += 1
                occurrences[what] += int(event.get("count") or 1)
            print(
                json.dumps(
                    {
                        "requests": tally,
                        "binds": len(store.binds),
                        "lastBindRv": last and last.resource_version,
                        "events": events,
                        "eventOccurrences": occurrences,
                    }
                ),
                flush=True,
            )
    server.stop()


class _Unbounded(list[Any]):
    """A list with deque's `append`/`clear`/iteration, so the server keeps every request record."""


# --- helpers --------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and its live descendants (and the children it waited for)."""
    total = 0.0
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / CLOCK_TICKS  # utime stime cutime cstime
        todo.extend(children.get(current, []))
    return total


def _pod(i: int) -> bytes:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"job-{i:05d}",
            "namespace": NAMESPACE,
            "labels": {"kai.scheduler/queue": f"queue-{i % QUEUES}", "app": "bench"},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }
    return json.dumps(pod).encode()


def _create_pods(url: str, count: int, clients: int) -> tuple[float, float, list[str]]:
    """Create `count` pods from `clients` threads; (first create sent, last create answered, errors)."""
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(url)
    errors: list[str] = []
    times: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client(index: int) -> None:
        conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=60)
        bodies = [_pod(i) for i in range(index, count, clients)]
        start.wait()
        began = time.time()
        for body in bodies:
            conn.request(
                "POST",
                f"/api/v1/namespaces/{NAMESPACE}/pods",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            response.read()
            if response.status != 201:
                with lock:
                    errors.append(f"create: HTTP {response.status}")
        with lock:
            times.extend((began, time.time()))
        conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return min(times), max(times), errors


class _Server:
    def __init__(self, nodes: int) -> None:
        # The fake API server is the measuring instrument: always this clone's, whatever `--src` runs.
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "fakeapi" / "src"), str(ROOT / "src")]),
        }
        self.process = subprocess.Popen(
            [sys.executable, __file__, "serve", "--nodes", str(nodes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.url = str(self._read()["url"])

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the fake API server process ended")
        return dict(json.loads(line))

    def ask(self, command: str) -> dict[str, Any]:
        """`stats`: every request so far by verb, resource and code, and the binds; `binds`: their
        count only (cheap enough to poll)."""
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write("quit\n")
            self.process.stdin.flush()
            self.process.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def _wait_ready(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"`run` ended with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("`run` did not become ready")


def _writes(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Requests in `after` but not `before`, by "verb resource code"."""
    return {k: n - before.get(k, 0) for k, n in sorted(after.items()) if n - before.get(k, 0) > 0}


WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


# --- one measured run -----------------------------------------------------------------------------


def _py_spy(path: Path, pid: int) -> subprocess.Popen[bytes]:
    """py-spy sampling `pid` into `path` (.svg: a flame graph, else collapsed stacks) until SIGINT."""
    form = "flamegraph" if path.suffix == ".svg" else "raw"
    # --gil: only the thread holding the GIL is sampled, i.e. where the CPU goes (not idle threads).
    # py-spy installed into the venv is not on PATH unless the venv is activated.
    beside = Path(sys.executable).with_name("py-spy")
    spy = str(beside) if beside.exists() else "py-spy"
    command = [spy, "record", "-o", str(path), "--pid", str(pid), "-r", "50", "-f", form, "--gil"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(
    src: Path, nodes: int, pods: int, budget: float, profile: Path | None, server_profile: Path | None
) -> dict[str, Any]:
    server = _Server(nodes)
    run_process: subprocess.Popen[bytes] | None = None
    spies: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = Path(tmp) / "kubeconfig"
            kubeconfig.write_text(
                json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
                        "users": [{"name": "fake", "user": {"token": "fake"}}],
                        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                        "current-context": "fake",
                    }
                )
            )
            metrics_port = _free_port()
            run_log = (Path(tmp) / "run.log").open("wb")
            run_process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kai_scheduler",
                    "run",
                    "--all",
                    "--skip",
                    "admission",
                    "--no-gpu-reservation",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--metrics-port",
                    str(metrics_port),
                    "--plugin-server-port",
                    "0",
                ],
                env={**os.environ, "PYTHONPATH": str(src)},
                # A file, not a pipe nobody reads while it runs: its log would fill the pipe and stop it.
                stderr=run_log,
            )
            run_log.close()  # the child has its own descriptor
            _wait_ready(metrics_port, run_process, 120)
            time.sleep(1.0)  # let the first idle cycles pass
            baseline = server.ask("stats")
            run_cpu0 = _cpu_seconds(run_process.pid)
            server_cpu0 = _cpu_seconds(server.process.pid)
            spies = [
                _py_spy(path, pid)
                for path, pid in ((profile, run_process.pid), (server_profile, server.process.pid))
                if path is not None
            ]
            first, created, errors = _create_pods(server.url, pods, CLIENTS)
            if errors:
                raise RuntimeError(f"{len(errors)} creates failed, e.g. {errors[0]}")
            deadline = first + budget
            last_bound = 0.0
            bound = 0
            while time.time() < deadline:
                if run_process.poll() is not None:
                    raise RuntimeError(f"`run` ended with code {run_process.returncode}")
                bound = int(server.ask("binds")["binds"]) - int(baseline["binds"])
                if bound >= pods:
                    last_bound = time.time()
                    break
                time.sleep(0.05)
            run_cpu = _cpu_seconds(run_process.pid) - run_cpu0
            server_cpu = _cpu_seconds(server.process.pid) - server_cpu0
            stats = server.ask("stats")
    finally:
        for spy in spies:
            spy.send_signal(2)
            spy.wait(60)
        if run_process is not None:
            run_process.terminate()
            try:
                run_process.wait(30)
            except subprocess.TimeoutExpired:
                run_process.kill()
                run_process.wait()
        server.close()
    served = _writes(baseline["requests"], stats["requests"])
    creates = f"create pods {201}"
    by_kind: dict[str, float] = {}
    for key, n in served.items():
        verb, resource, code = key.split(" ")
        if key == creates:
            n -= pods  # the benchmark's own creates
        if verb in WRITE_VERBS and n > 0:
            name = f"{verb} {resource}" + ("" if code.startswith("2") else f" ({code})")
            by_kind[name] = round(n / max(bound, 1), 4)
    done = bound >= pods
    seconds = (last_bound - first) if done else None
    return {
        "nodes": nodes,
        "pods": pods,
        "bound": bound,
        "completed": done,
        "budgetSeconds": budget,
        "firstCreateToLastBoundSeconds": round(seconds, 2) if seconds is not None else None,
        "createSeconds": round(created - first, 2),
        "podsPerSecond": round(bound / seconds, 1) if seconds else round(bound / budget, 1),
        "apiWritesPerPod": round(sum(by_kind.values()), 2),
        "apiWritesPerPodByKind": by_kind,
        "eventsByReason": _writes(baseline["events"], stats["events"]),
        "eventOccurrencesByReason": _writes(baseline["eventOccurrences"], stats["eventOccurrences"]),
        "apiReadsDuringRun": {k: n for k, n in served.items() if k.split(" ")[0] in ("get", "list", "watch")},
        "runCpuSecondsPerPod": round(run_cpu / max(bound, 1), 5),
        "runCpuSeconds": round(run_cpu, 1),
        "serverCpuSecondsPerPod": round(server_cpu / max(bound, 1), 5),
        "loadAverageBefore": os.getloadavg(),
        "src": os.path.relpath(src.resolve(), ROOT),  # relative: no machine's folders in results.json
    }


def _record(key: str, entries: list[dict[str, Any]]) -> None:
    """Read-modify-write `results.json`: only `live.<key>` changes."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    live = results.setdefault("live", {})
    live[key] = {"measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": entries}
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode")
    serve_parser = sub.add_parser("serve", help="(internal) the fake API server process")
    serve_parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=4000)
    parser.add_argument("--no-double", action="store_true", help="skip the second run at twice the size")
    parser.add_argument(
        "--no-large", action="store_true", help="skip the run at 10,000 pods on 1,250 nodes (the last)"
    )
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per run before giving up")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the kai_scheduler sources to run")
    parser.add_argument("--record", default="after", help="key under `live` in results.json ('' : none)")
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy profile of `run`, first size only (.svg: a flame graph, else collapsed stacks)",
    )
    parser.add_argument("--profile-server", type=Path, help="the same for the fake API server")
    args = parser.parse_args(argv)
    if args.mode == "serve":
        serve(args.nodes)
        return 0
    sizes = [(args.nodes, args.pods)]
    if not args.no_double:
        sizes.append((args.nodes * 2, args.pods * 2))
    if not args.no_large and LARGE not in sizes:
        sizes.append(LARGE)
    entries = []
    for i, (nodes, pods) in enumerate(sizes):
        first = i == 0
        entry = measure(
            args.src.resolve(),
            nodes,
            pods,
            args.budget,
            args.profile if first else None,
            args.profile_server if first else None,
        )
        entries.append(entry)
        print(json.dumps(entry, indent=2), flush=True)
    if not args.no_double and all(e["firstCreateToLastBoundSeconds"] for e in entries[:2]):
        ratio = entries[1]["firstCreateToLastBoundSeconds"] / entries[0]["firstCreateToLastBoundSeconds"]
        print(f"double size / base size: {ratio:.2f}x (goal <= 2.2x)")
    if args.record:
        _record(args.record, entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
