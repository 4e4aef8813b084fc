"""The validation rules of a build, each with an id and a one-line meaning (docs/curation.md).

Item rules look at one item; build rules at the whole item set (letter balance, split leaks,
duplicate ids). Every violation becomes a :class:`Problem` whose ``check`` is the rule id.
Rules re-read image files and the source manifests; they do not trust the stage that wrote
the items.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from ..errors import ImageProblem
from ..geometry import box_problem, iou
from ..media.image import check_image
from ..ontology import Ontology
from ..records import Item, Sample, item_groups
from ..render import prompt_levels
from ..store.memory import release_freed_memory
from ..store.tables import SampleTable, batched, sample_lookup
from ..vocab import COORD_FORMATS, IMAGE_SCHEMES, LETTERS, answer_letters, nested_options
from .blind import BlindAudit
from .summaries import IdLog, SplitTracker, duplicated


@dataclass(frozen=True)
class Problem:
    item_id: str
    check: str
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


MIN_REGION_IOU = 0.5
_SLOT = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
_ANSWER = re.compile(r"^[A-Z](,[A-Z])*$")
WINDOW = 1024  # items checked together: their samples are looked up at once (a window of
# rendered contour items is ~10 MiB; 4096 cost 35 MiB more at 64k items for no speed-up)
# image sizes remembered, one entry an image (~150 bytes); beyond this the oldest half is
# dropped, and a dropped size costs one header read again (~20 us). It was 65536 entries, two
# an image: ~11 MiB held from 33k images on
SIZE_CACHE = 16384
_SAMPLE_RULES = frozenset({"schema", "box-matches-region", "split-leak"})  # read samples


def normalise_text(text: str) -> str:
    """Case, spacing and punctuation folded: ``"X-ray."``, ``"x_ray"``, ``" X ray "`` agree."""
    text = text.casefold().replace("_", " ").replace("-", " ").replace("/", " ")
    text = re.sub(r"[.,;:!?'\"()\[\]]", "", text)
    return " ".join(text.split())


@dataclass
class RuleContext:
    """What the rules may consult besides the items.

    ``samples_by_id`` holds (at least) the samples of the items being checked: in
    :func:`run_rules`, those of the current window. ``samples_known`` says whether the build's
    samples were given at all (by default: whether ``samples_by_id`` is not empty).
    """

    samples_by_id: Mapping[str, Sample]
    manifests: Mapping[str, Any]
    resolve: Callable[[str], Path]
    letter_tolerance: float = 0.1
    duplicate_groups: Sequence[Sequence[str]] = ()
    samples_known: bool | None = None
    _sizes: dict[str, tuple[tuple[int, int] | str, bool]] = field(default_factory=dict)
    # every item id the build rules saw, in order (they keep positions into it)
    item_ids: IdLog = field(default_factory=IdLog)
    _ontologies: dict[str, Ontology] = field(default_factory=dict)
    blind: Any = None  # the recipe's BlindSpec: the text-only audit runs only with one
    seed: int = 0
    findings: dict[str, Any] = field(default_factory=dict)  # build rules' reports (``blind``)

    def __post_init__(self) -> None:
        if self.samples_known is None:
            self.samples_known = bool(self.samples_by_id)

    def image_size(self, ref: str, decode: bool = False) -> tuple[int, int] | str:
        """``(width, height)`` of an image reference, or why it cannot be read (cached).

        One cache entry per image, ``(answer, decoded)``: an answer found in ``decode`` mode
        also answers a header lookup, unless it is an error (a file whose pixels fail may still
        have a readable header); a header answer is read again for a decode lookup."""
        hit = self._sizes.get(ref)
        if hit is not None:
            size, decoded = hit
            if decoded if decode else not (decoded and isinstance(size, str)):
                return size
        if len(self._sizes) >= SIZE_CACHE:  # bounded; a dropped size is re-read alike
            for old in list(islice(self._sizes, len(self._sizes) // 2)):
                del self._sizes[old]
        try:
            size = check_image(self.resolve(ref), "decode" if decode else "header")
        except (ImageProblem, KeyError) as exc:
            size = str(exc)
        self._sizes[ref] = (size, decode)
        return size

    def ontology(self, source: str) -> Ontology:
        if source not in self._ontologies:
            m = self.manifests.get(source)
            data = getattr(m, "ontology", None) if m is not None else None
            self._ontologies[source] = Ontology.from_mapping(data)
        return self._ontologies[source]


@dataclass(frozen=True)
class Rule:
    id: str
    message: str  # what the rule guarantees, one line
    check: Callable[..., list]
    # item: check(item, ctx) -> [message]; build: check(items, ctx) -> [Problem], with
    # check.collector the class run_rules feeds item by item
    scope: str = "item"


def _is_grounding(item: Item) -> bool:
    return not item.options and item.answer_bbox is not None


# --- item rules -----------------------------------------------------------------------------


def _schema(item: Item, ctx: RuleContext) -> list[str]:
    out = []
    for name in ("item_id", "benchmark", "category", "task", "subtask", "source", "question", "gt"):
        value = getattr(item, name)
        if not isinstance(value, str) or not value.strip():
            out.append(f"{name} is empty")
    if _SLOT.search(item.question or ""):
        out.append(f"unfilled template slot in {item.question!r}")
    if not item.sample_ids:
        out.append("no sample_ids (provenance lost)")
    elif ctx.samples_known:
        unknown = [s for s in item.sample_ids if s not in ctx.samples_by_id]
        if unknown:
            out.append(f"sample_ids {unknown} are not in the build's samples")
    if not item.images:
        out.append("no image")
    bad_refs = [r for r in item.images if not r.startswith(IMAGE_SCHEMES)]
    if bad_refs:
        out.append(f"image references {bad_refs} use no known scheme {IMAGE_SCHEMES}")
    if not _is_grounding(item):
        if len(item.options) < 2:
            out.append(f"{len(item.options)} option(s); an MCQ needs at least 2")
        if any(not isinstance(o, str) or not o.strip() for o in item.options):
            out.append("an option is empty")
        if not _ANSWER.match(item.answer or ""):
            out.append(f"answer {item.answer!r} is not a letter or comma-separated letters")
    levels = prompt_levels()
    if item.prompt_level not in levels:
        out.append(f"prompt_level {item.prompt_level!r} is not one of {', '.join(levels)}")
    if item.coord_format is not None and item.coord_format not in COORD_FORMATS:
        out.append(f"coord_format {item.coord_format!r} is not one of {', '.join(COORD_FORMATS)}")
    if not item.split:
        out.append("split is empty")
    return out


def _image_decodes(item: Item, ctx: RuleContext) -> list[str]:
    out = []
    for ref in item.images:
        size = ctx.image_size(ref, decode=True)
        if isinstance(size, str):
            out.append(f"{ref}: {size}")
    return out


def _synonym_classes(onto: Ontology) -> dict[str, str]:
    """Normalised name -> representative of its synonym class."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    for name, aliases in onto.synonyms.items():
        for alias in aliases:
            a, b = find(normalise_text(name)), find(normalise_text(alias))
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {k: find(k) for k in list(parent)}


