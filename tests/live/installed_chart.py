"""The chart installed as `helm install` installs it, run against the strict fake API server as a cluster
runs it: the CRDs and every rendered manifest created, and each Deployment's pods run as child processes
`kai-scheduler <the container's args>` with

- the token of the pod's ServiceAccount (`serviceAccountName`), in a kubeconfig of its own;
- its mounted ConfigMaps and Secrets written to files, its emptyDirs as folders (an argument naming a
  mount path is pointed at the folder);
- its environment as the container's `env` gives it (`fieldRef` names: the pod's name and namespace);
- free ports instead of the container's ports (`--metrics-port`, `--webhook-port`, the scheduler's
  plugin server), and the chart's Services routed to them (`FakeApiServer.expose_service`), so that the
  API server calls the admission webhooks through their Service, over TLS; a pod that loses a port to
  another process between the probe that found it free and its own bind is started again on other ports;
- `extra_args(pod)` appended to its args: what a test adds to the chart's (leader-election timing, say).

    chart = InstalledChart(server, tmp_path, {"allInOne": True})
    chart.install()
    with chart.running():
        await chart.until_ready()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from child_process import Child
from ports import free_port, http_status

from chart_support import CHART, NAMESPACE, RELEASE, render_chart
from kai_fakeapi import FakeApiServer

# What `helm install` creates first: the namespaces the rest lives in.
_FIRST_KINDS = ("Namespace", "CustomResourceDefinition", "ServiceAccount")


@dataclass
class ChartPod:
    """One replica of a Deployment, as a child process."""

    deployment: str
    index: int  # the pod's ordinal in its Deployment
    name: str
    service_account: str
    command: list[str]
    env: dict[str, str]
    ports: dict[str, int]  # container port name -> the free port it got
    child: Child | None = None

    def ready(self) -> bool:
        port = self.ports.get("metrics")
        return port is not None and http_status(f"http://127.0.0.1:{port}/readyz") == 200

    def kill(self) -> None:
        """SIGKILL (not waited for), as a node that dies: no graceful stop, nothing released."""
        assert self.child is not None
        self.child.process.kill()


@dataclass
class InstalledChart:
    server: FakeApiServer
    folder: Path
    overrides: Mapping[str, Any] = field(default_factory=dict)
    release: str = RELEASE
    namespace: str = NAMESPACE
    # Arguments a test adds to a pod's own (after the chart's and the rewritten ports).
    extra_args: Callable[[ChartPod], list[str]] = field(default=lambda pod: [])
    src: Path | None = None  # the kai_scheduler sources the pods run (default: as installed)
    pods: list[ChartPod] = field(default_factory=list)
    _ports: set[int] = field(default_factory=set)  # every port handed out: no two pods get the same one

    @property
    def documents(self) -> list[dict[str, Any]]:
        return [
            doc for _, doc in render_chart(self.overrides, release=self.release, namespace=self.namespace)
        ]

    def install(self) -> None:
        """Create what `helm install --create-namespace` creates: the release namespace, the CRDs, then the
        manifests (namespaces and ServiceAccounts first), straight into the store as an administrator."""
        store = self.server.store
        if store.try_get("namespaces", self.namespace) is None:
            store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        for path in sorted((CHART / "crds").glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            if store.try_get("customresourcedefinitions", crd["metadata"]["name"]) is None:
                store.create(crd)
        documents = sorted(
            self.documents,
            key=lambda d: _FIRST_KINDS.index(d["kind"]) if d["kind"] in _FIRST_KINDS else len(_FIRST_KINDS),
        )
        for document in documents:
            namespaced = document["kind"] not in _CLUSTER_KINDS
            namespace = (document["metadata"].get("namespace") or self.namespace) if namespaced else None
            store.create(copy.deepcopy(document), namespace=namespace)  # the rendering is shared

    # --- the Deployments' pods ------------------------------------------------------------------------

    def _deployments(self) -> list[dict[str, Any]]:
        return [d for d in self.documents if d["kind"] == "Deployment"]

    def prepare(self, replicas: int | None = None) -> list[ChartPod]:
        """Each Deployment's pods (`replicas` each, default the Deployment's), ready to start."""
        self.pods = []
        for deployment in self._deployments():
            count = replicas if replicas is not None else int(deployment["spec"].get("replicas", 1))
            for index in range(count):
                self.pods.append(self._pod(deployment, index))
        return self.pods

    def _pod(self, deployment: dict[str, Any], index: int) -> ChartPod:
        name = f"{deployment['metadata']['name']}-{index}"
        namespace = deployment["metadata"].get("namespace") or self.namespace
        spec = deployment["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        folder = self.folder / name
        folder.mkdir(parents=True, exist_ok=True)
        mounts = self._mounts(spec, container, namespace, folder)
        account = spec.get("serviceAccountName", "default")
        kubeconfig = self.server.write_kubeconfig(
            folder / "kubeconfig", namespace=namespace, service_account=(namespace, account)
        )
        ports = {
            port.get("name", str(port["containerPort"])): self._port() for port in container.get("ports", [])
        }
        ports.setdefault("metrics", self._port())
        args = [_remap(arg, mounts) for arg in container.get("args", [])]
        args = [
            a
            for a in args
            if not a.startswith(("--webhook-port=", "--metrics-port=", "--plugin-server-port="))
        ]
        args += [f"--kubeconfig={kubeconfig}", f"--metrics-port={ports['metrics']}"]
        if "webhook" in ports:
            args.append(f"--webhook-port={ports['webhook']}")
        if any(arg in ("--component=scheduler", "--all") for arg in args):
            ports["plugins"] = self._port()
            args.append(f"--plugin-server-port={ports['plugins']}")
        env = {key: os.environ[key] for key in ("PATH", "PYTHONPATH", "HOME") if key in os.environ}
        for variable in container.get("env", []):
            env[variable["name"]] = _in_mounts(_env_value(variable, name, namespace), mounts)
        env["TMPDIR"] = str(mounts.get("/tmp", folder))
        if self.src is not None:
            env["PYTHONPATH"] = str(self.src)
        command = [sys.executable, "-m", "kai_scheduler", *args]
        pod = ChartPod(deployment["metadata"]["name"], index, name, account, command, env, ports)
        pod.command += self.extra_args(pod)
        return pod

    def _port(self) -> int:
        port = free_port()
        while port in self._ports:
            port = free_port()
        self._ports.add(port)
        return port

    def _mounts(
        self, spec: dict[str, Any], container: dict[str, Any], namespace: str, folder: Path
    ) -> dict[str, Path]:
        """Mount path -> the folder that holds what the volume gives the container."""
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        mounts: dict[str, Path] = {}
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            target = folder / "volumes" / mount["name"]
            target.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                config_map = self.server.store.get("configmaps", volume["configMap"]["name"], namespace)
                for key, text in (config_map.get("data") or {}).items():
                    (target / key).write_text(text)
            elif "secret" in volume:
                secret = self.server.store.get("secrets", volume["secret"]["secretName"], namespace)
                for key, data in (secret.get("data") or {}).items():
                    (target / key).write_bytes(base64.b64decode(data))
            mounts[mount["mountPath"]] = target
        return mounts

    @contextlib.contextmanager
    def running(self, replicas: int | None = None) -> Iterator[InstalledChart]:
        """Start every Deployment's pods (and route the Services to them); stop them when the block ends. A
        failure in the block gets every process's output."""
        if not self.pods:
            self.prepare(replicas)
        self._route_services()
        for pod in self.pods:
            pod.child = Child(pod.command, pod.env)
        try:
            yield self
        except BaseException as error:
            self._stop()
            error.add_note(self.output())
            raise
        finally:
            self._stop()

    def _route_services(self) -> None:
        """Each Service of the chart to the port its first selected pod got for the target port's name."""
        for service in (d for d in self.documents if d["kind"] == "Service"):
            selector = service["spec"].get("selector") or {}
            for port in service["spec"]["ports"]:
                target = port.get("targetPort")
                for pod in self.pods:
                    labels = self._labels_of(pod.deployment)
                    if selector.items() <= labels.items() and target in pod.ports:
                        address = ("127.0.0.1", pod.ports[str(target)])
                        namespace = service["metadata"].get("namespace") or self.namespace
                        self.server.expose_service(
                            namespace, service["metadata"]["name"], port["port"], address
                        )
                        break

    def _labels_of(self, deployment: str) -> dict[str, str]:
        (found,) = [d for d in self._deployments() if d["metadata"]["name"] == deployment]
        return dict(found["spec"]["template"]["metadata"].get("labels") or {})

    def _stop(self) -> None:
        children = [pod.child for pod in self.pods if pod.child is not None]
        for child in children:
            if child.returncode is None:
                child.process.terminate()  # all at once: each then has the whole time to stop
        for child in children:
            child.stop()

    def output(self) -> str:
        return "\n".join(
            f"=== {pod.name}\n{pod.child.output()}" for pod in self.pods if pod.child is not None
        )

    async def until_ready(self, timeout: float = 120.0) -> None:
        """Every pod serves /readyz (its caches are synced); fails early when one exits, unless it lost a
        port race (then it is started again on other ports)."""
        deadline = time.monotonic() + timeout
        waiting = list(self.pods)
        while waiting:
            for pod in waiting:
                assert pod.child is not None
                if pod.child.returncode is not None:
                    self._restart(pod)
            waiting = [pod for pod in waiting if not await asyncio.to_thread(pod.ready)]
            if waiting and time.monotonic() > deadline:
                raise AssertionError(f"not ready in time: {[pod.name for pod in waiting]}")
            await asyncio.sleep(0.1)

    def _restart(self, pod: ChartPod) -> None:
        """A pod that exited because another process took a port it was given between the probe that
        found it free and its own bind (nothing reserves a port across processes), started again on other
        ports, its Services routed there; any other exit fails."""
        assert pod.child is not None
        pod.child.wait(10)
        if "address already in use" not in pod.child.stderr:
            raise AssertionError(f"{pod.name} exited with {pod.child.returncode}")
        (deployment,) = [d for d in self._deployments() if d["metadata"]["name"] == pod.deployment]
        fresh = self._pod(deployment, pod.index)
        pod.command, pod.ports = fresh.command, fresh.ports
        pod.child = Child(pod.command, pod.env)
        self._route_services()

    def alive(self) -> None:
        """Fail when a component process has exited."""
        for pod in self.pods:
            assert pod.child is not None
            if pod.child.returncode is not None:
                raise AssertionError(f"{pod.name} exited with {pod.child.returncode}")


_CLUSTER_KINDS = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "PriorityClass",
        "Queue",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "Topology",
        "SchedulingShard",
        "Config",
    }
)


def _remap(argument: str, mounts: Mapping[str, Path]) -> str:
    """An argument naming a file under a mount path, pointed at the folder that holds it."""
    flag, equals, value = argument.partition("=")
    return f"{flag}={_in_mounts(value, mounts)}" if equals else argument


def _in_mounts(value: str, mounts: Mapping[str, Path]) -> str:
    """A path under a mount path, pointed at the folder that holds it; any other value as it is."""
    for path, folder in mounts.items():
        if value == path or value.startswith(path.rstrip("/") + "/"):
            return f"{folder}{value[len(path.rstrip('/')) :]}"
    return value


def _env_value(variable: dict[str, Any], pod: str, namespace: str) -> str:
    if "value" in variable:
        return str(variable["value"])
    path = ((variable.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
    if path == "metadata.name":
        return pod
    if path == "metadata.namespace":
        return namespace
    raise AssertionError(f"the chart's env {variable['name']}: teach installed_chart.py {variable}")
