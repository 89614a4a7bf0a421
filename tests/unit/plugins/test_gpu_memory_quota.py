"""GPU-memory requests count toward queue quota and limit as GPU fractions (KAI v0.17, #1370, #1668, #1792).

A pending gpu-memory pod weighs `devices * memory / per-GPU memory`: with the cluster's smallest GPU where
KAI builds a job's init vector (queue order, reclaim), with the largest in the job-level quota and limit
checks (KAI's capacity policy), and with each node's own GPUs when a pod is placed there; nothing when no
node reports its GPU memory. Cases are KAI v0.17.0's, ported by name:
`pkg/scheduler/actions/allocate/allocateGpuMemory_test.go` `TestHandleMemoryGPUAllocation`,
`pkg/scheduler/actions/reclaim/reclaimGpuMemory_test.go` `TestHandleReclaimGpuMemory` and
`pkg/scheduler/plugins/proportion/capacity_policy/capacity_policy_test.go` ("Capacity Policy Check").
"""

from __future__ import annotations

from typing import Any

from helpers import binds, config, evicted, gang, node, one_cycle, open_session, pipelines, pod, queue, run
from kai_scheduler.framework.gang import quota_request_of, request_of, tasks_to_allocate
from kai_scheduler.model.resources import PodRequest

ALLOCATE = config(actions="allocate")
RECLAIM = config(actions="reclaim")


def shared(name: str, queue_name: str, memory: int, **kwargs: Any) -> Any:
    return pod(name, queue_name, gpu_memory=memory, cpu=None, memory=None, **kwargs)


# --- allocateGpuMemory_test.go TestHandleMemoryGPUAllocation ---------------------------------------------


def test_non_preemptible_job_over_deserved_quota_takes_nothing() -> None:
    """ "Non preemptible job requests gpu memory over deserved quota" (changed in v0.16, #1668): three
    40 MiB pods on 100 MiB GPUs are 1.2 GPUs, over the quota of 1, so none is placed (was 2 of 3)."""
    objects = [
        node("node0", gpus=2, gpu_memory=100),
        queue("queue0", gpu=1),
        *gang(
            "pending_job-0", "queue0", size=3, gpu_memory=40, cpu=None, memory=None, priority_class="build"
        ),
    ]
    assert binds(one_cycle(objects, ALLOCATE)) == {}


def test_preemptible_job_over_queue_limit_takes_nothing() -> None:
    """ "Preemptible job requests gpu memory over queue limit" (changed in v0.16, #1668): 1.2 GPUs over a
    limit of 1, nothing placed (was 2 of 3)."""
    objects = [
        node("node0", gpus=2, gpu_memory=100),
        queue("queue0", gpu=1, gpu_limit=1),
        *gang(
            "pending_job-0", "queue0", size=3, gpu_memory=40, cpu=None, memory=None, priority_class="train"
        ),
    ]
    assert binds(one_cycle(objects, ALLOCATE)) == {}


def test_over_quota_on_every_free_node_though_not_on_the_full_largest_one() -> None:
    """ "pending job requests gpu memory - overlimit on available nodes, not overlimit on full
    largest-memory node": 350 MiB is 0.175 of the largest GPU (within the quota of 0.5, so the job-level
    check lets it through) but 0.88 and 0.59 of the free nodes' GPUs, and the large node is full."""
    objects = [
        node("node-small", gpus=1, gpu_memory=400),
        node("node-medium", gpus=1, gpu_memory=600),
        node("node-large", gpus=2, gpu_memory=2000),
        queue("queue0", gpu=0.5),
        queue("queue1", gpu=2),
        *gang("running-job", "queue1", size=2, gpus=1, node_name="node-large", priority_class="train"),
        shared("pending-job-0", "queue0", 350, priority_class="build"),
    ]
    result = run(objects, ALLOCATE, cycles=1)
    assert binds(result.cycles[0].decisions) == {}
    reason = result.reasons["default/pg-pending-job-0"]
    assert "2 node(s) would take the queue over its quota or limit" in reason