def _options_unique(item: Item, ctx: RuleContext) -> list[str]:
    classes = _synonym_classes(ctx.ontology(item.source))
    seen: dict[str, str] = {}
    out = []
    for option in item.options:
        norm = normalise_text(option)
        key = classes.get(norm, norm)
        if key in seen:
            how = "the same text" if normalise_text(seen[key]) == norm else "synonyms"
            out.append(f"options {seen[key]!r} and {option!r} are {how} after normalisation")
        else:
            seen[key] = option
    return out


def _options_apart(item: Item, ctx: RuleContext) -> list[str]:
    neg = item.negatives
    if neg is None or neg.pool_size <= len(neg.candidates):
        return []  # the recipe's whole option set (fixed options, every allowed label shown)
    return [
        f"option {inner!r} lies inside option {outer!r}: a reply naming {outer!r} matches "
        "both by text"
        for inner, outer in nested_options(item.options)
        if normalise_text(inner) != normalise_text(outer)  # the same text: options-unique
    ]


def _answer_in_options(item: Item, ctx: RuleContext) -> list[str]:
    if _is_grounding(item):
        return []
    n = len(item.options)
    letters = answer_letters(item.answer)
    if not letters or any(a not in LETTERS[:n] for a in letters):
        return [f"answer {item.answer!r} is not among the letters {LETTERS[:n]}"]
    if len(letters) != len(set(letters)):
        return [f"answer {item.answer!r} repeats a letter"]
    if len(letters) == 1:
        shown = item.options[LETTERS.index(letters[0])]
        if normalise_text(shown) != normalise_text(item.gt):
            return [f"option {letters[0]} is {shown!r}, the truth (gt) is {item.gt!r}"]
    return []


