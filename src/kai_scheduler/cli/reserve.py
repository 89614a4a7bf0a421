"""`kai-scheduler reserve`: run inside a GPU reservation pod (the binder creates them): find the UUID of the
pod's GPU through NVML, publish it in the pod's annotation, and hold the GPU until SIGTERM
(`k8s.binder.reservation_app`)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from kai_scheduler.cli.flags import UsageError, kube_client


def add_command(commands: Any) -> None:
    """The `reserve` subcommand, its arguments added when it is parsed, on the program's subparsers."""
    commands.add_parser(
        "reserve",
        help="inside a GPU reservation pod: publish the pod's GPU, then hold it",
        description="Run inside a GPU reservation pod (the binder creates them): find the UUID of the "
        "pod's GPU through NVML, publish it in the pod's annotation run.ai/reserve_for_gpu_index, and "
        "hold the GPU until SIGTERM.",
        arguments=_arguments,
    )


def _arguments(reserve: argparse.ArgumentParser) -> None:
    reserve.add_argument(
        "--kubeconfig", metavar="FILE", help="default: in-cluster, then $KUBECONFIG, ~/.kube/config"
    )
    reserve.add_argument("--pod-name", default=os.environ.get("POD_NAME"), help="default: $POD_NAME")
    reserve.add_argument(
        "--namespace", default=os.environ.get("POD_NAMESPACE"), help="default: $POD_NAMESPACE"
    )


def command(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from kai_scheduler.k8s.binder.reservation_app import (
        GpuDiscoveryError,
        discover_gpu_uuid,
        reservation_app_access,
        run_reservation,
    )
    from kai_scheduler.k8s.runtime.access import AccessGuard
    from kai_scheduler.k8s.runtime.client import ApiStatusError

    if not args.pod_name or not args.namespace:
        raise UsageError(
            "reserve: the pod is unknown: set --pod-name and --namespace (or POD_NAME, POD_NAMESPACE)"
        )
    try:
        uuid = discover_gpu_uuid(os.environ)
    except GpuDiscoveryError as error:
        raise UsageError(f"reserve: {error}") from None
    client = kube_client(args.kubeconfig)

    async def hold() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        guarded = AccessGuard(client, reservation_app_access(args.namespace), "reserve")
        try:
            await run_reservation(guarded, args.namespace, args.pod_name, uuid, stop)
        finally:
            await client.aclose()

    try:
        asyncio.run(hold())
    except ApiStatusError as error:
        raise UsageError(f"reserve: pod {args.namespace}/{args.pod_name}: {error}") from None
    return 0
