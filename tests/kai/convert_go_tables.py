"""Turn KAI's Go action test tables into this project's YAML case files (tests/kai/tables/*.yaml).

KAI's action tests (`pkg/scheduler/actions/<action>/*_test.go`) are tables of `TestTopologyBasic` literals:
nodes, queues, departments, jobs with their tasks, and what every job's or task's pods must look like after
the action ran once. This reads those literals (a small parser for Go composite literals: nested `Type{...}`,
keys, numbers, strings, constants, `ptr.To(...)`-style wrappers, simple arithmetic, durations in seconds,
closures that build sub-group trees, the test file's own one-line helper functions and the harness's
builders it knows) and writes the same facts as plain data; `test_kai_tables.py` builds clusters from them
and runs our actions. A literal that refers to anything the parser cannot evaluate (a loop's variable) is
written with `unreadable: <why>` and reported as not ported.

Run against a checkout of KAI (the Go source is not needed otherwise):

    python tests/kai/convert_go_tables.py /path/to/KAI-Scheduler --ref 'v0.17.0 (f218c69b)' \
        [--only reclaim_test]

The output is committed; rerun it when porting a newer KAI.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
TABLES = HERE / "tables"

# The test files ported, by action (the action the test runs once).
FILES = {
    "reclaim": [
        "reclaim/reclaim_test.go",
        "reclaim/reclaimDepartments_test.go",
        "reclaim/reclaimGang_test.go",
        "reclaim/reclaimGpuMemory_test.go",
        "reclaim/reclaimMIG_test.go",
        "reclaim/reclaim_elastic_test.go",
        "reclaim/reclaim_sub_group_test.go",
        "reclaim/reclaim_numa_test.go",
        "reclaim/reclaim_anchor_victim_test.go",
    ],
    "preempt": [
        "preempt/preempt_test.go",
        "preempt/preemptGang_test.go",
        "preempt/preemptGpuMemory_test.go",
        "preempt/preemptMIG_test.go",
        "preempt/preempt_elastic_test.go",
        "preempt/preempt_subgroups_test.go",
        "preempt/preempt_numa_test.go",
        "preempt/preempt_gang_full_drain_test.go",
    ],
    "consolidation": [
        "consolidation/consolidation_test.go",
        "consolidation/consolidationGpuMemory_test.go",
        "consolidation/consolidation_subgroups_test.go",
    ],
    "allocate": [
        "allocate/allocate_test.go",
        "allocate/allocateGang_test.go",
        "allocate/allocateElastic_test.go",
        "allocate/allocateFractionalGpu_test.go",
        "allocate/allocateGpuMemory_test.go",
        "allocate/allocateMIG_test.go",
        "allocate/allocate_subgroups_test.go",
        "allocate/allocateTopology_test.go",
        "allocate/interpod_affinity_test.go",
        "allocate/allocate_stuck_in_releasing_test.go",
        "allocate/allocate_numa_test.go",
    ],
    "stalegangeviction": [
        "stalegangeviction/stalegangeviction_test.go",
    ],
}

# Go constants the tables use, as values.
CONSTANTS: dict[str, Any] = {
    "constants.PriorityTrainNumber": 50,
    "constants.PriorityInteractivePreemptibleNumber": 75,
    "constants.PriorityBuildNumber": 100,
    "constants.PriorityInferenceNumber": 125,
    "constants.SpreadStrategy": "spread",
    "constants.BinpackStrategy": "binpack",
    "constants.GPUResource": "gpu",
    "constants.CPUResource": "cpu",
    "node_info.MigStrategyMixed": "mixed",
    "node_info.MigStrategySingle": "single",
    "v2alpha2.Preemptible": "preemptible",
    "v2alpha2.NonPreemptible": "non-preemptible",
    "enginev2alpha2.Preemptible": "preemptible",
    "enginev2alpha2.NonPreemptible": "non-preemptible",
    "tasks_fake.NodeAffinityKey": "kai.scheduler/type",
    "subgroup_info.RootSubGroupSetName": "",
    "v1.ResourceCPU": "cpu",
    "v1.ResourceMemory": "memory",
    "v1.PodQOSGuaranteed": "Guaranteed",
    "v1.PodQOSBurstable": "Burstable",
    "v1.PodQOSBestEffort": "BestEffort",
    # The kubelet's Topology Manager policy and scope, as a NodeResourceTopology's attributes name them.
    "node_info.TopologyPolicyNone": "none",
    "node_info.TopologyPolicyBestEffort": "best-effort",
    "node_info.TopologyPolicyRestricted": "restricted",
    "node_info.TopologyPolicySingleNUMANode": "single-numa-node",
    "node_info.TopologyScopeContainer": "container",
    "node_info.TopologyScopePod": "pod",
    # Durations are written in seconds.
    "time.Millisecond": 0.001,
    "time.Second": 1,
    "time.Minute": 60,
    "time.Hour": 3600,
    "true": True,
    "false": False,
    "nil": None,
}
NUMA_OBSERVED_ANNOTATION = "kai.scheduler/numa-placement-observed"
# Calls that only wrap their argument (pointers, conversions).
WRAPPERS = {
    "ptr.To",
    "pointer.Duration",
    "pointer.Int",
    "pointer.Int32",
    "pointer.Bool",
    "pointer.Float64",
    "test_utils.CreateFloat64Pointer",
    "v1.ResourceName",
    "float64",
    "int",
    "int32",
    "int64",
    "uint64",
}


class Unreadable(Exception):
    """A literal refers to something only running the Go code would tell."""


# --- tokens ------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\])*"|`[^`]*`)
  | (?P<number>\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?|\.\d+)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<punct>:=|[{}\[\]().,:*&+\-/=<>!;])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str


def tokens(source: str) -> list[Token]:
    found = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            raise ValueError(f"cannot read Go source at {source[position : position + 30]!r}")
        position = match.end()
        kind = match.lastgroup or ""
        if kind != "space":
            found.append(Token(kind, match.group()))
    return found


# --- values ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Function:
    """A helper of the test file that only returns an expression of its parameters
    (`func cpu(amount string) map[v1.ResourceName]string { return ... }`)."""

    toks: list[Token]
    parameters: tuple[str, ...]
    start: int  # the returned expression's first token

    def evaluate(self, args: list[Any], functions: dict[str, Function]) -> Any:
        if len(args) != len(self.parameters):
            raise Unreadable(f"calls a helper with {len(args)} arguments for {len(self.parameters)}")
        parser = Parser(self.toks, self.start, functions)
        parser.scopes.append(dict(zip(self.parameters, args, strict=True)))
        return parser.expression()


def file_functions(toks: list[Token]) -> dict[str, Function]:
    """The file's top-level functions whose body is one `return <expression>`."""
    found: dict[str, Function] = {}
    for i in range(len(toks) - 2):
        if toks[i].text != "func" or toks[i + 1].kind != "name" or toks[i + 2].text != "(":
            continue
        j = i + 3
        parameters: list[str] = []
        expect_name = True
        while toks[j].text != ")":
            if expect_name and toks[j].kind == "name":
                parameters.append(toks[j].text)
                expect_name = False
            elif toks[j].text == ",":
                expect_name = True
            j += 1
        while toks[j].text != "{":
            j += 1
        if toks[j + 1].text == "return":
            found[toks[i + 1].text] = Function(toks, tuple(parameters), j + 2)
    return found


