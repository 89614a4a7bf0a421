"""The words live mode's events and conditions use (docs/live-reasons.md): stable, since tools read them."""

from __future__ import annotations

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.reasons import QUEUE_DOES_NOT_EXIST, WaitReason
from kai_scheduler.framework.decisions import Decision
from kai_scheduler.k8s.binder.handover import scheduled_message
from kai_scheduler.k8s.scheduler.evictions import eviction_event
from kai_scheduler.k8s.scheduler.waiting import Waiting, invalid_pod, job_waiting

POD = {"metadata": {"name": "p", "namespace": "team", "labels": {}, "annotations": {}}}


def test_scheduled_names_the_node_and_the_shared_gpus() -> None:
    assert scheduled_message(POD, "n1", "Regular", [], {"count": 1}) == "Successfully assigned team/p to n1"
    two = scheduled_message(POD, "n1", "Fraction", ["g1", "g2"], {"count": 2, "portion": "0.25"})
    assert two == "Successfully assigned team/p to n1 on shared GPU groups g1, g2 (0.25 of each GPU)"


def test_an_eviction_names_the_action_the_preemptor_and_the_reason() -> None:
    victim = Decision(
        "reclaim", "evict", "team/v", "n1", (), "reclaimed for a/j (queue a below fair share)", for_job="a/j"
    )
    assert eviction_event(victim) == (
        "Preempted",
        "Preempted by reclaim for a/j on n1: reclaimed for a/j (queue a below fair share)",
    )
    stale = Decision("stalegangeviction", "evict", "team/v", "n1", (), "stale gang team/g: ...")
    assert eviction_event(stale) == ("Evicted", "Evicted by stalegangeviction on n1: stale gang team/g: ...")


def test_why_a_pod_waits_names_the_field() -> None:
    error = ManifestError(
        "Pod team/p",
        "must be a positive whole number of MiB, got '-5'",
        field="metadata.annotations.gpu-memory",
    )
    assert invalid_pod(error) == Waiting(
        "InvalidPod", "metadata.annotations.gpu-memory: must be a positive whole number of MiB, got '-5'"
    )
    missing = WaitReason("QueueDoesNotExist: queue nobody does not exist", QUEUE_DOES_NOT_EXIST)
    assert job_waiting("team/p", missing, POD, {}, {}) == Waiting(
        "QueueDoesNotExist",
        "metadata.labels.kai.scheduler/queue (not set: the default queue): queue nobody does not exist",
    )
    assert job_waiting("team/pg", missing, POD, {"team/pg": {}}, {}) == Waiting(
        "QueueDoesNotExist", "PodGroup team/pg spec.queue: queue nobody does not exist"
    )
    assert job_waiting("team/p", "0/2 nodes are available", POD, {}, {}) == Waiting(
        "Unschedulable", "0/2 nodes are available"
    )
