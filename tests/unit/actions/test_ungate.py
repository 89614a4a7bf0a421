"""ungate (queue admission gating, KAI's design `queue-admission-gating`): the pure decisions, snapshot in and
"ungate these pods" out, on a cluster cache driven cycle by cycle the way an edge drives it (each admitted pod
written back without the gate and stamped admitted, as the scheduler's patch does): quota raised and lowered,
reservations of admitted pods that still wait (and their expiry), a torn gang first, queues missing or not
opted in, fair share the same with and without gating, and nothing changed when nothing is configured."""

from __future__ import annotations

from dataclasses import replace

import pytest

from helpers import config, node, pod, pod_group, queue, queue_manifest
from kai_scheduler.actions.ungate import gated_jobs
from kai_scheduler.api.admission_gate import QUEUE_ADMISSION_GATE
from kai_scheduler.api.objects import AccountedResource, Node, Pod, PodSchedulingGate, Queue
from kai_scheduler.api.reasons import code_of
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.snapshot import PodGroupState, PodState

ON = config(queueAdmissionGating={"enabled": True})


def gated(p: Pod, *others: str) -> Pod:
    gates = [PodSchedulingGate(name=QUEUE_ADMISSION_GATE), *(PodSchedulingGate(name=o) for o in others)]
    return p.model_copy(update={"spec": p.spec.model_copy(update={"scheduling_gates": gates})})


def opted(q: Queue, opt_in: bool | None = True) -> Queue:
    return q.model_copy(update={"spec": q.spec.model_copy(update={"admission_gating": opt_in})})


class Cluster:
    """A cluster cache as an edge keeps it: pods bound where allocate binds them, gates off as ungate says."""

    def __init__(
        self,
        queues: list[Queue],
        pods: list[Pod],
        gpus: int = 8,
        nodes: list[Node] | None = None,
        accounted: list[AccountedResource] | None = None,
    ) -> None:
        self.cache = ClusterCache()
        self.cache.set_nodes(nodes or [node("n0", gpus=gpus)])
        self.cache.set_accounted_resources(accounted or [])
        self.cache.set_queues(queues)
        self.cache.set_priorities(Priorities.of([]))
        self.rank = 0
        for p in pods:
            self.add(p)
        self.now = 0.0

    def add(self, p: Pod) -> None:
        self.rank += 1
        self.cache.upsert_pod(PodState(p, self.rank))

    def group(self, name: str, min_member: int, q: str = "q") -> None:
        self.rank += 1
        self.cache.upsert_pod_group(PodGroupState(pod_group(name, q, min_member=min_member), self.rank))

    def cycle(self, scheduler_config: SchedulerConfig = ON) -> SessionResult:
        self.cache.refresh()
        result = Scheduler(scheduler_config).run(self.cache.snapshot(), cycle=1, now=self.now)
        self.cache.after_cycle([d.pod for d in result.decisions])
        for decision in result.decisions:
            state = self.cache.pod(decision.pod)
            assert state is not None and decision.type == "bind"
            self.cache.upsert_pod(replace(state, node_name=decision.node, phase="Running"))
        for ungating in result.ungates:
            for key in ungating.pods:
                state = self.cache.pod(key)
                assert state is not None
                spec = state.pod.spec
                gates = [g for g in spec.scheduling_gates if g.name != QUEUE_ADMISSION_GATE]
                p = state.pod.model_copy(update={"spec": spec.model_copy(update={"scheduling_gates": gates})})
                self.cache.upsert_pod(replace(state, pod=p, admitted=self.now))
        self.now += 1.0
        return result

    def set_queue(self, q: Queue) -> None:
        self.cache.set_queues([q])

    def finish(self, key: str) -> None:
        state = self.cache.pod(key)
        assert state is not None
        self.cache.upsert_pod(replace(state, phase="Succeeded"))


def ungated(result: SessionResult) -> list[str]:
    return [key.split("/")[1] for u in result.ungates for key in u.pods]


