"""Frozen records passed between stages: Sample (one image/frame/slice), Region, Item, and
QuarantineEntry (what a stage left out, and why).

Each record converts to and from a plain row (``to_row`` / ``from_row``) whose shape is the
Arrow schema in :mod:`medvqa_build.schema`. Coordinates are 0-based pixels of the 2-D image,
x to the right, y down; boxes are ``[x1, y1, x2, y2]`` with x2/y2 *exclusive* (pixel-edge
coordinates, as COCO: a box around pixel columns 3..5 is ``x1=3, x2=6``).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from itertools import chain
from typing import Any

import numpy as np

from .view import notebook_item

BoxXYXY = tuple[float, float, float, float]
PointXY = tuple[float, float]


def _tuple_or_none(value: Any, conv=float) -> tuple | None:
    return None if value is None else tuple(map(conv, value))


def _intern(text: str | None) -> str | None:
    """One shared string object for values that repeat across rows (source, modality, labels):
    a table read back as records holds each distinct value once, not once per row."""
    return None if text is None else sys.intern(text)


def _short(text: str) -> str:
    """Interned when short (attribute values are mostly labels and codes), else as is."""
    return sys.intern(text) if len(text) <= 32 else text


def _points(value: Any) -> tuple[PointXY, ...]:
    if not value:
        return ()
    return tuple((float(x), float(y)) for x, y in value)


def _polygon(value: Any) -> Polygon | tuple:
    """A row's polygon (a list of ``[x, y]``) as a :class:`Polygon`; ``()`` when empty."""
    return Polygon(value) if value else ()


def _point_rows(points: Sequence[PointXY]) -> list[list[float]]:
    if isinstance(points, Polygon):
        return points.to_array().tolist()
    return [list(p) for p in points]


class Polygon(Sequence):
    """A polygon's ``(x, y)`` vertices packed as float64 pairs (16 bytes a vertex, not a tuple
    of two floats: a traced outline has hundreds of vertices and a rendered build holds many).

    Reads like the tuple of ``(x, y)`` tuples it replaces: iterating and indexing give
    ``(x, y)`` tuples, it compares equal to such a tuple (or a list of pairs) and hashes like
    one, so records stay comparable and hashable; ``np.asarray(polygon)`` is ``(N, 2)``."""

    __slots__ = ("_xy",)

    def __init__(self, points: Any = ()) -> None:
        if isinstance(points, Polygon):
            xy = points._xy
        elif isinstance(points, np.ndarray):
            pts = np.asarray(points, np.float64)
            if pts.size and (pts.ndim != 2 or pts.shape[1] != 2):
                raise ValueError(f"polygon array must be (N, 2), got shape {pts.shape}")
            xy = array("d", pts.tobytes())
        else:
            points = points if isinstance(points, (list, tuple)) else list(points)
            xy = array("d", map(float, chain.from_iterable(points)))
            if len(xy) != 2 * len(points):
                raise ValueError(f"polygon vertices must be (x, y) pairs, got {points[:3]!r}...")
        object.__setattr__(self, "_xy", xy)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Polygon is immutable")

    def __len__(self) -> int:
        return len(self._xy) // 2

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self)[index]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("polygon vertex index out of range")
        return (self._xy[2 * index], self._xy[2 * index + 1])

    def __iter__(self) -> Iterator[PointXY]:
        it = iter(self._xy)
        return zip(it, it, strict=True)  # the array holds whole pairs

    def __eq__(self, other) -> bool:
        if isinstance(other, Polygon):
            return self._xy == other._xy
        if isinstance(other, (tuple, list)):
            if len(other) != len(self):
                return False
            try:
                return tuple(self) == tuple(map(tuple, other))
            except TypeError:  # not a sequence of pairs
                return False
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Polygon({list(self)!r})"

    def __reduce__(self):
        return (Polygon, (self.to_array(),))

    def to_array(self) -> np.ndarray:
        """The vertices as a new ``(N, 2)`` float64 array."""
        return np.frombuffer(self._xy, np.float64).reshape(-1, 2).copy()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.to_array()
        return out if dtype is None else out.astype(dtype, copy=False)


