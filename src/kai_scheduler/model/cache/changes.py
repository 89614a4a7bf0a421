"""What changed since the cluster cache's model was last brought up to date: the work `refresh` has left."""

from __future__ import annotations

from kai_scheduler.api.objects import Node


class Changes:
    """Shared by the cache's parts: each marks what a delta touched, `ClusterCache.refresh` does the work.

    `everything`: the set of nodes, priorities or the nodes' DRA devices changed, which changes what every
    job and node row means, so all are made again (rare). `node_table`: node objects changed but not which
    nodes there are (a cordon, a label, a taint, a capacity): a job's tasks name their nodes by index in
    name order, which stays, so only the node table is made again and every row accounted from the holds
    kept (a cordon on a large cluster then costs a table, not every job); `edited_nodes` names those nodes,
    each with its object as the table has it, so that a node whose capacity stayed (a cordon, a label)
    has only its static facts replaced and no row is accounted again. `jobs`: jobs to make again from
    their objects. `nodes`: node rows to account again from the pods on them. `foreign`: other
    schedulers' pods changed, so what they take from the capacity and which host ports they hold are
    summed again."""

    __slots__ = ("edited_nodes", "everything", "foreign", "jobs", "node_table", "nodes")

    def __init__(self) -> None:
        self.everything = True
        self.node_table = False
        self.edited_nodes: dict[str, Node] = {}
        self.jobs: set[str] = set()
        self.nodes: set[int] = set()
        self.foreign = True
