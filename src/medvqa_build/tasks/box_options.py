"""Distractor boxes that geometry alone cannot tell from the answer (issue 32.3).

Boxes "of about the target's size, anywhere in the image" gave the answer away without the
image: the target's size was the mean of the others', and the target sat nearer the centre
(findings are framed) than boxes placed uniformly. Here a distractor is a true box of another
image of the task's pool: the same source and finding where there are enough, scaled to this
image, kept when it overlaps neither the target, another annotated region nor a box already
taken (IoU below ``max_iou``). Its size, position and distance to the border then follow the
distribution of the answers (drawn with weights that undo what the overlap rule removes,
:func:`fit_weights`), and a box text that is often an answer (a video's repeated box) is as
often a distractor. When too few true boxes fit, a box is recombined from the size of one true
box and the centre of another; only then is the item dropped.

The pool follows the benchmark, not the download (issue 35): it keeps at most
``box_pool_size`` boxes (2,048) of each (source, finding), a seeded draw made as the scan
streams (:class:`BoxPool`), so its memory and the weighting stay bounded however large the
raw data; ``"all"`` keeps every box. A pool whose groups are all under the cap is the one of
before, array for array.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import RecipeError
from ..geometry import iou
from ..records import Sample
from .columns import NotColumnar, region_boxes

MIN_POOL = 8  # true boxes of a (source, finding) needed to draw from it alone
BATCH = 64  # candidate boxes drawn at a time
REFERENCE = 256  # boxes the weights are estimated against
CHUNK = 4096  # boxes compared with the reference at a time
MIN_CLEAR = 0.1  # share of boxes cleared below which a box's weight stops growing
POOL_SIZE = 2048  # true boxes kept per (source, finding): ``params.box_pool_size``


Box = tuple[float, float, float, float]


def _owner(sample_id: str) -> int:
    """The image a box belongs to: a 64-bit hash of its sample id (signed, as int64 holds
    it). With a crc32 (32 bits) two of 77k images shared one at even odds, and the boxes of
    the one were then left out as the other's own (issue 35); 64 bits reach those odds at
    5 * 10**9 images."""
    digest = hashlib.blake2b(sample_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` (n, 4) with every box of ``b`` (m, 4), xyxy."""
    lo = np.maximum(a[:, None, :2], b[None, :, :2])
    hi = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(hi - lo, 0, None).prod(axis=2)
    area_a = (a[:, 2:] - a[:, :2]).prod(axis=1)
    area_b = (b[:, 2:] - b[:, :2]).prod(axis=1)
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-12)


def fit_weights(rows: np.ndarray, max_iou: float, power: int = 3, rounds: int = 2) -> np.ndarray:
    """Draw weights that keep a distractor's geometry that of an answer.

    A distractor is kept only when it clears the target, so boxes that clear few others
    (large and central, as most findings are) would be kept less often than they are answers,
    and "the largest, most central box" would win. Each box is drawn with weight ``1 / Z``,
    ``Z`` the weighted share of boxes it clears, estimated on :data:`REFERENCE` boxes in
    ``rounds`` fixed-point rounds (boxes divided by their image's size: IoU does not change).

    A round reads only the reference boxes' weights of the round before, so every round but
    the last weighs the reference boxes alone and only the last weighs them all (the same
    weights as weighing every box each round: the first round sums ones, and the last is
    summed chunk by chunk as ever)."""
    n = len(rows)
    if n == 0:
        return np.zeros(0)
    unit = rows[:, :4] / np.concatenate([rows[:, 4:6], rows[:, 4:6]], axis=1)
    picked = np.sort(np.random.default_rng(0).choice(n, size=min(n, REFERENCE), replace=False))
    ref = unit[picked]
    clears = _iou_matrix(ref, ref) < max_iou  # the reference boxes among themselves
    q = np.ones(len(picked))
    for _ in range(rounds - 1):
        q = 1.0 / np.maximum((clears @ q) / q.sum(), MIN_CLEAR) ** power
    z = np.empty(n)
    for a in range(0, n, CHUNK):
        z[a : a + CHUNK] = (_iou_matrix(unit[a : a + CHUNK], ref) < max_iou) @ q
    return 1.0 / np.maximum(z / q.sum(), MIN_CLEAR) ** power


