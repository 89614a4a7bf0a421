"""The control plane around the scheduling core, the layer both edges stand on: the rules KAI's other
components apply (the pod grouper's grouping, the status numbers), the cluster state both edges keep
current by deltas (`model.cache.ClusterCache`), the one cycle driver that runs the scheduler on it, and
the bookkeeping a cluster keeps between cycles (pod phases, timestamps, job start and staleness times).
The simulator (`sim`) and live mode (`k8s`) call these functions; neither carries a copy of its own (an
import-linter contract says so).
"""