def test_quota_raised_admits_more_and_lowered_admits_none_more() -> None:
    """Raised: the next cycle admits what now fits. Lowered: gates are not put back (a one-way ratchet),
    the pods that ran keep running and no more are admitted until usage is below the new limit."""
    q = opted(queue("q", gpu=2, gpu_limit=2))
    cluster = Cluster([q], [gated(pod(f"p{i}", gpus=1)) for i in range(6)])
    assert ungated(cluster.cycle()) == ["p0", "p1"]
    first = cluster.cycle()  # p0 and p1 bind; nothing more fits the limit
    assert sorted(d.pod for d in first.decisions) == ["default/p0", "default/p1"] and not first.ungates
    assert first.unschedulable["default/pg-p2"].startswith("QueueAdmissionGated: OverLimit")
    cluster.set_queue(opted(queue("q", gpu=4, gpu_limit=4)))
    assert ungated(cluster.cycle()) == ["p2", "p3"]
    cluster.cycle()
    cluster.set_queue(opted(queue("q", gpu=1, gpu_limit=1)))
    cluster.finish("default/p0")
    assert ungated(cluster.cycle()) == []  # 3 running over a limit of 1
    for key in ("default/p1", "default/p2"):
        cluster.finish(key)
    assert ungated(cluster.cycle()) == []  # 1 running: at the limit
    cluster.finish("default/p3")
    assert ungated(cluster.cycle()) == ["p4"]


def test_admitted_pods_that_still_wait_hold_the_quota_until_the_reservation_lapses() -> None:
    """Design D6/D12: a pod admitted but not placed (here: no node has room) reserves its queue's quota, so a
    later cycle does not admit another against it, until `reservationTimeout` after its admission."""
    q = opted(queue("q", gpu=2, gpu_limit=2))
    cluster = Cluster([q], [gated(pod(f"p{i}", gpus=2)) for i in range(2)], gpus=1)
    on = config(queueAdmissionGating={"enabled": True, "reservationTimeout": "5s"})
    assert ungated(cluster.cycle(on)) == ["p0"]
    for _ in range(4):
        result = cluster.cycle(on)
        assert ungated(result) == [] and result.wake_at == 5.0
    assert ungated(cluster.cycle(on)) == ["p1"]  # at 5 s: p0's reservation lapsed


def test_admissions_of_one_cycle_never_exceed_the_quota_together() -> None:
    parent = opted(queue("parent", gpu=3, gpu_limit=3))
    children = [opted(queue(name, parent="parent", gpu_limit=3)) for name in ("a", "b")]
    pods = [gated(pod(f"{name}{i}", name, gpus=1)) for i in range(3) for name in ("a", "b")]
    cluster = Cluster([parent, *children], pods)
    assert len(ungated(cluster.cycle())) == 3


def test_a_torn_gang_is_admitted_before_later_arrivals() -> None:
    """A crash between the patches of a gang's pods leaves it part ungated; the next cycle decides it again,
    first, so that the gang converges rather than starving behind pods that came after it."""
    q = opted(queue("q", gpu=3, gpu_limit=3))
    cluster = Cluster([q], [])
    cluster.add(gated(pod("early", gpus=2)))
    cluster.group("gang", 3)
    cluster.add(pod("gang-0", gpus=1, group="gang"))  # its gate already removed
    for i in (1, 2):
        cluster.add(gated(pod(f"gang-{i}", gpus=1, group="gang")))
    assert ungated(cluster.cycle()) == ["gang-1", "gang-2"]


def test_queue_missing_keeps_the_gate_and_a_queue_not_opted_in_lets_go() -> None:
    cluster = Cluster([opted(queue("q"), False)], [gated(pod("lost", "nowhere")), gated(pod("free"))])
    result = cluster.cycle()
    assert ungated(result) == ["free"]
    assert code_of(result.unschedulable["default/pg-lost"]) == "QueueDoesNotExist"


