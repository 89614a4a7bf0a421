"""Reading manifests from disk: files and folders of YAML in, validated objects out, in creation order.

This is the file-I/O edge of the simulator; the validation itself is `kai_scheduler.api.manifests`. The
order of the result is the order of the input (files as given, folder contents sorted), because the
simulator creates objects in that order and creation order breaks scheduling ties.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import object_key, object_ref, parse_object
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.api.shared_parts import SharedParts
from kai_scheduler.api.strict import Notice, near_miss_keys_in, notices
from kai_scheduler.sim.gc_policy import collector_paused
from kai_scheduler.sim.input_checks import check_references, check_reservations
from kai_scheduler.sim.operator_input import OperatorObject, is_operator_document, operator_object
from kai_scheduler.sim.skipped import SkippedObject, is_unmodelled, skipped_object
from kai_scheduler.sim.workloads import Workload, is_workload_document, parse_workload
from kai_scheduler.sim.yaml_templates import Document
from kai_scheduler.sim.yaml_templates import documents as templated_documents

# The C loader is several times faster, which matters for 10,000+ pod documents; the pure-Python one is a
# fallback for Python builds without libyaml. Both are "safe": no arbitrary Python objects from YAML tags.
try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

_YAML_SUFFIXES = (".yaml", ".yml")
_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
# Local names for the node classes: the functions below test them for each of millions of nodes.
_ScalarNode = yaml.ScalarNode
_MappingNode = yaml.MappingNode
_SequenceNode = yaml.SequenceNode


class _Loader(_SafeLoader):
    """The safe loader with a faster tag resolver, which the parser calls for every node of every document.

    Safe YAML has no path resolvers, so the per-node path bookkeeping is skipped; and a file repeats the same
    plain scalars (`name`, `cpu`, `500m`, `kai-scheduler`) thousands of times, so each one's implicit tag
    (str, int, bool, ...) is resolved once per file. The tags are exactly those of the safe loader.
    `strings`: one string object per distinct text of the file, which the documents built from it share
    (`_construct`).
    """

    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self._plain_tags: dict[str, str] = {}
        self.strings: dict[str, str] = {}

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> Any:
        if kind is not _ScalarNode:
            return _MAP_TAG if kind is _MappingNode else _SEQ_TAG
        if not implicit[0]:  # quoted, or otherwise not plain: always a string
            return _STR_TAG
        tag = self._plain_tags.get(value)
        if tag is None:
            tag = self._plain_tags[value] = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        return tag


@dataclass(slots=True)
class LoadedObject:
    """An object and where it came from: `index` is its 1-based document in `source`, `item` its 1-based
    position inside a `kind: List` document (None otherwise), `line` the 1-based line where it starts;
    `notices`: the warnings about it (`api.strict.notices`). Nothing changes one once made. (Not frozen, as
    `yaml_templates.Document`: one is made per object, 340,000 at 20,000 nodes.)"""

    obj: ApiObject | Workload
    source: str
    index: int
    item: int | None = None
    line: int | None = None
    notices: tuple[Notice, ...] = ()

    @property
    def ref(self) -> str:
        """How messages name the object: `Pod default/a-0`, `Queue team-a`, `Job team/train`."""
        obj = self.obj
        if isinstance(obj, Workload):
            return f"{obj.kind} {obj.namespace}/{obj.metadata.name}"
        return object_ref(obj)

    @property
    def location(self) -> str:
        """`x.yaml document 3 (line 41)`, for messages that point back to the input."""
        return _location(self.source, self.index, self.item, self.line)

    def error(self, message: str, field: str | None = None) -> ManifestError:
        """Bad input at this object's place (as `OperatorObject.error` for the operator's objects)."""
        return ManifestError(
            self.source,
            message,
            document=self.index,
            item=self.item,
            line=self.line,
            object_ref=self.ref,
            field=field,
        )


def _location(source: str, index: int, item: int | None, line: int | None) -> str:
    where = f"{source} document {index}"
    if item is not None:
        where += f", item {item}"
    return f"{where} (line {line})" if line is not None else where


class LoadedInput(list[LoadedObject]):
    """The loaded objects, in input order; `skipped`: those of kinds the scheduler does not model
    (`sim.skipped`), left out of the list; `operator`: KAI's SchedulingShards and Config, which configure
    the scheduler rather than being scheduled (`sim.operator_input`)."""

    skipped: list[SkippedObject]
    operator: list[OperatorObject]

    def __init__(self) -> None:
        super().__init__()
        self.skipped = []
        self.operator = []


def load_manifests(paths: Sequence[str]) -> LoadedInput:
    """Load every object in `paths` (files, or folders searched recursively for *.yaml / *.yml).

    Raises ManifestError (one line, naming file, document and field) for anything wrong with the input,
    including an object defined twice and a pod naming a PriorityClass that does not exist. Objects of
    kinds the scheduler does not model are not errors: they go to `skipped`.
    """
    loaded = LoadedInput()
    first_seen: dict[tuple[str, str, str], LoadedObject] = {}
    shared = SharedParts()
    with collector_paused():
        for file in _expand(paths):
            for entry in _load_file(file, shared):
                if isinstance(entry, SkippedObject):
                    loaded.skipped.append(entry)
                    continue
                if isinstance(entry, OperatorObject):
                    _check_unique(entry, loaded.operator)
                    loaded.operator.append(entry)
                    continue
                previous = first_seen.setdefault(_key(entry.obj), entry)
                if previous is not entry:
                    raise _duplicate(entry, previous)
                loaded.append(entry)
    check_references(loaded)
    check_reservations(loaded)
    return loaded


# --- paths --------------------------------------------------------------------------------------


def _expand(paths: Sequence[str]) -> Iterator[str]:
    """Files as given; each folder replaced by its YAML files, recursively, in sorted order."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = _yaml_files(path)
            if not files:
                raise ManifestError(raw, "folder holds no *.yaml or *.yml files")
            yield from files
        elif path.exists():
            yield raw
        else:
            raise ManifestError(raw, "no such file or folder")


