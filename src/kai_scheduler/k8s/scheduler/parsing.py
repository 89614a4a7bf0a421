"""How the state builder reads informer objects into the project's models: a pod of ours (and every
PodGroup) through `parse_object`, the simulator's own checks; other pods by schema only; each object parsed
once per version, and a failure logged once per version (one bad object never stops scheduling)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar, cast, get_args

from pydantic import ValidationError

from kai_scheduler.api import constants as c
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import (
    K8sModel,
    Pod,
    PodPhase,
)
from kai_scheduler.k8s.runtime.client import (
    JsonObject,
)
from kai_scheduler.k8s.runtime.objects import resource_version

log = logging.getLogger(__name__)


M = TypeVar("M", bound=K8sModel)


class Parsed(Generic[M]):
    """Parsed models by object key, re-parsed only when the resourceVersion changes, and (with `same_model`)
    not even then when the new version differs from the parsed one only where the model does not look."""

    def __init__(
        self,
        what: str,
        parse: Callable[[JsonObject, str], M],
        same_model: Callable[[JsonObject, JsonObject], bool] | None = None,
    ) -> None:
        self.what = what
        self.parse = parse
        self.same_model = same_model
        self.entries: dict[str, tuple[str, M | None]] = {}
        self.sources: dict[str, JsonObject] = {}  # key -> the object a model was parsed from (`same_model`)
        self.warned: set[tuple[str, str]] = set()
        # key -> why the object's current version does not parse (live mode says so on the object)
        self.errors: dict[str, Exception] = {}

    def get(self, key: str, obj: JsonObject) -> M | None:
        version = resource_version(obj)
        entry = self.entries.get(key)
        if entry is not None and entry[0] == version and version:
            return entry[1]
        if entry is not None and entry[1] is not None and self.same_model is not None:
            source = self.sources.get(key)
            if source is not None and self.same_model(source, obj):
                # The same model object keeps the cache's in-place path open (`ClusterCache.upsert_pod`).
                self.entries[key] = (version, entry[1])
                return entry[1]
        try:
            model: M | None = self.parse(obj, key)
        except (ManifestError, ValidationError, ValueError, TypeError) as error:
            if (key, version) not in self.warned:
                self.warned.add((key, version))
                log.warning("skipping %s %s (resourceVersion %s): %s", self.what, key, version, error)
            self.errors[key] = error
            model = None
        else:
            self.errors.pop(key, None)
        self.entries[key] = (version, model)
        if self.same_model is not None:
            self.sources[key] = obj
        return model

    def forget(self, key: str) -> None:
        self.entries.pop(key, None)
        self.sources.pop(key, None)
        self.errors.pop(key, None)

    def parse_all(
        self, cache: Mapping[str, JsonObject], label: str, skipped: list[str]
    ) -> list[tuple[str, JsonObject, M]]:
        """Every object of an informer's cache that parses, as (key, object, model), in key order; the
        others are named in `skipped` (`<label> <key>`); entries of vanished objects are forgotten."""
        parsed: list[tuple[str, JsonObject, M]] = []
        for key, obj in sorted(cache.items()):
            model = self.get(key, obj)
            if model is None:
                skipped.append(f"{label} {key}")
            else:
                parsed.append((key, obj, model))
        self.prune(set(cache))
        return parsed

    def models(self, cache: Mapping[str, JsonObject]) -> list[M]:
        """Every object of an informer's cache that parses, in key order (the kinds handed to the cache
        as a whole set, whose skipped objects only the log names)."""
        return [model for _, _, model in self.parse_all(cache, self.what, [])]

    def prune(self, alive: set[str]) -> list[M]:
        """Forget entries whose object is gone; returns their models."""
        gone = [key for key in self.entries if key not in alive]
        dropped = [model for key in gone if (model := self.entries.pop(key)[1]) is not None]
        for key in gone:
            self.sources.pop(key, None)
            self.errors.pop(key, None)
        self.warned = {item for item in self.warned if item[0] in alive}
        return dropped


def checked(kind: type[M]) -> Callable[[JsonObject, str], M]:
    def parse(obj: JsonObject, key: str) -> M:
        model = parse_object(obj, f"{kind.__name__} {key}", 1)
        if not isinstance(model, kind):
            raise ValueError(f"expected a {kind.__name__}, got {type(model).__name__}")
        return cast(M, model)

    return parse


def schema_only(kind: type[M]) -> Callable[[JsonObject, str], M]:
    def parse(obj: JsonObject, key: str) -> M:
        del key
        return kind.model_validate(obj)

    return parse


def by_schema(kind: type[M]) -> Parsed[M]:
    """A kind read by its schema only, named in the log by its model's name."""
    return Parsed(kind.__name__, schema_only(kind))


# A pod's (and a PodGroup's) model is made of its metadata and spec; what changes while it runs is read
# from the object itself (`_pod_facts`: spec.nodeName, status.phase, the GPU-group labels,
# deletionTimestamp) or by no one (the resourceVersion, managed fields, the rest of the status; a PodGroup's
# model has no status at all; of a pod's status only `resourceClaimStatuses` counts: where the DRA claims
# made from its templates are). A pod's model keeps `status.phase` and `spec.nodeName` as first parsed:
# nothing reads them there (the state export takes both from `PodState`).
_METADATA_UNREAD = frozenset({"resourceVersion", "managedFields", "generation"})


_POD_PHASES = frozenset(get_args(PodPhase))


def _model_input(obj: JsonObject) -> JsonObject:
    view = {key: value for key, value in obj.items() if key != "status"}
    status = obj.get("status")
    made = status.get("resourceClaimStatuses") if isinstance(status, dict) else None
    if made:  # the claims made from the pod's templates: where its DRA claims are
        view["status"] = {"resourceClaimStatuses": made}
    meta = view.get("metadata")
    if isinstance(meta, dict):
        view["metadata"] = {key: value for key, value in meta.items() if key not in _METADATA_UNREAD}
    spec = view.get("spec")
    if isinstance(spec, dict) and "nodeName" in spec:
        view["spec"] = {key: value for key, value in spec.items() if key != "nodeName"}
    return view


def same_pod_model(old: JsonObject, new: JsonObject) -> bool:
    """Whether the pod `new` parses to the same model as `old` did (bound, started, its status written):
    then that model can be kept. A status that would not validate is left to the parser to reject."""
    status = new.get("status")
    if status is not None and not isinstance(status, dict):
        return False
    phase = (status or {}).get("phase")
    if phase is not None and phase not in _POD_PHASES:
        return False
    return _model_input(old) == _model_input(new)


def same_pod_group_model(old: JsonObject, new: JsonObject) -> bool:
    """Whether the PodGroup `new` parses to the same model as `old` did (only its status was written)."""
    return _model_input(old) == _model_input(new)


def renamed(
    parse: Callable[[JsonObject, str], Pod], name: str, *, always: bool
) -> Callable[[JsonObject, str], Pod]:
    """`parse`, then the pod's schedulerName set to `name` (if `always`, else only if it says ours)."""

    def rename(obj: JsonObject, key: str) -> Pod:
        pod = parse(obj, key)
        current = pod.spec.scheduler_name
        if current != name and (always or current == c.SCHEDULER_NAME):
            pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"scheduler_name": name})})
        return pod

    return rename


__all__ = [
    "M",
    "Parsed",
    "by_schema",
    "checked",
    "renamed",
    "same_pod_group_model",
    "same_pod_model",
    "schema_only",
]