def _related_to_truth(onto: Ontology, truth: str) -> set[str]:
    norm = normalise_text(truth)
    names = set(onto.parents) | set(onto.synonyms)
    names |= {p for ps in onto.parents.values() for p in ps}
    banned = {norm}
    for name in names:
        if normalise_text(name) == norm:
            banned |= {normalise_text(r) for r in onto.related(name)}
    return banned


def _distractor_related(item: Item, ctx: RuleContext) -> list[str]:
    if _is_grounding(item):
        return []
    truth_letters = set(answer_letters(item.answer))
    onto = ctx.ontology(item.source)
    banned = _related_to_truth(onto, item.gt) - {normalise_text(item.gt)}
    classes = _synonym_classes(onto)
    truth_class = classes.get(normalise_text(item.gt), normalise_text(item.gt))
    out = []
    for letter, option in zip(LETTERS, item.options, strict=False):
        if letter in truth_letters:
            continue
        norm = normalise_text(option)
        if norm in banned or (
            norm != normalise_text(item.gt) and classes.get(norm, norm) == truth_class
        ):
            out.append(
                f"distractor {letter} {option!r} is a synonym, ancestor or descendant "
                f"of the truth {item.gt!r} in the {item.source} ontology"
            )
    return out


def _boxes_inside(item: Item, ctx: RuleContext) -> list[str]:
    out = []
    boxes = [
        (s.image_index, f"{s.kind} shape", s.bbox)
        for s in item.prompt_geometry
        if s.bbox is not None
    ]
    if item.answer_bbox is not None:
        boxes.append((0, "answer_bbox", item.answer_bbox))
    for index, what, box in boxes:
        if index >= len(item.images):
            continue  # image-count reports it
        size = ctx.image_size(item.images[index])
        if isinstance(size, str):
            continue  # image-decodes reports it
        if problem := box_problem(box, *size):
            out.append(f"{what} on image {index}: {problem}")
    return out


def _inside(inner, outer) -> float:
    """Share of box ``inner`` that lies inside box ``outer``."""
    ix = max(0.0, min(inner[2], outer[2]) - max(inner[0], outer[0]))
    iy = max(0.0, min(inner[3], outer[3]) - max(inner[1], outer[1]))
    area = max(0.0, inner[2] - inner[0]) * max(0.0, inner[3] - inner[1])
    return ix * iy / area if area > 0 else 0.0


