"""predicates: Kubernetes' NodePorts filter (kai-reference §4.4 `predicates`: "k8s plugins NodePorts").

A pod's host ports are the `hostPort`s of its containers and sidecars (protocol TCP and host IP 0.0.0.0
by default; with `hostNetwork` every container port). Two pods clash on a node when they ask for the same
protocol and port and either binds every address (0.0.0.0) or both bind the same one. Every pod on the
node holds its ports: running, placed earlier in the same cycle, releasing until gone, and pods of
other schedulers too.
"""

from __future__ import annotations

from typing import Any

from helpers import (
    binds,
    node_manifest,
    open_session,
    pipelines,
    pod_group_manifest,
    pod_manifest,
    queue_manifest,
    run,
    simulate,
)
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.model.jobs import TaskStatus

REJECTION = "node(s) didn't have free ports for the requested pod ports"


def objects(*manifests: dict[str, Any]) -> list[ApiObject]:
    return [parse_object(m, "test", i) for i, m in enumerate(manifests)]


def with_ports(
    manifest: dict[str, Any], *ports: dict[str, Any], container: str = "containers"
) -> dict[str, Any]:
    """The manifest with `ports` on its main container (or on a new init container)."""
    spec = manifest["spec"]
    if container == "containers":
        spec["containers"][0]["ports"] = list(ports)
    else:
        init: dict[str, Any] = {"name": "init", "image": "busybox", "ports": list(ports)}
        if container == "sidecar":
            init["restartPolicy"] = "Always"
        spec["initContainers"] = [init]
    return manifest


def port(host_port: int, *, protocol: str | None = None, host_ip: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"containerPort": 8080, "hostPort": host_port}
    if protocol is not None:
        entry["protocol"] = protocol
    if host_ip is not None:
        entry["hostIP"] = host_ip
    return entry


def nodes_of(document: dict[str, Any]) -> dict[str, str | None]:
    return {p["name"]: p["node"] for p in document["pods"]}


def reason_of(document: dict[str, Any], group: str) -> str:
    found: str = next(g for g in document["podGroups"] if g["name"] == group)["unschedulableReason"]
    return found


def one_node(*pods: dict[str, Any]) -> dict[str, Any]:
    return simulate(objects(node_manifest("n0"), queue_manifest("q"), *pods), cycles=1)


# --- the same host port ------------------------------------------------------------------------------


def test_two_pods_with_the_same_host_port_go_to_different_nodes() -> None:
    document = simulate(
        objects(
            node_manifest("n0"),
            node_manifest("n1"),
            queue_manifest("q"),
            with_ports(pod_manifest("a"), port(80)),
            with_ports(pod_manifest("b"), port(80)),
        ),
        cycles=1,
    )
    placed = nodes_of(document)
    assert placed["a"] is not None and placed["b"] is not None
    assert placed["a"] != placed["b"]


def test_on_one_node_the_second_pod_waits_and_says_why_until_the_port_is_free() -> None:
    cluster = objects(
        node_manifest("n0"),
        queue_manifest("q"),
        with_ports(pod_manifest("a", duration=60), port(80)),
        with_ports(pod_manifest("b"), port(80)),
    )
    first = run(cluster, cycles=1)
    assert binds(first.cycles[0].decisions) == {"a": "n0"}
    assert REJECTION in first.reasons["default/pg-b"]
    # Once `a` completes, the port is free again.
    result = run(cluster)
    assert binds(d for cycle in result.cycles[1:] for d in cycle.decisions) == {"b": "n0"}


def test_pods_alike_but_for_their_host_ports_are_explained_each_on_its_own() -> None:
    """Why a pod waits is worked out once for pods that fail alike; the host ports are part of alike."""
    cluster = objects(
        node_manifest("n0", gpus=8),
        queue_manifest("q"),
        with_ports(pod_manifest("a", gpus=1, duration=60), port(80)),
        with_ports(pod_manifest("b", gpus=8), port(80)),
        pod_manifest("c", gpus=8),
    )
    reasons = run(cluster, cycles=1).reasons
    assert REJECTION in reasons["default/pg-b"]
    assert REJECTION not in reasons["default/pg-c"]
    assert "Insufficient GPUs" in reasons["default/pg-c"]


