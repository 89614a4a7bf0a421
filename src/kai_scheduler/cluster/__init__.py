"""The layer both edges stand on: the cluster state they keep current by deltas (`model.cache.ClusterCache`),
the one cycle driver that runs the scheduler on it, and the bookkeeping rules a cluster keeps between
cycles (pod phases, timestamps, job start and staleness times). The simulator (`sim`) and live mode
(`k8s`) call these functions; neither carries a copy of its own (an import-linter contract says so).
"""
