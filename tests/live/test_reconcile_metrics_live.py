"""The live components' reconcile metrics, read as Prometheus reads them: from a running process's
`/metrics`, under controller-runtime's names (`k8s/runtime/reconcile_metrics.py`)."""

from __future__ import annotations

import asyncio
import urllib.request

from identities import client_as, run_as
from live_support import in_thread, run
from ports import free_port
from prometheus_client.parser import text_string_to_metric_families

from helpers import pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.components import RunOptions, run_components

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample of the endpoint, by name and sorted labels ({} when nothing answers yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_running_process_serves_its_controllers_reconcile_metrics(server: FakeApiServer) -> None:
    server.store.create(queue_manifest("q"))
    server.store.create(pod_manifest("p", "q"))
    port = free_port()
    components = frozenset({"podgrouper", "status-controllers"})
    options = RunOptions(
        components=components, config=SchedulerConfig(), metrics_port=port, plugin_server_port=0
    )
    pod_success = ("controller_runtime_reconcile_total", (("controller", "pod"), ("result", "success")))

    async def body() -> Samples:
        stop = asyncio.Event()
        async with client_as(server, run_as(components)) as client:
            task = asyncio.create_task(run_components(options, stop, client))
            samples: Samples = {}
            previous: Samples = {}
            # The pod grouper has grouped the pod and said so in its metrics, and two scrapes in a row
            # agree (no reconcile between them: the counts are read at rest, not halfway through one).
            while not (
                samples.get(pod_success, 0) >= 1
                and server.store.list("podgroups", "default")
                and samples == previous
            ):
                assert not task.done(), "the components stopped"
                await asyncio.sleep(0.05)
                previous, samples = samples, await in_thread(scrape, port)
            stop.set()
            await asyncio.wait_for(task, 10)
            return samples

    samples = run(body(), timeout=30)
    for controller in ("pod", "podgroup", "queue"):
        one = (("controller", controller),)
        queue = (("controller", controller), ("name", controller))
        results = {
            result: samples[("controller_runtime_reconcile_total", (*one, ("result", result)))]
            for result in ("success", "requeue_after", "requeue", "error")
        }
        # Every reconcile is timed once, and each came off the queue after an add.
        assert samples[("controller_runtime_reconcile_time_seconds_count", one)] == sum(results.values())
        assert samples[("workqueue_adds_total", queue)] >= sum(results.values())
        assert samples[("controller_runtime_reconcile_errors_total", one)] == results["error"]
        assert ("workqueue_depth", (*queue, ("priority", ""))) in samples
        assert ("workqueue_retries_total", queue) in samples
        assert samples[("controller_runtime_max_concurrent_reconciles", one)] >= 1
    assert samples[pod_success] >= 1
    assert (
        samples[("controller_runtime_reconcile_time_seconds_bucket", (("controller", "pod"), ("le", "+Inf")))]
        >= 1
    )