def pool_size(params: dict) -> int | None:
    """A task's ``box_pool_size``: the boxes kept per (source, finding), at least
    :data:`MIN_POOL`, or ``"all"`` (None: every box)."""
    value = params.get("box_pool_size", POOL_SIZE)
    if value == "all":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_POOL:
        raise RecipeError(
            f"params.box_pool_size must be a count of at least {MIN_POOL} or 'all', not {value!r}",
            fix="see the Boxes section of docs/negatives.md",
        )
    return value


def _draw_key(salt: bytes, sample_id: str, ordinal: int) -> int:
    """A box's place in the seeded draw of a capped group: a 64-bit hash of the task's salt,
    its image's id and its place among that image's boxes (the same whatever the scan order
    or the samples around it)."""
    data = f"{ordinal}:{sample_id}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, key=salt).digest(), "little")


class _Group:
    """The boxes of one (source, finding) kept so far, in the order they were added:
    ``rows`` six floats a box, the image's :func:`_owner`, the box's number in the scan
    and its draw key (none without a cap); ``seen`` counts every box added."""

    __slots__ = ("rows", "owners", "seqs", "keys", "seen")

    def __init__(self) -> None:
        self.rows, self.owners = array("d"), array("q")
        self.seqs, self.keys = array("q"), array("Q")
        self.seen = 0

    def prune(self, cap: int) -> None:
        """Keep the ``cap`` boxes of smallest draw key (ties: the first added), in order."""
        if len(self.seqs) <= cap:
            return
        keys = np.frombuffer(self.keys, np.uint64)
        keep = np.sort(np.argsort(keys, kind="stable")[:cap])
        rows = np.frombuffer(self.rows, np.float64).reshape(-1, 6)[keep]
        self.rows = _floats(rows)
        self.owners = array("q", np.frombuffer(self.owners, np.int64)[keep].tolist())
        self.seqs = array("q", np.frombuffer(self.seqs, np.int64)[keep].tolist())
        self.keys = array("Q", keys[keep].tolist())


def _floats(rows: np.ndarray) -> array:
    out = array("d")
    out.frombytes(np.ascontiguousarray(rows, np.float64).tobytes())
    return out


@dataclass(frozen=True)
class _SourceBoxes:
    rows: np.ndarray  # float64 (n, 6): x1, y1, x2, y2, image width, image height
    labels: np.ndarray  # int32 index into ``names``
    owners: np.ndarray  # int64 :func:`_owner` of the sample id
    names: list[str]
    weights: np.ndarray  # float64 draw weights (:func:`fit_weights`)
    seen: np.ndarray | None = None  # per name: boxes in the pool (None: every one is kept)


