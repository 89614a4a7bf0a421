"""kai-scheduler: a Kubernetes-native scheduler for shared GPU clusters, compatible with KAI Scheduler."""

__version__ = "0.1.0"
