"""batch/v1 Job and CronJob, as Kubernetes' job and cronjob controllers run them.

Job: up to `parallelism` pods at a time until `completions` have succeeded (no `completions`: until one
has, then the others finish); `completionMode: Indexed` gives each pod a completion index (0 ..
completions-1), in its name (`<job>-<index>-<random>`), label and annotation; a failed pod is replaced
until more than `backoffLimit` (6) have failed, or `activeDeadlineSeconds` have passed since the Job
started: then the Job fails and its active pods are deleted. `suspend: true` runs nothing.

CronJob: a Job `<cronjob>-<scheduled time in minutes since the epoch>` at each time its schedule fires
(in `timeZone`, default UTC), the most recent missed one only; `concurrencyPolicy` Allow, Forbid (skip
while a Job runs) or Replace (delete the running Jobs first); `suspend: true` fires nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kai_scheduler.api.timestamps import format_rfc3339, parse_rfc3339
from kai_scheduler.workloads.cron import CronError, Schedule, parse_schedule
from kai_scheduler.workloads.errors import WorkloadError
from kai_scheduler.workloads.objects import (
    Reconciled,
    View,
    at,
    child_object,
    flag,
    integer,
    is_active,
    mapping,
    name_of,
    optional_integer,
    phase_of,
    pod_from_template,
    ref,
    template_of,
    text,
)

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CRONJOB_SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
DEFAULT_BACKOFF_LIMIT = 6


# --- Job -------------------------------------------------------------------------------------------


def job_finished(job: Mapping[str, Any]) -> bool:
    """A Job whose status says Complete or Failed."""
    return any(
        cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True"
        for cond in at(job, "status", "conditions") or []
    )


def reconcile_job(job: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    mapping(job, "spec", required=True)
    template = template_of(job, "spec", "template")
    parallelism = integer(job, "spec", "parallelism", default=1)
    completions = optional_integer(job, "spec", "completions")
    indexed = (
        text(job, "spec", "completionMode", default="NonIndexed", choices=("NonIndexed", "Indexed"))
        == "Indexed"
    )
    if indexed and completions is None:
        raise WorkloadError(
            "is required with completionMode Indexed", object_ref=ref(job), field="spec.completions"
        )
    backoff_limit = integer(job, "spec", "backoffLimit", default=DEFAULT_BACKOFF_LIMIT)
    suspended = flag(job, "spec", "suspend")
    deadline = job_deadline(job)

    pods = list(view.owned(job))
    active = [pod for pod in pods if is_active(pod)]
    succeeded = [pod for pod in pods if phase_of(pod) == "Succeeded"]
    failed = sum(1 for pod in pods if phase_of(pod) == "Failed")
    done_indexes = {_index(pod) for pod in succeeded}
    out = Reconciled()
    if job_finished(job):
        return out
    condition: str | None = None
    if failed > backoff_limit or (deadline is not None and now >= deadline):
        condition = "Failed"
        out.delete.extend(active)
        active = []
    elif completions is not None and (len(done_indexes) if indexed else len(succeeded)) >= completions:
        condition = "Complete" if not active else None
    elif completions is None and succeeded:
        # A work queue: once one pod succeeds no more start, and the Job completes when the rest finish.
        condition = "Complete" if not active else None
    elif not suspended:
        out.create.extend(
            _new_pods(job, template, parallelism, completions, indexed, active, done_indexes, len(succeeded))
        )
    if suspended and condition is None:
        out.delete.extend(active)
        active = []
    status: dict[str, Any] = {
        "startTime": at(job, "status", "startTime") or format_rfc3339(now),
        "active": len(active) + len(out.create),
        "succeeded": len(succeeded),
        "failed": failed,
    }
    if condition is not None:
        status["conditions"] = [{"type": condition, "status": "True"}]
        if condition == "Complete":
            status["completionTime"] = format_rfc3339(now)
    if indexed:
        status["completedIndexes"] = ",".join(str(i) for i in sorted(done_indexes))
    out.status = status
    return out


def job_deadline(job: Mapping[str, Any]) -> datetime | None:
    """When a started Job with `activeDeadlineSeconds` fails (its running pods deleted)."""
    seconds = optional_integer(job, "spec", "activeDeadlineSeconds", minimum=1)
    started = at(job, "status", "startTime")
    if seconds is None or not started or job_finished(job):
        return None
    return parse_rfc3339(str(started)) + timedelta(seconds=seconds)


def job_next_time(job: Mapping[str, Any], now: datetime) -> datetime | None:
    """When the Job next has work by the clock alone: its active deadline."""
    deadline = job_deadline(job)
    return deadline if deadline is not None and deadline > now else None


def _new_pods(
    job: Mapping[str, Any],
    template: Mapping[str, Any],
    parallelism: int,
    completions: int | None,
    indexed: bool,
    active: list[Mapping[str, Any]],
    done_indexes: set[int],
    succeeded: int,
) -> list[dict[str, Any]]:
    name, uid = name_of(job), str(at(job, "metadata", "uid") or "")
    labels = {
        CONTROLLER_UID_LABEL: uid,
        JOB_NAME_LABEL: name,
        LEGACY_CONTROLLER_UID_LABEL: uid,
        LEGACY_JOB_NAME_LABEL: name,
    }
    left = None if completions is None else completions - (len(done_indexes) if indexed else succeeded)
    wanted = max(0, (parallelism if left is None else min(parallelism, left)) - len(active))
    if not indexed:
        return [
            pod_from_template(job, template, generate_name=f"{name}-", labels=labels) for _ in range(wanted)
        ]
    assert completions is not None
    busy = {_index(pod) for pod in active} | done_indexes
    free = [i for i in range(completions) if i not in busy][:wanted]
    subdomain = at(template, "spec", "subdomain")
    pods = []
    for index in free:
        spec: dict[str, Any] = {"hostname": f"{name}-{index}"}
        if subdomain:
            spec["subdomain"] = subdomain
        pods.append(
            pod_from_template(
                job,
                template,
                generate_name=f"{name}-{index}-",
                labels={**labels, COMPLETION_INDEX: str(index)},
                annotations={COMPLETION_INDEX: str(index)},
                spec=spec,
            )
        )
    return pods


def _index(pod: Mapping[str, Any]) -> int:
    value = (at(pod, "metadata", "annotations") or {}).get(COMPLETION_INDEX)
    return int(value) if isinstance(value, str) and value.isdigit() else -1


# --- CronJob ---------------------------------------------------------------------------------------


def _zone(cron_job: Mapping[str, Any]) -> tzinfo:
    name = text(cron_job, "spec", "timeZone", default="UTC")
    if name == "UTC":
        return UTC  # without the system's time zone database too
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise WorkloadError(
            f"unknown time zone {name!r}", object_ref=ref(cron_job), field="spec.timeZone"
        ) from None


def _schedule(cron_job: Mapping[str, Any]) -> Schedule:
    raw = text(cron_job, "spec", "schedule")
    if not raw:
        raise WorkloadError("is missing", object_ref=ref(cron_job), field="spec.schedule")
    try:
        return parse_schedule(raw)
    except CronError as err:
        raise WorkloadError(str(err), object_ref=ref(cron_job), field="spec.schedule") from None


def _created(obj: Mapping[str, Any]) -> datetime:
    stamp = at(obj, "metadata", "creationTimestamp")
    if isinstance(stamp, datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    if isinstance(stamp, str) and stamp:
        return parse_rfc3339(stamp)
    raise WorkloadError("is missing", object_ref=ref(obj), field="metadata.creationTimestamp")


def cron_job_next_time(cron_job: Mapping[str, Any], now: datetime) -> datetime | None:
    """When the CronJob next fires after `now` (None: suspended, or never)."""
    if flag(cron_job, "spec", "suspend"):
        return None
    return _schedule(cron_job).next_after(now, _zone(cron_job))


def reconcile_cron_job(cron_job: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    schedule, zone = _schedule(cron_job), _zone(cron_job)
    policy = text(
        cron_job, "spec", "concurrencyPolicy", default="Allow", choices=("Allow", "Forbid", "Replace")
    )
    job_template = mapping(cron_job, "spec", "jobTemplate", required=True)
    template_of(cron_job, "spec", "jobTemplate", "spec", "template")
    last_text = at(cron_job, "status", "lastScheduleTime")
    since = parse_rfc3339(str(last_text)) if last_text else _created(cron_job)
    out = Reconciled()
    jobs = list(view.owned(cron_job))
    running = [job for job in jobs if not job_finished(job)]
    status: dict[str, Any] = {"active": [{"kind": "Job", "name": name_of(job)} for job in running]}
    if last_text:
        status["lastScheduleTime"] = last_text
    out.status = status
    if flag(cron_job, "spec", "suspend"):
        return out
    # The most recent time the schedule fired since the last run, if any (older misses are not made up).
    due: datetime | None = None
    moment = schedule.next_after(since, zone)
    while moment is not None and moment <= now:
        due = moment
        moment = schedule.next_after(moment, zone)
    if due is None:
        return out
    name = f"{name_of(cron_job)}-{int(due.timestamp()) // 60}"
    if any(name_of(job) == name for job in jobs):
        return out
    status["lastScheduleTime"] = format_rfc3339(due)
    if running and policy == "Forbid":
        return out
    if running and policy == "Replace":
        out.delete.extend(running)
        running = []
    meta = mapping(job_template, "metadata")
    job = child_object(
        cron_job,
        "batch/v1",
        "Job",
        mapping(job_template, "spec", required=True),
        name=name,
        labels=meta.get("labels") or {},
        annotations={
            **(meta.get("annotations") or {}),
            CRONJOB_SCHEDULED_ANNOTATION: format_rfc3339(due, keep_offset=True),
        },
    )
    out.create.append(job)
    status["active"] = [{"kind": "Job", "name": name_of(j)} for j in running] + [
        {"kind": "Job", "name": name}
    ]
    return out