class BoxPool:
    """The true boxes of a task's pool, per source: pixel box and image size, the finding,
    the image they belong to (a 64-bit hash of its id) and a draw weight: about 70 bytes a
    box once frozen (about 65 while the scan collects them in arrays, 75 with a cap's draw
    keys; tracemalloc).

    With ``cap`` (``params.box_pool_size``) each (source, finding) keeps at most ``cap``
    boxes: those of smallest draw key, a hash of ``salt`` (the task's seed), the image's id
    and the box's place in it; the scan prunes a group back to ``cap`` whenever it holds
    twice as many (it never holds more). ``labels``: the findings the pool reads (all
    when empty), to count a target image's own boxes."""

    def __init__(
        self,
        max_iou: float = 0.1,
        cap: int | None = None,
        salt: bytes = b"",
        labels: Sequence[str] = (),
    ) -> None:
        self.max_iou = float(max_iou)
        self.cap = cap
        self.salt = bytes(salt)
        self.labels = frozenset(labels)
        self._groups: dict[tuple[str, str], _Group] = {}
        self._seq = 0
        # the last image added: its id, its boxes so far and its owner
        self._last: tuple[str | None, int, int] = (None, 0, 0)
        self._frozen: dict[str, _SourceBoxes] = {}

    @classmethod
    def of(
        cls,
        samples: Iterable[Sample],
        labels: Sequence[str] = (),
        max_iou: float = 0.1,
        cap: int | None = None,
        salt: bytes = b"",
    ):
        """Every region with a box (of ``labels`` when given) of ``samples`` (streamed), at
        most ``cap`` of each (source, finding)."""
        pool, only = cls(max_iou, cap, salt, labels), set(labels)
        for s in samples:
            for r in s.regions:
                if r.bbox is not None and (not only or r.label in only):
                    pool.add(s, r.label, r.bbox)
        pool.freeze()
        return pool

    def _put(self, src: str, label: str, row, sample_id: str) -> None:
        group = self._groups.get((src, label))
        if group is None:
            group = self._groups[src, label] = _Group()
        last, ordinal, owner = self._last
        if last != sample_id:  # an image's boxes come one after another: hashed once
            ordinal, owner = 0, _owner(sample_id)
        self._last = (sample_id, ordinal + 1, owner)
        group.rows.extend(row)
        group.owners.append(owner)
        group.seqs.append(self._seq)
        group.seen += 1
        self._seq += 1
        if self.cap is not None:
            group.keys.append(_draw_key(self.salt, sample_id, ordinal))
            if len(group.seqs) >= 2 * self.cap:
                group.prune(self.cap)

    def add(self, sample: Sample, label: str, box: Sequence[float]) -> None:
        self._put(
            sample.source,
            label,
            (*map(float, box), float(sample.width), float(sample.height)),
            sample.sample_id,
        )

    def add_columns(self, sources: list[str], rows: np.ndarray, labels: list[str], ids) -> None:
        """Boxes read from columns (one a row: source, ``x1, y1, x2, y2, width, height``,
        label, sample id), the same as :meth:`add` of each in turn."""
        for src, row, label, sample_id in zip(sources, rows.tolist(), labels, ids, strict=True):
            self._put(src, label, row, sample_id)

    def freeze(self) -> None:
        """Pack the boxes added so far into arrays, per source in the order they were added,
        and weigh them (the scan's arrays are dropped)."""
        by_source: dict[str, list[tuple[str, _Group]]] = {}
        for (src, label), group in sorted(self._groups.items()):
            if self.cap is not None:
                group.prune(self.cap)
            by_source.setdefault(src, []).append((label, group))
        self._groups = {}
        for src, groups in by_source.items():
            names = [label for label, _ in groups]  # sorted
            seqs = np.concatenate([np.frombuffer(g.seqs, np.int64) for _, g in groups])
            order = np.argsort(seqs, kind="stable")
            rows = np.concatenate(
                [np.frombuffer(g.rows, np.float64).reshape(-1, 6) for _, g in groups]
            )[order]
            labels = np.concatenate(
                [np.full(len(g.seqs), k, np.int32) for k, (_, g) in enumerate(groups)]
            )[order]
            owners = np.concatenate([np.frombuffer(g.owners, np.int64) for _, g in groups])
            seen = np.array([g.seen for _, g in groups], np.int64)
            self._frozen[src] = _SourceBoxes(
                rows=rows,
                labels=labels,
                owners=owners[order],
                names=names,
                weights=fit_weights(rows, self.max_iou),
                seen=seen if (seen > np.bincount(labels, minlength=len(names))).any() else None,
            )

    def __len__(self) -> int:
        return sum(len(b.rows) for b in self._frozen.values())

    def summary(self) -> dict:
        """What the report states of the pool: the cap, the boxes of the task's pool and
        those kept, the (source, finding) groups and how many the cap cut."""
        seen = kept = groups = cut = 0
        for b in self._frozen.values():
            counts = np.bincount(b.labels, minlength=len(b.names))
            full = counts if b.seen is None else b.seen
            seen, kept = seen + int(full.sum()), kept + int(counts.sum())
            groups, cut = groups + len(b.names), cut + int((full > counts).sum())
        return {
            "box_pool_size": "all" if self.cap is None else self.cap,
            "boxes_in_pool": seen,
            "boxes_kept": kept,
            "groups": groups,
            "groups_capped": cut,
        }

    def _own(self, sample: Sample, label: str | None) -> int:
        """How many of the pool's boxes are ``sample``'s own (of ``label``; None: of any
        finding the pool reads)."""
        if label is not None:
            return sum(r.bbox is not None and r.label == label for r in sample.regions)
        only = self.labels
        return sum(r.bbox is not None and (not only or r.label in only) for r in sample.regions)

    def candidates(self, sample: Sample, label: str) -> tuple[np.ndarray, np.ndarray]:
        """The boxes a distractor of ``sample``'s ``label`` box is drawn from, as rows of
        ``x1, y1, x2, y2, width, height``, and their draw weights: the source's boxes of that
        finding in other images, or all its boxes in other images when those are fewer than
        :data:`MIN_POOL`, or the boxes of every source of the task when the source itself
        has fewer (a small source, say three CVC frames, would otherwise lose every item).

        Where the cap cut one of the source's findings, which of these applies is decided on
        the pool's counts before the cap (the boxes of that finding, or of the source, less
        the target image's own), so a cap never moves a target to a wider draw; the boxes
        are then drawn from those kept (a level whose kept boxes are all the target image's
        own, possible only with a cap below the boxes one image holds, passes to the next)."""
        owner = _owner(sample.sample_id)
        boxes = self._frozen.get(sample.source)
        if boxes is not None:
            other = boxes.owners != owner
            code = boxes.names.index(label) if label in boxes.names else -1
            same = other & (boxes.labels == code)
            if boxes.seen is None:  # every box of the source kept
                keep = same if same.sum() >= MIN_POOL else other
                if keep.sum() >= MIN_POOL:
                    return boxes.rows[keep], boxes.weights[keep]
            else:
                n_same = (int(boxes.seen[code]) - self._own(sample, label)) if code >= 0 else 0
                n_other = int(boxes.seen.sum()) - self._own(sample, None)
                for n, keep in ((n_same, same), (n_other, other)):
                    if n >= MIN_POOL and keep.any():
                        return boxes.rows[keep], boxes.weights[keep]
        rows = [b.rows[b.owners != owner] for _, b in sorted(self._frozen.items())]
        weights = [b.weights[b.owners != owner] for _, b in sorted(self._frozen.items())]
        if not rows:
            return np.zeros((0, 6)), np.zeros(0)
        return np.concatenate(rows), np.concatenate(weights)


