"""Reading the cluster: the API client of `kai-scheduler run` (lightkube's kubeconfig handling, the
project's CRD kinds) on the user's kubeconfig, with the errors a user can meet turned into `PluginError`s
of one line."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import aiohttp

from kai_scheduler.k8s.runtime.client import ApiStatusError, JsonObject, ResourceKind
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

T = TypeVar("T")
TIMEOUT_SECONDS = 30.0

NOT_FOUND = 1  # exit status: what was asked about does not exist, or the input is wrong
UNREACHABLE = 2  # exit status: the cluster cannot be read (kubeconfig, connection, permissions)


class PluginError(Exception):
    """One line for the user, and the exit status."""

    def __init__(self, message: str, status: int = NOT_FOUND) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Cluster:
    """A connected client and the namespace of the kubeconfig's context (or `-n`)."""

    client: LightkubeClient
    namespace: str

    async def list(self, kind: ResourceKind, namespace: str | None = None) -> list[JsonObject]:
        items, _ = await self.client.list_objects(kind, namespace)
        return items

    async def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> JsonObject | None:
        """The object, or None when there is none of that name."""
        try:
            return await self.client.get(kind, name, namespace)
        except ApiStatusError as error:
            if error.code == 404:
                return None
            raise


def run(kubeconfig: str | None, namespace: str | None, work: Callable[[Cluster], Awaitable[T]]) -> T:
    """Connect with the kubeconfig (default: in-cluster, $KUBECONFIG, ~/.kube/config) and run `work`."""
    if kubeconfig is not None and not Path(kubeconfig).is_file():
        raise PluginError(f"kubeconfig {kubeconfig}: no such file", UNREACHABLE)
    try:
        client = LightkubeClient.from_kubeconfig(kubeconfig, timeout=TIMEOUT_SECONDS)
    except Exception as error:  # lightkube's configuration errors have no common base
        raise PluginError(f"kubeconfig: {error}", UNREACHABLE) from None
    return asyncio.run(_with(client, namespace, work))


async def _with(client: LightkubeClient, namespace: str | None, work: Callable[[Cluster], Awaitable[T]]) -> T:
    try:
        return await work(Cluster(client, namespace or client.namespace))
    except ApiStatusError as error:
        what = "permission denied" if error.code in (401, 403) else f"status {error.code}"
        raise PluginError(f"the API server answered {what}: {error}", UNREACHABLE) from None
    except (ConnectionError, OSError, TimeoutError, aiohttp.ClientError) as error:
        reason = str(error) or type(error).__name__
        raise PluginError(f"cannot reach the API server {client.base_url}: {reason}", UNREACHABLE) from None
    finally:
        await client.aclose()


__all__ = ["NOT_FOUND", "UNREACHABLE", "Cluster", "PluginError", "run"]