def test_a_gang_sees_the_ports_its_own_pods_took_earlier_in_the_cycle() -> None:
    gang = [with_ports(pod_manifest(f"w-{i}", group="w"), port(29500)) for i in range(3)]
    fits = simulate(
        objects(
            *(node_manifest(f"n{i}") for i in range(3)),
            queue_manifest("q"),
            pod_group_manifest("w", min_member=3),
            *gang,
        ),
        cycles=1,
    )
    assert sorted(n or "" for n in nodes_of(fits).values()) == ["n0", "n1", "n2"]

    too_few = simulate(
        objects(
            node_manifest("n0"),
            node_manifest("n1"),
            queue_manifest("q"),
            pod_group_manifest("w", min_member=3),
            *gang,
            # Rolled back with the gang, its pods hold no ports: a later pod may take the same one.
            with_ports(pod_manifest("later"), port(29500)),
        ),
        cycles=1,
    )
    assert nodes_of(too_few) == {"w-0": None, "w-1": None, "w-2": None, "later": "n0"}
    assert REJECTION in reason_of(too_few, "w")


# --- protocols and host IPs --------------------------------------------------------------------------


def test_the_same_port_on_another_protocol_does_not_clash() -> None:
    document = one_node(
        with_ports(pod_manifest("tcp"), port(53)),
        with_ports(pod_manifest("udp"), port(53, protocol="UDP")),
        with_ports(pod_manifest("sctp"), port(53, protocol="SCTP")),
        with_ports(pod_manifest("tcp-again"), port(53, protocol="TCP")),
    )
    assert nodes_of(document) == {"tcp": "n0", "udp": "n0", "sctp": "n0", "tcp-again": None}
    assert REJECTION in reason_of(document, "pg-tcp-again")


def test_different_specific_host_ips_do_not_clash_but_the_same_one_does() -> None:
    document = one_node(
        with_ports(pod_manifest("first"), port(80, host_ip="10.0.0.1")),
        with_ports(pod_manifest("second"), port(80, host_ip="10.0.0.2")),
        with_ports(pod_manifest("same"), port(80, host_ip="10.0.0.1")),
    )
    assert nodes_of(document) == {"first": "n0", "second": "n0", "same": None}


def test_all_addresses_clash_with_any_address_both_ways() -> None:
    specific_first = one_node(
        with_ports(pod_manifest("specific"), port(80, host_ip="10.0.0.1")),
        with_ports(pod_manifest("default"), port(80)),
        with_ports(pod_manifest("explicit"), port(80, host_ip="0.0.0.0")),
    )
    assert nodes_of(specific_first) == {"specific": "n0", "default": None, "explicit": None}
    all_first = one_node(
        with_ports(pod_manifest("all"), port(80, host_ip="0.0.0.0")),
        with_ports(pod_manifest("specific"), port(80, host_ip="10.0.0.1")),
    )
    assert nodes_of(all_first) == {"all": "n0", "specific": None}


# --- who holds ports ---------------------------------------------------------------------------------


def test_a_pod_of_another_scheduler_holds_its_host_port() -> None:
    foreign = with_ports(
        pod_manifest("ingress", None, scheduler="default-scheduler", node_name="n0"), port(443)
    )
    document = simulate(
        objects(
            node_manifest("n0"),
            node_manifest("n1"),
            queue_manifest("q"),
            foreign,
            with_ports(pod_manifest("web"), port(443)),
            with_ports(pod_manifest("web-2"), port(443)),
        ),
        cycles=1,
    )
    placed = nodes_of(document)
    assert placed["web"] == "n1" and placed["web-2"] is None
    assert "2 " + REJECTION in reason_of(document, "pg-web-2")


def test_a_running_pod_holds_its_host_port() -> None:
    document = one_node(
        with_ports(pod_manifest("old", node_name="n0"), port(80)),
        with_ports(pod_manifest("new"), port(80)),
    )
    assert nodes_of(document)["new"] is None


