"""The profile reference: every key of a profile, its type, default and description, read from the pydantic models
of generation/profiles/profile.py, generation/profiles/sections.py and generation/profiles/release_sections.py, so it
cannot drift from what `load_profile` accepts.
`researchy-subq profiles --reference` prints it; docs/reference/profiles.md is the same text (scripts/make_reference.py
writes it; a test keeps them equal)."""

from __future__ import annotations

import json
import types
import typing
from enum import Enum

from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic import BaseModel

from generation.profiles.profile import Profile

INTRO = (
    "Every key a profile file may hold (`researchy-subq profiles --reference` prints this). A key without a "
    "default must be given; every other key may be left out. Values are not coerced: a number is not a string, "
    "`true` is not a number."
)


def section_models(model: type[BaseModel] = Profile) -> list[tuple[str, type[BaseModel]]]:
    """(section name, model) for the top level and each nested section, in the order the profile declares them."""
    sections = [("", model)]
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            sections.append((name, field.annotation))
    return sections


def type_text(annotation) -> str:
    """A type as a profile's author reads it: `float`, `one of: a, b`, `list of float`, `mapping`."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        bounds = bounds_text([m for item in arguments[1:] for m in getattr(item, "metadata", [item])])
        return type_text(arguments[0]) + (f" ({bounds})" if bounds else "")
    if origin is typing.Literal:
        return "one of: " + ", ".join(f"`{a}`" if a is not None else "`null`" for a in arguments)
    if origin in (typing.Union, types.UnionType):
        present = [a for a in arguments if a is not type(None)]
        text = " or ".join(type_text(a) for a in present)
        return text + " or `null`" if len(present) < len(arguments) else text
    if origin is list:
        return f"list of {type_text(arguments[0])}"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of: " + ", ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section (below)"
    return getattr(annotation, "__name__", str(annotation))


def bounds_text(metadata: list) -> str:
    symbols = {Gt: ">", Ge: ">=", Lt: "<", Le: "<="}
    parts = []
    for item in metadata:
        for kind, symbol in symbols.items():
            if isinstance(item, kind):
                parts.append(f"{symbol} {getattr(item, kind.__name__.lower())}")
        if isinstance(item, MinLen) and item.min_length == 1:
            parts.append("not empty")
    return ", ".join(parts)


def default_text(field) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section defaults)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (dict, list)) and not value:
        return "`{}`" if isinstance(value, dict) else "`[]`"
    if isinstance(value, str) and (not value.strip() or value.strip() != value):
        return f"`{json.dumps(value)}`"  # a space, as YAML must quote it
    return f"`{value}`"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def profile_reference() -> str:
    """The reference as Markdown: one table per section."""
    lines = [INTRO]
    for section, model in section_models():
        heading = f"`{section}`" if section else "top level"
        lines += [
            "",
            f"**{heading}**" + (f": {cell(model.__doc__.strip())}" if section and model.__doc__ else ""),
            "",
            "| key | type | default | description |",
            "| --- | --- | --- | --- |",
        ]
        for name, field in model.model_fields.items():
            kind = type_text(field.annotation)
            bounds = bounds_text(field.metadata)
            key = f"{section}.{name}" if section else name
            lines.append(
                f"| `{key}` | {cell(kind + (f' ({bounds})' if bounds else ''))} | {cell(default_text(field))} "
                f"| {cell(field.description or '')} |"
            )
    return "\n".join(lines) + "\n"
