"""Node pools: which nodes, queues, PodGroups and pods one scheduling shard sees (KAI's partition).

KAI partitions a cluster with one node label, `kai.scheduler/node-pool` by default, and runs one scheduler
per `SchedulingShard`. A shard with a `partitionLabelValue` sees the nodes, Queues and PodGroups whose
label has that value; the shard without one (the default shard) sees those that do not carry the label at
all (KAI's label selector `DoesNotExist`: a label with an empty value belongs to no shard). Pods are not
filtered: every pod bound to one of the shard's nodes holds its capacity, and a pod is scheduled by the
shard of its PodGroup (see docs/node-pools.md for the KAI sources).

A pod's pool is its PodGroup's label; a pod whose PodGroup is not known (yet) speaks for itself with its
own label, as KAI's pod grouper copies the pod's label onto the PodGroup it makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kai_scheduler.api import constants as c

# What KAI calls the pool of an object without the label (`DefaultNodePoolName`): the name in
# `schedulingConditions[].nodePool`, metrics and BindRequests' absence of the label.
DEFAULT_NODE_POOL: Final = "default"


@dataclass(frozen=True, slots=True)
class Partition:
    """The objects one shard schedules: those whose `label_key` label is `value` (None: the default
    shard, those without the label)."""

    label_key: str = c.NODE_POOL_LABEL
    value: str | None = None

    def holds(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with these labels belongs to this shard."""
        if self.value is None:
            return self.label_key not in labels
        return labels.get(self.label_key) == self.value

    def holds_value(self, value: str | None) -> bool:
        """Whether an object whose label is `value` (None: absent) belongs to this shard."""
        return value == self.value

    @property
    def pool(self) -> str:
        """The pool's name as KAI writes it (the label value, or "default")."""
        return self.value or DEFAULT_NODE_POOL


def pool_of(labels: Mapping[str, str], label_key: str) -> str:
    """An object's pool as KAI names it in conditions and results (`GetNodePoolNameFromLabels`): the label's
    value, or "default" when it is absent or empty."""
    return labels.get(label_key) or DEFAULT_NODE_POOL
