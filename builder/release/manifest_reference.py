"""docs/reference/manifest.md: manifest.json as a field table per record, read from the manifest's JSON schema
(contract.py `manifest_schema`), the very schema every release holds, so the page says what a user's tools check.

A record is an object the schema defines (a pydantic model of the contract). The records are listed in the order a
reader meets them, depth first from the top of the manifest; each names the records that hold it. A field's type is
said in the schema's own words (string, integer, number, boolean, null, array, object) with its bounds."""

from __future__ import annotations

import json
import re
from typing import Any

from generation.profiles.reference import cell

ROOT = "manifest.json"  # the heading of the top-level record
BOUNDS = (
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "{} or more characters"),
    ("minItems", "{} or more items"),
    ("pattern", "matching `{}`"),
)


def record_name(ref: str) -> str:
    return ref.removeprefix("#/$defs/")


def record_link(name: str) -> str:
    """A link to a record's table. Its heading is the name in a code span; GitHub's anchor of it is the name lower-cased
    without the characters it drops (github.com/Flet/github-slugger; tests/docs/test_docs.py checks every link)."""
    return f"[`{name}`](#{re.sub(r'[^a-z0-9_-]', '', name.lower())})"


def type_text(prop: dict[str, Any]) -> str:
    """A property's type, as the schema states it: a record (a link to its table), a union, a constant, one of some
    values, an array of items, an object from its keys to its values, or a JSON type, with its bounds."""
    if "$ref" in prop:
        return record_link(record_name(prop["$ref"]))
    if "anyOf" in prop:
        options = [type_text(option) for option in prop["anyOf"]]
        return " or ".join(f"({text})" if text.startswith(("array", "object")) else text for text in options)
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return "one of " + ", ".join(f"`{json.dumps(value)}`" for value in prop["enum"])
    kind = prop.get("type", "any JSON value")
    if kind == "array" and "items" in prop:
        kind = f"array of {grouped(type_text(prop['items']))}"
    elif kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        keys = prop.get("propertyNames", {}).get("enum")
        key_text = " or ".join(f"`{key}`" for key in keys) if keys else "string"
        kind = f"object: {key_text} -> {grouped(type_text(prop['additionalProperties']))}"
    bounds = [text.format(prop[key]) for key, text in BOUNDS if key in prop]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def grouped(text: str) -> str:
    """A union inside an array's items or an object's values, in brackets, so "or" reads as the items' choice (an
    "or" already in brackets is left as it is)."""
    depth = 0
    for i, character in enumerate(text):
        depth += (character == "(") - (character == ")")
        if depth == 0 and text.startswith(" or ", i):
            return f"({text})"
    return text


def references(prop: Any) -> list[str]:
    """The records a property's type names, in the order it names them."""
    if isinstance(prop, dict):
        own = [record_name(prop["$ref"])] if "$ref" in prop else []
        return own + [name for value in prop.values() for name in references(value)]
    if isinstance(prop, list):
        return [name for value in prop for name in references(value)]
    return []


def records_in_order(schema: dict[str, Any]) -> tuple[list[str], dict[str, list[str]]]:
    """Every record, depth first from the top in field order, and for each the `Record.field`s that hold it."""
    order: list[str] = []
    held_by: dict[str, list[str]] = {}

    def visit(name: str, record: dict[str, Any]) -> None:
        order.append(name)
        for field, prop in record.get("properties", {}).items():
            for child in dict.fromkeys(references(prop)):
                held_by.setdefault(child, []).append(f"{record_link(name)} `{field}`")
                if child not in order:
                    visit(child, schema["$defs"][child])

    visit(ROOT, schema)
    return order, held_by


def record_table(name: str, record: dict[str, Any], held_by: list[str]) -> list[str]:
    required = set(record.get("required", []))
    lines = [f"## `{name}`", ""]
    if record.get("description") and name != ROOT:  # the root's is the page's first sentence
        lines += [cell(record["description"]), ""]
    if held_by:
        lines += ["In " + ", ".join(held_by) + ".", ""]
    lines += ["| field | type | required | description |", "| --- | --- | --- | --- |"]
    lines += [
        f"| `{field}` | {cell(type_text(prop))} | {'yes' if field in required else 'no'} | "
        f"{cell(prop.get('description', ''))} |"
        for field, prop in record.get("properties", {}).items()
    ]
    return lines + [""]


def manifest_reference(schema: dict[str, Any], schema_file: str) -> str:
    """The page's body below its title: how to read it, then a table per record."""
    order, held_by = records_in_order(schema)
    lines = [
        f"Every release holds `{ROOT}`: what it holds and how it was made.",
        f"Beside it, `{schema_file}` is its JSON schema, so your own tools can read a release.",
        f"The same file is [{schema_file}]({schema_file}) here.",
        f"Its `$schema` is `{schema['$schema']}`.",
        f"Its `$id` is `{schema['$id']}`: the sha256 of the schema itself names this version of it.",
        "",
        "The kit reads and writes the manifest through the models of `builder/release/contract.py`.",
        'A key they do not name is refused; a value of another type is too ("4486" is no integer).',
        "How a release is built and checked: [releasing](../releasing.md), [validating](../validating.md).",
        "",
        f"Below is a table per record, from the top of `{ROOT}` down; each says which records hold it.",
        "A field that is not required is left out, not written as null, when it has no value.",
        "The profile's records are a profile file's sections ([profile reference](profiles.md)).",
        "",
    ]
    for name in order:
        record = schema if name == ROOT else schema["$defs"][name]
        lines += record_table(name, record, held_by.get(name, []))
    return "\n".join(lines)
