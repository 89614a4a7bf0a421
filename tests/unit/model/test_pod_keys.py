"""The keys a pod is known by, read off its metadata: the pod's own (`namespace/name`, `default` for a
manifest that names no namespace) and its job's (the PodGroup it names, else the pod grouper's). The hot
paths read them off the metadata they hold (`namespace_of`, `job_key_in`); both ways must agree. A caller
that holds a pod's key hands it to the cache with the pod's state."""

from __future__ import annotations

import pytest

from helpers import pod
from kai_scheduler.api.objects import Pod, namespace_of
from kai_scheduler.model.builder import implicit_pod_group_name, job_key_in, job_key_of
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.cache.cluster_cache import PodKeyMismatch
from kai_scheduler.model.snapshot import PodState

PODS = [
    pod("bare"),
    pod("bare", namespace="team-a"),
    pod("member", group="train"),
    pod("member", group="train", namespace="team-a"),
]


@pytest.mark.parametrize("subject", PODS, ids=lambda p: f"{p.metadata.namespace or '-'}/{p.metadata.name}")
def test_keys_read_off_the_metadata_are_the_pods(subject: Pod) -> None:
    metadata = subject.metadata
    assert namespace_of(metadata) == subject.namespace == (metadata.namespace or "default")
    assert subject.key == f"{subject.namespace}/{metadata.name}"
    assert job_key_in(metadata) == job_key_of(subject)


def test_a_pod_without_a_pod_group_is_the_pod_groupers_job_in_its_namespace() -> None:
    assert pod("bare").key == "default/bare"
    assert job_key_of(pod("bare")) == f"default/{implicit_pod_group_name(pod('bare'))}" == "default/pg-bare"
    assert job_key_of(pod("member", group="train", namespace="team-a")) == "team-a/train"


def test_the_cache_holds_a_pod_under_the_key_it_is_handed() -> None:
    """The simulator hands each pod's key in with its state (it keeps every pod's): the cache asks the pod
    for it only when it is handed none."""
    cache = ClusterCache()
    cache.upsert_pod(PodState(pod("handed"), 1), "default/handed")
    cache.upsert_pod(PodState(pod("asked"), 2))
    assert cache.pod("default/handed") is not None and cache.pod("default/asked") is not None
    cache.upsert_pod(PodState(pod("trusted"), 3), "default/other")  # trusted as it is
    assert cache.pod("default/other") is not None and cache.pod("default/trusted") is None


def test_a_handed_key_that_is_not_the_pods_is_refused_when_verifying() -> None:
    cache = ClusterCache()
    cache.lone_jobs.verify = True  # (`KAI_SCHEDULER_VERIFY_REUSE=1`)
    cache.upsert_pod(PodState(pod("right"), 1), "default/right")
    with pytest.raises(PodKeyMismatch):
        cache.upsert_pod(PodState(pod("wrong"), 2), "default/other")
