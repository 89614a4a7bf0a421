"""Allocate's walk numbers a job's signatures (`WalkFacts.of`); those of a job whose next attempt is one
pod, with no topology and nothing read of its pods, are kept by the few fields they are made of
(`WalkFacts._numbers`). Over generated jobs of one pod and gangs in two queues (GPUs whole or shared,
priority classes, preemptibility, node selectors, nominations, topology constraints, elastic gangs with
pods running), two jobs' numbers are equal exactly when their own signatures (`gang.next_signature`) are,
with the queue and without."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, open_session, pod, pod_group_manifest, priority_class, queue, topology_constraint
from kai_scheduler.api.objects import PodGroup
from kai_scheduler.framework.gang import next_signature
from kai_scheduler.framework.walk_facts import WalkFacts

PRIORITIES = st.sampled_from([None, "train", "inference"])
SELECTORS = st.sampled_from([None, None, {"zone": "z1"}])
PREEMPTIBILITY = st.sampled_from([None, None, {"kai.scheduler/preemptibility": "non-preemptible"}])


@st.composite
def jobs(draw: st.DrawFn) -> tuple[list[Any], list[bool]]:
    """The objects, and per pod (in order) whether it is nominated to n0."""
    objects: list[Any] = [node("n0", gpus=8, labels={"zone": "z1"}), queue("a"), queue("b")]
    objects += [priority_class("train", 50), priority_class("inference", 125)]
    nominated: list[bool] = []
    for i in range(draw(st.integers(1, 8))):
        fraction = draw(st.sampled_from([None, None, 0.5]))
        ask: dict[str, Any] = {
            "gpus": 0 if fraction else draw(st.integers(1, 2)),
            "fraction": fraction,
            "priority_class": draw(PRIORITIES),
            "node_selector": draw(SELECTORS),
            "labels": draw(PREEMPTIBILITY),
        }
        queue_name = draw(st.sampled_from(["a", "b"]))
        size = draw(st.sampled_from([0, 0, 1, 2, 3]))  # 0: a bare pod
        if size:
            group = pod_group_manifest(f"g{i}", queue_name, min_member=draw(st.integers(1, size)))
            if draw(st.booleans()):
                group["spec"]["topologyConstraint"] = topology_constraint(required="zone")
            objects.append(PodGroup.model_validate(group))
        for m in range(max(size, 1)):
            running = size > 1 and draw(st.booleans())  # an elastic gang's next attempt may be one pod
            objects.append(
                pod(
                    f"p{i}-{m}",
                    None if size else queue_name,
                    group=f"g{i}" if size else None,
                    node_name="n0" if running else None,
                    **ask,
                )
            )
            nominated.append(not running and draw(st.booleans()))
    return objects, nominated


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(made=jobs())
def test_lone_jobs_number_their_signatures_as_their_own_signatures_are(
    made: tuple[list[Any], list[bool]],
) -> None:
    objects, nominated = made
    session = open_session(objects)
    tasks = {task.name: task for job in session.snapshot.jobs.values() for task in job.tasks}
    names = [o.metadata.name for o in objects if o.kind == "Pod"]
    for name, flag in zip(names, nominated, strict=True):
        if flag:
            tasks[name].nominated_node = 0
            tasks[name].job.version += 1
    facts = WalkFacts()
    reads = facts.start(session)
    every = list(session.snapshot.jobs.values())
    numbered = [facts.of(session, job, reads) for job in every]
    own = [(next_signature(session, job), next_signature(session, job, by_queue=False)) for job in every]
    for one, one_own in zip(numbered, own, strict=True):
        for other, other_own in zip(numbered, own, strict=True):
            assert (one.signature == other.signature) == (one_own[0] == other_own[0])
            assert (one.shape == other.shape) == (one_own[1] == other_own[1])
