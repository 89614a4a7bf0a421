"""The command line of `kubectl-kai` (kubectl runs it for `kubectl kai ...`, with the arguments after
`kai`): the subcommands, the flags kubectl users expect (`--kubeconfig`, `-n/--namespace`,
`-A/--all-namespaces`, `-o json`, before or after the subcommand), and errors as one line on stderr with
exit status 1 (what was asked about does not exist, bad input) or 2 (the cluster cannot be read; also
argparse's usage errors)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from kai_scheduler.kubectl_plugin import fairshare, queues, top, why
from kai_scheduler.kubectl_plugin.amounts import RESOURCES
from kai_scheduler.kubectl_plugin.api_client import Cluster, PluginError, run
from kai_scheduler.kubectl_plugin.scheduler_client import DEFAULT_SCHEDULER

COMMON_DEFAULTS: dict[str, Any] = {
    "kubeconfig": None,
    "namespace": None,
    "all_namespaces": False,
    "output": "",
}


def _common() -> argparse.ArgumentParser:
    # Defaults are suppressed so that a flag given before the subcommand is not reset by the subparser.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--kubeconfig", metavar="FILE", help="default: $KUBECONFIG, then ~/.kube/config")
    common.add_argument("-n", "--namespace", help="default: the kubeconfig context's namespace")
    common.add_argument("-A", "--all-namespaces", action="store_true", help="why: every namespace")
    common.add_argument("-o", "--output", choices=("json",), help="json: for scripts")
    return common


def parser() -> argparse.ArgumentParser:
    common = _common()
    main = argparse.ArgumentParser(
        prog="kubectl kai",
        description="What kai-scheduler knows about queues, waiting pods and GPUs.",
        parents=[common],
    )
    commands = main.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = commands.add_parser(
        "queues", parents=[common], help="the queue tree: quota, limit, fair share, allocated, requested"
    )
    listing.add_argument(
        "--resource", choices=RESOURCES, default="gpu", help="the columns of this resource (default: gpu)"
    )
    explain = commands.add_parser(
        "why", parents=[common], help="why a pod or pod group waits, and what would let it start"
    )
    explain.add_argument(
        "name", nargs="?", metavar="POD|PODGROUP", help="pod, pod/NAME, podgroup/NAME; none: all that wait"
    )
    commands.add_parser("top", parents=[common], help="GPU allocation per node and per shared GPU")
    for name, what in (
        ("fairshare", "how the scheduler's last cycle divided the cluster down to QUEUE's fair share"),
        ("usage", "who holds QUEUE's resources, per pod group and user, in the order reclaim takes them"),
    ):
        asked = commands.add_parser(name, parents=[common], help=what)
        asked.add_argument("queue", metavar="QUEUE")
        asked.add_argument(
            "--scheduler",
            default=DEFAULT_SCHEDULER,
            metavar="URL",
            help=f"the scheduler's plugin server (default {DEFAULT_SCHEDULER}, where "
            "`kubectl -n kai-scheduler port-forward deploy/kai-scheduler-scheduler 8081` puts it)",
        )
    return main


def _print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2) + "\n")


def execute(args: argparse.Namespace) -> None:
    as_json = args.output == "json"
    if args.command in ("fairshare", "usage"):
        # From the scheduler's plugin server, not the API server: what its last cycle used.
        fetch, text = (
            (fairshare.fair_share, fairshare.fair_share_text)
            if args.command == "fairshare"
            else (fairshare.usage, fairshare.usage_text)
        )
        document = fetch(args.scheduler, args.queue)
        if as_json:
            _print_json(document)
        else:
            sys.stdout.write(text(document))
        return

    async def work(cluster: Cluster) -> None:
        if args.command == "queues":
            rows = queues.queue_tree(await queues.fetch(cluster))
            if as_json:
                _print_json({"queues": [row.as_json() for row in rows]})
            else:
                sys.stdout.write(queues.table(rows, args.resource))
                accounted = queues.accounted_table(rows)
                if accounted:
                    sys.stdout.write("\n" + accounted)
        elif args.command == "top":
            nodes = top.gpu_allocation(*await top.fetch(cluster))
            if as_json:
                _print_json(top.as_json(nodes))
            else:
                sys.stdout.write(top.tables(nodes))
        elif args.name is None:
            groups = await why.waiting_groups(cluster, args.all_namespaces)
            if as_json:
                _print_json({"waiting": groups})
            elif not groups:
                where = "any namespace" if args.all_namespaces else f"namespace {cluster.namespace}"
                sys.stdout.write(f"No pod group waits in {where}.\n")
            else:
                sys.stdout.write(why.waiting_table(groups, args.all_namespaces))
        else:
            if args.all_namespaces:
                raise PluginError("why NAME: a name is looked up in one namespace (-n), not with -A")
            explanation = await why.explain(cluster, args.name)
            if as_json:
                _print_json(explanation.as_json())
            else:
                sys.stdout.write(why.text(explanation))

    run(args.kubeconfig, args.namespace, work)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for key, value in COMMON_DEFAULTS.items():
        if not hasattr(args, key):
            setattr(args, key, value)
    try:
        execute(args)
    except PluginError as error:
        sys.stderr.write(f"error: {error}\n")
        return error.status
    except KeyboardInterrupt:
        return 130
    return 0


def program() -> None:
    """The `kubectl-kai` console script."""
    sys.exit(main())


if __name__ == "__main__":
    program()
