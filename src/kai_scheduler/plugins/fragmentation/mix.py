"""The workload mix a cycle places against: the kinds of GPU pods the cluster sees, and how often.

FGD (Weng et al., ATC'23) measures fragmentation against the target workload's distribution, the
"typical pods" that make up most of the trace. Here the mix is learnt from the snapshot itself: every
pod it holds that asks for a GPU counts once for its *class*: the live ones (pending, placed, running,
leaving) and the recent ones (finished pods the cluster still keeps). A class is the pods alike in what
they ask of a node (CPU, memory, whole GPUs, a shared portion or GPU memory on N devices, MIG instances)
and in where they may run (their placement constraints). The most frequent classes that together cover
`coverage` of those pods, at most `max_classes` of them, are the mix, and with them the classes of several
whole GPUs however rare (at most half as many more); their weights are their frequencies among the chosen
ones (the plugin then weighs in how few nodes can take a class). The mix
stays fixed for the session: a pod placed in it moves from pending to placed and still counts once, so
nothing the session does changes what it learnt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.resources import PodRequest


@dataclass(frozen=True, slots=True)
class PodClass:
    """Pods alike for placement: one request and one set of placement constraints; `example` is one of
    them (the predicates that decide where the class may run are asked of it)."""

    request: PodRequest
    weight: float
    example: TaskInfo


def learn_mix(tasks: Iterable[TaskInfo], coverage: float, max_classes: int) -> list[PodClass]:
    """The most frequent GPU pod classes among `tasks`, covering `coverage` of their pods (at
    most `max_classes` classes), with weights that add up to 1; the most frequent first."""
    counts: dict[tuple[PodRequest, str], int] = {}
    examples: dict[tuple[PodRequest, str], TaskInfo] = {}
    for task in tasks:
        request = task.request
        # (whole GPUs and devices first: far cheaper than `uses_gpu`, which looks for MIG instances)
        if not (request.whole_gpus or request.gpu_devices or (request.scalars and request.uses_gpu)):
            continue
        key = (request, task.placement.key)
        count = counts.get(key)
        if count is None:
            counts[key] = 1
            examples[key] = task
        else:
            counts[key] = count + 1
    total = sum(counts.values())
    if not total:
        return []
    # The most frequent first; equal counts in a fixed order (the request's shape, then placement), so
    # that the same cluster always yields the same mix.
    ranked = sorted(counts, key=lambda key: (-counts[key], repr(key[0].shape()), key[1]))
    chosen: list[tuple[PodRequest, str]] = []
    covered = 0
    for key in ranked:
        if len(chosen) >= max_classes or covered >= coverage * total:
            break
        chosen.append(key)
        covered += counts[key]
    # Classes of several whole GPUs are kept however rare (up to half as many more, rounded up): a rare
    # pod that needs a node whole, and CPU or memory only some nodes have, fails if nothing keeps those
    # nodes whole.
    several = [key for key in ranked[len(chosen) :] if _several(key[0])][: (max_classes + 1) // 2]
    chosen.extend(several)
    covered += sum(counts[key] for key in several)
    return [PodClass(key[0], counts[key] / covered, examples[key]) for key in chosen]


def _several(request: PodRequest) -> bool:
    """Whether pods of `request` take several whole GPUs (as `measure.mix_arrays` counts them)."""
    return not request.is_shared_gpu and request.whole_gpus >= 2