def evenly_distributed_topology_nodes(
    zones: int, spines_per_zone: int, racks_per_spine: int, nodes_per_rack: int, gpus: int
) -> dict[str, Any]:
    """allocateTopology_test.go's buildEvenlyDistributedTopologyNodes: node0, node1, ... filling racks,
    spines and zones in order, each node labelled with its zone, spine and rack (numbered from 1)."""
    nodes: dict[str, Any] = {}
    for zone in range(1, zones + 1):
        for spine in range(1, spines_per_zone + 1):
            for rack in range(1, racks_per_spine + 1):
                labels = {
                    "k8s.io/zone": f"zone{zone}",
                    "k8s.io/spine": f"spine{spine + (zone - 1) * spines_per_zone}",
                    "k8s.io/rack": "rack"
                    + str(
                        rack + (spine - 1) * racks_per_spine + (zone - 1) * spines_per_zone * racks_per_spine
                    ),
                }
                for _ in range(nodes_per_rack):
                    nodes[f"node{len(nodes)}"] = {"GPUs": gpus, "Labels": dict(labels)}
    return nodes


class Parser:
    """Go expressions as they appear in the tables: composite literals become dicts (keyed) or lists,
    everything else a Python value."""

    def __init__(self, toks: list[Token], start: int, functions: dict[str, Function] | None = None) -> None:
        self.toks = toks
        self.i = start
        self.functions = functions or {}
        # Names in scope, innermost last: a closure's variables, a helper function's parameters.
        self.scopes: list[dict[str, Any]] = []

    def peek(self, offset: int = 0) -> Token:
        return self.toks[self.i + offset]

    def take(self, text: str | None = None) -> Token:
        token = self.toks[self.i]
        if text is not None and token.text != text:
            raise ValueError(f"expected {text!r}, got {token.text!r}")
        self.i += 1
        return token

    def expression(self) -> Any:
        value = self.term()
        while self.peek().text in ("+", "-", "*", "/"):
            operator = self.take().text
            right = self.term()
            if operator == "+" and isinstance(value, str) and isinstance(right, str):
                value += right
                continue
            if not isinstance(value, int | float) or not isinstance(right, int | float):
                raise Unreadable(f"arithmetic on {value!r} and {right!r}")
            value = {"+": value + right, "-": value - right, "*": value * right, "/": value / right}[operator]
        return value

    def term(self) -> Any:
        token = self.peek()
        if token.text in ("&", "*"):
            self.take()
            return self.term()
        if token.text == "-":
            self.take()
            value = self.term()
            if not isinstance(value, int | float):
                raise Unreadable(f"negative {value!r}")
            return -value
        if token.kind == "number":
            self.take()
            return float(token.text) if any(c in token.text for c in ".eE") else int(token.text)
        if token.kind == "string":
            self.take()
            return (
                token.text[1:-1]
                if token.text.startswith("`")
                else bytes(token.text[1:-1], "utf-8").decode("unicode_escape")
            )
        if token.text == "{":
            return self.body()
        if token.text in ("[", "map"):
            self.type_name()
            value = self.body()
            return [] if token.text == "[" and value == {} else value  # []int{}: an empty slice
        if token.text == "func":
            return self.closure()
        if token.kind == "name":
            name = self.qualified()
            if self.peek().text == "[":  # a generic instantiation: ptr.To[int32](...)
                self.take("[")
                self.type_name()
                self.take("]")
            if self.peek().text == "{":
                body = self.body()
                if name == "metav1.Duration":
                    return body.get("Duration", 0) if isinstance(body, dict) else 0
                return body
            if self.peek().text == "(":
                return self.call(name)
            for scope in reversed(self.scopes):
                if name in scope:
                    return scope[name]
            if name in CONSTANTS:
                return CONSTANTS[name]
            if name.startswith("pod_status."):
                return name.split(".", 1)[1]
            raise Unreadable(f"refers to {name}")
        raise ValueError(f"unexpected {token.text!r}")

    def qualified(self) -> str:
        name = self.take().text
        while self.peek().text == "." and self.peek(1).kind == "name":
            self.take(".")
            name += "." + self.take().text
        return name

    def type_name(self) -> None:
        """Skip a type: []*pkg.T, map[string]pkg.T, *pkg.T, pkg.T."""
        token = self.peek()
        if token.text == "[":
            self.take("[")
            if self.peek().text != "]":
                self.expression()
            self.take("]")
            self.type_name()
        elif token.text == "map":
            self.take("map")
            self.take("[")
            self.type_name()
            self.take("]")
            self.type_name()
        elif token.text == "*":
            self.take("*")
            self.type_name()
        else:
            self.qualified()

    def call(self, name: str) -> Any:
        self.take("(")
        args = []
        while self.peek().text != ")":
            args.append(self.expression())
            if self.peek().text == ",":
                self.take(",")
        self.take(")")
        if name in WRAPPERS and len(args) == 1:
            return args[0]
        if name == "jobs_fake.DefaultSubGroup":
            return {"podSets": [{"name": "", "minAvailable": args[0]}]}
        if name == "subgroup_info.NewSubGroupSet":
            return {"name": args[0], "topology": args[1], "podSets": [], "subGroups": []}
        if name == "subgroup_info.NewPodSet":
            return {"name": args[0], "minAvailable": args[1], "topology": args[2] if len(args) > 2 else None}
        if name == "nodes_fake.NewNumaTopology":
            return {"policy": args[0], "scope": args[1], "zones": args[2:]}
        if name == "nodes_fake.NewNumaZone":
            return {"id": args[0], "allocatable": args[1], "available": args[1]}
        if name == "nodes_fake.NewNumaZoneWithAllocatable":
            return {"id": args[0], "allocatable": args[1], "available": args[2]}
        if name == "nodes_fake.NumaObservedPlacementAnnotation":
            record = [{"zone": zone, "amount": amount} for zone, amount in sorted(args[0].items())]
            return {NUMA_OBSERVED_ANNOTATION: json.dumps(record, separators=(",", ":"))}
        if name == "buildEvenlyDistributedTopologyNodes":
            return evenly_distributed_topology_nodes(*args)
        if name in self.functions:
            return self.functions[name].evaluate(args, self.functions)
        raise Unreadable(f"calls {name}")

    def closure(self) -> Any:
        """`func() *T { x := ...; x.AddPodSet(...); x.AddSubGroup(...); return x }()`: the sub-group trees
        the tables build in place."""
        self.take("func")
        self.take("(")
        self.take(")")
        self.type_name()
        self.take("{")
        names: dict[str, Any] = {}
        self.scopes.append(names)
        result: Any = None
        while self.peek().text != "}":
            target = self.take().text
            if target == "return":
                result = names[self.take().text]
                continue
            if self.peek().text == ":=":
                self.take(":=")
                names[target] = self.expression()
                continue
            self.take(".")
            method = self.take().text
            self.take("(")
            argument = self.expression()
            self.take(")")
            if method == "AddPodSet":
                names[target]["podSets"].append(argument)
            elif method == "AddSubGroup":
                names[target]["subGroups"].append(argument)
            elif method == "SetMinSubGroup":
                names[target]["minSubGroup"] = argument
            else:
                raise Unreadable(f"calls {target}.{method}")
        self.scopes.pop()
        self.take("}")
        self.take("(")
        self.take(")")
        return result

    def body(self) -> Any:
        """`{ ... }`: a dict when its elements are keyed, else a list."""
        self.take("{")
        keyed: dict[Any, Any] = {}
        items: list[Any] = []
        while self.peek().text != "}":
            if self.peek().kind == "name" and self.peek(1).text == ":":  # a field name
                key: Any = self.take().text
                self.take(":")
                keyed[key] = self.expression()
            else:
                value = self.expression()
                if self.peek().text == ":":  # a map key
                    self.take(":")
                    keyed[value] = self.expression()
                else:
                    items.append(value)
            if self.peek().text == ",":
                self.take(",")
        self.take("}")
        if keyed and items:
            raise ValueError("a literal with keyed and unkeyed elements")
        return keyed if keyed or not items else items