def _yaml_files(folder: Path) -> list[str]:
    # Sorted by path components (not by listing order, which varies between file systems), so the result,
    # and with it the simulated creation order, is the same on every machine.
    found = [
        Path(root, name)
        for root, _, names in os.walk(folder)
        for name in names
        if name.endswith(_YAML_SUFFIXES)
    ]
    return [str(file) for file in sorted(found)]


# --- files and documents ------------------------------------------------------------------------


def _load_file(source: str, shared: SharedParts) -> Iterator[LoadedObject | SkippedObject | OperatorObject]:
    # Documents are validated as they are parsed, so the raw dictionaries of a large file never all live at
    # the same time.
    for document in _file_documents(source, _read_bytes(source)):
        if document.data is not None:
            yield from _objects_in(document, source, shared)


def _file_documents(source: str, content: bytes) -> Iterator[Document]:
    """The file's documents, null ones included: through their skeletons (`yaml_templates`) as far as the
    file's text allows, then by PyYAML alone from the first document that could not be read so."""
    try:
        text = content.decode("ascii")
    except UnicodeDecodeError:
        yield from _documents(source, content)
        return
    del content  # the text alone is kept: 124 MiB at 20,000 nodes
    read = 0
    for document in templated_documents(text, lambda skeleton: _documents(source, skeleton), _Loader(b"")):
        if document is None:
            yield from (d for d in _documents(source, text.encode("ascii")) if d.index > read)
            return
        read = document.index
        yield document


def _read_bytes(source: str) -> bytes:
    try:
        with open(source, "rb") as stream:
            return stream.read()
    except OSError as exc:
        raise ManifestError(source, f"cannot read: {exc.strerror or exc}") from None


