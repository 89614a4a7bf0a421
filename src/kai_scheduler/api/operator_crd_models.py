"""The shapes of KAI's operator objects, `SchedulingShard` and `Config` (`kai.scheduler/v1`, cluster-scoped),
for their CustomResourceDefinitions (`crds.py`): field names, types and bounds as KAI v0.17.0's CRDs have
them (`pkg/apis/kai/v1`). What a scheduler makes of them is `framework`'s; these models only say what the
API server stores.

A SchedulingShard is typed whole. Of a Config, the parts the scheduler reads (`namespace`, `global`,
`prometheus`) are typed; each component's own block (`scheduler`, `binder`, `admission`, ...: images,
resources, replicas, pod placement for KAI's operator to deploy) is kept as written, as this project's
chart deploys the components itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal

from pydantic import Field

from kai_scheduler.api.objects import K8sModel, ObjectMeta, Quantity

OPERATOR_API_VERSION: Final = "kai.scheduler/v1"

# --- SchedulingShard -------------------------------------------------------------------------------


class PluginOverride(K8sModel):
    """One scheduler plugin's settings over KAI's defaults (a name not among them adds a plugin)."""

    enabled: bool | None = Field(default=None, description="Whether the plugin runs; default true.")
    priority: int | None = Field(default=None, description="Order among plugins; higher runs first.")
    arguments: dict[str, str] | None = Field(
        default=None, description="The plugin's arguments; when given, they replace the defaults whole."
    )


class ActionOverride(K8sModel):
    """One scheduler action's settings over KAI's defaults (a name not among them adds an action)."""

    enabled: bool | None = Field(default=None, description="Whether the action runs; default true.")
    priority: int | None = Field(default=None, description="Order among actions; higher runs first.")


class PlacementStrategy(K8sModel):
    gpu: str | None = Field(default=None, description="binpack (default) or spread.")
    cpu: str | None = Field(default=None, description="binpack (default) or spread.")


class MinRuntime(K8sModel):
    preempt_min_runtime: str | None = Field(
        default=None, description="How long a job runs before it may be preempted (a duration)."
    )
    reclaim_min_runtime: str | None = Field(
        default=None, description="How long a job runs before it may be reclaimed (a duration)."
    )


class UsageParams(K8sModel):
    half_life_period: str | None = None
    window_size: str | None = Field(
        default=None,
        pattern=r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
    )
    window_type: str | None = None
    tumbling_window_start_time: datetime | None = None
    cron_string: str | None = None
    fetch_interval: str | None = None
    staleness_period: str | None = None
    wait_timeout: str | None = None
    extra_params: dict[str, str] | None = None


class UsageDBConfig(K8sModel):
    """Where the scheduler reads past usage from (time-based fair share)."""

    client_type: str
    connection_string: str | None = None
    connection_string_env_var: str | None = None
    usage_params: UsageParams | None = None


class ScenarioSearchBudgets(K8sModel):
    """Time budgets of the victim search (Go durations)."""

    max_action_search_duration: dict[str, str] | None = None
    max_generator_search_duration: dict[str, str] | None = None
    max_job_search_duration: str | None = None
    min_job_search_duration: str | None = None


class SchedulingShardSpec(K8sModel):
    partition_label_value: str | None = Field(
        default=None, description="The node-pool label value of this shard's nodes, queues and PodGroups."
    )
    placement_strategy: PlacementStrategy | None = None
    args: dict[str, str] | None = Field(
        default=None, description="Scheduler flags by name (without dashes), as strings."
    )
    go_mem_limit_ratio: float | None = Field(default=None, gt=0, le=1)
    go_mem_limit: Quantity | None = None
    queue_depth_per_action: dict[str, int] | None = None
    min_runtime: MinRuntime | None = None
    k_value: float | None = None
    usage_db_config: UsageDBConfig | None = Field(default=None, alias="usageDBConfig")
    scenario_search_budgets: ScenarioSearchBudgets | None = None
    plugins: dict[str, PluginOverride] | None = None
    actions: dict[str, ActionOverride] | None = None


class OperatorCondition(K8sModel):
    type: str = Field(min_length=1, max_length=316)
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = Field(default=None, ge=0)
    last_transition_time: datetime
    reason: str = Field(min_length=1, max_length=1024)
    message: str = Field(max_length=32768)


class OperatorStatus(K8sModel):
    conditions: list[OperatorCondition] | None = None


class SchedulingShardObject(K8sModel):
    api_version: Literal["kai.scheduler/v1"] = OPERATOR_API_VERSION
    kind: Literal["SchedulingShard"] = "SchedulingShard"
    metadata: ObjectMeta
    spec: SchedulingShardSpec | None = None
    status: OperatorStatus | None = None


# --- Config ----------------------------------------------------------------------------------------


class ConfigGlobal(K8sModel):
    """Settings shared by every component."""

    scheduler_name: str | None = Field(default=None, description="Default kai-scheduler.")
    node_pool_label_key: str | None = Field(default=None, description="Default kai.scheduler/node-pool.")
    queue_label_key: str | None = Field(default=None, description="Default kai.scheduler/queue.")
    namespace_label_selector: dict[str, str] | None = None
    pod_label_selector: dict[str, str] | None = None
    json_log: bool | None = None
    openshift: bool | None = None
    replica_count: int | None = None
    priority_class_name: str | None = None
    require_default_pod_anti_affinity_term: bool | None = None
    images_pull_secret: str | None = None
    additional_image_pull_secrets: list[str] | None = None
    node_selector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    daemonsets_tolerations: list[dict[str, Any]] | None = None
    security_context: dict[str, Any] | None = None
    vpa: dict[str, Any] | None = None


class ConfigPrometheus(K8sModel):
    enabled: bool | None = None
    external_prometheus_url: str | None = None
    instance_name: str | None = None
    retention_period: str | None = None
    sample_interval: str | None = None
    enable_persistent_storage: bool | None = None
    storage_size: str | None = None
    storage_class_name: str | None = None
    accounting_label_key: str | None = None
    accounting_label_value: str | None = None
    service_monitor: dict[str, Any] | None = None
    external_prometheus_health_probe: dict[str, Any] | None = None


class ConfigSpec(K8sModel):
    namespace: str | None = Field(
        default=None, description="Where the components run; default kai-scheduler."
    )
    global_: ConfigGlobal | None = Field(default=None, alias="global")
    prometheus: ConfigPrometheus | None = None
    # Each component's deployment settings, for KAI's operator: kept as written.
    scheduler: dict[str, Any] | None = None
    binder: dict[str, Any] | None = None
    admission: dict[str, Any] | None = None
    pod_grouper: dict[str, Any] | None = None
    pod_group_controller: dict[str, Any] | None = None
    queue_controller: dict[str, Any] | None = None
    node_scale_adjuster: dict[str, Any] | None = None
    numa_placement_exporter: dict[str, Any] | None = None


class ConfigObject(K8sModel):
    api_version: Literal["kai.scheduler/v1"] = OPERATOR_API_VERSION
    kind: Literal["Config"] = "Config"
    metadata: ObjectMeta
    spec: ConfigSpec | None = None
    status: OperatorStatus | None = None