def table_cases(source: str) -> list[dict[str, Any]]:
    """Every `TestTopologyBasic` literal of a test file, in order (unreadable ones say why)."""
    toks = tokens(source)
    functions = file_functions(toks)
    cases: list[dict[str, Any]] = []
    i = 0
    while i < len(toks):
        token = toks[i]
        start = None
        if token.text == "TestTopologyBasic" and toks[i + 1].text == ":":
            start = i + 2
        elif token.text == "TestTopologyBasic" and toks[i + 1].text == "{" and toks[i - 1].text == ".":
            start = i + 1
        if start is None or _is_result_type(toks, i):
            i += 1
            continue
        parser = Parser(toks, start, functions)
        many = toks[i - 3].text == "]" and toks[i - 4].text == "["  # []test_utils.TestTopologyBasic{...}
        try:
            if toks[start].text != "{":
                parser.type_name()
            case = parser.body()
            end = parser.i
            if many:
                cases += [item if item.get("Name") else {"Name": "(unnamed)", **item} for item in case]
                i = end
                continue
        except (Unreadable, ValueError) as why:
            end = _skip_braces(toks, start)
            name = _literal_name(toks, start, end) or _outer_name(toks, i)
            case = {"Name": name, "unreadable": str(why)}
        if isinstance(case, dict) and not case.get("Name"):
            case = {"Name": _outer_name(toks, i), **case}
        cases.append(case)
        i = end
    return cases


