"""Avro's schema-resolution rules: can a reader schema read what a writer schema wrote?

Written from the Avro specification's "Schema Resolution": the same primitive type or a
promotion (int to long, float or double; long to float or double; float to double;
string to bytes and back), records matched by (unqualified) name or a reader alias, whose
reader fields each come from the writer's field of that name (or alias) or have a
default, enums whose writer symbols the reader knows (or a reader default), fixed of the
same name and size, arrays and maps by their items / values, and unions (each writer
branch must be readable; a reader union reads a writer type that one of its branches
reads). Logical types are read as their underlying type.
"""

from __future__ import annotations

import json
from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PROMOTIONS = {
    "int": {"long", "float", "double"}, "long": {"float", "double"}, "float": {"double"},
    "string": {"bytes"}, "bytes": {"string"},
}  # fmt: skip
_NAMED = ("record", "error", "enum", "fixed")


class AvroSchemaError(ValueError):
    """A schema definition that does not parse as Avro."""


def parse(data: bytes | str) -> Any:
    """The schema ``data`` defines, named types resolved (a name refers to its definition).

    Raises:
        AvroSchemaError: not JSON, or not an Avro schema (unknown type, a record without
            fields, an unknown name...).
    """
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AvroSchemaError(f"the schema is not JSON: {exc}") from None
    names: dict[str, dict[str, Any]] = {}
    return _resolve(doc, None, names, "")


def _fullname(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _resolve(node: Any, namespace: str | None, names: dict[str, dict[str, Any]], where: str) -> Any:
    if isinstance(node, str):
        if node in PRIMITIVES:
            return node
        for candidate in (_fullname(node, namespace), node):
            if candidate in names:
                return names[candidate]
        raise AvroSchemaError(f"unknown type {node!r} at {where or 'the top'}")
    if isinstance(node, list):
        return [_resolve(branch, namespace, names, where) for branch in node]
    if not isinstance(node, dict) or "type" not in node:
        raise AvroSchemaError(f"not an Avro type at {where or 'the top'}: {node!r}")
    kind = node["type"]
    if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in (*_NAMED, "array", "map")):
        return _resolve(kind, namespace, names, where)  # {"type": "int", "logicalType": ...} and the like
    if kind == "array":
        return {"type": "array", "items": _resolve(node.get("items"), namespace, names, f"{where}[]")}
    if kind == "map":
        return {"type": "map", "values": _resolve(node.get("values"), namespace, names, f"{where}{{}}")}
    name = node.get("name")
    if not isinstance(name, str) or not name:
        raise AvroSchemaError(f"a {kind} without a name at {where or 'the top'}")
    space = node.get("namespace", namespace) if "." not in name else name.rsplit(".", 1)[0]
    full = _fullname(name, space)
    out: dict[str, Any] = {"type": kind, "name": full.rsplit(".", 1)[-1], "fullname": full,
                           "aliases": [a.rsplit(".", 1)[-1] for a in node.get("aliases", []) if isinstance(a, str)]}
    names[full] = out
    if kind == "enum":
        symbols = node.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
            raise AvroSchemaError(f"enum {full} has no list of symbols")
        out["symbols"], out["default"] = list(symbols), node.get("default")
    elif kind == "fixed":
        size = node.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise AvroSchemaError(f"fixed {full} has no size")
        out["size"] = size
    else:
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise AvroSchemaError(f"record {full} has no list of fields")
        out["fields"] = []
        for f in fields:
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
                raise AvroSchemaError(f"record {full} has a field without a name or type: {f!r}")
            out["fields"].append({
                "name": f["name"], "aliases": [a for a in f.get("aliases", []) if isinstance(a, str)],
                "has_default": "default" in f,
                "type": _resolve(f["type"], space, names, f"{where}.{f['name']}" if where else f["name"]),
            })  # fmt: skip
    return out


def _kind(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    return str(schema["type"])


def _show(schema: Any) -> str:
    if isinstance(schema, list):
        return "[" + ", ".join(_show(b) for b in schema) + "]"
    if isinstance(schema, dict) and "fullname" in schema:
        return f"{schema['type']} {schema['fullname']}"
    return _kind(schema)


def incompatibility(reader: Any, writer: Any) -> str | None:
    """Why ``reader`` cannot read data written with ``writer`` (both from :func:`parse`);
    None: it can. The reason names the first field (a dotted path) that does not resolve."""
    return _check(reader, writer, "", set())


def _check(reader: Any, writer: Any, path: str, seen: set[tuple[int, int]]) -> str | None:
    at = path or "the top level"
    rk, wk = _kind(reader), _kind(writer)
    if wk == "union":
        for branch in writer:
            why = _check(reader, branch, path, seen)
            if why is not None:
                return why
        return None
    if rk == "union":
        if any(_check(branch, writer, path, seen) is None for branch in reader):
            return None
        return f"{at}: the reader's union {_show(reader)} has no branch that reads the writer's {_show(writer)}"
    if rk in PRIMITIVES or wk in PRIMITIVES:
        if rk == wk or rk in _PROMOTIONS.get(wk, ()):
            return None
        return f"{at}: type {_show(writer)} cannot be read as {_show(reader)}"
    if rk != wk and {rk, wk} != {"record", "error"}:
        return f"{at}: type {_show(writer)} cannot be read as {_show(reader)}"
    if rk == "array":
        return _check(reader["items"], writer["items"], f"{path}[]", seen)
    if rk == "map":
        return _check(reader["values"], writer["values"], f"{path}{{}}", seen)
    if writer["name"] != reader["name"] and writer["name"] not in reader["aliases"]:
        return f"{at}: {_show(writer)} cannot be read as {_show(reader)} (another name)"
    key = (id(reader), id(writer))
    if key in seen:  # a recursive type being checked already
        return None
    seen.add(key)
    if rk == "fixed":
        if reader["size"] != writer["size"]:
            return f"{at}: fixed {reader['fullname']} has size {writer['size']} written and {reader['size']} read"
        return None
    if rk == "enum":
        unknown = [s for s in writer["symbols"] if s not in reader["symbols"]]
        if unknown and reader["default"] is None:
            return f"{at}: enum {reader['fullname']} of the reader lacks the writer's symbols {unknown}"
        return None
    written = {f["name"]: f for f in writer["fields"]}
    for field in reader["fields"]:
        name = field["name"]
        sub = f"{path}.{name}" if path else name
        source = written.get(name) or next((written[a] for a in field["aliases"] if a in written), None)
        if source is None:
            if not field["has_default"]:
                return f"{sub}: the reader's field has no default and the writer has no such field"
            continue
        why = _check(field["type"], source["type"], sub, seen)
        if why is not None:
            return why
    return None