def test_fair_share_is_the_same_with_and_without_gating() -> None:
    """Design D7: gated demand counts in the queue's request as pending demand does."""
    queues = [opted(queue("a", gpu=2)), opted(queue("b", gpu=2))]
    pods = [pod(f"a{i}", "a", gpus=1) for i in range(6)] + [pod(f"b{i}", "b", gpus=1) for i in range(1)]
    plain = Cluster(queues, pods).cycle(SchedulerConfig(actions=()))
    gated_pods = [gated(p) for p in pods]
    with_gates = Cluster(queues, gated_pods).cycle(replace(ON, actions=()))
    assert with_gates.fair_share == plain.fair_share


def test_nothing_configured_changes_nothing() -> None:
    """Without our gate on any pod the action has nothing to do; with gates and no configuration every one
    of ours comes off (the feature switched off) and a foreign gate stays."""
    q = queue("q", gpu=1, gpu_limit=1)
    cluster = Cluster([q], [pod("a", gpus=1), pod("b", gpus=1)])
    result = cluster.cycle(SchedulerConfig())
    assert not result.ungates and "ungate" not in result.action_seconds
    off = Cluster([q], [gated(pod("c", gpus=1)), gated(pod("d", gpus=1), "example.com/hold")])
    assert ungated(off.cycle(SchedulerConfig())) == ["c", "d"]


# --- accounted-resource limits at the gate (KAI's AccountedResource design, "Queue Admission Signaling") --