class RLECounts(array):
    """RLE run lengths held as packed 32-bit ints (4 bytes a run, not a tuple of Python ints:
    a 100k-sample source of masks then fits in memory). Compares equal to a tuple or list of
    the same runs and hashes like one, so records stay comparable and hashable."""

    def __new__(cls, runs=()):
        return super().__new__(cls, "i", runs)

    def __eq__(self, other) -> bool:
        if isinstance(other, array):
            return array.__eq__(self, other)
        if isinstance(other, (tuple, list)):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"RLECounts({list(self)!r})"

    def __reduce__(self):
        return (RLECounts, (list(self),))


@dataclass(frozen=True, slots=True)
class MaskRef:
    """A region's mask: a file (optionally one value of a label map) or an RLE.

    ``path`` is relative to the source root (or the build dir for rendered masks);
    ``value`` selects the pixels equal to it, ``None`` means "non-zero".
    ``counts`` is an uncompressed COCO RLE (column-major runs, starting with a run of 0s)
    over an image of ``size_hw``.
    """

    path: str | None = None
    value: int | None = None
    size_hw: tuple[int, int] | None = None
    counts: tuple[int, ...] | RLECounts | None = None  # stored as RLECounts

    def __post_init__(self) -> None:
        if self.path is None and self.counts is None:
            raise ValueError("MaskRef needs a path or RLE counts")
        if self.counts is not None and self.size_hw is None:
            raise ValueError("an RLE mask needs size_hw")
        if self.counts is not None and not isinstance(self.counts, RLECounts):
            object.__setattr__(self, "counts", RLECounts(self.counts))

    def to_row(self, arrays: bool = False) -> dict:
        """The row of the table; with ``arrays``, the RLE counts as an int32 numpy view of
        them instead of a list of ints (for ``pa.Table.from_pylist``, which reads an array a
        third of the time a list takes, to the same column)."""
        if self.counts is None:
            counts = None
        else:
            counts = np.frombuffer(self.counts, np.intc) if arrays else list(self.counts)
        return {
            "path": self.path,
            "value": self.value,
            "size": list(self.size_hw) if self.size_hw is not None else None,
            "counts": counts,
        }

    @classmethod
    def from_row(cls, row: dict | None) -> MaskRef | None:
        if row is None:
            return None
        return cls(
            path=row.get("path"),
            value=row.get("value"),
            size_hw=_tuple_or_none(row.get("size"), int),
            counts=None if row.get("counts") is None else RLECounts(row["counts"]),
        )


@dataclass(frozen=True, slots=True)
class Region:
    """One annotated region of a sample: a label and any of box, mask, polygon, points."""

    label: str
    bbox: BoxXYXY | None = None
    mask: MaskRef | None = None
    polygon: Polygon | tuple[PointXY, ...] = ()  # stored as a Polygon
    points: tuple[PointXY, ...] = ()
    level: str | None = None

    def __post_init__(self) -> None:
        if self.bbox is not None and len(self.bbox) != 4:
            raise ValueError(f"bbox must have 4 numbers, got {self.bbox!r}")
        if self.polygon and not isinstance(self.polygon, Polygon):
            object.__setattr__(self, "polygon", Polygon(self.polygon))

    def to_row(self, arrays: bool = False) -> dict:
        """The row of the table (``arrays``: see :meth:`MaskRef.to_row`)."""
        return {
            "label": self.label,
            "bbox": list(self.bbox) if self.bbox is not None else None,
            "mask": self.mask.to_row(arrays) if self.mask is not None else None,
            "polygon": _point_rows(self.polygon),
            "points": [list(p) for p in self.points],
            "level": self.level,
        }

    @classmethod
    def from_row(cls, row: dict) -> Region:
        return cls(
            label=_intern(row["label"]),
            bbox=_tuple_or_none(row.get("bbox")),
            mask=MaskRef.from_row(row.get("mask")),
            polygon=_polygon(row.get("polygon")),
            points=_points(row.get("points")),
            level=_intern(row.get("level")),
        )


@dataclass(frozen=True, slots=True)
class SliceRef:
    """Plane and index of a 2-D slice in a volume."""

    axis: str
    index: int


