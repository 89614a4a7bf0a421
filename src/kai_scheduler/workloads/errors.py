"""The one error a workload's controller raises: what is wrong, in which field of which object."""

from __future__ import annotations


class WorkloadError(ValueError):
    """`field` is the manifest path (`spec.replicas`) in the object `object_ref` (`Job default/train`)."""

    def __init__(self, message: str, *, object_ref: str = "", field: str | None = None) -> None:
        self.message = message
        self.object_ref = object_ref
        self.field = field
        where = f"{object_ref} " if object_ref else ""
        at = f"{field}: " if field else ""
        super().__init__(f"{where}{at}{message}")