def _is_result_type(toks: list[Token], at: int) -> bool:
    """`func f() []test_utils.TestTopologyBasic {`: the type names a function's result, not a literal."""
    j = at - 2 if toks[at - 1].text == "." else at
    while toks[j - 1].text in ("[", "]", "*"):
        j -= 1
    return toks[j - 1].text == ")"


def _skip_braces(toks: list[Token], start: int) -> int:
    i = start
    while toks[i].text != "{":
        i += 1
    depth = 0
    while True:
        if toks[i].text == "{":
            depth += 1
        elif toks[i].text == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1


def _literal_name(toks: list[Token], start: int, end: int) -> str:
    for j in range(start, end - 2):
        if toks[j].text == "Name" and toks[j + 1].text == ":" and toks[j + 2].kind == "string":
            return toks[j + 2].text.strip('"`')
    return ""


def _outer_name(toks: list[Token], at: int) -> str:
    """The `name: "..."` just before a literal, where a table keeps the name beside its
    `TestTopologyBasic` (stalegangeviction_test.go)."""
    for j in range(at - 3, max(at - 12, 0), -1):
        if toks[j].text == "name" and toks[j + 1].text == ":" and toks[j + 2].kind == "string":
            return toks[j + 2].text.strip('"`')
    return "(unnamed)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kai", type=Path, help="a checkout of kai-scheduler/KAI-Scheduler")
    parser.add_argument("--only", help="only test files whose name contains this")
    parser.add_argument(
        "--ref", required=True, help="the KAI release and commit read, e.g. 'v0.17.0 (f218c69b)'"
    )
    args = parser.parse_args(argv)
    TABLES.mkdir(exist_ok=True)
    for action, files in FILES.items():
        for relative in files:
            if args.only and args.only not in relative:
                continue
            path = args.kai / "pkg/scheduler/actions" / relative
            cases = table_cases(path.read_text(encoding="utf-8"))
            document = {
                "source": f"pkg/scheduler/actions/{relative}",
                "kai": args.ref,
                "action": action,
                "cases": cases,
            }
            out = TABLES / (Path(relative).stem + ".yaml")
            header = f"# Generated by convert_go_tables.py from KAI's {document['source']}; do not edit.\n"
            out.write_text(header + yaml.safe_dump(document, sort_keys=False, width=110), encoding="utf-8")
            unreadable = sum(1 for case in cases if "unreadable" in case)
            print(f"{out.name}: {len(cases)} cases, {unreadable} unreadable", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