def _box_matches_region(item: Item, ctx: RuleContext) -> list[str]:
    """A drawn shape labelled with the truth must lie on a region of that label in the sample."""
    out = []
    for shape in item.prompt_geometry:
        if shape.bbox is None or shape.label is None or shape.image_index >= len(item.images):
            continue
        if normalise_text(shape.label) != normalise_text(item.gt):
            continue
        if shape.image_index >= len(item.sample_ids):
            continue
        sample = ctx.samples_by_id.get(item.sample_ids[shape.image_index])
        size = ctx.image_size(item.images[shape.image_index])
        if sample is None or isinstance(size, str) or box_problem(shape.bbox, *size):
            continue
        regions = [
            r
            for r in sample.regions
            if r.bbox is not None and normalise_text(r.label) == normalise_text(shape.label)
        ]
        if not regions:
            continue
        sx, sy = size[0] / sample.width, size[1] / sample.height
        scaled = [(r.bbox[0] * sx, r.bbox[1] * sy, r.bbox[2] * sx, r.bbox[3] * sy) for r in regions]
        # a box is drawn around the whole region; a contour/mask/point may be one component
        measure, score = (
            ("IoU", iou) if shape.kind in ("box", "text") else ("share inside", _inside)
        )
        best = max(score(shape.bbox, b) for b in scaled)
        if best < MIN_REGION_IOU:
            out.append(
                f"{shape.kind} shape at {[round(v, 1) for v in shape.bbox]} is not on a "
                f"{shape.label!r} region of {sample.sample_id} (best {measure} {best:.2f} < "
                f"{MIN_REGION_IOU}); the prompt points at the wrong place"
            )
    return out


def _licence(item: Item, ctx: RuleContext) -> list[str]:
    if not item.licence.strip():
        return [f"no licence (source {item.source!r})"]
    m = ctx.manifests.get(item.source)
    if m is not None and getattr(m, "licence", None) and m.licence != item.licence:
        return [f"licence {item.licence!r} differs from the {item.source} manifest's {m.licence!r}"]
    return []


# --- build rules ----------------------------------------------------------------------------
# A build rule is a collector: ``add`` sees each item once (with ``ctx.samples_by_id`` holding
# at least that item's samples) and keeps a compact summary of it (ids, letters, counts, group
# keys), never the item; ``finish`` turns the summaries into problems. ``check(items, ctx)``
# runs one over a whole item set.


class _UniqueIds:
    """A hash and a position per item; the ids of equal hashes are compared at the end."""

    def __init__(self, ctx: RuleContext):
        self.hashes, self.positions = array("q"), array("q")

    def add(self, item: Item, ctx: RuleContext) -> None:
        self.hashes.append(hash(item.item_id))
        self.positions.append(ctx.item_ids.position(item))

    def finish(self, ctx: RuleContext) -> list[Problem]:
        at, _ = duplicated(self.hashes)
        counts = Counter(ctx.item_ids[self.positions[i]] for i in at.tolist())
        return [
            Problem(i, "item-id-unique", f"{n} items share this id")
            for i, n in sorted(counts.items())
            if n > 1
        ]


class _LetterBalance:
    def __init__(self, ctx: RuleContext):
        # task -> (option count of each single-answer item in order, answer counts, entries)
        self.tasks: dict[str, tuple[array, Counter[str], set[tuple[str, int]]]] = {}

    def add(self, item: Item, ctx: RuleContext) -> None:
        if _is_grounding(item) or len(answer_letters(item.answer)) != 1:
            return
        summary = self.tasks.get(item.task)
        if summary is None:
            summary = self.tasks[item.task] = (array("I"), Counter(), set())
        n_options, counts, entries = summary
        n_options.append(len(item.options))
        counts[item.answer.strip()] += 1
        entries.add((item.template_id.split("/")[0], len(item.options)))

    def finish(self, ctx: RuleContext) -> list[Problem]:
        out = []
        for task, (n_options, counts, entries) in sorted(self.tasks.items()):
            n_letters = max(n_options)
            # a task may mix option counts (polyp counting has 6, lesion counting 4): each item
            # adds 1/n to each of its own n letters (summed in item order)
            expected = {
                L: sum(1 / n for n in n_options if k < n) for k, L in enumerate(LETTERS[:n_letters])
            }
            # each (task entry, option count) is balanced to within one item; a task made of
            # several entries may therefore be off by one per entry
            slack = max(float(len(entries)), ctx.letter_tolerance * len(n_options))
            bad = {L for L in expected if abs(counts.get(L, 0) - expected[L]) > slack}
            if bad:
                shown = ", ".join(f"{L}: {counts.get(L, 0)}" for L in LETTERS[:n_letters])
                want = ", ".join(f"{L}: {expected[L]:.1f}" for L in expected)
                out.append(
                    Problem(
                        f"task:{task}",
                        "letter-balance",
                        f"answer letters of {task!r} are unbalanced ({shown}; expected {want}, "
                        f"tolerance {slack:.1f})",
                    )
                )
        return out


