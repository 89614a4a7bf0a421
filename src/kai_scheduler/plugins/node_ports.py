"""Host ports for the predicates plugin (Kubernetes' NodePorts filter): a live index of who holds which
port on which node in this session.

A pod may not go to a node where another pod holds one of its host ports: the same protocol and port,
on the same host IP or where either side binds every address (0.0.0.0). Every pod that occupies its node
holds its ports there, releasing ones included (until they are gone), and so do other schedulers' pods.

Most clusters have no host ports at all: then the predicate is not registered and no event is tracked.
Otherwise only pods with host ports are tracked, and the index reads their status lazily (events fire
before a pod's status changes), so a pod placed earlier in the session holds its ports, one taken back
by a rollback does not, and an evicted one still does.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from kai_scheduler.framework.session import NamedPredicate, Session
from kai_scheduler.model.jobs import ALL_HOST_IPS, OCCUPYING, HostPort, TaskInfo
from kai_scheduler.model.nodes import BoolArray

REJECTION: Final = "node(s) didn't have free ports for the requested pod ports"


class HostPortIndex:
    def __init__(self, session: Session) -> None:
        snapshot = session.snapshot
        self._all_nodes = np.ones(snapshot.nodes.size, dtype=np.bool_)
        # (protocol, port) -> host IP -> node -> how many pods hold it there.
        self._holders: dict[tuple[str, int], dict[str, dict[int, int]]] = {}
        # Our pods with host ports whose holding may have changed, and the node where each holds now.
        self._stale: dict[TaskInfo, None] = dict.fromkeys(snapshot.host_port_tasks)
        self._held: dict[TaskInfo, int] = {}
        for node, ports in snapshot.foreign_host_ports:
            self._change(node, ports, 1)

    def touched(self, task: TaskInfo) -> None:
        if task.host_ports:
            self._stale[task] = None

    def allowed_nodes(self, task: TaskInfo) -> BoolArray:
        if not task.host_ports:
            return self._all_nodes
        self._refresh()
        ok = self._all_nodes.copy()
        for wanted in task.host_ports:
            for host_ip, nodes in self._holders.get((wanted.protocol, wanted.port), {}).items():
                if ALL_HOST_IPS in (wanted.host_ip, host_ip) or host_ip == wanted.host_ip:
                    ok[list(nodes)] = False
        return ok

    def _refresh(self) -> None:
        for task in self._stale:
            node = task.node if task.status in OCCUPYING else -1
            held = self._held.pop(task, -1)
            if held >= 0:
                self._change(held, task.host_ports, -1)
            if node >= 0:
                self._change(node, task.host_ports, 1)
                self._held[task] = node
        self._stale.clear()

    def _change(self, node: int, ports: tuple[HostPort, ...], delta: int) -> None:
        for port in ports:
            by_ip = self._holders.setdefault((port.protocol, port.port), {})
            counts = by_ip.setdefault(port.host_ip, {})
            count = counts.get(node, 0) + delta
            if count > 0:
                counts[node] = count
                continue
            counts.pop(node, None)
            if not counts:
                del by_ip[port.host_ip]
                if not by_ip:
                    del self._holders[(port.protocol, port.port)]


def node_ports_predicate(session: Session) -> NamedPredicate | None:
    """The NodePorts filter for this session; None when no pod in the cluster has a host port (nothing
    to check, nothing to track)."""
    snapshot = session.snapshot
    if not snapshot.host_port_tasks and not snapshot.foreign_host_ports:
        return None
    index = HostPortIndex(session)
    session.points.on_allocate.append(index.touched)
    session.points.on_deallocate.append(index.touched)
    return NamedPredicate("nodeports", REJECTION, index.allowed_nodes)
