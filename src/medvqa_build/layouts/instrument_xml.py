"""Per-frame instrument XML (the ``instruments18`` annotations over EndoVis 2018 that
Surgical-VQA and its scene-graph predecessors use): one ``seq_N/xml/frameNNN.xml`` per frame
holding ``<objects>`` elements with ``<name>`` (instrument type, or ``kidney`` for the tissue),
``<bndbox>`` (``xmin``/``ymin``/``xmax``/``ymax``) and ``<interaction>`` (Idle, Grasping, ...).

The element names are those read by lalithjets/Global-reasoned-multi-task-model's loaders
(``_xml.iter('objects')``, ``obj.find('name'|'bndbox'|'interaction')``); those loaders crop
``img[ymin:ymax + 1, xmin:xmax + 1]``, i.e. xmax/ymax name the last pixel inside the box.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ..errors import ImageProblem
from ..geometry import box_problem
from ..records import Region
from ..store.limits import box_count_problem
from .base import LabelProblem, LayoutOptions, ScanContext


class InstrumentXmlOptions(LayoutOptions):
    dir: str = "xml"  # folder of the XML files, inside each sequence folder
    file_name: str = "{stem}.xml"  # XML file of a frame, in ``dir``
    object_tag: str = "objects"
    name_tag: str = "name"
    box_tag: str = "bndbox"
    interaction_tag: str = "interaction"
    max_inclusive: bool = True  # xmax/ymax are the last pixel inside; we store exclusive edges
    # raw names of the tissue side of each interaction: kept as box regions, but their
    # interaction is not recorded (it is the instruments' interaction with them)
    tissue_classes: list[str] = ["kidney"]
    # raw interaction -> canonical text; empty keeps the raw value, else unknown ones quarantine
    interaction_map: dict[str, str] = {}
    required: bool = False  # False: a frame without an XML file keeps only its mask regions


def xml_regions(
    ctx: ScanContext, o: InstrumentXmlOptions, path: Path, width: int, height: int, first: int
) -> tuple[list[Region], dict[str, str]]:
    """Box regions of one frame's XML and their ``region<k>.*`` attributes, ``k`` counted from
    ``first`` (the regions already on the sample); raises ImageProblem / LabelProblem with the
    quarantine reason."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise ImageProblem(f"annotation {path.name} is not well-formed XML ({exc})") from None
    regions: list[Region] = []
    attributes: dict[str, str] = {}
    for k, obj in enumerate(root.iter(o.object_tag), start=first):
        too_many = box_count_problem(k - first + 1, f"annotation {path.name}")
        if too_many:
            raise ImageProblem(too_many)
        raw = _text(obj, o.name_tag, path)
        box = _box(obj, o, path)
        problem = box_problem(box, width, height)
        if problem:
            raise ImageProblem(f"{path.name}: {problem}")
        regions.append(Region(label=ctx.canonical(raw), bbox=box, level="box"))
        attributes[f"region{k}.source_label"] = raw
        if raw not in o.tissue_classes:
            attributes[f"region{k}.interaction"] = _interaction(obj, o, path)
    return regions, attributes


def _text(obj: ET.Element, tag: str, path: Path) -> str:
    node = obj.find(tag)
    text = (node.text or "").strip() if node is not None else ""
    if not text:
        raise ImageProblem(f"annotation {path.name}: an <{obj.tag}> has no <{tag}> text")
    return text


def _box(obj: ET.Element, o: InstrumentXmlOptions, path: Path) -> tuple[float, ...]:
    node = obj.find(o.box_tag)
    if node is None:
        raise ImageProblem(f"annotation {path.name}: an <{obj.tag}> has no <{o.box_tag}>")
    try:
        x1, y1, x2, y2 = (float(_text(node, t, path)) for t in ("xmin", "ymin", "xmax", "ymax"))
    except ValueError:
        raise ImageProblem(
            f"annotation {path.name}: a <{o.box_tag}> coordinate is not a number"
        ) from None
    pad = 1.0 if o.max_inclusive else 0.0
    return (x1, y1, x2 + pad, y2 + pad)


def _interaction(obj: ET.Element, o: InstrumentXmlOptions, path: Path) -> str:
    raw = _text(obj, o.interaction_tag, path)
    if not o.interaction_map:
        return raw
    if raw not in o.interaction_map:
        raise LabelProblem(f"interaction {raw!r} in {path.name} is not in the interaction_map")
    return o.interaction_map[raw]
