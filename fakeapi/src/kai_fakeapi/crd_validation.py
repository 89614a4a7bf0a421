"""What a real API server checks about CustomResourceDefinitions and custom objects, for the tests: that
a CRD is structural (`crd_errors`, `structural_errors`: the rules of apiextensions.k8s.io/v1) and that an
object validates against a CRD's OpenAPI schema (`validate_object`, for the subset KAI's CRDs use, strict
about unknown fields as `kubectl apply`'s field validation is). The tests hold the chart's CRDs and the
example manifests to them; the store holds every write of a custom object to its CRD (`cr_schema.py`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from kai_scheduler.api.constants import HOSTNAME_LABEL
from kai_scheduler.api.crds import CRDS, TOPOLOGY_LEVEL_RULES, crd_manifest, join_path, json_type


def schema_for(api_version: str, kind: str) -> dict[str, Any] | None:
    """The openAPIV3Schema of one of KAI's kinds (`kai_scheduler.api.crds.CRDS`), or None."""
    for definition in CRDS:
        if (definition.api_version, definition.kind) == (api_version, kind):
            version: dict[str, Any] = crd_manifest(definition)["spec"]["versions"][0]
            schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
            return schema
    return None


# --- structural-schema checks (apiextensions.k8s.io/v1) ---------------------------------------------

_SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "description",
        "enum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "nullable",
        "anyOf",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-validations",
    }
)
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def structural_errors(schema: Any, path: str = "") -> list[str]:
    """Why `schema` is not a structural schema that apiextensions.k8s.io/v1 accepts (empty when it is).

    Checked: a type at every level (except int-or-string), only known keywords (no $ref, definitions,
    uniqueItems, patternProperties, ...), object schemas with properties or additionalProperties but not
    both, arrays with one `items` schema, junctors only in the int-or-string form (which has no type),
    `required` naming declared properties, enums of the declared type, boolean exclusive bounds, list-map
    keys that are required scalar properties of the items, and CEL rules that are non-empty strings.
    """
    errors: list[str] = []
    where = path or "<root>"
    if not isinstance(schema, Mapping):
        return [f"{where}: a schema must be a mapping"]
    for key in schema:
        if key not in _SCHEMA_KEYWORDS:
            errors.append(f"{where}: keyword {key!r} is not allowed in a structural schema")
    if schema.get("x-kubernetes-int-or-string"):
        if "type" in schema:
            errors.append(f"{where}: an int-or-string schema must not set type")
        if schema.get("anyOf", _INT_OR_STRING) != _INT_OR_STRING:
            errors.append(f"{where}: int-or-string allows only anyOf [integer, string]")
        return errors
    if "anyOf" in schema:
        errors.append(f"{where}: anyOf is only allowed in the x-kubernetes-int-or-string form")
    kind = schema.get("type")
    if kind not in _TYPES:
        errors.append(f"{where}: every level needs a type (one of {', '.join(sorted(_TYPES))}), got {kind!r}")
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):
        if bound in schema and not isinstance(schema[bound], bool):
            errors.append(f"{where}: {bound} must be a boolean in OpenAPI v3.0")
    for value in schema.get("enum", []):
        if json_type(value) != kind and not (kind == "number" and json_type(value) == "integer"):
            errors.append(f"{where}: enum value {value!r} is not of type {kind}")
    properties = schema.get("properties")
    additional = schema.get("additionalProperties")
    if kind != "object" and (properties is not None or additional is not None or "required" in schema):
        errors.append(f"{where}: properties/additionalProperties/required need type object")
    if properties is not None and additional is not None:
        errors.append(f"{where}: properties and additionalProperties are mutually exclusive")
    if additional is not None and not isinstance(additional, Mapping):
        errors.append(f"{where}: additionalProperties must be a schema (use preserve-unknown-fields)")
    for name in schema.get("required", []):
        if properties is None or name not in properties:
            errors.append(f"{where}: required field {name!r} is not a declared property")
    if kind == "array" and not isinstance(schema.get("items"), Mapping):
        errors.append(f"{where}: an array needs a single items schema")
    if kind != "array" and "items" in schema:
        errors.append(f"{where}: items needs type array")
    if schema.get("x-kubernetes-preserve-unknown-fields") is not None and kind != "object":
        errors.append(f"{where}: x-kubernetes-preserve-unknown-fields belongs on an object")
    errors.extend(_list_map_errors(schema, where))
    for rule in schema.get("x-kubernetes-validations", []):
        if not isinstance(rule, Mapping) or not isinstance(rule.get("rule"), str) or not rule["rule"].strip():
            errors.append(f"{where}: each x-kubernetes-validations entry needs a rule")
    for name, sub in (properties or {}).items():
        errors.extend(structural_errors(sub, join_path(path, name)))
    if isinstance(schema.get("items"), Mapping):
        errors.extend(structural_errors(schema["items"], path + "[]"))
    if isinstance(additional, Mapping):
        errors.extend(structural_errors(additional, path + "{}"))
    return errors


