"""Helm's engine (helm-python-sdk) in a process of its own, answering JSON requests line by line.

The SDK loads Helm's Go library into the process that imports it, and the Go runtime then shares that
process's signals and threads: the live tests' watch streams broke once it had been loaded next to them.
So the test process talks to Helm through this child instead (`chart_support.HelmEngine`).

Requests on stdin, one JSON object a line: {"op": "chart" | "render" | "lint" | "parse_set", ...};
answers on stdout, one a line: {"result": ...} or {"error": "..."}.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import helm_python as helm


def answer(request: dict[str, Any]) -> Any:
    op = request["op"]
    if op == "parse_set":
        return helm.parse_set_string(request["expression"])
    if op == "chart":
        chart = helm.Chart.load(request["chart"])
        return {"values": chart.values, "templates": chart.templates}
    if op == "render":
        chart = helm.Chart.load(request["chart"])
        return chart.render(request["values"], name=request["release"], namespace=request["namespace"])
    if op == "lint":
        return helm.lint(request["chart"], request["values"], strict=True, namespace=request["namespace"])
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    for line in sys.stdin:
        try:
            reply: dict[str, Any] = {"result": answer(json.loads(line))}
        except Exception as error:  # the test process reports it, with the request
            reply = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
