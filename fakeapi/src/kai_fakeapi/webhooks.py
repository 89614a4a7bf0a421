"""The API server's admission webhook chain (opt-in: `FakeApiServer(admission_webhooks=True)`).

Every HTTP create, update, patch and delete, subresources included, goes after defaulting and before it
is stored (`admitted.py`) through the MutatingWebhookConfigurations, then the
ValidatingWebhookConfigurations in the store, as kube-apiserver's MutatingAdmissionWebhook and
ValidatingAdmissionWebhook plugins pass it: configurations in name order and their webhooks in their
order (`webhook_rules.py` decides which are for the request, `match_conditions.py` reads their
`matchConditions`); an AdmissionReview (admission.k8s.io/v1) sent (`webhook_client.py`); JSONPatch
answers applied (a webhook with `reinvocationPolicy: IfNeeded` called once more when a later one changed
the object); denials, and failures under `failurePolicy: Fail`, answered with the API server's errors;
warnings passed on; dry runs refused to a webhook with side effects. Validating webhooks are called one
after another (the API server calls them at once) and the first refusal in their order is the answer.
Each call is recorded (`calls`).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from . import match_conditions, webhook_client
from .admission_request import Attributes, WriteRequest
from .errors import ApiError
from .jsoncopy import clone
from .meta import Obj
from .patch import json_patch
from .webhook_client import CallFailed
from .webhook_rules import Invocation, invocation

if TYPE_CHECKING:
    from .writes import ObjectApi

MUTATING = "mutatingwebhookconfigurations.admissionregistration.k8s.io"
VALIDATING = "validatingwebhookconfigurations.admissionregistration.k8s.io"
REVIEW_VERSIONS = ("v1", "v1beta1")
DEFAULT_TIMEOUT = 10


@dataclass(frozen=True)
class WebhookCall:
    """One call of a webhook (see `FakeApiServer.webhook_calls`)."""

    configuration: str
    webhook: str
    mutating: bool
    review: Obj
    """The AdmissionReview sent."""
    response: Obj | None
    """The AdmissionReview answered; None when the call failed."""
    error: str | None
    """Why the call failed (its failurePolicy then decided)."""


class AdmissionWebhooks:
    """The webhook chain on the store's configurations; a routing table for Services' ports."""

    def __init__(self, api: ObjectApi) -> None:
        self.api = api
        self._lock = threading.Lock()
        self._services: dict[tuple[str, str, int], tuple[str, int]] = {}
        self._calls: list[WebhookCall] = []

    def expose_service(self, namespace: str, name: str, port: int, address: tuple[str, int]) -> None:
        """Serve Service `namespace/name`'s `port` at `address` (host, port), as a cluster's network would."""
        with self._lock:
            self._services[(namespace, name, port)] = address

    def calls(self, webhook: str | None = None) -> list[WebhookCall]:
        """Webhook calls so far, oldest first (of the webhook named `webhook`, if given)."""
        with self._lock:
            return [c for c in self._calls if webhook is None or c.webhook == webhook]

    # ----------------------------------------------------------------------------------- the chain

    def mutate(self, attrs: Attributes, request: WriteRequest) -> Obj | None:
        obj = attrs.object
        invoked: list[str] = []  # reinvocable webhooks called so far
        again: set[str] = set()
        hooks = self._hooks(MUTATING)
        for reinvocation in (False, True):
            for configuration, hook in hooks:
                key = f"{configuration}/{hook.get('name')}"
                if reinvocation and key not in again:
                    continue
                current = replace(attrs, object=obj)
                found = self._invocation(hook, current, request)
                if found is None:
                    continue
                changed = self._mutating_call(configuration, hook, found, current, request)
                if changed is not None and changed != obj:
                    obj = changed
                    again.update(invoked)
                if hook.get("reinvocationPolicy") == "IfNeeded" and not reinvocation:
                    invoked.append(key)
            if not again:
                break
        return obj

    def validate(self, attrs: Attributes, request: WriteRequest) -> None:
        errors: list[ApiError] = []
        for configuration, hook in self._hooks(VALIDATING):
            found = self._invocation(hook, attrs, request)
            if found is None:
                continue
            try:
                self._call(configuration, hook, found, attrs, request, mutating=False)
            except ApiError as err:
                errors.append(err)
        if errors:
            raise errors[0]

    def _hooks(self, key: str) -> list[tuple[str, Obj]]:
        with self.api.objects.lock:
            configurations = sorted(
                self.api.objects.of_type(key).values(), key=lambda c: str(c["metadata"]["name"])
            )
            return [
                (str(c["metadata"]["name"]), clone(hook))
                for c in configurations
                for hook in c.get("webhooks") or []
                if isinstance(hook, dict)
            ]

    def _invocation(self, hook: Obj, attrs: Attributes, request: WriteRequest) -> Invocation | None:
        found = invocation(hook, attrs, self.api.registry, self._namespace_labels)
        if found is None:
            return None
        review = _review("", "v1", found, attrs, request.user)["request"]
        obj, old = review.pop("object"), review.pop("oldObject")
        return found if match_conditions.hold(hook, attrs, obj, old, review) else None

    def _namespace_labels(self, name: str) -> dict[str, str] | None:
        with self.api.objects.lock:
            ns = self.api.objects.find(self.api.registry.resolve("namespaces"), None, name)
            return None if ns is None else dict((ns.get("metadata") or {}).get("labels") or {})

    # ------------------------------------------------------------------------------------- one call

    def _mutating_call(
        self, configuration: str, hook: Obj, found: Invocation, attrs: Attributes, request: WriteRequest
    ) -> Obj | None:
        """The object as this webhook's patch leaves it; None when it sent none (or failed, ignored)."""
        answered = self._call(configuration, hook, found, attrs, request, mutating=True)
        if answered is None or not answered.get("patch"):
            return None
        try:
            operations = json.loads(base64.b64decode(str(answered["patch"]), validate=True))
        except (binascii.Error, ValueError) as exc:
            self._failed(
                configuration, hook, None, f"received undecodable patch in webhook response: {exc}", True
            )
            return None
        if not operations:
            return None
        name = hook.get("name")
        if attrs.object is None:
            raise _internal(
                f'admission webhook "{name}" attempted to modify the object, '
                "which is not supported for this operation"
            )
        if answered.get("patchType") != "JSONPatch":
            why = f'unsupported patch type "{answered.get("patchType")}"'
            self._failed(configuration, hook, None, why, True)
            return None
        try:
            patched = json_patch(_served(attrs.object, found, attrs), operations)
        except ApiError as err:
            raise _internal(err.message) from None
        if not isinstance(patched, dict):
            raise _internal("the patched object is not a JSON object")
        patched["apiVersion"] = attrs.object.get("apiVersion")  # back to the request's version
        return patched

    def _call(
        self,
        configuration: str,
        hook: Obj,
        found: Invocation,
        attrs: Attributes,
        request: WriteRequest,
        *,
        mutating: bool,
    ) -> Obj | None:
        """Call the webhook: its `response`, which allowed the request; None when the call failed and the
        failurePolicy ignores that. Raises the denial, or the failure under `Fail`."""
        name = str(hook.get("name"))
        if attrs.dry_run:
            side_effects = hook.get("sideEffects")
            if side_effects is None:
                self._failed(configuration, hook, None, "Webhook SideEffects is nil", mutating)
                return None
            if side_effects not in ("None", "NoneOnDryRun"):
                raise ApiError(400, f'admission webhook "{name}" does not support dry run')
        version = next((v for v in hook.get("admissionReviewVersions") or [] if v in REVIEW_VERSIONS), None)
        uid = str(uuid.uuid4())
        review = _review(uid, version or "v1", found, attrs, request.user)
        if version is None:
            self._failed(
                configuration,
                hook,
                review,
                "could not create admission objects: webhook does not accept known AdmissionReview versions",
                mutating,
            )
            return None
        timeout = int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT)
        try:
            answer = webhook_client.post(hook.get("clientConfig") or {}, review, timeout, self._address)
            response = _verified(uid, version, answer, mutating=mutating)
        except CallFailed as exc:
            self._failed(configuration, hook, review, str(exc), mutating)
            return None
        self._record(WebhookCall(configuration, name, mutating, review, answer, None))
        request.warnings.extend(str(w) for w in response.get("warnings") or [])
        if not response.get("allowed"):
            raise _denied(name, response.get("status"))
        return response

    def _failed(self, configuration: str, hook: Obj, review: Obj | None, why: str, mutating: bool) -> None:
        """A call that failed: recorded; raised as the API server's error unless `failurePolicy: Ignore`."""
        name = str(hook.get("name"))
        self._record(WebhookCall(configuration, name, mutating, review or {}, None, why))
        if hook.get("failurePolicy") == "Ignore":
            return None
        raise _internal(f'failed calling webhook "{name}": {why}')

    def _record(self, call: WebhookCall) -> None:
        with self._lock:
            self._calls.append(call)

    def _address(self, namespace: str, name: str, port: int) -> tuple[str, int] | None:
        with self._lock:
            return self._services.get((namespace, name, port))