def _list_map_errors(schema: Mapping[str, Any], where: str) -> list[str]:
    list_type = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys")
    if list_type is None and keys is None:
        return []
    if schema.get("type") != "array":
        return [f"{where}: x-kubernetes-list-type needs type array"]
    if list_type not in ("atomic", "set", "map"):
        return [f"{where}: x-kubernetes-list-type must be atomic, set or map"]
    if (list_type == "map") != bool(keys):
        return [f"{where}: x-kubernetes-list-map-keys go with (and only with) list-type map"]
    errors = []
    items = schema.get("items", {})
    for key in keys or []:
        sub = items.get("properties", {}).get(key)
        if sub is None or sub.get("type") not in ("string", "integer", "boolean", "number"):
            errors.append(f"{where}: list-map key {key!r} must be a scalar property of the items")
        elif key not in items.get("required", []):
            errors.append(f"{where}: list-map key {key!r} must be required")
    return errors


def crd_errors(manifest: Any) -> list[str]:
    """Structural and CRD-level problems of one CustomResourceDefinition manifest."""
    errors: list[str] = []
    try:
        spec = manifest["spec"]
        group, names = spec["group"], spec["names"]
        if (
            manifest["apiVersion"] != "apiextensions.k8s.io/v1"
            or manifest["kind"] != "CustomResourceDefinition"
        ):
            errors.append("not an apiextensions.k8s.io/v1 CustomResourceDefinition")
        if manifest["metadata"]["name"] != f"{names['plural']}.{group}":
            errors.append("metadata.name must be <plural>.<group>")
        if spec["scope"] not in ("Namespaced", "Cluster"):
            errors.append("scope must be Namespaced or Cluster")
        for key in ("kind", "listKind", "plural", "singular"):
            if not isinstance(names.get(key), str) or not names[key]:
                errors.append(f"names.{key} is missing")
        if names["plural"] != names["plural"].lower() or names["singular"] != names["singular"].lower():
            errors.append("names.plural and names.singular must be lowercase")
        versions = spec["versions"]
        if sum(1 for version in versions if version.get("storage")) != 1:
            errors.append("exactly one version must be the storage version")
        for version in versions:
            schema = version["schema"]["openAPIV3Schema"]
            label = f"version {version['name']}"
            if schema.get("type") != "object":
                errors.append(f"{label}: the root schema must be of type object")
            metadata = schema.get("properties", {}).get("metadata")
            if metadata is not None and set(metadata) - {"type"}:
                errors.append(f"{label}: metadata may only be declared as type object")
            errors.extend(f"{label}: {error}" for error in structural_errors(schema))
            for column in version.get("additionalPrinterColumns", []):
                if column.get("type") not in ("string", "integer", "number", "boolean", "date"):
                    errors.append(f"{label}: printer column {column.get('name')} has a bad type")
                if not str(column.get("jsonPath", "")).startswith("."):
                    errors.append(f"{label}: printer column {column.get('name')} needs a jsonPath")
            subresources = version.get("subresources", {})
            if set(subresources) - {"status", "scale"}:
                errors.append(f"{label}: unknown subresources")
    except (KeyError, TypeError) as missing:
        errors.append(f"malformed CRD: missing {missing}")
    return errors


# --- validating objects against a schema (the OpenAPI subset above) ------------------------------------

_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")

