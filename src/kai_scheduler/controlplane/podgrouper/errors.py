"""The one error the pod grouper raises for input it cannot group."""

from __future__ import annotations

import re

_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


class GroupingError(ValueError):
    """A pod, or one of its owners, cannot be turned into a PodGroup.

    `object_ref` names the object (`PyTorchJob team-a/mnist`), `field` the dotted path inside it
    (`spec.pytorchReplicaSpecs.Worker.replicas`); `str(err)` is one line that says both and what is wrong,
    fit for a Kubernetes event or a log line.
    """

    def __init__(self, message: str, *, object_ref: str | None = None, field: str | None = None) -> None:
        self.message = _LINE_BREAKS.sub(" ", message).strip()
        self.object_ref = object_ref
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [p for p in (self.object_ref, self.field) if p]
        return ": ".join([*parts, self.message])
