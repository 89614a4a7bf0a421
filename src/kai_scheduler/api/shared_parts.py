"""Parts of manifests that many objects repeat, validated once and shared between them.

A large cluster's objects come from few templates: 280,000 running pods have a handful of distinct
containers and a few statuses, and the nodes of one type have one status. Validating such a part once and
giving every object that repeats it the same model (models are frozen) saves the validation and the memory
of every copy, about a third of a pod's.

A part is shared only when it validates on its own. One with an error stays in the document, so the error
is found by validating the whole object and names its full path, as it always did.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kai_scheduler.api.objects import Container, K8sModel, Node, NodeStatus, Pod, PodStatus

_STATUS_MODELS: dict[type[K8sModel], type[K8sModel]] = {Pod: PodStatus, Node: NodeStatus}
_CONTAINER_LISTS = ("containers", "initContainers")


class SharedParts:
    """The parts validated so far, by their content; one per load, so that they go when it is done."""

    def __init__(self) -> None:
        self._made: dict[
            tuple[type[K8sModel], str], K8sModel | None
        ] = {}  # None: the part does not validate on its own
        self._known_fields: set[tuple[object, type[K8sModel]]] = set()
        # Ids of the parts made (held in `_made`, so their ids stay theirs), and of those whose own checks
        # (a container's quantities) passed.
        self._shared_ids: set[int] = set()
        self._checked_ids: set[int] = set()

    def fields_known(self, shape: object, model: type[K8sModel]) -> bool:
        """Whether a document of this `shape` (`parse_object`) was found to have only fields `model` has:
        every field of a shape is where it is in each of its documents, only scalars differ."""
        return shape is not None and (shape, model) in self._known_fields

    def note_fields_known(self, shape: object, model: type[K8sModel]) -> None:
        if shape is not None:
            self._known_fields.add((shape, model))

    def checked(self, part: K8sModel) -> bool:
        """Whether `part` is a shared one whose own checks passed (`note_checked`)."""
        return id(part) in self._checked_ids

    def note_checked(self, part: K8sModel) -> None:
        """`part`'s own checks passed: for a shared part, they pass for every object that holds it."""
        if id(part) in self._shared_ids:
            self._checked_ids.add(id(part))

    def substitute(self, model: type[K8sModel], doc: dict[Any, Any]) -> dict[Any, Any]:
        """`doc` with its repeated parts (a pod's containers and status, a node's status) replaced by their
        shared models; the input is not changed."""
        status_model = _STATUS_MODELS.get(model)
        if status_model is None:
            return doc
        out = doc
        status = doc.get("status")
        if status.__class__ is dict:
            shared = self._part(status_model, status)
            if shared is not None:
                out = {**out, "status": shared}
        spec = doc.get("spec")
        if model is Pod and spec.__class__ is dict:
            new_spec = spec
            for field in _CONTAINER_LISTS:
                entries = spec.get(field)
                if entries.__class__ is not list or not entries:
                    continue
                parts = [self._part(Container, e) if e.__class__ is dict else None for e in entries]
                if None not in parts:
                    new_spec = {**new_spec, field: parts}
            if new_spec is not spec:
                out = {**out, "spec": new_spec}
        return out

    def _part(self, model: type[K8sModel], raw: dict[Any, Any]) -> K8sModel | None:
        # By its repr, which the C code writes fast: equal for equal parts with their keys in the same order
        # (which the models keep), and different for `1`, `1.0`, `true` and `'1'`, equal in Python but not
        # to a schema. (The loader's documents hold only YAML's plain types, whose repr is their content.)
        key = (model, repr(raw))
        try:
            return self._made[key]
        except KeyError:
            pass
        try:
            part: K8sModel | None = model.model_validate(raw)
        except ValidationError:
            part = None
        else:
            self._shared_ids.add(id(part))
        self._made[key] = part
        return part