# CEL rules used by these CRDs, evaluated in Python. A rule not listed here is an error, so a new rule
# cannot be added without teaching the validator what it means. Transition rules (oldSelf) apply to
# updates only and are skipped when validating a new object.
_CEL: dict[str, Callable[[Any], bool]] = {
    TOPOLOGY_LEVEL_RULES[1]["rule"]: lambda levels: (
        not any(level.get("nodeLabel") == HOSTNAME_LABEL for level in levels)
        or levels[-1].get("nodeLabel") == HOSTNAME_LABEL
    ),
}


def validate_object(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """Why `value` does not validate against `schema` (empty when it does). Unknown fields are errors,
    as with `kubectl apply`'s strict field validation; null fields are dropped first, as the API server
    prunes them (none of these schemas is nullable)."""
    where = path or "<root>"
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{where}: expected an integer or a string, got {_describe(value)}"]
        if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            return [f"{where}: {value!r} does not match {schema['pattern']}"]
        return []
    kind = schema["type"]
    if not _is_type(value, kind):
        return [f"{where}: expected {kind}, got {_describe(value)}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    errors.extend(_bound_errors(schema, value, where))
    if kind == "object":
        errors.extend(_object_errors(schema, value, path))
    elif kind == "array":
        for index, item in enumerate(value):
            errors.extend(validate_object(schema["items"], item, f"{path}[{index}]"))
        keys = schema.get("x-kubernetes-list-map-keys")
        if schema.get("x-kubernetes-list-type") == "map" and keys:
            seen: set[tuple[Any, ...]] = set()
            for index, item in enumerate(value):
                key = tuple(item.get(name) for name in keys) if isinstance(item, Mapping) else (item,)
                if key in seen:
                    errors.append(f"{path}[{index}]: duplicate entry for key {', '.join(map(str, key))}")
                seen.add(key)
    elif kind == "string" and schema.get("format") == "date-time" and not _DATE_TIME.match(value):
        errors.append(f"{where}: {value!r} is not an RFC 3339 date-time")
    if not errors:
        errors.extend(_rule_errors(schema, value, where))
    return errors


def _object_errors(schema: Mapping[str, Any], value: Mapping[str, Any], path: str) -> list[str]:
    errors: list[str] = []
    value = {key: item for key, item in value.items() if item is not None}
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return errors
    properties = schema.get("properties")
    additional = schema.get("additionalProperties")
    for name in schema.get("required", []):
        if name not in value:
            errors.append(f"{join_path(path, name)}: required field is missing")
    for name, item in value.items():
        if properties is not None and name in properties:
            if path == "" and name == "metadata":
                errors.extend(_metadata_errors(item))
            else:
                errors.extend(validate_object(properties[name], item, join_path(path, name)))
        elif isinstance(additional, Mapping):
            errors.extend(validate_object(additional, item, join_path(path, str(name))))
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            errors.append(f"{join_path(path, str(name))}: unknown field")
    return errors


def _metadata_errors(metadata: Any) -> list[str]:
    if not isinstance(metadata, Mapping):
        return ["metadata: expected object"]
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return ["metadata.name: required"]
    return []


def _bound_errors(schema: Mapping[str, Any], value: Any, where: str) -> list[str]:
    errors = []
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema:
            low = schema["minimum"]
            if value < low or (schema.get("exclusiveMinimum") and value == low):
                errors.append(f"{where}: {value} is below the minimum {low}")
        if "maximum" in schema:
            high = schema["maximum"]
            if value > high or (schema.get("exclusiveMaximum") and value == high):
                errors.append(f"{where}: {value} is above the maximum {high}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{where}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
    return errors


def _rule_errors(schema: Mapping[str, Any], value: Any, where: str) -> list[str]:
    errors = []
    for validation in schema.get("x-kubernetes-validations", []):
        rule = validation["rule"]
        if "oldSelf" in rule:
            continue
        check = _CEL.get(rule)
        if check is None:
            errors.append(f"{where}: the validator does not know the CEL rule {rule!r}")
        elif not check(value):
            errors.append(f"{where}: {validation.get('message', rule)}")
    return errors


def _is_type(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return False


def _describe(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def custom_objects(documents: Sequence[Any]) -> Iterator[dict[str, Any]]:
    """The objects of KAI's kinds in a list of YAML documents (`kind: List` unwrapped)."""
    for document in documents:
        if not isinstance(document, dict):
            continue
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            yield from custom_objects(document["items"])
        elif schema_for(str(document.get("apiVersion")), str(document.get("kind"))) is not None:
            yield document