def _served(obj: Obj | None, found: Invocation, attrs: Attributes) -> Obj | None:
    """The object in the version the webhook gets it in."""
    if obj is None or found.rt is attrs.rt or attrs.kind is not None:
        return obj
    return {**obj, "apiVersion": found.rt.api_version}


def _gvk(group: str, version: str, kind: str) -> Obj:
    return {"group": group, "version": version, "kind": kind}


def _gvr(group: str, version: str, resource: str) -> Obj:
    return {"group": group, "version": version, "resource": resource}


def _review(uid: str, version: str, found: Invocation, attrs: Attributes, user: Obj) -> Obj:
    """The AdmissionReview kube-apiserver sends (absent fields left out as Go's encoder leaves them)."""
    request: Obj = {
        "uid": uid,
        "kind": _gvk(*found.kind),
        "resource": _gvr(found.rt.group, found.rt.version, found.rt.plural),
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
    request["requestKind"] = _gvk(*attrs.object_kind)
    request["requestResource"] = _gvr(attrs.rt.group, attrs.rt.version, attrs.rt.plural)
    if attrs.subresource:
        request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    request.update(
        {
            "operation": attrs.operation,
            "userInfo": user,
            "object": _served(attrs.object, found, attrs),
            "oldObject": _served(attrs.old_object, found, attrs),
            "dryRun": attrs.dry_run,
            "options": attrs.options,
        }
    )
    return {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}", "request": request}


def _verified(uid: str, version: str, answer: Obj, *, mutating: bool) -> Obj:
    """The answer's `response`, checked as the API server checks it."""

    def invalid(why: str) -> CallFailed:
        return CallFailed(f"received invalid webhook response: {why}")

    response = answer.get("response")
    if not isinstance(response, dict):
        raise invalid("webhook response was absent")
    if response.get("uid") != uid:
        raise invalid(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    group, _, got_version = str(answer.get("apiVersion") or "").rpartition("/")
    if (group, got_version, answer.get("kind")) != ("admission.k8s.io", version, "AdmissionReview"):
        raise invalid(
            f"expected webhook response of admission.k8s.io/{version}, Kind=AdmissionReview, "
            f"got {group}/{got_version}, Kind={answer.get('kind') or ''}"
        )
    patch, patch_type = response.get("patch"), response.get("patchType")
    if mutating and patch and not patch_type:
        raise invalid("webhook returned response.patch but not response.patchType")
    if mutating and patch_type and not patch:
        raise invalid("webhook returned response.patchType but not response.patch")
    if not mutating and patch:
        raise invalid("validating webhook may not return response.patch")
    if not mutating and patch_type:
        raise invalid("validating webhook may not return response.patchType")
    return response


def _denied(name: str, status: Any) -> ApiError:
    """A webhook's refusal as the API server answers it: the webhook's Status, its code at least 400."""
    status = status if isinstance(status, dict) else {}
    code = status.get("code") if isinstance(status.get("code"), int) else 0
    denied_by = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied_by}: {status['reason']}"
    else:
        message = f"{denied_by} without explanation"
    details = status.get("details") if isinstance(status.get("details"), dict) else None
    return ApiError(max(code, 400), message, reason=str(status.get("reason") or ""), details=details)


def _internal(why: str) -> ApiError:
    return ApiError(
        500, f"Internal error occurred: {why}", reason="InternalError", details={"causes": [{"message": why}]}
    )