def test_over_quota_node_is_passed_over_for_one_with_larger_gpus() -> None:
    """The same job with room on the large node goes there: each node's own GPUs decide."""
    objects = [
        node("node-small", gpus=1, gpu_memory=400),
        node("node-large", gpus=2, gpu_memory=2000),
        queue("queue0", gpu=0.5),
        shared("pending-job-0", "queue0", 350, priority_class="build"),
    ]
    assert binds(one_cycle(objects, ALLOCATE)) == {"pending-job-0": "node-large"}


def test_two_device_gpu_memory_job_blocked_by_non_preemptible_quota() -> None:
    """ "2-device GPU memory job blocked by non-preemptible quota": 2 x 60 MiB of 100 MiB GPUs is 1.2 GPUs
    (counted per device, #1370), over the quota of 1."""
    objects = [
        node("node0", gpus=2, gpu_memory=100),
        queue("queue0", gpu=1),
        shared("pending_job-0", "queue0", 60, num_devices=2, priority_class="build"),
    ]
    assert binds(one_cycle(objects, ALLOCATE)) == {}


# --- reclaimGpuMemory_test.go TestHandleReclaimGpuMemory --------------------------------------------------


def test_reclaim_enabled_when_min_node_gpu_memory_gives_a_fraction_within_fair_share() -> None:
    """ "reclaim enabled when min node GPU memory produces fraction within fair share": 320 MiB of the
    cluster's smallest GPU (800 MiB) is 0.4, within queue1's fair share of 0.5, so it may reclaim."""
    objects = [
        node("node0", gpus=1, gpu_memory=800),
        queue("queue0", gpu=0.5),
        queue("queue1", gpu=0.5),
        shared("q0_running-0", "queue0", 720, node_name="node0", labels={"runai-gpu-group": "0"}),
        shared("q1_pending-0", "queue1", 320),
    ]
    result = run(objects, RECLAIM, cycles=1)
    assert evicted(result, "reclaim") == ["q0_running-0"]
    assert pipelines(result.cycles[0].decisions) == {"q1_pending-0": "node0"}


# --- capacity_policy_test.go -------------------------------------------------------------------------------


def three_levels(*, limit: float = -1, quota: float = -1) -> list[Any]:
    """top-queue > mid-queue > leaf-queue, each with the same GPU limit and quota."""
    return [
        queue("top-queue", gpu=quota, gpu_limit=limit),
        queue("mid-queue", gpu=quota, gpu_limit=limit, parent="top-queue"),
        queue("leaf-queue", gpu=quota, gpu_limit=limit, parent="mid-queue"),
    ]


def job_capacity(objects: list[Any], job: str) -> str | None:
    """IsJobOverQueueCapacity: the session's job-level checks on what the job's next pods ask."""
    session = open_session(objects)
    info = session.snapshot.jobs[f"default/pg-{job}"]
    return session.check_job_capacity(info, quota_request_of(session, tasks_to_allocate(session, info)))


def held(gpus: int, priority_class: str) -> list[Any]:
    """What the leaf queue already holds: whole GPUs on node `busy`."""
    return [
        node("busy", gpus=gpus),
        *gang("held", "leaf-queue", size=gpus, gpus=1, node_name="busy", priority_class=priority_class),
    ]


def test_limited_queues_gpu_memory_request_over_limit() -> None:
    """IsJobOverQueueCapacity "limited queues - gpu memory request over limit": 3 of 3 GPUs held, half a
    GPU (50 of 100 MiB) more is over every level's limit."""
    objects = [*three_levels(limit=3), *held(3, "train"), node("node0", gpus=1, gpu_memory=100)]
    objects.append(shared("task-a", "leaf-queue", 50, priority_class="train"))
    assert "OverLimit" in str(job_capacity(objects, "task-a"))


def test_limited_queues_gpu_memory_request_below_limit() -> None:
    """IsJobOverQueueCapacity "limited queues - gpu memory request below limit": 2 held + 0.5 <= 3."""
    objects = [*three_levels(limit=3), *held(2, "train"), node("node0", gpus=1, gpu_memory=100)]
    objects.append(shared("task-a", "leaf-queue", 50, priority_class="train"))
    assert job_capacity(objects, "task-a") is None