class ScansBoxes:
    """Mixin of the tasks with box options: :meth:`scan` keeps the pool's true boxes (of
    ``params.labels`` when given) as the task's :class:`BoxPool`, at most
    ``params.box_pool_size`` of each (source, finding), drawn with the task's ``seed``;
    ``params.box_pool: false`` keeps the uniform similar-size boxes instead."""

    scans_pool = True
    params: dict
    seed: bytes
    boxes: BoxPool | None = None

    def _new_pool(self) -> BoxPool:
        return BoxPool(
            float(self.params.get("max_iou", 0.1)),
            pool_size(self.params),
            self.seed,
            self.params.get("labels", ()),
        )

    def scan(self, samples: Iterable[Sample]) -> None:
        if self.params.get("box_pool", True):
            labels, max_iou = self.params.get("labels", ()), self.params.get("max_iou", 0.1)
            cap = pool_size(self.params)
            self.boxes = BoxPool.of(samples, labels, float(max_iou), cap, self.seed)

    def pool_summary(self) -> dict | None:
        """What the report states of the task's box pool (None: it has none)."""
        return None if self.boxes is None else self.boxes.summary()

    # planned from columns (stages/plan_columns.py): the same pool, batch by batch
    def column_scan(self, batch, pool) -> None:
        """:meth:`scan` of one batch's pool from its ``regions``, ``width`` and ``height``."""
        if not self.params.get("box_pool", True):
            return
        scanned = self.__dict__.get("_box_scan")
        if scanned is None:
            scanned = self.__dict__["_box_scan"] = self._new_pool()
        at, labels, boxes = region_boxes(batch, pool, self.params.get("labels", ()))
        take = pa.array(at, pa.int64())
        size = [batch[c].take(take) for c in ("width", "height")]
        if any(c.null_count for c in size):
            raise NotColumnar("an image without a size")
        rows = np.column_stack([boxes, *(np.asarray(c, np.float64) for c in size)])
        ids = batch["sample_id"].take(take).to_pylist()
        scanned.add_columns(batch["source"].take(take).to_pylist(), rows, labels.to_pylist(), ids)

    def column_scanned(self) -> None:
        """The scan is complete: the task's box pool."""
        scanned = self.__dict__.pop("_box_scan", None)
        if scanned is not None:
            scanned.freeze()
            self.boxes = scanned