@dataclass(frozen=True, slots=True)
class Sample:
    """One image, video frame or volume slice of a source, in the common schema."""

    sample_id: str
    source: str
    image: str
    width: int
    height: int
    modality: str
    frame: int | None = None
    slice: SliceRef | None = None
    scene: str | None = None
    labels: tuple[str, ...] = ()
    attributes: dict[str, str] = field(default_factory=dict)
    regions: tuple[Region, ...] = ()
    group_id: str = ""
    split: str | None = None

    def to_row(self, arrays: bool = False) -> dict:
        """The row of the table (``arrays``: RLE counts as numpy views, see
        :meth:`MaskRef.to_row`)."""
        return {
            "sample_id": self.sample_id,
            "source": self.source,
            "image": self.image,
            "frame": self.frame,
            "slice": None
            if self.slice is None
            else {"axis": self.slice.axis, "index": self.slice.index},
            "width": self.width,
            "height": self.height,
            "modality": self.modality,
            "scene": self.scene,
            "labels": list(self.labels),
            "attributes": sorted(self.attributes.items()),
            "regions": [r.to_row(arrays) for r in self.regions],
            "group_id": self.group_id,
            "split": self.split,
        }

    @classmethod
    def from_row(cls, row: dict) -> Sample:
        attrs = row.get("attributes") or []
        if isinstance(attrs, dict):
            attrs = attrs.items()
        slice_row = row.get("slice")
        return cls(
            sample_id=row["sample_id"],
            source=_intern(row["source"]),
            image=row["image"],
            frame=row.get("frame"),
            slice=None
            if slice_row is None
            else SliceRef(slice_row["axis"], int(slice_row["index"])),
            width=int(row["width"]),
            height=int(row["height"]),
            modality=_intern(row["modality"]),
            scene=_intern(row.get("scene")),
            labels=tuple(_intern(lab) for lab in row.get("labels") or ()),
            attributes={_intern(str(k)): _short(str(v)) for k, v in attrs},
            regions=tuple(Region.from_row(r) for r in row.get("regions") or ()),
            group_id=row.get("group_id") or "",
            split=_intern(row.get("split")),
        )


@dataclass(frozen=True, slots=True)
class DrawnShape:
    """Exactly what a renderer drew on one of an item's images, in clean-image pixels."""

    image_index: int
    kind: str  # box | contour | mask | point | text
    label: str | None = None
    color: str | None = None
    bbox: BoxXYXY | None = None
    polygon: Polygon | tuple[PointXY, ...] = ()  # stored as a Polygon
    point: PointXY | None = None
    mask: MaskRef | None = None
    thickness_px: int | None = None

    def __post_init__(self) -> None:
        if self.polygon and not isinstance(self.polygon, Polygon):
            object.__setattr__(self, "polygon", Polygon(self.polygon))

    def to_row(self) -> dict:
        return {
            "image_index": self.image_index,
            "kind": self.kind,
            "label": self.label,
            "color": self.color,
            "bbox": list(self.bbox) if self.bbox is not None else None,
            "polygon": _point_rows(self.polygon),
            "point": list(self.point) if self.point is not None else None,
            "mask": self.mask.to_row() if self.mask is not None else None,
            "thickness_px": self.thickness_px,
        }

    @classmethod
    def from_row(cls, row: dict) -> DrawnShape:
        return cls(
            image_index=int(row["image_index"]),
            kind=row["kind"],
            label=row.get("label"),
            color=row.get("color"),
            bbox=_tuple_or_none(row.get("bbox")),
            polygon=_polygon(row.get("polygon")),
            point=_tuple_or_none(row.get("point")),
            mask=MaskRef.from_row(row.get("mask")),
            thickness_px=row.get("thickness_px"),
        )


@dataclass(frozen=True, slots=True)
class Negatives:
    """How an item's distractors were chosen: strategy, the chosen labels and their scores."""

    strategy: str
    candidates: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    pool_size: int = 0

    def to_row(self) -> dict:
        return {
            "strategy": self.strategy,
            "candidates": list(self.candidates),
            "scores": list(self.scores),
            "pool_size": self.pool_size,
        }

    @classmethod
    def from_row(cls, row: dict | None) -> Negatives | None:
        if row is None:
            return None
        return cls(
            strategy=row["strategy"],
            candidates=tuple(row.get("candidates") or ()),
            scores=tuple(float(s) for s in row.get("scores") or ()),
            pool_size=int(row.get("pool_size") or 0),
        )