def test_unlimited_queues_non_preemptible_gpu_memory_request_over_quota() -> None:
    """IsJobOverQueueCapacity "unlimited queues - non preemptible gpu memory request over quota": 3 of a
    quota of 3 held by non-preemptible pods, half a GPU more is over."""
    objects = [*three_levels(quota=3), *held(3, "build"), node("node0", gpus=1, gpu_memory=100)]
    objects.append(shared("task-a", "leaf-queue", 50, priority_class="build"))
    assert "NonPreemptibleOverQuota" in str(job_capacity(objects, "task-a"))


def test_two_device_gpu_memory_task_exceeds_non_preemptible_quota_on_the_node() -> None:
    """IsTaskAllocationOnNodeOverCapacity "2-device GPU memory task exceeds non-preemptible quota": 0.4
    held, 2 x 60 of 100 MiB is 1.2 more, over the quota of 1 on that node."""
    objects = [
        node("worker-node", gpus=3, gpu_memory=100),
        queue("queue", gpu=1),
        shared(
            "held-0",
            "queue",
            40,
            node_name="worker-node",
            priority_class="build",
            labels={"runai-gpu-group": "g"},
        ),
        shared("task-a", "queue", 60, num_devices=2, priority_class="build"),
    ]
    session = open_session(objects)
    assert not session.candidate_nodes(session.snapshot.tasks["default/task-a"]).any()


def test_two_gpu_task_exceeds_queue_gpu_limit_of_one() -> None:
    """IsTaskAllocationOnNodeOverCapacity "2-GPU task exceeds queue GPU limit of 1" (here the job-level
    check already refuses it: a whole GPU is the same on every node)."""
    objects = [node("worker-node", gpus=2), queue("queue", gpu_limit=1), pod("task-a", "queue", gpus=2)]
    assert "OverLimit" in str(job_capacity(objects, "task-a"))


# --- the conversion itself ----------------------------------------------------------------------------------


def test_smallest_gpu_for_the_init_vector_largest_for_capacity() -> None:
    objects = [
        node("small", gpus=1, gpu_memory=400),
        node("large", gpus=1, gpu_memory=2000),
        node("cpu-only", gpus=0),
        queue("q"),
        shared("p", "q", 400, num_devices=2),
    ]
    session = open_session(objects)
    tasks = [session.snapshot.tasks["default/p"]]
    assert request_of(session, tasks).gpu == 2.0  # 2 x 400/400
    assert quota_request_of(session, tasks).gpu == 0.4  # 2 x 400/2000


def test_no_node_reporting_gpu_memory_counts_nothing() -> None:
    """KAI's nil min/max: a pending gpu-memory request asks nothing of its queue (and fits no node)."""
    request = PodRequest(gpu_memory_mib=500, gpu_devices=1)
    assert request.queue_gpus(None, 0.0) == 0.0
    assert request.queue_gpus(None, 1000.0) == 0.5
    assert PodRequest(gpu_memory_mib=3000, gpu_devices=2).queue_gpus(None, 1000.0) == 6.0  # not capped
    session = open_session([node("n", gpus=1), queue("q"), shared("p", "q", 500)])
    assert request_of(session, [session.snapshot.tasks["default/p"]]).gpu == 0.0


def test_a_placed_pod_counts_by_its_own_nodes_gpus_only_when_it_shares_one() -> None:
    """Placed, a gpu-memory pod weighs its node's GPUs in its queue (400 of 2000 MiB: 0.2 GPU, where the
    smallest GPU would make it 1.0); a fractional pod and a whole-GPU pod weigh what they ask on any node
    (their node's GPU memory is not read)."""
    objects = [
        node("small", gpus=2, gpu_memory=400),
        node("large", gpus=2, gpu_memory=2000),
        queue("q"),
        shared("by-memory", "q", 400),
        pod("by-fraction", "q", fraction=0.5, cpu=None, memory=None),
        pod("whole", "q", gpus=1, cpu=None, memory=None),
    ]
    session = open_session(objects)
    large = session.snapshot.nodes.index["large"]
    allocated = session.snapshot.queues["q"].allocated
    for name, weighs in (("by-memory", 0.2), ("by-fraction", 0.5), ("whole", 1.0)):
        before = allocated.gpu
        task = session.snapshot.tasks[f"default/{name}"]
        statement = session.statement("allocate")
        statement.allocate(task, large, (), "test")  # (the queue's part reads no GPU group)
        statement.commit()
        assert abs(allocated.gpu - before - weighs) < 1e-9
