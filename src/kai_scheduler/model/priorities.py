"""Job priority and preemptibility, as KAI resolves them: one set of rules for every edge."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import PriorityClass


@dataclass(frozen=True, slots=True)
class Priorities:
    """Priority classes by name, and the priority of a pod or PodGroup that names none."""

    classes: Mapping[str, int] = field(default_factory=lambda: dict(c.BUILTIN_PRIORITY_CLASSES))
    default: int = c.DEFAULT_PRIORITY

    @classmethod
    def of(cls, priority_classes: Iterable[PriorityClass]) -> Priorities:
        """KAI's four classes (train 50, build-preemptible 75, build 100, inference 125) unless the
        cluster defines a class of the same name; a `globalDefault` class sets the default priority."""
        classes = dict(c.BUILTIN_PRIORITY_CLASSES)
        default = c.DEFAULT_PRIORITY
        for priority_class in priority_classes:
            classes[priority_class.metadata.name] = priority_class.value
            if priority_class.global_default:
                default = priority_class.value
        return cls(classes, default)

    def resolve(self, class_name: str | None, pod_priority: int | None) -> int:
        """A known class wins, then the pod's own `spec.priority`, then the default."""
        if class_name and class_name in self.classes:
            return self.classes[class_name]
        if pod_priority is not None:
            return pod_priority
        return self.default


def is_preemptible(preemptibility: str, priority: int) -> bool:
    """KAI's rule: an explicit `preemptible` / `non-preemptible` wins; else below 100 is preemptible."""
    if preemptibility == "preemptible":
        return True
    if preemptibility == "non-preemptible":
        return False
    return priority < c.NON_PREEMPTIBLE_PRIORITY_THRESHOLD