def _documents(source: str, content: bytes) -> Iterator[Document]:
    """Each document with its start line (one of only comments after `---`, or `---` twice, is null).

    This drives the loader by hand (what `yaml.load_all` does inside) to keep each document's node, whose
    marks give the line numbers that errors report. Errors raised by the consumer between documents do not
    enter this generator, so the handlers below see only YAML's own errors.
    """
    loader = _Loader(content)
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # not after check_node(); the check narrows the type
                break
            index += 1
            try:
                data = _construct(loader, node)
            except ValueError as exc:  # PyYAML's only one: a timestamp of a day that is not (`2026-13-01`)
                where = node.start_mark.line + 1
                raise ManifestError(source, f"not a date: {exc}", document=index, line=where) from None
            item_lines = _item_lines(node) if _is_list(data) else ()
            yield Document(data, index, node.start_mark.line + 1, item_lines)
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(source, exc) from None
    except yaml.reader.ReaderError as exc:  # bytes that are not text in UTF-8/16: located by byte, not line
        raise ManifestError(source, f"not a text file: {exc.reason} at byte {exc.position}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(source, f"invalid YAML: {exc}") from None
    except RecursionError:  # absurd nesting, or an alias that contains itself
        raise ManifestError(source, "invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def _construct(loader: Any, node: yaml.Node) -> Any:
    """What `loader.construct_document(node)` returns, about twice as fast for manifests.

    Manifests are almost entirely mappings with string keys, lists and strings; those are built here
    directly. Everything else (numbers, booleans, null, merge keys `<<`, explicit tags) goes through PyYAML's
    own constructor, so the result is the same. (Aliased nodes become copies rather than shared objects,
    which read-only use cannot tell apart.)

    Equal strings are one object (the loader's `strings`): the parser makes a new one for every scalar,
    and the models keep them, so 300,000 pods held 300,000 copies of `kai-scheduler`, of their queue's
    name, of `Running`, ...
    """
    kind = node.__class__
    share = loader.strings.setdefault
    if kind is _ScalarNode:
        text = node.value
        return share(text, text) if node.tag == _STR_TAG else loader.construct_document(node)
    if kind is _MappingNode and node.tag == _MAP_TAG:
        result: dict[str, Any] = {}
        for key, value in node.value:
            if key.__class__ is not _ScalarNode or key.tag != _STR_TAG:
                return loader.construct_document(node)  # merge keys, non-string keys
            # String values (most of a manifest) inline: a call per scalar was a fifth of the loading time.
            name = key.value
            if value.__class__ is _ScalarNode and value.tag == _STR_TAG:
                text = value.value
                result[share(name, name)] = share(text, text)
            else:
                result[share(name, name)] = _construct(loader, value)
        return result
    if kind is _SequenceNode and node.tag == _SEQ_TAG:
        return [_construct(loader, item) for item in node.value]
    return loader.construct_document(node)


def _item_lines(node: yaml.Node) -> tuple[int, ...]:
    """Start lines of the entries of a top-level `items:` sequence (a `kind: List`), else nothing."""
    if not isinstance(node, yaml.MappingNode):
        return ()
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "items" and isinstance(value, yaml.SequenceNode):
            return tuple(entry.start_mark.line + 1 for entry in value.value)
    return ()


def _objects_in(
    document: Document, source: str, shared: SharedParts
) -> Iterator[LoadedObject | SkippedObject | OperatorObject]:
    data = document.data
    if not _is_list(data):
        yield _parse(data, source, document.index, None, document.line, shared, document.shape)
        return
    items = data.get("items")
    if items is None:
        return
    if not isinstance(items, list):
        raise ManifestError(
            source,
            "expected a list of objects",
            document=document.index,
            line=document.line,
            object_ref=str(data["kind"]),
            field="items",
        )
    for position, entry in enumerate(items, start=1):
        line = document.item_lines[position - 1] if position <= len(document.item_lines) else document.line
        yield _parse(_typed_item(entry, data), source, document.index, position, line, shared)


def _is_list(data: Any) -> bool:
    """`kind: List` (kubectl's) or `kind: PodList`-style typed lists that the API server returns."""
    if not isinstance(data, dict):
        return False
    kind = data.get("kind")
    return kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in data)


def _typed_item(entry: Any, listing: dict[str, Any]) -> Any:
    """Items of a typed list (`PodList`) may omit their apiVersion and kind; take them from the list."""
    kind = listing["kind"].removesuffix("List")
    if not kind or not isinstance(entry, dict) or ("kind" in entry and "apiVersion" in entry):
        return entry
    return {"apiVersion": listing.get("apiVersion"), "kind": kind, **entry}


def _parse(
    data: Any,
    source: str,
    index: int,
    item: int | None,
    line: int,
    shared: SharedParts,
    shape: object = None,
) -> LoadedObject | SkippedObject | OperatorObject:
    if is_operator_document(data):
        return operator_object(data, source, index, item, line)
    if not is_workload_document(data) and is_unmodelled(data):
        return skipped_object(data, _location(source, index, item, line))
    try:
        # Workloads (Jobs, Deployments, ...) are their controllers' to expand: `sim.workloads`.
        obj: ApiObject | Workload = (
            parse_workload(data, source, index, item)
            if is_workload_document(data)
            else parse_object(data, source, index, item, strict=True, shared=shared, shape=shape)
        )
    except ManifestError as exc:
        raise exc.located(line=line) from None
    # The warnings are found here, while the object is fresh in the CPU's caches: a second pass over
    # 85,000 objects cost more than the checks themselves. (A workload's labels and its pod templates'
    # reach its pods and PodGroups: near misses there count too; so does what the pod grouper passed over.)
    found = (
        [*near_miss_keys_in(obj.manifest), *obj.dropped_notices()]
        if isinstance(obj, Workload)
        else notices(obj)
    )
    return LoadedObject(obj, source, index, item, line, tuple(found))


def _key(obj: ApiObject | Workload) -> tuple[str, str, str]:
    return obj.key if isinstance(obj, Workload) else object_key(obj)


# --- errors -------------------------------------------------------------------------------------


def _syntax_error(source: str, exc: yaml.MarkedYAMLError) -> ManifestError:
    """`x.yaml: line 4, column 7: could not find expected ':' (while scanning a simple key)`."""
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or "invalid YAML"
    message = f"{problem} ({exc.context})" if exc.context else problem
    return ManifestError(
        source,
        message,
        line=mark.line + 1 if mark is not None else None,
        column=mark.column + 1 if mark is not None else None,
    )


def _check_unique(entry: OperatorObject, loaded: list[OperatorObject]) -> None:
    previous = next((o for o in loaded if o.ref == entry.ref), None)
    if previous is not None:
        where = _location(previous.source, previous.document, previous.item, previous.line)
        raise entry.error(f"duplicate {entry.ref}: already defined in {where}")


def _duplicate(entry: LoadedObject, previous: LoadedObject) -> ManifestError:
    return entry.error(f"duplicate {entry.ref}: already defined in {previous.location}")
