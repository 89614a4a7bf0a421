"""What a write hands to the admission webhooks: the attributes Kubernetes' admission plugins see (operation,
resource, object, old object, options), and the request's context (user, the webhook chain, the warnings
for the response), which the handler passes down the write path (`writes.py`, `admitted.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .meta import Obj
from .resources import ResourceType

Kind = tuple[str, str, str]
"""group, version, kind"""


@dataclass(frozen=True)
class Attributes:
    """One admission: `operation` CREATE, UPDATE or DELETE on `rt` (`subresource`), the object as it would be
    stored (None for DELETE) and the stored one (None for CREATE). `kind` is the object's own when it is not
    `rt`'s (a pod's `binding` takes a Binding, its `eviction` an Eviction)."""

    operation: str
    rt: ResourceType
    subresource: str | None
    namespace: str | None
    name: str
    object: Obj | None
    old_object: Obj | None
    options: Obj
    dry_run: bool
    kind: Kind | None = None

    @property
    def object_kind(self) -> Kind:
        return self.kind or (self.rt.group, self.rt.version, self.rt.kind)


class Admission(Protocol):
    def mutate(self, attrs: Attributes, request: WriteRequest) -> Obj | None:
        """The object after the mutating webhooks (`attrs.object` when none changed it)."""
        ...

    def validate(self, attrs: Attributes, request: WriteRequest) -> None:
        """Returns when every validating webhook allows the write; raises the API server's error."""
        ...


@dataclass
class WriteRequest:
    """An HTTP write that goes through admission webhooks (the store's Python API and the fake's own
    controllers do not: they are not API clients)."""

    admission: Admission
    user: Obj
    """The AdmissionReview's `userInfo`."""
    field_manager: str | None = None
    warnings: list[str] = field(default_factory=list)
    """`Warning` headers for the response."""

    def mutate(self, attrs: Attributes) -> Obj | None:
        return self.admission.mutate(attrs, self)

    def validate(self, attrs: Attributes) -> None:
        self.admission.validate(attrs, self)

    def options(self, kind: str, dry_run: bool, given: Obj | None = None) -> Obj:
        """The operation's options as the AdmissionReview carries them (CreateOptions, UpdateOptions,
        DeleteOptions)."""
        out: Obj = {**(given or {}), "kind": kind, "apiVersion": "meta.k8s.io/v1"}
        if dry_run:
            out["dryRun"] = ["All"]
        if self.field_manager and kind != "DeleteOptions":
            out["fieldManager"] = self.field_manager
        return out
