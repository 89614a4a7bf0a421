"""A simulated pod's key and its job's key follow the pod object it holds: the simulator replaces that
object (a bound claim, an annotation), and what it names then is what counts."""

from __future__ import annotations

from helpers import pod
from kai_scheduler.api import constants as c
from kai_scheduler.sim.in_memory_cluster import SimPod


def test_keys_follow_a_replaced_pod() -> None:
    sim_pod = SimPod(pod=pod("a-0", namespace="team"), rank=0, arrival=0.0, duration=None)
    assert (sim_pod.key, sim_pod.job_key) == ("team/a-0", "team/pg-a-0")
    named = pod("a-0", namespace="team", annotations={c.POD_GROUP_ANNOTATION: "train"})
    sim_pod.pod = named
    assert (sim_pod.key, sim_pod.job_key) == ("team/a-0", "team/train")
    sim_pod.pod = pod("b-1", namespace="other")
    assert (sim_pod.job_key, sim_pod.key) == ("other/pg-b-1", "other/b-1")
