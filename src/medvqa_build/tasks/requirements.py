"""Which sample fields feed a task, and whether a recipe's sources provide them.

A generator states its needs with a classmethod ``requirements(params, prompt_level)``
returning alternatives: a list of sets of capabilities, any one of which suffices. A source's
capabilities come from its manifest: an explicit ``provides:`` list when the manifest has one,
otherwise what its layout parts' options imply. Capabilities are

- ``labels``: image-level labels;            - ``regions``: regions with a box;
- ``masks``: regions with a mask;            - ``attribute:<name>``: a per-sample attribute;
- ``attribute:tool``: ``tool:<name>`` 0/1 presence attributes;
- ``region_attribute:<name>``: per-region values (``region<k>.<name>`` attributes).

A source whose layout this module does not know is assumed to provide everything, so the
check never rejects a recipe it cannot judge; the generate stage still drops what it cannot use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

CAPABILITIES_HELP = (
    "labels, regions, masks, attribute:<name>, attribute:tool, region_attribute:<name>"
)


def _attrs(names) -> set[str]:
    return {f"attribute:{n}" for n in names or ()}


def _class_folders(o: dict) -> set[str]:
    return {"labels", "attribute:source_label"} | _attrs(o.get("parent_attributes"))


def _label_table(o: dict) -> set[str]:
    out = {"labels"} | _attrs(o.get("attribute_columns"))
    return out | ({"regions", "masks"} if o.get("masks") else set())


def _metadata_table(o: dict) -> set[str]:
    out = {"labels"} | _attrs(o.get("attribute_columns"))
    return out | ({"regions"} if o.get("box_point_columns") else set())


def _image_mask_pairs(o: dict) -> set[str]:
    out = {"regions", "masks"} | _attrs(o.get("attributes"))
    if o.get("image_label", "if_regions") != "never":
        out.add("labels")
    if any(isinstance(f, dict) and f.get("boxes") for f in o.get("folders") or ()):
        out.add("attribute:box_count")
    return out


def _txt_boxes(o: dict) -> set[str]:
    out = {"regions", "labels", f"attribute:{o.get('count_attribute', 'box_count')}"}
    out |= _attrs(o.get("attributes"))
    return out | ({"masks"} if o.get("class_masks") else set())


def _yolo_boxes(o: dict) -> set[str]:
    out = {"labels"}
    if o.get("labels_dir"):
        out.add("regions")
    return out | ({"masks", "regions"} if o.get("masks") else set())


def _coco_json(o: dict) -> set[str]:
    fields = o.get("region_list_fields") or {}
    return (
        {"regions", "labels"}
        | _attrs(o.get("image_fields"))
        | _attrs(fields)
        | {f"region_attribute:{f}" for f in fields}
    )


def _frames(o: dict) -> set[str]:
    out = {"attribute:phase"} if o.get("phase_table") else set()
    if o.get("tool_table"):
        out |= {"attribute:tool"} | ({"labels"} if o.get("tools_as_labels", True) else set())
    return out


LAYOUT_CAPABILITIES: dict[str, Callable[[dict], set[str]]] = {
    "class_folders": _class_folders,
    "label_table": _label_table,
    "metadata_table": _metadata_table,
    "image_mask_pairs": _image_mask_pairs,
    "json_boxes": lambda o: {"regions", "labels", "attribute:box_count"},
    "txt_boxes": _txt_boxes,
    "yolo_boxes": _yolo_boxes,
    "coco_json": _coco_json,
    "frame_folders": _frames,
    "video_tables": lambda o: _frames({"phase_table": True, **o}),
    "instrument_label_folders": lambda o: {"regions", "masks", "labels"},
    "colour_label_masks": lambda o: {"regions", "masks", "labels", "attribute:sequence"},
}


def source_capabilities(manifest: Any) -> set[str] | None:
    """What a source's samples carry, or None when it cannot be told (unknown layout)."""
    declared = getattr(manifest, "provides", None)
    if declared:
        return set(declared)
    out: set[str] = set()
    for part in manifest.parts:
        infer = LAYOUT_CAPABILITIES.get(part.layout)
        if infer is None:
            return None
        out |= infer(dict(part.options))
    return out


def task_requirements(spec: Any) -> list[set[str]] | None:
    """The alternatives of capabilities that feed the task, or None if the generator is silent."""
    from . import TASKS

    requirements = getattr(TASKS.get(spec.generator), "requirements", None)
    if requirements is None:
        return None
    return [set(a) for a in requirements(dict(spec.params), spec.prompt_level)]


def _describe(alternatives: list[set[str]]) -> str:
    return " or ".join("+".join(sorted(a)) for a in alternatives)


def check_task_sources(spec: Any, manifests: Mapping[str, Any]) -> str | None:
    """Why no (or a named) source of the task can feed it, or None when it can be fed.

    ``manifests`` are the recipe's sources (id -> SourceManifest). A task that names its
    sources needs every one of them to feed it; a task over all sources needs at least one.
    """
    alternatives = task_requirements(spec)
    if alternatives is None:
        return None
    named = list(spec.sources)
    wanted = spec.where.get("source") if hasattr(spec, "where") else None
    if wanted is not None:
        allowed = [wanted] if isinstance(wanted, str) else list(wanted)
        named = [s for s in (named or list(manifests)) if s in allowed] or named
    candidates = named or list(manifests)
    feeders, lacking = [], {}
    for sid in candidates:
        manifest = manifests.get(sid)
        if manifest is None:
            continue
        have = source_capabilities(manifest)
        if have is None or any(a <= have for a in alternatives):
            feeders.append(sid)
        else:
            lacking[sid] = sorted(have)
    needs = _describe(alternatives)
    if named and lacking:
        detail = "; ".join(
            f"{sid} provides {', '.join(have) or 'nothing'}" for sid, have in lacking.items()
        )
        return (
            f"task {spec.name!r} ({spec.generator}) needs {needs}, which source(s) "
            f"{', '.join(lacking)} lack ({detail})"
        )
    if not feeders and candidates:
        return (
            f"task {spec.name!r} ({spec.generator}) needs {needs}, and none of the sources "
            f"{', '.join(candidates)} provides it"
        )
    return None
