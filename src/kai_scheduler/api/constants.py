"""Names that KAI users put in their manifests: labels, annotations, resource names, defaults.

They are part of the compatibility promise: a manifest written for KAI Scheduler must work unchanged.
"""

from typing import Final

SCHEDULER_NAME: Final = "kai-scheduler"

# Labels and annotations on pods and their owners.
QUEUE_LABEL: Final = "kai.scheduler/queue"
DEFAULT_QUEUE: Final = "default-queue"
POD_GROUP_ANNOTATION: Final = "pod-group-name"
SUBGROUP_LABEL: Final = "kai.scheduler/subgroup-name"
# On a pod or any of its owners, exactly "true": the pod grouper leaves the pod alone, which joins the
# PodGroup its pod-group-name names (an external one, made by the user or another controller; KAI v0.15).
SKIP_PODGROUPER_ANNOTATION: Final = "kai.scheduler/skip-podgrouper"
PREEMPTIBILITY_LABEL: Final = "kai.scheduler/preemptibility"
TASK_PRIORITY_LABEL: Final = "kai.scheduler/task-priority"
GPU_FRACTION_ANNOTATION: Final = "gpu-fraction"
GPU_MEMORY_ANNOTATION: Final = "gpu-memory"
GPU_FRACTION_NUM_DEVICES_ANNOTATION: Final = "gpu-fraction-num-devices"
GPU_FRACTION_CONTAINER_ANNOTATION: Final = "gpu-fraction-container-name"
MPS_ANNOTATION: Final = "mps"
GPU_GROUP_LABEL: Final = "runai-gpu-group"
RECEIVED_RESOURCE_TYPE_ANNOTATION: Final = "received-resource-type"
LAST_START_TIMESTAMP_ANNOTATION: Final = "kai.scheduler/last-start-timestamp"
STALE_PODGROUP_TIMESTAMP_ANNOTATION: Final = "kai.scheduler/stale-podgroup-timestamp"
# Preemption delay (KAI v0.17): on a workload or its pods, how long its PodGroup must wait (a Go duration)
# before it may evict anyone; the scheduler stamps the second on a PodGroup whose pod it evicts (RFC 3339),
# which starts the wait again.
PREEMPTION_DELAY_ANNOTATION: Final = "kai.scheduler/preemption-delay"
LAST_EVICTION_TIMESTAMP_ANNOTATION: Final = "kai.scheduler/last-eviction-timestamp"
# This project's, not KAI's: when a waiting PodGroup is estimated to start, RFC 3339 (docs/start-times.md).
ESTIMATED_START_ANNOTATION: Final = "kai.scheduler/estimated-start"
# This project's, not KAI's: the capacity held for a PodGroup that cannot start yet (reservation and
# backfill, docs/reservation-and-backfill.md), JSON {"nodes": [...], "start": "<RFC 3339>", "gpus": n}.
RESERVATION_ANNOTATION: Final = "kai.scheduler/reservation"
# A pod's NUMA placement (KAI v0.16): predicted by the scheduler (the binder writes it from the
# BindRequest's `predictedNUMAZones`), observed by KAI's placement exporter; JSON [{zone, amount}].
NUMA_PLACEMENT_PREDICTED_ANNOTATION: Final = "kai.scheduler/numa-placement-predicted"
NUMA_PLACEMENT_OBSERVED_ANNOTATION: Final = "kai.scheduler/numa-placement-observed"
TOPOLOGY_ANNOTATION: Final = "kai.scheduler/topology"
TOPOLOGY_REQUIRED_ANNOTATION: Final = "kai.scheduler/topology-required-placement"
TOPOLOGY_PREFERRED_ANNOTATION: Final = "kai.scheduler/topology-preferred-placement"
NODE_POOL_LABEL: Final = "kai.scheduler/node-pool"
# Published by a GPU reservation pod: the UUID of the GPU it holds (KAI keeps the historical name).
RESERVED_GPU_ANNOTATION: Final = "run.ai/reserve_for_gpu_index"
# On a ResourceClaim made from a template for a pod: the pod's name for that claim (Kubernetes').
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
# Karpenter leaves a node alone while a pod with this annotation runs on it.
DO_NOT_DISRUPT_ANNOTATION: Final = "karpenter.sh/do-not-disrupt"

# Node labels.
GPU_MEMORY_LABEL: Final = "nvidia.com/gpu.memory"
MIG_STRATEGY_LABEL: Final = "nvidia.com/mig.strategy"
MIG_ENABLED_LABEL: Final = "node-role.kubernetes.io/mig-enabled"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"

# Resource names.
GPU_RESOURCE: Final = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX: Final = "nvidia.com/mig-"
CPU_RESOURCE: Final = "cpu"
MEMORY_RESOURCE: Final = "memory"
PODS_RESOURCE: Final = "pods"

# Priority classes that the deployment ships (name -> value).
BUILTIN_PRIORITY_CLASSES: Final = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
DEFAULT_PRIORITY: Final = 50
# Jobs at or above this priority are non-preemptible unless they say otherwise.
NON_PREEMPTIBLE_PRIORITY_THRESHOLD: Final = 100
DEFAULT_QUEUE_PRIORITY: Final = 100

# Queue quota units: KAI's queue spec gives CPU in millicores and memory in MB (10^6 bytes).
QUEUE_MEMORY_UNIT_BYTES: Final = 1_000_000
QUEUE_CPU_UNIT_CORES: Final = 0.001
UNLIMITED: Final = -1.0

# Simulation-only annotations, ignored by a real cluster.
SIM_ARRIVAL_ANNOTATION: Final = "simulation.kai.scheduler/arrival"
SIM_DURATION_ANNOTATION: Final = "simulation.kai.scheduler/duration"

# GPU sharing's environment. The admission webhook writes the annotation on a pod with `gpu-fraction` or
# `gpu-memory`: the name prefix of the ConfigMaps (`<prefix>-<containerIndex>` and
# `<prefix>-<containerIndex>-evar`) that its container's environment refers to and the binder fills.
SHARED_GPU_CONFIGMAP_ANNOTATION: Final = "runai/shared-gpu-configmap"
SHARED_GPU_ENV_CONFIGMAP_SUFFIX: Final = "-evar"
NVIDIA_VISIBLE_DEVICES_ENV: Final = "NVIDIA_VISIBLE_DEVICES"
GPU_PORTION_ENV: Final = "GPU_PORTION"
NUM_OF_GPUS_ENV: Final = "RUNAI_NUM_OF_GPUS"

# Each Kubeflow training job kind and the spec field that holds its replica specs (the pod grouper reads
# them, the simulator's controllers expand them).
KUBEFLOW_REPLICA_SPECS: Final = {
    "PyTorchJob": "pytorchReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
}