class _ImageCount:
    def __init__(self, ctx: RuleContext):
        self.problems: list[Problem] = []  # per item, in item order
        # (task, subtask, prompt_level) -> image count -> positions of its items (ctx.item_ids)
        self.groups: dict[tuple, dict[int, array]] = {}

    def add(self, item: Item, ctx: RuleContext) -> None:
        key = (item.task, item.subtask, item.prompt_level)
        by_count = self.groups.get(key)
        if by_count is None:
            by_count = self.groups[key] = {}
        at = by_count.get(len(item.images))
        if at is None:
            at = by_count[len(item.images)] = array("q")
        at.append(ctx.item_ids.position(item))
        synthesised = any(r.startswith("generated://") for r in item.images)
        if not synthesised and len(item.images) != len(item.sample_ids):
            self.problems.append(
                Problem(
                    item.item_id,
                    "image-count",
                    f"{len(item.images)} image(s) for {len(item.sample_ids)} sample(s)",
                )
            )
        for shape in item.prompt_geometry:
            if shape.image_index >= len(item.images):
                self.problems.append(
                    Problem(
                        item.item_id,
                        "image-count",
                        f"a {shape.kind} shape is on image {shape.image_index}, "
                        f"but the item has {len(item.images)} image(s)",
                    )
                )

    def finish(self, ctx: RuleContext) -> list[Problem]:
        out = list(self.problems)
        for (task, subtask, level), by_count in sorted(self.groups.items()):
            usual, _ = max(
                ((n, len(at)) for n, at in by_count.items()), key=lambda kv: (kv[1], -kv[0])
            )
            odd = sorted((pos, n) for n, at in by_count.items() if n != usual for pos in at)
            out += [
                Problem(
                    ctx.item_ids[pos],
                    "image-count",
                    f"{n} image(s); the other items of {task}/{subtask} ({level}) have {usual}",
                )
                for pos, n in odd
            ]
        return out


class _SplitLeak:
    """Per group, source image and near-duplicate group: in which splits its items are
    (a :class:`SplitTracker`: three numbers per key an item has, the key's text only once it
    leaks)."""

    def __init__(self, ctx: RuleContext):
        self.item_groups = item_groups
        self.member_of = {
            sid: n for n, members in enumerate(ctx.duplicate_groups) for sid in members
        }
        self.tracker = SplitTracker()

    def add(self, item: Item, ctx: RuleContext) -> None:
        if not item.split:
            return
        at, split, add = ctx.item_ids.position(item), item.split, self.tracker.add
        for g in self.item_groups(item, ctx.samples_by_id):
            add(("group", g), split, at)
        for ref in item.images:
            if ref.startswith("source://"):
                add(("image", ref), split, at)
        for sid in item.sample_ids:
            if sid in self.member_of:
                add(("near-duplicate", f"group {self.member_of[sid]}"), split, at)

    def finish(self, ctx: RuleContext) -> list[Problem]:
        out = []
        for (kind, key), per_split in sorted(self.tracker.leaks()):
            # split -> (records, the distinct ids of its items)
            splits = {
                s: (n, {ctx.item_ids[p] for p in at.tolist()}) for s, (n, at) in per_split.items()
            }
            ordered = sorted(splits, key=lambda s: (-splits[s][0], s))
            shown = ", ".join(f"{s}: {len(splits[s][1])}" for s in ordered)
            out.append(
                Problem(
                    min(splits[ordered[-1]][1]),
                    "split-leak",
                    f"{kind} {key} is in several splits ({shown} items)",
                )
            )
        return out


