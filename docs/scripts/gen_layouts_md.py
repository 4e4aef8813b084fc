"""Regenerate docs/layouts.md from the layout registry: python docs/scripts/gen_layouts_md.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pydantic import BaseModel

from medvqa_build.api import list_sources
from medvqa_build.layouts import LAYOUTS

HEADER = """# Layouts

Generated from the layout registry by `docs/scripts/gen_layouts_md.py`; do not edit by hand.
Every option a manifest part may set, with its type and default (`docs/manifests.md` explains
manifests). An unknown option is an error naming it. Each layout also says what its part
needs under the source root (root discovery, partial downloads) and what its samples carry
(the recipe's task check).
"""


def _type(annotation) -> str:
    if getattr(annotation, "__args__", None) or not hasattr(annotation, "__name__"):
        text = str(annotation)
    else:
        text = annotation.__name__
    for prefix in ("typing.", "medvqa_build.layouts.", "class_folders.", "json_boxes."):
        text = text.replace(prefix, "")
    return re.sub(r"[a-z_]+\.([A-Z]\w+)", r"\1", text)


def _models(annotation) -> list[type[BaseModel]]:
    """The option models an option's type names (a nested block of options)."""
    out = []
    for arg in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            out.append(arg)
        out += [m for m in _models(arg) if m not in out] if arg is not annotation else []
    return out


def _table(model: type[BaseModel]) -> list[str]:
    rows = ["| option | type | default |", "|---|---|---|"]
    for key, field in model.model_fields.items():
        rows.append(f"| `{key}` | `{_type(field.annotation)}` | `{_default(field)}` |")
    return rows


def _default(field) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return type(value).__name__
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def render() -> str:
    users: dict[str, list[str]] = {}
    for source in list_sources():
        for part in source.manifest.parts:
            users.setdefault(part.layout, []).append(source.id)
    out = [HEADER]
    for name in LAYOUTS.names():
        cls = LAYOUTS.get(name)
        out += [f"## `{name}`", ""]
        # the whole module docstring, paragraph by paragraph: its later paragraphs say what
        # the options do (the table below gives only their types and defaults)
        for paragraph in (sys.modules[cls.__module__].__doc__ or "").strip().split("\n\n"):
            out += [" ".join(paragraph.split()), ""]
        used = ", ".join(sorted(set(users.get(name, [])))) or "-"
        out += [f"Used by: {used}.", ""] + _table(cls.Options) + [""]
        nested = [m for f in cls.Options.model_fields.values() for m in _models(f.annotation)]
        for model in dict.fromkeys(nested):
            out += [f"`{model.__name__}`:", ""] + _table(model) + [""]
    return "\n".join(out)


if __name__ == "__main__":
    target = Path(__file__).parents[1] / "layouts.md"
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")