def accounted(name: str, source: dict[str, object], default: str | None = None) -> AccountedResource:
    spec: dict[str, object] = {"sources": [source]}
    if default is not None:
        spec["defaults"] = {"limit": default}
    return AccountedResource.model_validate(
        {
            "apiVersion": "scheduling.run.ai/v1alpha1",
            "kind": "AccountedResource",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def limited(name: str, **limits: str) -> Queue:
    manifest = queue_manifest(name)
    manifest["spec"]["accountedResources"] = [{"resourceRef": k, "limit": v} for k, v in limits.items()]
    return opted(Queue.model_validate(manifest))


GPUS = accounted("gpus", {"resourceName": "nvidia.com/gpu"})
H200 = accounted("gpu-h200", {"resourceName": "nvidia.com/gpu", "match": {"nodeLabels": {"product": "H200"}}})


def test_a_queue_naming_a_missing_accounted_resource_keeps_its_pods_gated() -> None:
    cluster = Cluster([limited("q", missing="4")], [gated(pod("p0", gpus=1))], accounted=[GPUS])
    result = cluster.cycle()
    assert ungated(result) == []
    reason = result.unschedulable["default/pg-p0"]
    assert code_of(reason) == "AccountedResourceNotFound"
    assert reason.startswith(
        "QueueAdmissionGated: AccountedResourceNotFound: queue q names AccountedResource missing"
    )


def test_an_accounted_limit_gates_as_a_queue_limit_does_counting_admitted_pods_as_reserved() -> None:
    """No spec.resources limit: only the accounted one (4 GPUs) holds. p0..p3 are admitted in the first
    cycle together; p4 stays gated naming the resource; once p0 ends, p4 is admitted."""
    cluster = Cluster(
        [limited("q", gpus="4")], [gated(pod(f"p{i}", gpus=1)) for i in range(5)], accounted=[GPUS]
    )
    first = cluster.cycle()
    assert ungated(first) == ["p0", "p1", "p2", "p3"]
    reason = first.unschedulable["default/pg-p4"]
    assert code_of(reason) == "OverLimit"
    assert reason.startswith(
        "QueueAdmissionGated: OverLimit: queue q would exceed its accounted gpus limit (4 used"
    )
    assert ungated(cluster.cycle()) == []  # p0..p3 bind
    cluster.finish("default/p0")
    assert ungated(cluster.cycle()) == ["p4"]


def test_admitted_pods_that_still_wait_hold_the_accounted_limit() -> None:
    """No node has room for a 2-GPU pod: p0, admitted, waits and reserves 2 of the 2 accounted GPUs, so p1 is
    not admitted in later cycles while the reservation holds."""
    cluster = Cluster(
        [limited("q", gpus="2")], [gated(pod(f"p{i}", gpus=2)) for i in range(2)], gpus=1, accounted=[GPUS]
    )
    assert ungated(cluster.cycle()) == ["p0"]
    later = cluster.cycle()
    assert ungated(later) == [] and code_of(later.unschedulable["default/pg-p1"]) == "OverLimit"


def test_a_default_limit_gates_queues_that_name_none() -> None:
    default = accounted("gpus", {"resourceName": "nvidia.com/gpu"}, default="1")
    cluster = Cluster(
        [opted(queue("q"))], [gated(pod(f"p{i}", gpus=1)) for i in range(2)], accounted=[default]
    )
    result = cluster.cycle()
    assert ungated(result) == ["p0"] and code_of(result.unschedulable["default/pg-p1"]) == "OverLimit"


def test_a_node_derived_charge_gates_only_pods_no_node_would_take() -> None:
    """An H200 limit of 0: a pod that may use the A100 node charges nothing there and is admitted (and runs
    there); one bound by its node selector to H200 nodes stays gated naming gpu-h200."""
    nodes = [
        node("h200", gpus=4, labels={"product": "H200"}),
        node("a100", gpus=4, labels={"product": "A100"}),
    ]
    pods = [
        gated(pod("anywhere", gpus=1)),
        gated(pod("h200-only", gpus=1, node_selector={"product": "H200"})),
    ]
    cluster = Cluster([limited("q", **{"gpu-h200": "0"})], pods, nodes=nodes, accounted=[H200])
    result = cluster.cycle()
    assert ungated(result) == ["anywhere"]
    reason = result.unschedulable["default/pg-h200-only"]
    assert code_of(reason) == "OverLimit" and "accounted gpu-h200 limit" in reason
    placed = cluster.cycle().decisions
    assert [(d.pod, d.node) for d in placed] == [("default/anywhere", "a100")]


def test_the_gated_jobs_are_those_the_cache_keeps_and_verify_mode_finds_a_wrong_list() -> None:
    """`gated_jobs` answers with the jobs the cache keeps as meeting the gate, without looking at every job;
    they are those a look at every job finds, and with verify a kept list that differs raises."""
    cluster = Cluster([opted(queue("q"))], [pod("free", "q", gpus=1), gated(pod("held", "q", gpus=1))])
    cluster.group("gang", 2)
    cluster.add(gated(pod("m1", "q", gpus=1, group="gang")))
    cluster.add(pod("m2", "q", gpus=1, group="gang"))
    snapshot = cluster.cache.snapshot()
    found = [job for job in snapshot.jobs.values() if job.admission is not None]
    assert [job.key for job in found] == ["default/pg-held", "default/gang"]
    assert snapshot.admission_jobs == found
    assert gated_jobs(snapshot) is snapshot.admission_jobs
    assert gated_jobs(snapshot, verify=True) == found
    snapshot.admission_jobs = found[:1]
    with pytest.raises(CarriedMismatch, match="meeting the admission gate"):
        gated_jobs(snapshot, verify=True)
    assert gated_jobs(replace(snapshot, admission_jobs=None)) == found
    # A job leaves them when its gated pod goes, and when its pods no longer meet the gate.
    cluster.cache.remove_pod("default/held")
    state = cluster.cache.pod("default/m1")
    assert state is not None
    ungated = state.pod.model_copy(
        update={"spec": state.pod.spec.model_copy(update={"scheduling_gates": []})}
    )
    cluster.cache.upsert_pod(replace(state, pod=ungated))
    assert cluster.cache.snapshot().admission_jobs == []