_FREE_GUESS = {  # what the text-only guess of a task that is not single-answer choice was
    "box": "the mean answer box of the other items, or the box the question writes, hits "
    "its answer (IoU >= 0.5)",
    "multi-select": "the options most often in the answer, as many as usual, are the answer",
}


class _Blind:
    """The text-only audit (:mod:`.blind`) when the recipe configures ``blind``: a task whose
    items are answered far above chance without the image is a problem; the per-task table
    and the items answered confidently go to ``ctx.findings["blind"]``."""

    def __init__(self, ctx: RuleContext):
        self.audit = BlindAudit(ctx.blind, ctx.seed) if ctx.blind is not None else None

    def add(self, item: Item, ctx: RuleContext) -> None:
        if self.audit is not None:
            self.audit.add(item)

    def finish(self, ctx: RuleContext) -> list[Problem]:
        if self.audit is None:
            return []
        report = self.audit.report()
        ctx.findings["blind"] = report
        return [
            Problem(
                f"task:{t['task']}",
                "blind",
                f"{t['task']!r} is answerable without the image: blind accuracy "
                f"{t['accuracy']:.1%} against chance {t['chance']:.1%} over {t['items']} items "
                f"(z = {t['z']:.1f}); "
                + (
                    f"{t['confident']} answered confidently"
                    if t.get("kind", "choice") == "choice"
                    else _FREE_GUESS[t["kind"]]
                ),
            )
            for t in report["tasks"]
            if t["flagged"]
        ]


def _whole_set(collector: type) -> Callable[[Iterable[Item], RuleContext], list[Problem]]:
    """``check(items, ctx)`` of a build rule: its collector fed every item."""

    def check(items: Iterable[Item], ctx: RuleContext) -> list[Problem]:
        c = collector(ctx)
        for item in items:
            c.add(item, ctx)
        return c.finish(ctx)

    check.collector = collector  # type: ignore[attr-defined] - run_rules feeds it itself
    return check


_unique_ids = _whole_set(_UniqueIds)
_letter_balance = _whole_set(_LetterBalance)
_image_count = _whole_set(_ImageCount)
_split_leak = _whole_set(_SplitLeak)
_blind = _whole_set(_Blind)


RULES: tuple[Rule, ...] = (
    Rule(
        "schema", "every field has the right type and a value; no unfilled template slot", _schema
    ),
    Rule("item-id-unique", "no two items share an item_id", _unique_ids, "build"),
    Rule("image-decodes", "every image of the item exists and decodes fully", _image_decodes),
    Rule(
        "options-unique",
        "options differ after folding case, spacing, punctuation and synonyms",
        _options_unique,
    ),
    Rule(
        "options-apart",
        "no option's text lies inside another's (lower-cased) where the distractors were chosen",
        _options_apart,
    ),
    Rule(
        "answer-in-options",
        "the answer letters name options; a single answer's option is the gt",
        _answer_in_options,
    ),
    Rule(
        "distractor-related",
        "no distractor is a synonym, ancestor or descendant of the truth",
        _distractor_related,
    ),
    Rule(
        "box-inside",
        "every box (prompt, answer) lies inside its image with positive area",
        _boxes_inside,
    ),
    Rule(
        "box-matches-region",
        "a shape drawn for the truth lies on a region of that label "
        f"(box IoU, or share of a contour inside, >= {MIN_REGION_IOU})",
        _box_matches_region,
    ),
    Rule(
        "letter-balance",
        "per task, each answer letter's count is within the tolerance of uniform",
        _letter_balance,
        "build",
    ),
    Rule(
        "image-count",
        "one image per sample, as many as the task's other items, shapes on existing images",
        _image_count,
        "build",
    ),
    Rule(
        "split-leak",
        "no group (patient/video), image or near-duplicate group in two splits",
        _split_leak,
        "build",
    ),
    Rule("licence", "every item carries its source's licence", _licence),
    Rule(
        "blind",
        "per task, the answers are not far above chance from question and options alone "
        "(text-only audit; runs when the recipe has `blind`)",
        _blind,
        "build",
    ),
)
RULE_IDS = tuple(r.id for r in RULES)


