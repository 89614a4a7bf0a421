"""`kai-fakeapi` (`python -m kai_fakeapi`) `--port 0 --kubeconfig PATH [-f manifests.yaml ...]`: serve until
interrupted; prints the URL on the first line of stdout.

By default it is ready for the README's walk-through: it starts with the try-it seed (two 8-GPU nodes,
KAI's priority classes and default queues: `kai_fakeapi.seed`), its kubelet stand-in starts bound pods,
and the workload controllers turn Jobs, CronJobs, Deployments, ReplicaSets and StatefulSets into pods.
`--seed none --no-kubelet --no-controllers` gives a bare API server."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from .controllers import WorkloadControllers
from .seed import try_it_seed
from .server import FakeApiServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kai-fakeapi", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port")
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for kubectl here")
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        type=Path,
        default=[],
        help="YAML manifests to load at start (repeatable)",
    )
    parser.add_argument(
        "--seed",
        choices=("try-it", "none"),
        default="try-it",
        help="what the server starts with before the -f files: try-it (default): two 8-GPU nodes, KAI's "
        "priority classes and default queues; none: nothing",
    )
    parser.add_argument("--bookmark-interval", type=float, default=1.0)
    parser.add_argument(
        "--kubelet",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="bound pods become Running, as a node's kubelet would start them (default: on)",
    )
    parser.add_argument(
        "--controllers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Jobs, CronJobs, Deployments, ReplicaSets and StatefulSets make their pods (default: on)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="authenticate every request (the kubeconfig's admin token or a ServiceAccount's, e.g. from "
        "kubectl create token), authorize it by RBAC and pass every write through the admission webhooks, "
        "as a real API server; implies --tls",
    )
    parser.add_argument(
        "--expose-service",
        action="append",
        default=[],
        metavar="NAMESPACE/NAME:PORT=HOST:PORT",
        help="route a Service's port (what a webhook's clientConfig.service names) to an address "
        "(repeatable): there is no cluster network",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS (a CA of its own, in the kubeconfig): kubectl sends tokens only over HTTPS",
    )
    parser.add_argument("--graceful-pod-deletion", action="store_true")
    parser.add_argument("--auto-create-namespaces", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(asctime)s %(message)s"
    )
    server = FakeApiServer(
        args.host,
        args.port,
        bookmark_interval=args.bookmark_interval,
        strict=args.strict,
        tls=args.tls or args.strict,
        kubelet=args.kubelet,
        graceful_pod_deletion=args.graceful_pod_deletion,
        auto_create_namespaces=args.auto_create_namespaces,
    )
    for route in args.expose_service:
        try:
            service, address = route.split("=", 1)
            ref, port = service.rsplit(":", 1)
            namespace, name = ref.split("/", 1)
            host, target = address.rsplit(":", 1)
            server.expose_service(namespace, name, int(port), (host, int(target)))
        except ValueError:
            parser.error(f"--expose-service {route!r}: expected NAMESPACE/NAME:PORT=HOST:PORT")
    if args.seed == "try-it":
        server.store.load(try_it_seed())
    for path in args.filename:
        server.store.load(path.read_text())
    controllers = WorkloadControllers(server.store) if args.controllers else None
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    server.start()
    if controllers is not None:
        controllers.start()
    if args.kubeconfig:
        server.write_kubeconfig(args.kubeconfig)
    print(server.url, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        if controllers is not None:
            controllers.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
