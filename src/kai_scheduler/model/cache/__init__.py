"""The cluster cache: the scheduler's view of the cluster, kept current by deltas (KAI's scheduler cache).

`ClusterCache` (`cluster_cache`) is the one class the edges use; it says what each delta makes dirty and
brings the model up to date on `refresh`. Its parts each keep one kind of state:

* `inputs`: the cluster-scoped kinds, each set as a whole (with `dra_inputs`: DRA claims, slices and
  classes, and which pods use which claims);
* `pods`: the pods and PodGroups, and whose each pod is (ours: a task; else another scheduler's);
* `job_rebuild`: the jobs and tasks, made again from the objects when dirty, in creation order
  (`rank_order`); a bare pod's plain job made from the pod alone, as it arrives (`lone_jobs`);
* `accounting`: the node table and what every pod on a node holds;
* `nominations` and `job_times`: what a cycle or the cluster remembers about pods and jobs;
* `changes`: what is dirty; `asks`: what a pod asks for; `deltas`: which methods are changes of the
  cluster (what a cache that keeps others current hands on, `model.shard_caches`).
"""

from kai_scheduler.model.cache.cluster_cache import ClusterCache, build_snapshot

__all__ = ["ClusterCache", "build_snapshot"]
