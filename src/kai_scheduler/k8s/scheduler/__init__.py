"""The scheduler (KAI's pkg/scheduler): the state feed from the informers, the cycle driver, and the
effects of its decisions (BindRequests, evictions, PodGroup annotations and conditions, PodScheduled).
"""
