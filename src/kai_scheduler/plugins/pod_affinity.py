"""Inter-pod affinity for the predicates plugin: a live index of where pods are in this session.

Most clusters have few pods with pod (anti-)affinity, so the index is only built once a pod that has such
rules is being placed, or is already placed (its anti-affinity repels others); until then every node
passes and nothing is tracked.
"""

from __future__ import annotations

import numpy as np

from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import OCCUPYING, TaskInfo
from kai_scheduler.model.matching import PlacedPod, PlacedPodIndex, normalize_scores
from kai_scheduler.model.nodes import BoolArray, FloatArray, IntArray
from kai_scheduler.plugins.scoring import K8S_PLUGINS_SCORE


def _placed_pod(session: Session, task: TaskInfo) -> PlacedPod:
    spec = session.snapshot.nodes.specs[task.node]
    affinity = task.placement.affinity
    pod_affinity = affinity.pod_affinity if affinity else None
    anti_affinity = affinity.pod_anti_affinity if affinity else None
    return PlacedPod(
        namespace=task.namespace,
        labels=task.labels,
        node_labels=spec.labels,
        node_name=spec.name,
        anti_affinity=tuple(anti_affinity.required_during_scheduling_ignored_during_execution)
        if anti_affinity
        else (),
        affinity=tuple(pod_affinity.required_during_scheduling_ignored_during_execution)
        if pod_affinity
        else (),
        preferred_affinity=tuple(pod_affinity.preferred_during_scheduling_ignored_during_execution)
        if pod_affinity
        else (),
        preferred_anti_affinity=tuple(anti_affinity.preferred_during_scheduling_ignored_during_execution)
        if anti_affinity
        else (),
    )


class PodAffinityIndex:
    def __init__(self, session: Session) -> None:
        self._session = session
        self._index: PlacedPodIndex | None = None
        self._by_task: dict[str, PlacedPod] = {}
        nodes = session.snapshot.nodes
        # Each node's name and labels, made when a pod with inter-pod rules first asks (most sessions have
        # none, and this is a walk over every node).
        self._names_and_labels: list[tuple[str, dict[str, str]]] | None = None
        self._all_nodes = np.ones(nodes.size, dtype=np.bool_)
        self._all_nodes.flags.writeable = False  # handed out to every pod no rule concerns
        self._placed_with_rules = any(
            task.status in OCCUPYING for task in session.snapshot.pod_affinity_tasks
        )

    def _node_list(self) -> list[tuple[str, dict[str, str]]]:
        made = self._names_and_labels
        if made is None:
            specs = self._session.snapshot.nodes.specs
            made = self._names_and_labels = [(spec.name, spec.labels) for spec in specs]
        return made

    def _relevant(self, task: TaskInfo) -> bool:
        return task.placement.has_pod_affinity or self._placed_with_rules

    def what_matters_reads(self) -> bool:
        """What `what_matters` reads of the session besides the pod: whether pods with rules run."""
        return self._placed_with_rules

    def what_matters(self, task: TaskInfo) -> tuple[str, tuple[tuple[str, str], ...]] | None:
        """What of the pod its answer reads: its namespace and labels once inter-pod rules are in play
        (its own rules are part of its placement)."""
        if not self._relevant(task):
            return None
        return task.namespace, tuple(sorted(task.labels.items()))

    def _ensure_index(self) -> PlacedPodIndex:
        if self._index is None:
            self._index = PlacedPodIndex(namespace_labels=self._session.snapshot.namespace_labels)
            for task in self._session.snapshot.tasks.values():
                if task.status in OCCUPYING and task.node >= 0:
                    self.placed(task)
        return self._index

    def allowed_nodes(self, task: TaskInfo) -> BoolArray:
        if not self._relevant(task):
            return self._all_nodes
        index = self._ensure_index()
        check = index.required(task.namespace, task.labels, task.placement.affinity)
        return np.array([check.allows(labels) for _, labels in self._node_list()], dtype=np.bool_)

    def preferred_scores(self, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        """Normalised across every node (as Kubernetes does), then read at the candidates `rows`."""
        if not self._relevant(task):
            return 0.0
        index = self._ensure_index()
        raw = index.preferred_scores_for_nodes(
            task.namespace, task.labels, task.placement.affinity, self._node_list()
        )
        if not any(raw):
            return 0.0
        scores = np.array(normalize_scores(raw), dtype=np.float64) / 100.0 * K8S_PLUGINS_SCORE
        return np.asarray(scores[rows], dtype=np.float64)

    def placed(self, task: TaskInfo) -> None:
        if task.placement.has_pod_affinity:
            self._placed_with_rules = True
        if self._index is None or task.key in self._by_task:
            return
        pod = _placed_pod(self._session, task)
        self._by_task[task.key] = pod
        self._index.add(pod)

    def removed(self, task: TaskInfo) -> None:
        pod = self._by_task.pop(task.key, None)
        if pod is not None and self._index is not None:
            self._index.remove(pod)


def shared_index(session: Session) -> PodAffinityIndex:
    """The session's one index, created by whichever plugin asks first and kept live through events."""
    index = session.scratch.get("pod-affinity-index")
    if not isinstance(index, PodAffinityIndex):
        index = PodAffinityIndex(session)
        session.scratch["pod-affinity-index"] = index
        session.points.on_allocate.append(index.placed)
        session.points.on_deallocate.append(index.removed)
    return index


class PodAffinityPlugin:
    """podaffinity: score nodes by preferred inter-pod (anti-)affinity (Kubernetes' InterPodAffinity
    score, scaled as KAI scales Kubernetes' scoring plugins)."""

    name = "podaffinity"

    def __init__(self, arguments: dict[str, object]) -> None:
        self.arguments = arguments

    def on_session_open(self, session: Session) -> None:
        session.points.node_scorers.append(shared_index(session).preferred_scores)

    def on_session_close(self, session: Session) -> None:
        return None
