"""The shared-GPU labels on a pod, read and written the way KAI's binder writes them.

A pod on one shared GPU carries `runai-gpu-group: <id>`; a pod on several (`gpu-fraction-num-devices`)
carries `runai-gpu-group: <first id>` plus `runai-gpu-group/<i>: <id>` for every device, in order. The
simulator reads a pod's shared GPUs from these labels, live mode reads them from the cluster, and the
binder and the snapshot export write them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from kai_scheduler.api.constants import GPU_GROUP_LABEL

_GPU_GROUP_INDEXED = re.compile(re.escape(GPU_GROUP_LABEL) + r"/(\d+)$")


def pod_gpu_groups(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The shared GPUs a pod holds: `runai-gpu-group/<i>` labels in order, else `runai-gpu-group`."""
    indexed = sorted(
        (int(match.group(1)), value)
        for name, value in labels.items()
        if (match := _GPU_GROUP_INDEXED.match(name)) and value
    )
    if indexed:
        return tuple(value for _, value in indexed)
    single = labels.get(GPU_GROUP_LABEL)
    return (single,) if single else ()


def gpu_group_labels(groups: Sequence[str]) -> dict[str, str]:
    """The labels that name `groups` (none for no group)."""
    labels = {GPU_GROUP_LABEL: groups[0]} if groups else {}
    if len(groups) > 1:
        labels.update({f"{GPU_GROUP_LABEL}/{i}": group for i, group in enumerate(groups)})
    return labels


def is_gpu_group_label(name: str) -> bool:
    """`runai-gpu-group` or `runai-gpu-group/<i>`."""
    return name == GPU_GROUP_LABEL or _GPU_GROUP_INDEXED.match(name) is not None


__all__ = ["gpu_group_labels", "is_gpu_group_label", "pod_gpu_groups"]
