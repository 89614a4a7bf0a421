"""The status controllers (KAI's pkg/podgroupcontroller and pkg/queuecontroller): PodGroup and Queue
status.
"""