_ITEM_REPEATED = (
    "benchmark",
    "category",
    "task",
    "subtask",
    "scene",
    "source",
    "coord_format",
    "prompt_level",
    "template_id",
    "split",
    "licence",
)


@dataclass(frozen=True, slots=True)
class Item:
    """One benchmark question: taxonomy, provenance, images, options, answer, prompt geometry.

    ``images`` are references the build resolves: ``source://<source>/<relpath>`` for a clean
    source image, or a path relative to the build directory for a rendered one.
    """

    item_id: str
    benchmark: str
    category: str
    task: str
    subtask: str
    source: str
    sample_ids: tuple[str, ...]
    images: tuple[str, ...]
    question: str
    options: tuple[str, ...]
    answer: str
    gt: str
    prompt_level: str = "image"
    scene: str | None = None
    answer_bbox: BoxXYXY | None = None
    coord_format: str | None = None
    prompt_geometry: tuple[DrawnShape, ...] = ()
    negatives: Negatives | None = None
    template_id: str = ""
    split: str | None = None
    licence: str = ""

    def replace(self, **changes: Any) -> Item:
        """A copy with ``changes`` (``dataclasses.replace``, field by field: it runs for every
        rendered and every split item, and the generic version costs several times more)."""
        new = object.__new__(Item)
        for name in _ITEM_FIELDS:
            value = changes.pop(name) if name in changes else getattr(self, name)
            object.__setattr__(new, name, value)
        if changes:
            raise TypeError(f"Item has no field(s) {sorted(changes)}")
        return new

    def _repr_html_(self) -> str:
        """The item in a notebook: thumbnails (when the build that holds it is open), question,
        lettered options with the answer marked, task, source and prompt level."""
        return notebook_item(self)

    def to_row(self) -> dict:
        row: dict[str, Any] = {}
        for name in _ITEM_FIELDS:  # dataclasses.fields() costs more than the rest of a row
            value = getattr(self, name)
            if name == "prompt_geometry":
                value = [s.to_row() for s in value]
            elif name == "negatives":
                value = value.to_row() if value is not None else None
            elif isinstance(value, tuple):
                value = list(value)
            row[name] = value
        return row

    @classmethod
    def from_row(cls, row: dict) -> Item:
        kwargs = {name: row.get(name) for name in _ITEM_FIELDS}
        kwargs["sample_ids"] = tuple(row.get("sample_ids") or ())
        kwargs["images"] = tuple(row.get("images") or ())
        kwargs["options"] = tuple(row.get("options") or ())
        kwargs["answer_bbox"] = _tuple_or_none(row.get("answer_bbox"))
        kwargs["prompt_geometry"] = tuple(
            DrawnShape.from_row(s) for s in row.get("prompt_geometry") or ()
        )
        kwargs["negatives"] = Negatives.from_row(row.get("negatives"))
        for key in ("template_id", "licence"):
            kwargs[key] = kwargs[key] or ""
        kwargs["prompt_level"] = kwargs["prompt_level"] or "image"
        for key in _ITEM_REPEATED:
            kwargs[key] = _intern(kwargs[key])
        return cls(**kwargs)


_ITEM_FIELDS = tuple(f.name for f in fields(Item))


@dataclass(frozen=True)
class QuarantineEntry:
    """A file (relative to its source root) or an item left out by a stage, and why: the one
    failure row of every stage, so nothing is silently dropped and counts add up."""

    file: str
    reason: str
    source: str = ""
    stage: str = "convert"


def item_groups(item: Item, samples_by_id: dict[str, Sample], by: str = "group_id") -> list[str]:
    """The groups an item belongs to; a sample without ``group_id`` is its own group (what
    splits keep whole, and what validation checks they did)."""
    out = []
    for sid in item.sample_ids:
        sample = samples_by_id.get(sid)
        group = sample.group_id if (sample is not None and by == "group_id") else ""
        out.append(f"{sample.source}:{group}" if group and sample is not None else f"sample:{sid}")
    return out or [f"item:{item.item_id}"]