def _candidates(
    rows: np.ndarray, picks: np.ndarray, recombine: bool, jitter: float, w: int, h: int, rng
) -> np.ndarray:
    """Boxes (k, 4) for draws ``picks`` (k, 2) of ``rows``: the first row's box scaled to a
    ``w`` x ``h`` image (with ``recombine``: its size at the second row's centre), each edge
    moved by up to ``jitter`` of the box's side, in whole pixels inside the image."""
    size = np.array([w, h, w, h], dtype=np.float64)
    a = rows[picks[:, 0], :4] / np.tile(rows[picks[:, 0], 4:6], 2) * size
    same = (rows[picks[:, 0], 4] == w) & (rows[picks[:, 0], 5] == h)
    a = np.where(same[:, None], rows[picks[:, 0], :4], np.round(a))  # same size: unchanged
    if recombine:
        b = rows[picks[:, 1], :4] / np.tile(rows[picks[:, 1], 4:6], 2) * size
        side = np.minimum(a[:, 2:] - a[:, :2], size[:2])
        lo = np.clip(np.round((b[:, :2] + b[:, 2:] - side) / 2), 0, size[:2] - side)
        a = np.concatenate([lo, lo + side], axis=1)
    sides = np.tile(a[:, 2:] - a[:, :2], 2)
    moved = np.round(a + rng.uniform(-1.0, 1.0, size=a.shape) * jitter * sides)
    lo = np.clip(np.minimum(moved[:, :2], moved[:, 2:]), 0, None)
    hi = np.minimum(np.maximum(moved[:, :2], moved[:, 2:]), size[:2])
    return np.concatenate([lo, hi], axis=1)


def pool_distractor_boxes(
    pool: BoxPool,
    sample: Sample,
    label: str,
    target: Sequence[float],
    n: int,
    rng: np.random.Generator,
    *,
    max_iou: float = 0.1,
    avoid: Sequence[Sequence[float]] = (),
    max_tries: int = 2000,
    jitter: float = 0.05,
    fresh: Callable[[Box], bool] | None = None,
    larger: int | None = None,
) -> list[Box]:
    """``n`` boxes from ``pool`` (true boxes of other images, then recombined ones), each
    edge jittered by up to ``jitter`` of its side, with IoU below ``max_iou`` to ``target``,
    to every ``avoid`` box and to each other; ValueError when ``max_tries`` draws of each
    kind do not find them.

    ``fresh`` (default: any box) says whether a box's option text is new to the task: with
    unique answers, a text shown twice would be a distractor, and an answer's text shown
    again would be one too, so every box text is shown once. ``larger`` (None: any): how many
    of the boxes are larger in area than ``target``, so a caller can spread the answer's size
    rank evenly."""
    rows, weights = pool.candidates(sample, label)
    if not len(rows):
        raise ValueError("no box of another image of the task's sources to draw from")
    taken = np.array([target, *avoid], dtype=np.float64).reshape(-1, 4)
    found: list[Box] = []
    area = (target[2] - target[0]) * (target[3] - target[1])
    room = None if larger is None else {True: larger, False: n - larger}  # per side: still to find
    p = weights / weights.sum()
    for recombine in (False, True):
        for _ in range(0, max_tries, BATCH):
            if len(found) == n:
                break
            picks = rng.choice(len(rows), size=(BATCH, 2), p=p)
            boxes = _candidates(rows, picks, recombine, jitter, sample.width, sample.height, rng)
            ok = ((boxes[:, 2:] - boxes[:, :2]) >= 1).all(axis=1)
            ok &= (_iou_matrix(boxes, taken) < max_iou).all(axis=1)
            for k in np.flatnonzero(ok).tolist():
                box = tuple(float(v) for v in boxes[k])
                side = (box[2] - box[0]) * (box[3] - box[1]) > area
                if room is not None and not room[side]:
                    continue
                if all(iou(box, o) < max_iou for o in found) and (fresh is None or fresh(box)):
                    found.append(box)
                    if room is not None:
                        room[side] -= 1
                    if len(found) == n:
                        break
    if len(found) == n:
        return found
    sized = "" if larger is None else f" ({larger} larger than the target)"
    raise ValueError(
        f"found {len(found)} of {n} distractor boxes{sized} among {len(rows)} boxes of other "
        "images "
        f"with IoU < {max_iou} to the target and the image's regions; max_iou too strict or "
        "the target too large"
    )


