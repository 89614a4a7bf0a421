"""The keys a pod is known by, read off its metadata: the pod's own (`namespace/name`, `default` for a
manifest that names no namespace) and its job's (the PodGroup it names, else the pod grouper's). The hot
paths read them off the metadata they hold (`namespace_of`, `job_key_in`); both ways must agree."""

from __future__ import annotations

import pytest

from helpers import pod
from kai_scheduler.api.objects import Pod, namespace_of
from kai_scheduler.model.builder import implicit_pod_group_name, job_key_in, job_key_of

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
