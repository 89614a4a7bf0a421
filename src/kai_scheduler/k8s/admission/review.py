"""KAI's admission webhooks: AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out, over HTTPS.

Four webhooks, on the paths the chart registers:

| Path | Function | What it does |
|---|---|---|
| `/validate--v1-pod` | `review_pod_validation` | KAI's GPU-sharing rules for this scheduler's pods |
| `/mutate--v1-pod` | `review_pod_mutation` | GPU pods' `runtimeClassName`; the shared-GPU env |
| `/validate-scheduling-run-ai-v2-queue` | `review_queue_validation` | `spec.resources`; the Queue rules |
| `/validate-scheduling-run-ai-v2alpha2-podgroup` | `review_podgroup_validation` | the sub-group rules |

The rules are the simulator's own (`kai_scheduler.api.manifests`: `check_gpu_sharing`, `check_queue`,
`check_sub_groups`, after the same schema), so a manifest that `kai-scheduler simulate` refuses is refused
by a cluster too, with the same field path and words. A denial is HTTP-level success with `allowed: false`
and `status {code: 400, message}`, the message one line that starts with the field
(`metadata.annotations.gpu-fraction: must be between 0 and 1 ...`). The one rule the simulator does not
apply is the Queue webhook's `spec.resources` requirement (the simulator defaults a missing one).

Each `review_*` function takes the decoded JSON body and never raises: a malformed review (not a mapping,
no `request.uid`, an object of the wrong kind, ...) is answered with a denial that says what is wrong.

The mutation of a GPU-sharing pod (`gpu-fraction` or `gpu-memory`), KAI's admission `gpusharing` plugin:
the container named by `gpu-fraction-container-name` (default: the first of `spec.containers`; init
containers are never targets) gets its GPU's environment from two ConfigMaps that the binder writes before
it binds the pod (see `shared_gpu_config_maps`). Their name prefix is chosen here, where a pod created from
`generateName` has no name yet, and kept in the annotation `runai/shared-gpu-configmap`. The kubelet waits
for a referenced ConfigMap, so the container starts with `NVIDIA_VISIBLE_DEVICES`, `RUNAI_NUM_OF_GPUS` and
`GPU_PORTION` set.

`WebhookServer` serves them over TLS from a `tls.crt`/`tls.key` directory (a mounted Secret) and picks up
renewed certificates without a restart.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import secrets
import ssl
import string
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from pathlib import Path
from typing import Any, Final

from kai_scheduler.api import constants as c
from kai_scheduler.api.manifests import (
    InvalidField,
    check_gpu_sharing,
    check_queue,
    check_sub_groups,
    describe_value,
    short_repr,
    validate_schema,
)
from kai_scheduler.api.objects import Pod, PodGroup, Queue
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.k8s.runtime.http_server import AppHTTPServer, BackgroundHTTPServer, QuietHandler
from kai_scheduler.k8s.runtime.kai_objects import fraction_container_index, shared_gpu_config_maps

log = logging.getLogger(__name__)

REVIEW_API_VERSION: Final = "admission.k8s.io/v1"
REVIEW_KIND: Final = "AdmissionReview"

MUTATE_POD_PATH: Final = "/mutate--v1-pod"
VALIDATE_POD_PATH: Final = "/validate--v1-pod"
VALIDATE_QUEUE_PATH: Final = "/validate-scheduling-run-ai-v2-queue"
VALIDATE_PODGROUP_PATH: Final = "/validate-scheduling-run-ai-v2alpha2-podgroup"

WEBHOOK_PORT: Final = 9443
TLS_CERT_FILE: Final = "tls.crt"
TLS_KEY_FILE: Final = "tls.key"
DEFAULT_GPU_RUNTIME_CLASS: Final = "nvidia"
DENIED_CODE: Final = 400

_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
_CHECKED_OPERATIONS = frozenset({"CREATE", "UPDATE"})  # DELETE and CONNECT carry no new object
_DEFAULT_SCHEDULER = "default-scheduler"  # what the API server puts in spec.schedulerName when absent
_MAX_BODY_BYTES = 16 * 1024 * 1024  # the API server sends objects of at most ~3 MiB
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")
# A ConfigMap name (DNS-1123 subdomain) and its length limit.
_CONFIG_MAP_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_MAX_OBJECT_NAME = 253
# KAI's generated prefix: `<pod name or generateName>-<7 random chars>`, the base cut (to 50) so that
# `<prefix>-<container index>` stays within a DNS label (63), as KAI keeps it usable as a volume name.
_PREFIX_RANDOM_CHARS = 7
_PREFIX_MAX_BASE = 63 - _PREFIX_RANDOM_CHARS - 6
_PREFIX_CHARS = string.ascii_lowercase + string.digits

Review = dict[str, Any]
"""An AdmissionReview, as decoded JSON."""


# --- reviews --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Kind:
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


_POD = _Kind("", "v1", "Pod")
_QUEUE = _Kind("scheduling.run.ai", "v2", "Queue")
_PODGROUP = _Kind("scheduling.run.ai", "v2alpha2", "PodGroup")


class _Malformed(Exception):
    """The review itself is broken (not the object it carries)."""


@dataclass(frozen=True, slots=True)
class _Request:
    uid: str
    operation: str
    name: str
    namespace: str
    object: dict[str, Any] | None  # None for DELETE and CONNECT


def review_pod_validation(
    review: Any, *, scheduler_name: str = c.SCHEDULER_NAME, gpu_sharing_enabled: bool = True
) -> Review:
    """Allow or deny a Pod by KAI's GPU-sharing rules (pods of other schedulers are allowed unchecked).

    With `gpu_sharing_enabled=False` (KAI's `global.gpuSharing: false`) any `gpu-fraction` or `gpu-memory`
    annotation is refused as well."""
    return _guarded(
        review,
        _POD,
        partial(_validate_pod, scheduler_name=scheduler_name, gpu_sharing_enabled=gpu_sharing_enabled),
    )


def review_pod_mutation(
    review: Any,
    *,
    gpu_runtime_class: str = DEFAULT_GPU_RUNTIME_CLASS,
    scheduler_name: str = c.SCHEDULER_NAME,
) -> Review:
    """Allow a new Pod of this scheduler, with a JSONPatch that

    * sets `spec.runtimeClassName: <gpu_runtime_class>` when it is a GPU pod (whole GPUs, a GPU fraction
      or GPU memory, MIG instances) and has none (an empty `gpu_runtime_class` turns this off);
    * for a GPU-sharing pod (`gpu-fraction` or `gpu-memory`), points the target container's environment
      at the shared-GPU ConfigMaps (see the module doc and `shared_gpu_config_maps`), idempotently: a pod
      that was mutated already keeps its prefix and gets no second copy of an entry.

    Denied: a `gpu-fraction-container-name` that names no container of `spec.containers`, or a
    `runai/shared-gpu-configmap` that cannot prefix a ConfigMap name."""
    return _guarded(
        review,
        _POD,
        partial(_mutate_pod, gpu_runtime_class=gpu_runtime_class, scheduler_name=scheduler_name),
    )


def review_queue_validation(review: Any) -> Review:
    """Allow or deny a Queue: `spec.resources` must be given, and the simulator's Queue rules hold (not its
    own parent, non-negative minimum runtimes)."""
    return _guarded(review, _QUEUE, _validate_queue)


def review_podgroup_validation(review: Any) -> Review:
    """Allow or deny a PodGroup: sub-group names unique, every parent an existing sub-group, no cycles."""
    return _guarded(review, _PODGROUP, _validate_podgroup)


def allowed_response(uid: str, *, patch: list[dict[str, Any]] | None = None) -> Review:
    """An AdmissionReview that allows the request, with an optional JSONPatch."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}