def run_rules(
    items: Iterable[Item],
    samples: SampleTable | Mapping[str, Sample] | Iterable[Sample] | None,
    manifests: Mapping[str, Any] | None,
    resolve: Callable[[str], Path],
    *,
    letter_tolerance: float = 0.1,
    duplicate_groups: Sequence[Sequence[str]] | None = None,
    rules: Sequence[str] | None = None,
    blind: Any = None,
    seed: int = 0,
    findings: dict[str, Any] | None = None,
) -> list[Problem]:
    """Every violation of the rules (all, or those named in ``rules``) by ``items``.

    ``items`` is read once, :data:`WINDOW` items at a time, and may be a list or an on-disk
    :class:`~medvqa_build.tables.ItemTable`; ``samples`` a dict by id, a list or a
    :class:`~medvqa_build.tables.SampleTable`, of which only each window's samples are looked
    up. Nothing holds every item or sample: build rules keep a small summary of each item.
    ``samples`` and ``manifests`` may be empty: rules that need them then check less
    (no provenance, ontology or licence comparison). ``duplicate_groups`` (sample ids, from
    the curate report) let ``split-leak`` catch near-duplicate images across splits.
    ``blind`` (a :class:`~medvqa_build.recipe.BlindSpec`) runs the text-only audit with
    ``seed``; its report is put in ``findings["blind"]``.
    Problems come rule by rule (in :data:`RULES` order), each rule's in item order.
    """
    chosen = [r for r in RULES if rules is None or r.id in rules]
    unknown = sorted(set(rules or ()) - set(RULE_IDS))
    if unknown:
        raise ValueError(f"unknown rule(s) {unknown}; known: {', '.join(RULE_IDS)}")
    if samples is not None and not isinstance(samples, SampleTable | Mapping):
        samples = {s.sample_id: s for s in samples}
    known = bool(samples)  # a table's length is in its footer
    lookup = sample_lookup(samples) if known else None
    ctx = RuleContext(
        {},
        manifests or {},
        resolve,
        letter_tolerance,
        tuple(duplicate_groups or ()),
        samples_known=known,
        blind=blind,
        seed=seed,
        findings=findings if findings is not None else {},
    )
    item_rules = [r for r in chosen if r.scope != "build"]
    collectors = {r.id: r.check.collector(ctx) for r in chosen if r.scope == "build"}
    found: dict[str, list[Problem]] = {r.id: [] for r in item_rules}
    wants_samples = lookup is not None and any(r.id in _SAMPLE_RULES for r in chosen)
    for window in batched(items, WINDOW):
        if wants_samples:
            ctx.samples_by_id = lookup({s for item in window for s in item.sample_ids})
        for item in window:
            for rule in item_rules:
                found[rule.id] += [Problem(item.item_id, rule.id, m) for m in rule.check(item, ctx)]
            for c in collectors.values():
                c.add(item, ctx)
        ctx.samples_by_id = {}
        del window
        release_freed_memory(collect=False)
    problems: list[Problem] = []
    for rule in chosen:
        problems += collectors[rule.id].finish(ctx) if rule.id in collectors else found[rule.id]
    return problems


class LetterTally:
    """Per task, how often each letter is the answer, counted item by item."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter] = defaultdict(Counter)

    def add(self, item: Item) -> None:
        for letter in answer_letters(item.answer):
            self.counts[item.task][letter] += 1

    def histogram(self) -> dict[str, dict[str, int]]:
        return {task: dict(sorted(c.items())) for task, c in sorted(self.counts.items())}


def letter_histogram(items: Iterable[Item]) -> dict[str, dict[str, int]]:
    """Per task, how often each letter is the answer (one pass, counts only)."""
    tally = LetterTally()
    for item in items:
        tally.add(item)
    return tally.histogram()
