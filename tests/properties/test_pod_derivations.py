"""What `PodDerivations` hands out for a pod equals what the builder's rules derive from the pod alone
(`pod_request`, `pod_placement`, `pod_host_ports`), whichever memo found it: by the pod's container objects
(shared, as the loader makes them, or its own), by its node selector alone, by everything a plain pod is
made of, or by its resource shape, and also once the memos fill up and are emptied or given up. Pods whose
placements have one key share one `Placement` (a session evaluates static predicates once per placement
object), and pods of one resource shape one `PodRequest`.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import pod_manifest
from kai_scheduler.api.objects import Container, Pod
from kai_scheduler.model import builder
from kai_scheduler.model.builder import PodDerivations, pod_host_ports, pod_placement, pod_request

CONTAINERS: tuple[dict[str, Any], ...] = (
    {"name": "plain", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
    {"name": "gpu", "resources": {"requests": {"cpu": "2"}, "limits": {"nvidia.com/gpu": "1"}}},
    {"name": "port", "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80}]},
    {"name": "host-port", "ports": [{"containerPort": 80, "hostPort": 8080}]},
    {
        "name": "env",
        "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}],
    },
    # Quantities as numbers: each pod's its own objects (text is parsed into shared ones).
    {"name": "numbers", "resources": {"requests": {"cpu": 2, "memory": 1073741824}}},
    {
        "name": "env-from",
        "resources": {"requests": {"cpu": "500m"}},
        "envFrom": [{"configMapRef": {"name": "all"}}],
    },
)
# The same containers as objects of their own: pods that name one of these share it.
SHARED = tuple(Container.model_validate(container) for container in CONTAINERS)
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
        }
    }
}


def container(index: int, shared: bool) -> Container | dict[str, Any]:
    return SHARED[index] if shared else CONTAINERS[index]


containers = st.lists(
    st.builds(container, st.integers(0, len(CONTAINERS) - 1), st.booleans()), min_size=1, max_size=2
)
selectors = st.lists(
    st.tuples(st.sampled_from(("zone", "rack")), st.sampled_from(("a", "b"))),
    max_size=2,
    unique_by=lambda kv: kv[0],
).map(dict)


@st.composite
def pods(draw: st.DrawFn, name: str) -> Pod:
    manifest = pod_manifest(
        name,
        namespace=draw(st.sampled_from(("default", "team"))),
        node_selector=draw(selectors) or None,
        tolerations=[{"key": "gpu", "operator": "Exists"}] if draw(st.booleans()) else None,
        affinity=AFFINITY if draw(st.integers(0, 3)) == 0 else None,
        fraction=0.5 if draw(st.booleans()) else None,
    )
    spec = manifest["spec"]
    spec["containers"] = draw(containers)
    if draw(st.integers(0, 3)) == 0:  # a sidecar or a plain init container, of any of the shapes above
        init = CONTAINERS[draw(st.integers(0, len(CONTAINERS) - 1))]
        spec["initContainers"] = [
            {**init, "name": "init", "restartPolicy": draw(st.sampled_from(("Always", None)))}
        ]
    if draw(st.integers(0, 3)) == 0:
        spec["hostNetwork"] = True
    if draw(st.integers(0, 4)) == 0:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    if draw(st.integers(0, 4)) == 0:
        spec["overhead"] = {"cpu": "100m"}
    return Pod.model_validate(manifest)


pod_lists = st.integers(1, 12).flatmap(lambda n: st.tuples(*(pods(f"p{i}") for i in range(n))))


def check(derivations: PodDerivations, batch: tuple[Pod, ...]) -> None:
    by_key = {}
    by_shape = {}
    for pod in batch:
        request, placement, host_ports = derivations.of(pod)
        assert request == pod_request(pod)
        assert placement == pod_placement(pod)
        assert host_ports == pod_host_ports(pod)
        assert by_key.setdefault(placement.key, placement) is placement
        assert by_shape.setdefault(builder._resource_shape(pod), request) is request


@settings(max_examples=200, deadline=None)
@given(pod_lists, pod_lists)
def test_what_a_pod_is_handed_is_what_its_spec_says(first: tuple[Pod, ...], second: tuple[Pod, ...]) -> None:
    check(PodDerivations(), first + second)


@settings(max_examples=200, deadline=None)
@given(pod_lists, pod_lists)
def test_what_a_pod_is_handed_stays_what_its_spec_says_as_the_memos_fill_up(
    first: tuple[Pod, ...], second: tuple[Pod, ...]
) -> None:
    with mock.patch.object(builder, "_MAX_BY_CONTAINERS", 2):
        check(PodDerivations(), first + second)
