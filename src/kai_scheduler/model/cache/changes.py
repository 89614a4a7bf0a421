"""What changed since the cluster cache's model was last brought up to date: the work `refresh` has left."""

from __future__ import annotations


class Changes:
    """Shared by the cache's parts: each marks what a delta touched, `ClusterCache.refresh` does the work.

    `everything`: the set of nodes, priorities or the nodes' DRA devices changed, which changes what every
    job and node row means, so all are made again (rare). `node_table`: node objects changed but not which
    nodes there are (a cordon, a label, a taint, a capacity): a job's tasks name their nodes by index in
    name order, which stays, so only the node table is made again and every row accounted from the holds
    kept (a cordon on a large cluster then costs a table, not every job). `jobs`: jobs to make again from
    their objects. `nodes`: node rows to account again from the pods on them. `foreign`: other
    schedulers' pods changed, so what they take from the capacity and which host ports they hold are
    summed again."""

    __slots__ = ("everything", "foreign", "jobs", "node_table", "nodes")

    def __init__(self) -> None:
        self.everything = True
        self.node_table = False
        self.jobs: set[str] = set()
        self.nodes: set[int] = set()
        self.foreign = True
