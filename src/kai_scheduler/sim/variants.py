"""One input run under several scheduler configurations (`simulate --compare`, `--sweep`): a `Variant` is a
configuration plus any queues it changes, an `Outcome` what a run of it gives a comparison (the report's
summary, each pod group's start and fate, and the timeline for plots when asked for).

`run_variants` runs them in this process, in a local process pool or on a Ray cluster; the runs are
independent and deterministic, so where they ran changes nothing in their outcomes.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing.context import BaseContext
from typing import Any

from kai_scheduler.api.objects import ApiObject, Queue
from kai_scheduler.framework.config import ConfigError, SchedulerConfig
from kai_scheduler.sim.engine import Simulation, SimulationOptions
from kai_scheduler.sim.gc_policy import collector_paused, fewer_collections
from kai_scheduler.sim.results import result_document
from kai_scheduler.sim.summary import summary
from kai_scheduler.sim.timeline import NO_QUEUE, Timeline, replay
from kai_scheduler.sim.timeseries import FairShareRecorder, run_facts
from kai_scheduler.sim.workloads import Workload

Objects = Sequence[ApiObject | Workload]

# A pod group's fate at the end of a run.
NEVER_STARTED = "never started"
COMPLETED = "completed"
RUNNING = "running"
EVICTED = "evicted"  # started, then stopped by evictions, and not running at the end
STOPPED = "stopped"  # started, not running at the end, not completed, never evicted (its controller ended it)


@dataclass(frozen=True, slots=True)
class Variant:
    """A configuration to run the input under; `queues` replace the input's queues of the same names."""

    label: str
    config: SchedulerConfig
    queues: tuple[Queue, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupFate:
    queue: str | None
    arrival: float
    start: float | None  # when it first had minMember pods running (None: never)
    fate: str
    evictions: int  # evictions of its running pods
    preexisting: bool  # running from the input: it did not wait in this run


@dataclass(frozen=True, slots=True)
class Outcome:
    label: str
    summary: dict[str, Any]  # summary.json's numbers (sim.summary)
    groups: dict[str, GroupFate]  # by pod group, "namespace/name"
    timeline: Timeline | None = field(default=None, compare=False)


def with_queues(objects: Objects, queues: Sequence[Queue]) -> list[ApiObject | Workload]:
    """The input with each of `queues` in place of the input's queue of the same name."""
    replacing = {queue.metadata.name: queue for queue in queues}
    return [
        replacing.get(o.metadata.name, o) if isinstance(o, Queue) else o  # keeps the input's order
        for o in objects
    ]


def run_variant(
    objects: Objects, variant: Variant, options: SimulationOptions, *, keep_timeline: bool = False
) -> Outcome:
    """Run the input under the variant's configuration: its summary, pod groups' fates and timeline."""
    with collector_paused():
        try:
            simulation = Simulation(with_queues(objects, variant.queues), variant.config, options)
        except ConfigError as error:  # a configuration the input cannot run with (its shards, say)
            raise ConfigError(f"{variant.label}: {error}") from None
    fair_shares = FairShareRecorder()
    simulation.observers.append(fair_shares)
    with fewer_collections():
        result = simulation.run()
        with collector_paused():
            document = result_document(result)
            timeline = replay(document, run_facts(result, fair_shares))
    return Outcome(
        variant.label,
        summary(timeline),
        group_fates(document, timeline),
        timeline if keep_timeline else None,
    )


def group_fates(document: dict[str, Any], timeline: Timeline) -> dict[str, GroupFate]:
    evictions: Counter[str] = Counter()
    for pod in document["pods"]:
        evictions[pod["podGroup"]] += pod["evictions"]
    running = {f"{g['namespace']}/{g['name']}": g["running"] >= g["minMember"] for g in document["podGroups"]}
    fates = {}
    for group in sorted(timeline.groups, key=lambda g: (g.arrival, g.key)):
        if group.start is None:
            fate = NEVER_STARTED
        elif group.completion is not None:
            fate = COMPLETED
        elif running.get(group.key, False):
            fate = RUNNING
        elif evictions[group.key]:
            fate = EVICTED
        else:
            fate = STOPPED
        fates[group.key] = GroupFate(
            None if group.queue == NO_QUEUE else group.queue,
            group.arrival,
            group.start,
            fate,
            evictions[group.key],
            group.preexisting,
        )
    return fates


# --- where the runs go ------------------------------------------------------------------------------


class RayError(Exception):
    """`--ray`: the `ray` package is not installed, or the cluster could not be reached (one line)."""


RAY_MISSING = "--ray: the ray package is not installed (pip install 'kai-scheduler[ray]')"


def default_workers() -> int:
    return os.cpu_count() or 1


def run_variants(
    objects: Objects,
    variants: Sequence[Variant],
    options: SimulationOptions,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    keep_timelines: bool = False,
    done: Callable[[int], None] | None = None,
) -> list[Outcome]:
    """Every variant's outcome, in the variants' order: on the Ray cluster at `ray_address` when given,
    else in a pool of `workers` processes (default: one per core; one worker: in this process). `done`
    is called with the number of runs ended so far, as each ends (for progress)."""
    if ray_address is not None:
        return _on_ray(ray_address, objects, variants, options, keep_timelines, done)
    count = min(workers or default_workers(), len(variants))
    if count <= 1:
        outcomes = []
        for variant in variants:
            outcomes.append(run_variant(objects, variant, options, keep_timeline=keep_timelines))
            if done is not None:
                done(len(outcomes))
        return outcomes
    # The input goes to each worker once, not with every task: inherited when the worker is forked, else
    # pickled once per worker.
    with ProcessPoolExecutor(
        count, mp_context=_context(), initializer=_keep_input, initargs=(objects, options)
    ) as pool:
        futures = [pool.submit(_run_in_worker, variant, keep_timelines) for variant in variants]
        for finished, future in enumerate(as_completed(futures), start=1):
            if future.exception() is not None:
                pool.shutdown(cancel_futures=True)  # the runs not started yet would be in vain
                future.result()
            if done is not None:
                done(finished)
        return [future.result() for future in futures]


def _context() -> BaseContext:
    """Fork (workers start at once, the input shared) when this process runs no other thread; else a
    fork server: forking a process while another thread holds a lock (logging's, an allocator's) can leave
    the child waiting for it forever."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if os.name == "posix" else "spawn")


_WORKER_INPUT: tuple[Objects, SimulationOptions] | None = None


def _keep_input(objects: Objects, options: SimulationOptions) -> None:
    global _WORKER_INPUT
    _WORKER_INPUT = (objects, options)


def _run_in_worker(variant: Variant, keep_timeline: bool) -> Outcome:
    assert _WORKER_INPUT is not None, "the pool's initializer keeps the input"
    objects, options = _WORKER_INPUT
    return run_variant(objects, variant, options, keep_timeline=keep_timeline)


def _on_ray(
    address: str,
    objects: Objects,
    variants: Sequence[Variant],
    options: SimulationOptions,
    keep: bool,
    done: Callable[[int], None] | None,
) -> list[Outcome]:
    """The runs as Ray tasks: the input is put into the cluster's object store once and every task reads
    it from there. The cluster's workers need kai-scheduler installed (the same version)."""
    try:
        import ray
    except ImportError:
        raise RayError(RAY_MISSING) from None
    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    except Exception as error:  # Ray raises ConnectionError, ValueError, RuntimeError, ... for a bad address
        raise RayError(f"--ray {address}: {_first_line(error)}") from None
    try:
        remote = ray.remote(run_variant)
        shared = ray.put(list(objects))
        refs = [remote.remote(shared, variant, options, keep_timeline=keep) for variant in variants]
        waiting = list(refs)
        while waiting:
            _, waiting = ray.wait(waiting, num_returns=1)
            if done is not None:
                done(len(refs) - len(waiting))
        outcomes: list[Outcome] = ray.get(refs)
        return outcomes
    finally:
        ray.shutdown()


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