def geometry_stats(boxes: Sequence[Sequence[float]], width: int, height: int) -> np.ndarray:
    """The first box's (the answer's) geometric statistics among ``boxes`` (an item's
    options, the answer first), each as it would look to a reader of the options alone: for
    its log area, log aspect, distance of its centre to the image centre, distance to the
    nearest border and distance to the mean of the other boxes, its offset from the item's
    mean, its rank in [0, 1] and whether it is the largest and whether the smallest (minus
    what chance gives); then its area rank as a one-hot less ``1 / n``. Over a task whose
    answers are exchangeable with their distractors, each averages zero."""
    unit = np.asarray(boxes, dtype=np.float64) / np.array([width, height, width, height])
    n = len(unit)
    w = np.maximum(unit[:, 2] - unit[:, 0], 1e-9)
    h = np.maximum(unit[:, 3] - unit[:, 1], 1e-9)
    cx, cy = (unit[:, 0] + unit[:, 2]) / 2, (unit[:, 1] + unit[:, 3]) / 2
    others = (unit.sum(axis=0, keepdims=True) - unit) / max(n - 1, 1)
    side = np.sqrt(np.mean(w * h))
    measures = (
        np.log(w * h),
        np.log(w / h),
        np.hypot(cx - 0.5, cy - 0.5),
        np.minimum.reduce([unit[:, 0], unit[:, 1], 1 - unit[:, 2], 1 - unit[:, 3]]),
        np.linalg.norm(unit - others, axis=1) / side,
    )
    out = []
    for m in measures:
        m = np.round(m, 6)  # boxes of one size are ties whatever the float rounding
        out += [
            m[0] - m.mean(),
            (m < m[0]).sum() / max(n - 1, 1) - 0.5,
            float(m[0] == m.max()) - 1 / n,
            float(m[0] == m.min()) - 1 / n,
        ]
    rank = np.zeros(n)
    rank[int((measures[0][0] > measures[0]).sum())] = 1.0
    return np.array(out + list(rank - 1 / n))


# per statistic of :func:`geometry_stats`: an offset from the item's mean counts for more than
# a rank or an extreme, as a linear reader weighs it by its size (measured on the EndoBench
# replica: with equal weights the answer's log area stayed 0.06 above its distractors')
WEIGHTS = np.array([4.0, 1.0, 1.0, 1.0] * 5 + [1.0] * 4)


class GeometryBalance:
    """Keeps a task's answer boxes exchangeable with their distractors (issue 32.3): of a few
    distractor sets drawn for an item, :meth:`choose` keeps the one that brings the task's
    running sums of the answer's :func:`geometry_stats` closest to zero, each sum weighed by
    the spread of its statistic over the sets seen. "The largest box", "the box nearest the
    centre" or "the box at the others' mean" then win as often with a distractor as with the
    answer."""

    def __init__(self) -> None:
        self.sums: np.ndarray | None = None
        self.squares: np.ndarray | None = None
        self.seen = 0

    def choose(self, sets: Sequence[Sequence[Sequence[float]]], width: int, height: int) -> int:
        """The index of the set to keep (each set the answer's box first); its statistics
        are added to the sums."""
        stats = np.array([geometry_stats(s, width, height) for s in sets])
        if self.sums is None:
            self.sums, self.squares = np.zeros(stats.shape[1]), np.zeros(stats.shape[1])
        self.squares += (stats**2).sum(axis=0)
        self.seen += len(stats)
        spread = self.squares / self.seen + 1e-9
        cost = (((self.sums + stats) ** 2) / spread) @ WEIGHTS
        best = int(np.argmin(cost))
        self.sums += stats[best]
        return best