def test_a_releasing_pod_holds_its_port_until_it_is_gone() -> None:
    def cluster(newcomer: dict[str, Any]) -> list[ApiObject]:
        leaving = with_ports(pod_manifest("leaving", cpu="4", node_name="n0", terminating=True), port(80))
        return objects(node_manifest("n0", cpu="4"), queue_manifest("q"), leaving, newcomer)

    # Without the port, the newcomer is pipelined onto what the releasing pod frees.
    without = run(cluster(pod_manifest("new", cpu="4")), cycles=1)
    assert pipelines(without.cycles[0].decisions) == {"new": "n0"}

    # With it, the releasing pod still holds the port: the newcomer is neither bound nor pipelined there.
    first = run(cluster(with_ports(pod_manifest("new", cpu="4"), port(80))), cycles=1)
    assert first.cycles[0].decisions == []
    assert REJECTION in first.reasons["default/pg-new"]
    result = run(cluster(with_ports(pod_manifest("new", cpu="4"), port(80))), cycles=2)
    # Gone (the simulator deletes a terminating pod after the cycle that saw it): the port is free.
    assert binds(result.cycles[1].decisions) == {"new": "n0"}


def test_an_evicted_pod_holds_its_port_in_the_cycle_and_a_rollback_gives_placements_back() -> None:
    session = open_session(
        objects(
            node_manifest("n0"),
            queue_manifest("q"),
            with_ports(pod_manifest("victim", node_name="n0"), port(80)),
            with_ports(pod_manifest("pending"), port(80)),
            with_ports(pod_manifest("other"), port(80)),
        )
    )
    tasks = session.snapshot.tasks
    victim, pending, other = tasks["default/victim"], tasks["default/pending"], tasks["default/other"]
    assert not session.candidate_nodes(pending)[0]

    statement = session.statement("test")
    statement.evict(victim, "test")
    assert victim.status is TaskStatus.RELEASING
    assert not session.candidate_nodes(pending)[0]  # releasing: still on the node, still on the port
    statement.discard()

    # A placement made in the cycle holds the port for the next pod; undone, it no longer does.
    free = open_session(
        objects(
            node_manifest("n0"),
            queue_manifest("q"),
            with_ports(pod_manifest("pending"), port(80)),
            with_ports(pod_manifest("other"), port(80)),
        )
    )
    pending, other = free.snapshot.tasks["default/pending"], free.snapshot.tasks["default/other"]
    statement = free.statement("test")
    statement.allocate(pending, 0, (), "test")
    assert not free.candidate_nodes(other)[0]
    statement.discard()
    assert free.candidate_nodes(other)[0]


# --- what takes a host port --------------------------------------------------------------------------


def test_container_ports_without_a_host_port_never_clash() -> None:
    document = one_node(
        with_ports(pod_manifest("a"), {"containerPort": 80}),
        with_ports(pod_manifest("b"), {"containerPort": 80}),
        with_ports(pod_manifest("c"), port(80)),
        pod_manifest("plain"),
    )
    assert nodes_of(document) == {"a": "n0", "b": "n0", "c": "n0", "plain": "n0"}


def test_host_network_makes_every_container_port_a_host_port() -> None:
    host_network = with_ports(pod_manifest("agent"), {"containerPort": 9100})
    host_network["spec"]["hostNetwork"] = True
    document = one_node(host_network, with_ports(pod_manifest("exporter"), port(9100)))
    assert nodes_of(document) == {"agent": "n0", "exporter": None}


def test_sidecars_take_host_ports_but_init_containers_that_finish_do_not() -> None:
    sidecar = one_node(
        with_ports(pod_manifest("proxy"), port(15001), container="sidecar"),
        with_ports(pod_manifest("web"), port(15001)),
    )
    assert nodes_of(sidecar) == {"proxy": "n0", "web": None}
    init = one_node(
        with_ports(pod_manifest("setup"), port(15001), container="init"),
        with_ports(pod_manifest("web"), port(15001)),
    )
    assert nodes_of(init) == {"setup": "n0", "web": "n0"}


def test_jobs_with_other_host_ports_do_not_share_a_failed_jobs_fate() -> None:
    # `first` fails for its port; `second` has the same shape and constraints but another port.
    document = one_node(
        with_ports(pod_manifest("holder", node_name="n0"), port(80)),
        with_ports(pod_manifest("first"), port(80)),
        with_ports(pod_manifest("second"), port(81)),
    )
    assert nodes_of(document) == {"holder": "n0", "first": None, "second": "n0"}