def denied_response(uid: str, message: str) -> Review:
    """An AdmissionReview that denies the request with `message` (folded to one line), code 400."""
    return {
        "apiVersion": REVIEW_API_VERSION,
        "kind": REVIEW_KIND,
        "response": {
            "uid": uid,
            "allowed": False,
            "status": {
                "status": "Failure",
                "reason": "BadRequest",
                "code": DENIED_CODE,
                "message": _one_line(message),
            },
        },
    }


def _guarded(review: Any, kind: _Kind, decide: Callable[[_Request], Review]) -> Review:
    """Parse the review and hand the request to `decide`; whatever goes wrong comes back as a denial."""
    uid = _uid_of(review)
    try:
        request = _parse_review(review, kind)
        if request.object is None:
            return allowed_response(request.uid)
        return decide(request)
    except _Malformed as problem:
        return denied_response(uid, f"malformed AdmissionReview: {problem}")
    except InvalidField as problem:
        return denied_response(uid, _field_message(problem))
    except Exception as exc:  # a bug here must not turn into a 500 that blocks every pod
        log.exception("admission review for %s failed", kind)
        return denied_response(uid, f"internal error reviewing the {kind.kind}: {type(exc).__name__}: {exc}")


def _uid_of(review: Any) -> str:
    request = review.get("request") if isinstance(review, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else ""


def _parse_review(review: Any, kind: _Kind) -> _Request:
    if not isinstance(review, dict):
        raise _Malformed(f"expected a JSON object, got {describe_value(review)}")
    api_version, review_kind = review.get("apiVersion"), review.get("kind")
    if review_kind != REVIEW_KIND:
        raise _Malformed(f"kind: expected {REVIEW_KIND!r}, got {short_repr(review_kind)}")
    if api_version != REVIEW_API_VERSION:
        raise _Malformed(
            f"apiVersion: expected {REVIEW_API_VERSION!r} (the only version this webhook speaks), "
            f"got {short_repr(api_version)}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise _Malformed(f"request: expected a mapping, got {describe_value(request)}")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise _Malformed(f"request.uid: expected a non-empty string, got {short_repr(uid)}")
    operation = request.get("operation")
    if operation not in _OPERATIONS:
        known = ", ".join(sorted(_OPERATIONS))
        raise _Malformed(f"request.operation: expected one of {known}, got {short_repr(operation)}")
    _check_request_kind(request.get("kind"), kind)
    name = request.get("name")
    namespace = request.get("namespace")
    name = name if isinstance(name, str) else ""
    namespace = namespace if isinstance(namespace, str) else ""
    if operation not in _CHECKED_OPERATIONS:
        return _Request(uid, operation, name, namespace, None)
    obj = request.get("object")
    if not isinstance(obj, dict):
        raise _Malformed(f"request.object: expected the {kind.kind} as a mapping, got {describe_value(obj)}")
    obj_kind, obj_version = obj.get("kind", kind.kind), obj.get("apiVersion", kind.api_version)
    if obj_kind != kind.kind or obj_version != kind.api_version:
        shown = " ".join(v if isinstance(v, str) else short_repr(v) for v in (obj_version, obj_kind))
        raise _Malformed(f"request.object: this webhook reviews {kind}, got {shown}")
    return _Request(uid, operation, name, namespace, obj)


def _check_request_kind(value: Any, kind: _Kind) -> None:
    """`request.kind` ({group, version, kind}) must be the webhook's kind; it may be absent."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise _Malformed(f"request.kind: expected a mapping, got {describe_value(value)}")
    got = (value.get("group", ""), value.get("version"), value.get("kind"))
    if got != (kind.group, kind.version, kind.kind):
        group, version, name = (v if isinstance(v, str) else short_repr(v) for v in got)
        shown = f"{group}/{version}" if group else version
        raise _Malformed(f"request.kind: this webhook reviews {kind}, got {shown} {name}")


def _named(request: _Request, obj: dict[str, Any]) -> dict[str, Any]:
    """The object with the name the schema needs: pods created from `generateName` arrive without one."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or (isinstance(metadata.get("name"), str) and metadata["name"]):
        return obj  # fine as it is, or the schema will name what is wrong with metadata
    generated = metadata.get("generateName")
    name = request.name or (generated if isinstance(generated, str) and generated else "") or "unnamed"
    return {**obj, "metadata": {**metadata, "name": name}}


def _field_message(problem: InvalidField) -> str:
    return f"{problem.field}: {problem.message}" if problem.field else problem.message


# Pods.


def _is_for_scheduler(obj: Mapping[str, Any], scheduler_name: str) -> bool:
    spec = obj.get("spec")
    name = spec.get("schedulerName", _DEFAULT_SCHEDULER) if isinstance(spec, dict) else _DEFAULT_SCHEDULER
    return bool(name == scheduler_name)


def _validate_pod(request: _Request, *, scheduler_name: str, gpu_sharing_enabled: bool) -> Review:
    obj = request.object
    assert obj is not None
    if not _is_for_scheduler(obj, scheduler_name):
        return allowed_response(request.uid)
    pod = validate_schema(Pod, _pod_sharing_view(_named(request, obj)))
    check_gpu_sharing(pod)
    if not gpu_sharing_enabled:
        for key in (c.GPU_FRACTION_ANNOTATION, c.GPU_MEMORY_ANNOTATION):
            if key in pod.metadata.annotations:
                raise InvalidField(
                    f"metadata.annotations.{key}",
                    "GPU sharing is disabled in this cluster; request whole GPUs with nvidia.com/gpu",
                )
    return allowed_response(request.uid)


def _pod_sharing_view(obj: dict[str, Any]) -> dict[str, Any]:
    """The parts of a pod the GPU-sharing rules read (metadata, containers' resources), at their own paths.

    Only these go through the schema: the API server has validated the rest, and a field the project's
    model does not know the way the API server does must not make the webhook refuse a valid pod."""
    view: dict[str, Any] = {key: obj[key] for key in ("apiVersion", "kind") if key in obj}
    metadata = obj.get("metadata")
    view["metadata"] = (
        {key: metadata[key] for key in ("name", "namespace", "annotations") if key in metadata}
        if isinstance(metadata, dict)
        else metadata
    )
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        if spec is not None:
            view["spec"] = spec
        return view
    view["spec"] = {
        key: [_container_view(container) for container in spec[key]]
        if isinstance(spec[key], list)
        else spec[key]
        for key in ("containers", "initContainers")
        if key in spec
    }
    return view


def _container_view(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    return {key: container[key] for key in ("name", "resources") if key in container}


def _mutate_pod(request: _Request, *, gpu_runtime_class: str, scheduler_name: str) -> Review:
    obj = request.object
    assert obj is not None
    spec = obj.get("spec")
    if (
        request.operation != "CREATE"  # runtimeClassName and a container's env cannot change afterwards
        or not isinstance(spec, dict)
        or not _is_for_scheduler(obj, scheduler_name)
    ):
        return allowed_response(request.uid)
    patch: list[dict[str, Any]] = []
    if gpu_runtime_class and not spec.get("runtimeClassName") and _uses_gpus(obj, spec):
        # `add` also replaces a null or empty runtimeClassName.
        patch.append({"op": "add", "path": "/spec/runtimeClassName", "value": gpu_runtime_class})
    patch.extend(_gpu_sharing_patch(obj, spec))
    return allowed_response(request.uid, patch=patch)


def uses_gpu_sharing(obj: Mapping[str, Any]) -> bool:
    """Whether a pod asks for a shared GPU (`gpu-fraction` or `gpu-memory`)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return isinstance(annotations, dict) and (
        c.GPU_FRACTION_ANNOTATION in annotations or c.GPU_MEMORY_ANNOTATION in annotations
    )


def _gpu_sharing_patch(obj: Mapping[str, Any], spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSONPatch that gives a GPU-sharing pod's target container its shared-GPU environment (none for
    other pods, or when it has it already)."""
    containers = spec.get("containers")
    if not uses_gpu_sharing(obj) or not isinstance(containers, list) or not containers:
        return []  # a pod without containers: the API server refuses it
    index = fraction_container_index(obj)
    container = containers[index]
    if not isinstance(container, dict):
        return []  # not a container: the API server refuses the pod
    metadata = obj["metadata"]
    annotations = metadata["annotations"]
    patch: list[dict[str, Any]] = []
    prefix = annotations.get(c.SHARED_GPU_CONFIGMAP_ANNOTATION)
    if prefix is None or prefix == "":
        prefix = _new_config_map_prefix(metadata)
        key = c.SHARED_GPU_CONFIGMAP_ANNOTATION.replace("~", "~0").replace("/", "~1")
        patch.append({"op": "add", "path": f"/metadata/annotations/{key}", "value": prefix})
    capabilities, direct = shared_gpu_config_maps(_checked_prefix(prefix, index), index)

    def from_key(name: str) -> dict[str, Any]:
        return {"name": name, "valueFrom": {"configMapKeyRef": {"name": capabilities, "key": name}}}

    env = container.get("env")
    env = env if isinstance(env, list) else []
    wanted_env = _with_env(env, [from_key(c.NVIDIA_VISIBLE_DEVICES_ENV), from_key(c.NUM_OF_GPUS_ENV)])
    if wanted_env != env:
        # `add` on a member that exists replaces it: the whole list, as the pod was sent.
        patch.append({"op": "add", "path": f"/spec/containers/{index}/env", "value": wanted_env})
    env_from = container.get("envFrom")
    env_from = env_from if isinstance(env_from, list) else []
    if not any(
        isinstance(source, dict)
        and isinstance(source.get("configMapRef"), dict)
        and source["configMapRef"].get("name") == direct
        for source in env_from
    ):
        patch.append(
            {
                "op": "add",
                "path": f"/spec/containers/{index}/envFrom",
                "value": [*env_from, {"configMapRef": {"name": direct}}],
            }
        )
    return patch


def _with_env(env: list[Any], wanted: list[dict[str, Any]]) -> list[Any]:
    """`env` with each wanted entry in place of the entries of its name (kept where the first one was), or
    appended."""
    result = list(env)
    for entry in wanted:
        positions = [
            i for i, item in enumerate(result) if isinstance(item, dict) and item.get("name") == entry["name"]
        ]
        if not positions:
            result.append(entry)
            continue
        result[positions[0]] = entry
        for i in reversed(positions[1:]):
            del result[i]
    return result


def _new_config_map_prefix(metadata: Mapping[str, Any]) -> str:
    """`<base>-<7 random chars>`, the base being the pod's name, or its `generateName` (a pod created from
    one has no name yet at admission), made a DNS label and cut to keep the names short (KAI's scheme)."""
    base = ""
    for key in ("name", "generateName"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            base = value
            break
    base = re.sub(r"[^a-z0-9-]+", "-", base.lower())[:_PREFIX_MAX_BASE].strip("-") or "pod"
    suffix = "".join(secrets.choice(_PREFIX_CHARS) for _ in range(_PREFIX_RANDOM_CHARS))
    return f"{base}-{suffix}"


def _checked_prefix(prefix: Any, index: int) -> str:
    """A given `runai/shared-gpu-configmap` (a re-admitted pod, or the user's own) must make ConfigMap
    names: refusing it here beats a binder that can never write the ConfigMaps."""
    longest = f"-{index}{c.SHARED_GPU_ENV_CONFIGMAP_SUFFIX}"
    if (
        isinstance(prefix, str)
        and _CONFIG_MAP_NAME.fullmatch(prefix)
        and len(prefix) + len(longest) <= _MAX_OBJECT_NAME
    ):
        return prefix
    raise InvalidField(
        f"metadata.annotations.{c.SHARED_GPU_CONFIGMAP_ANNOTATION}",
        f"{short_repr(prefix)} cannot prefix a ConfigMap name: lowercase letters, digits, '-' and '.', "
        f"starting and ending with a letter or digit, at most {_MAX_OBJECT_NAME - len(longest)} characters; "
        "leave the annotation out and the webhook picks one",
    )


def _uses_gpus(obj: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    """Whole GPUs, MIG instances (requests or limits of any container), or a shared GPU (annotations)."""
    if uses_gpu_sharing(obj):
        return True
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        for container in containers:
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for section in ("limits", "requests"):
                amounts = resources.get(section)
                if isinstance(amounts, dict) and any(
                    _is_gpu_resource(name) and _positive(amount) for name, amount in amounts.items()
                ):
                    return True
    return False


def _is_gpu_resource(name: Any) -> bool:
    return isinstance(name, str) and (name == c.GPU_RESOURCE or name.startswith(c.MIG_RESOURCE_PREFIX))


def _positive(amount: Any) -> bool:
    try:
        return parse_quantity(amount) > 0
    except ValueError:
        return False  # not a quantity: the API server's validation refuses the pod


# Queues and PodGroups.


def _validate_queue(request: _Request) -> Review:
    obj = request.object
    assert obj is not None
    spec = obj.get("spec")
    if spec is None or (isinstance(spec, dict) and spec.get("resources") is None):
        # KAI's Queue webhook; the simulator instead defaults a missing `resources` (quota 0, no limit).
        raise InvalidField(
            "spec.resources",
            "required field is missing; give the queue's gpu, cpu and memory quota and limit",
        )
    check_queue(validate_schema(Queue, _named(request, obj)))
    return allowed_response(request.uid)


def _validate_podgroup(request: _Request) -> Review:
    obj = request.object
    assert obj is not None
    check_sub_groups(validate_schema(PodGroup, _named(request, obj)))
    return allowed_response(request.uid)


def _one_line(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text)


# --- TLS ------------------------------------------------------------------------------------------


class CertificateReloader:
    """The server's TLS context from `<cert_dir>/tls.crt` and `tls.key`, rebuilt when either file changes.

    Kubernetes updates a mounted Secret by swapping a symlink, and cert-manager renews certificates before
    they expire; `context()` notices (at most once per `check_interval` seconds) and loads the new pair. A
    pair that does not load (mid-update, a key that does not match) keeps the previous context until the
    next check. The first load must succeed: the constructor raises (OSError, ssl.SSLError) otherwise."""

    def __init__(
        self,
        cert_dir: str | os.PathLike[str],
        *,
        cert_file: str = TLS_CERT_FILE,
        key_file: str = TLS_KEY_FILE,
        check_interval: float = 1.0,
    ) -> None:
        directory = Path(cert_dir)
        self.cert_path = directory / cert_file
        self.key_path = directory / key_file
        self.check_interval = check_interval
        self._lock = threading.Lock()
        self._signature = self._stat()
        self._context = self._load()
        self._checked = time.monotonic()
        self.reloads = 0
        """How many times a changed pair was loaded (for tests and logs)."""

    def context(self) -> ssl.SSLContext:
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= self.check_interval:
                self._checked = now
                self._maybe_reload()
            return self._context

    def _maybe_reload(self) -> None:
        try:
            signature = self._stat()
        except OSError as exc:
            log.warning("TLS files unreadable, keeping the current certificate: %s", exc)
            return
        if signature == self._signature:
            return
        try:
            context = self._load()
        except (OSError, ssl.SSLError) as exc:
            log.warning("new TLS certificate does not load yet, keeping the current one: %s", exc)
            return
        self._context, self._signature = context, signature
        self.reloads += 1
        log.info("loaded a new TLS certificate from %s", self.cert_path)

    def _stat(self) -> tuple[tuple[int, int, int], ...]:
        return tuple(
            (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            for stat in (os.stat(self.cert_path), os.stat(self.key_path))
        )

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_path, self.key_path)
        return context


# --- the HTTPS server -----------------------------------------------------------------------------


Reviewer = Callable[[Any], Review]


class _TLSServer(AppHTTPServer):
    """Wraps each accepted connection with the reloader's current context; the handshake happens in the
    connection's own thread, so a slow or broken client never holds up `accept`."""

    def __init__(self, *args: Any, reloader: CertificateReloader, **kwargs: Any) -> None:
        self.reloader = reloader
        super().__init__(*args, **kwargs)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        try:
            wrapped = self.reloader.context().wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False
            )
        except (OSError, ValueError):
            sock.close()
            raise OSError("TLS wrap failed") from None
        return wrapped, address


class _WebhookHandler(QuietHandler):
    def setup(self) -> None:
        super().setup()
        self.handshake_ok = True
        try:
            self.request.do_handshake()
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError; timeouts too
            log.debug("TLS handshake with %s failed: %s", self.client_address, exc)
            self.handshake_ok = False

    def handle(self) -> None:
        if self.handshake_ok:
            super().handle()

    def do_POST(self) -> None:
        body = self._read_body()
        if body is None:
            return
        reviewers: Mapping[str, Reviewer] = self.app
        path = self.path.split("?", 1)[0]
        reviewer = reviewers.get(path)
        if reviewer is None:
            self.send_text(HTTPStatus.NOT_FOUND, f"no webhook at {path}; try {', '.join(sorted(reviewers))}")
            return
        try:
            review = json.loads(body)
        except (ValueError, RecursionError) as exc:
            self._send_review(
                HTTPStatus.BAD_REQUEST, denied_response("", f"malformed AdmissionReview: not JSON: {exc}")
            )
            return
        self._send_review(HTTPStatus.OK, reviewer(review))

    def _read_body(self) -> bytes | None:
        """The request body (Content-Length or chunked); None after answering a request without a usable one
        (the connection is then closed, as the rest of the body cannot be skipped reliably)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            self.close_connection = True
            self.send_text(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required")
            return None
        length = int(length_text)
        if length > _MAX_BODY_BYTES:
            self.close_connection = True
            self.send_text(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {_MAX_BODY_BYTES} bytes")
            return None
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes | None:
        chunks: list[bytes] = []
        total = 0
        while True:
            size_line = self.rfile.readline(1024).split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                size = -1
            if size < 0 or total + size > _MAX_BODY_BYTES:
                self.close_connection = True
                self.send_text(HTTPStatus.BAD_REQUEST, "a bad or too large chunked body")
                return None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline(1024)  # the CRLF after the chunk
            total += size

    def do_GET(self) -> None:
        self.send_text(HTTPStatus.METHOD_NOT_ALLOWED, "webhooks take a POST of an AdmissionReview")

    def _send_review(self, status: HTTPStatus, review: Review) -> None:
        self.send_body(status, json.dumps(review).encode(), "application/json")


def webhook_routes(
    *,
    scheduler_name: str = c.SCHEDULER_NAME,
    gpu_runtime_class: str = DEFAULT_GPU_RUNTIME_CLASS,
    gpu_sharing_enabled: bool = True,
) -> dict[str, Reviewer]:
    """Path -> review function, configured, for the four webhooks the chart registers."""
    return {
        VALIDATE_POD_PATH: partial(
            review_pod_validation, scheduler_name=scheduler_name, gpu_sharing_enabled=gpu_sharing_enabled
        ),
        MUTATE_POD_PATH: partial(
            review_pod_mutation, gpu_runtime_class=gpu_runtime_class, scheduler_name=scheduler_name
        ),
        VALIDATE_QUEUE_PATH: review_queue_validation,
        VALIDATE_PODGROUP_PATH: review_podgroup_validation,
    }


class WebhookServer(BackgroundHTTPServer):
    """The four webhooks over HTTPS on `host:port` (default every interface, 9443), with the certificate
    and key `tls.crt`/`tls.key` from `cert_dir`, reloaded when they change (see `CertificateReloader`).

    `start()` raises when the certificate does not load or the port cannot be bound."""

    def __init__(
        self,
        cert_dir: str | os.PathLike[str],
        *,
        host: str = "0.0.0.0",
        port: int = WEBHOOK_PORT,
        scheduler_name: str = c.SCHEDULER_NAME,
        gpu_runtime_class: str = DEFAULT_GPU_RUNTIME_CLASS,
        gpu_sharing_enabled: bool = True,
        reload_interval: float = 1.0,
    ) -> None:
        routes = webhook_routes(
            scheduler_name=scheduler_name,
            gpu_runtime_class=gpu_runtime_class,
            gpu_sharing_enabled=gpu_sharing_enabled,
        )
        super().__init__(_WebhookHandler, routes, host=host, port=port, name="admission")
        self.cert_dir = Path(cert_dir)
        self.reload_interval = reload_interval
        self.reloader: CertificateReloader | None = None

    def _make_server(self) -> AppHTTPServer:
        self.reloader = CertificateReloader(self.cert_dir, check_interval=self.reload_interval)
        return _TLSServer(
            (self.host, self.port), self._handler, self._app, name=self.name, reloader=self.reloader
        )


__all__ = [
    "DEFAULT_GPU_RUNTIME_CLASS",
    "DENIED_CODE",
    "MUTATE_POD_PATH",
    "REVIEW_API_VERSION",
    "TLS_CERT_FILE",
    "TLS_KEY_FILE",
    "VALIDATE_PODGROUP_PATH",
    "VALIDATE_POD_PATH",
    "VALIDATE_QUEUE_PATH",
    "WEBHOOK_PORT",
    "CertificateReloader",
    "Review",
    "Reviewer",
    "WebhookServer",
    "allowed_response",
    "denied_response",
    "review_pod_mutation",
    "review_pod_validation",
    "review_podgroup_validation",
    "review_queue_validation",
    "uses_gpu_sharing",
    "webhook_routes",
]
