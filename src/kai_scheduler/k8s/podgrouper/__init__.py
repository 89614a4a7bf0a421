"""The pod grouper controller (KAI's pkg/podgrouper); its pure planner is
kai_scheduler.controlplane.podgrouper, shared with the simulator.
"""
