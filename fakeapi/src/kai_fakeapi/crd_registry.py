"""CustomResourceDefinitions: checked and given a status when written, their kinds served from the moment
they are stored, their objects and watches gone with them."""

from __future__ import annotations

from typing import Any

from .errors import invalid
from .jsoncopy import clone
from .meta import Obj, meta
from .resources import PrinterColumn, Registry, ResourceType
from .versioned import VersionedStore

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"


class CrdRegistry:
    """The CRD side of the store: `types` is the store's index of served resource types."""

    def __init__(self, types: Registry, objects: VersionedStore) -> None:
        self.types = types
        self.objects = objects

    def prepare_create(self, crd: Obj, now: str) -> None:
        """Check a new CRD and set the status the API server gives an accepted one."""
        validate_crd(crd)
        spec = crd["spec"]
        storage = [v["name"] for v in spec["versions"] if v.get("storage")]
        crd["status"] = {
            "acceptedNames": spec["names"],
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now,
                },
            ],
            "storedVersions": storage,
        }

    def prepare_update(self, new: Obj, old: Obj) -> None:
        validate_crd(new)
        new["status"] = old.get("status", {})

    def serve(self, crd: Obj) -> None:
        """Serve the kinds of a stored (created or updated) CRD, replacing what it served before."""
        spec = crd["spec"]
        self.types.replace_crd_types(str(spec["group"]), str(spec["names"]["plural"]), types_from_crd(crd))

    def withdraw(self, crd: Obj) -> None:
        """Before a CRD is deleted (lock held): delete its objects, end its watches, stop serving it."""
        spec = crd["spec"]
        key = f"{spec['names']['plural']}.{spec['group']}"
        rt = next((t for t in self.types if t.custom and t.key == key), None)
        if rt is not None:
            for obj in list(self.objects.of_type(key).values()):
                self.objects.commit(rt, "DELETED", clone(obj), obj)
        for w in [w for w in self.objects.watchers() if w.rt.key == key]:
            w.close()  # the resource is gone: its watches end
        self.types.remove_crd_types(str(spec["group"]), str(spec["names"]["plural"]))


def validate_crd(crd: Obj) -> None:
    """The API server's checks on a CRD that this server relies on (names, scope, one storage version);
    defaults `singular` and `listKind`."""
    name = str(meta(crd).get("name", ""))
    spec = crd.get("spec")
    causes: list[tuple[str, str]] = []
    if not isinstance(spec, dict):
        raise invalid("CustomResourceDefinition", name, [("spec", "Required value")], CRD_KEY)
    group = str(spec.get("group", ""))
    names = spec.get("names") or {}
    plural, kind = str(names.get("plural", "")), str(names.get("kind", ""))
    if "." not in group:
        causes.append(("spec.group", f'Invalid value: "{group}": should be a domain with at least one dot'))
    if not plural:
        causes.append(("spec.names.plural", "Required value"))
    if not kind:
        causes.append(("spec.names.kind", "Required value"))
    if name != f"{plural}.{group}":
        causes.append(("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            (
                "spec.scope",
                f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"',
            )
        )
    versions = spec.get("versions")
    storage = (
        [v for v in versions if isinstance(v, dict) and v.get("storage")]
        if isinstance(versions, list)
        else []
    )
    if len(storage) != 1:
        causes.append(("spec.versions", "Invalid value: must have exactly one version marked as storage"))
    if causes:
        raise invalid("CustomResourceDefinition", name, causes, CRD_KEY)
    names.setdefault("singular", kind.lower())
    names.setdefault("listKind", f"{kind}List")


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The served versions of a CRD as resource types (assumes the CRD was validated)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out: list[ResourceType] = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        subs = ver.get("subresources") or {}
        columns = tuple(
            PrinterColumn(
                name=str(c.get("name", "")),
                type=str(c.get("type", "string")),
                json_path=str(c.get("jsonPath", "")),
                description=str(c.get("description", "")),
                priority=int(c.get("priority", 0) or 0),
                format=str(c.get("format", "")),
            )
            for c in ver.get("additionalPrinterColumns") or []
        )
        selectable = tuple(str(f.get("jsonPath", "")).lstrip(".") for f in ver.get("selectableFields") or [])
        out.append(
            ResourceType(
                group=str(spec["group"]),
                version=str(ver["name"]),
                kind=str(names["kind"]),
                plural=str(names["plural"]),
                singular=str(names.get("singular") or str(names["kind"]).lower()),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=("status",) if "status" in subs else (),
                field_selectors=selectable,
                printer_columns=columns,
                custom=True,
            )
        )
    return out
