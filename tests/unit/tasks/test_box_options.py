"""Issue 32.3: grounding options whose geometry gives nothing away. A classifier that sees only
the four boxes (size and its rank, distance to the centre and to the border, distance to the
mean of the others, overlap, aspect) is near chance on the pool-drawn distractors, and was not
on the old similar-size boxes placed uniformly; no box text is shown twice in a task."""

from collections import Counter

import numpy as np
import pytest

from medvqa_build.geometry import iou, parse_box
from medvqa_build.records import Region, Sample
from medvqa_build.tasks.box_options import (
    BoxPool,
    GeometryBalance,
    fit_weights,
    geometry_stats,
    pool_distractor_boxes,
)

from .conftest import SPATIAL, run, task

sklearn = pytest.importorskip("sklearn.linear_model")


def framed_samples(n=400, seed=0):
    """Endoscopy-like stills: findings framed near the centre, lognormal sizes, two image
    sizes, a second finding in every fourth image."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        width, height = (640, 480) if i % 3 else (720, 576)
        regions = []
        for _ in range(1 if i % 4 else 2):
            f = float(np.clip(rng.lognormal(np.log(0.22), 0.4), 0.06, 0.5))
            bw = round(f * width * rng.uniform(0.8, 1.2))
            bh = round(f * height * rng.uniform(0.8, 1.2))
            cx = float(np.clip(rng.normal(0.5, 0.12), 0.1, 0.9)) * width
            cy = float(np.clip(rng.normal(0.5, 0.12), 0.1, 0.9)) * height
            x1 = int(np.clip(cx - bw / 2, 0, width - bw))
            y1 = int(np.clip(cy - bh / 2, 0, height - bh))
            box = (float(x1), float(y1), float(x1 + bw), float(y1 + bh))
            if not any(iou(box, r.bbox) > 0 for r in regions):
                regions.append(Region("polyp", box))
        out.append(
            Sample(
                sample_id=f"synthetic-endo:f{i}",
                source="synthetic-endo",
                image=f"f{i}.jpg",
                width=width,
                height=height,
                modality="endoscopy",
                regions=tuple(regions),
                group_id=f"g{i}",
            )
        )
    return out


FEATURES = (
    "area", "area rank", "area against the others' mean", "centre distance",
    "centre distance rank", "border distance", "border distance rank",
    "distance to the mean of the others", "largest IoU with another", "aspect",
)  # fmt: skip


def features(boxes, width, height):
    """Per option, the geometry a text-only reader can compute from the four boxes."""
    b = np.array(boxes, dtype=float)
    w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    area = w * h / (width * height)
    cx, cy = (b[:, 0] + b[:, 2]) / 2 / width, (b[:, 1] + b[:, 3]) / 2 / height
    centre = np.hypot(cx - 0.5, cy - 0.5)
    border = np.minimum.reduce([b[:, 0] / width, b[:, 1] / height, 1 - b[:, 2] / width])
    border = np.minimum(border, 1 - b[:, 3] / height)

    def rank(x):
        return np.argsort(np.argsort(x))

    rows = []
    for k in range(len(b)):
        others = [j for j in range(len(b)) if j != k]
        rows.append(
            [
                area[k],
                rank(area)[k],
                abs(area[k] - area[others].mean()) / area[others].mean(),
                centre[k],
                rank(centre)[k],
                border[k],
                rank(border)[k],
                np.abs(b[k] - b[others].mean(axis=0)).sum() / (width + height),
                max(iou(b[k], b[j]) for j in others),
                w[k] / h[k],
            ]
        )
    return np.array(rows)


def geometry_guessers(items, by_id):
    """(logistic regression on every feature, learned on one half and scored on the other;
    the best single-feature rule "pick the smallest / largest")."""
    x, y = [], []
    for item in items:
        s = by_id[item.sample_ids[0]]
        boxes = [parse_box(o, "abs", s.width, s.height) for o in item.options]
        x.append(features(boxes, s.width, s.height))
        y.append(ord(item.answer) - 65)
    x, y = np.array(x), np.array(y)
    half = len(items) // 2
    flat = x.reshape(-1, x.shape[2])
    is_answer = (np.arange(4)[None, :] == y[:, None]).reshape(-1)
    model = sklearn.LogisticRegression(max_iter=2000).fit(flat[: 4 * half], is_answer[: 4 * half])
    scores = model.decision_function(flat[4 * half :]).reshape(-1, 4)
    learned = float((scores.argmax(axis=1) == y[half:]).mean())
    rules = {
        f"{pick} {name}": float((getattr(x[:, :, j], f"arg{pick}")(axis=1) == y).mean())
        for j, name in enumerate(FEATURES)
        for pick in ("min", "max")
    }
    return learned, rules


@pytest.fixture(scope="module")
def grounding():
    samples = framed_samples()
    by_id = {s.sample_id: s for s in samples}

    def items(**params):
        spec = task("vg", "visual_grounding", SPATIAL, "Visual Grounding", quota=400, params=params)
        return run([spec], samples).items

    return by_id, items(), items(box_pool=False)


def test_geometry_alone_is_near_chance(grounding):
    by_id, new, old = grounding
    assert len(new) == len(old) == 400
    learned, rules = geometry_guessers(new, by_id)
    assert learned <= 0.33, learned  # chance 0.25; 2 SE over 200 test items is 0.06
    assert max(rules.values()) <= 0.33, max(rules.items(), key=lambda kv: kv[1])
    old_learned, old_rules = geometry_guessers(old, by_id)
    assert old_learned >= 0.5  # the answer was the mean of the others, and nearer the centre
    assert max(old_rules.values()) >= 0.4
    assert {i.negatives.strategy for i in new} == {"pool_boxes"}


def test_no_box_text_is_shown_twice(grounding):
    by_id, new, _ = grounding
    shown = Counter(o for item in new for o in item.options)
    assert max(shown.values()) == 1
    for item in new:
        s = by_id[item.sample_ids[0]]
        boxes = [parse_box(o, "abs", s.width, s.height) for o in item.options]
        for b in boxes:
            assert 0 <= b[0] < b[2] <= s.width and 0 <= b[1] < b[3] <= s.height
            assert all(v == int(v) for v in b)
            if b != item.answer_bbox:
                assert all(iou(b, r.bbox) < 0.1 for r in s.regions)


def _sample(sid, width=100, height=100, boxes=(), label="polyp", source="src"):
    return Sample(
        sample_id=sid,
        source=source,
        image=f"{sid}.jpg",
        width=width,
        height=height,
        modality="endoscopy",
        regions=tuple(Region(label, b) for b in boxes),
    )


def test_pool_draws_from_other_images_of_the_same_finding():
    polyps = [_sample(f"p{i}", boxes=[(i, i, i + 10, i + 10)]) for i in range(10)]
    ulcers = [_sample(f"u{i}", boxes=[(50, 50, 60, 70)], label="ulcer") for i in range(3)]
    pool = BoxPool.of(polyps + ulcers)
    rows, weights = pool.candidates(polyps[0], "polyp")
    assert len(rows) == 9 and len(weights) == 9 and (rows[:, 0] != 0).all()  # not its own box
    rows, _ = pool.candidates(ulcers[0], "ulcer")  # 2 other ulcers are too few: every finding
    assert len(rows) == 12
    # a source with fewer than MIN_POOL boxes of its own draws from every source of the task
    assert len(pool.candidates(_sample("x", source="other"), "polyp")[0]) == 13
    small = [_sample(f"c{i}", boxes=[(5, 5, 95, 95)], source="cvc") for i in range(3)]
    pool = BoxPool.of(polyps + small)
    rows, _ = pool.candidates(small[0], "polyp")
    assert len(rows) == 12 and (rows[:, 2] - rows[:, 0] < 90).sum() == 10  # its 2 + 10 polyps
    assert len(BoxPool.of([]).candidates(small[0], "polyp")[0]) == 0


def test_boxes_are_scaled_to_the_image_and_clear_the_target():
    others = [_sample(f"o{i}", 200, 100, boxes=[(20 * i, 10, 20 * i + 40, 50)]) for i in range(8)]
    pool = BoxPool.of(others)
    target = _sample("t", 100, 50, boxes=[(0, 0, 20, 20)])
    got = pool_distractor_boxes(
        pool, target, "polyp", (0, 0, 20, 20), 3, np.random.default_rng(0), jitter=0.0
    )
    assert len(got) == 3
    for b in got:
        assert (b[2] - b[0], b[3] - b[1]) == (20, 20)  # 40 x 40 at half the size
        assert iou(b, (0, 0, 20, 20)) < 0.1
    with pytest.raises(ValueError, match="distractor boxes"):  # nothing clears the target
        pool_distractor_boxes(
            pool, target, "polyp", (0, 0, 100, 50), 3, np.random.default_rng(0), max_iou=0.01
        )


def test_weights_favour_boxes_that_clear_few():
    """A large central box clears few others and would be kept less often than it is an
    answer: it is drawn more often, so the kept distractors look like the answers."""
    grid = [(x, y, x + 20, y + 20, 100, 100) for y in range(0, 100, 20) for x in range(0, 100, 20)]
    big = (20, 20, 80, 80, 100, 100)  # overlaps the 9 central grid boxes (IoU 0.11)
    weights = fit_weights(np.array([*grid, big], dtype=float), max_iou=0.1)
    inside = [k for k, g in enumerate(grid) if 20 <= g[0] < 80 and 20 <= g[1] < 80]
    outside = [k for k in range(len(grid)) if k not in inside]
    assert weights[-1] > weights[inside].min()
    assert weights[inside].min() > weights[outside].max()


def _large_findings(n=80, seed=3):
    """Findings framed large on small frames: boxes drawn only for the room an answer leaves
    are smaller than it."""
    samples = []
    rng = np.random.default_rng(seed)
    for i in range(n):
        side = float(rng.integers(20, 90))
        x, y = (float(v) for v in rng.integers(0, 200 - int(side), 2))
        samples.append(
            Sample(
                sample_id=f"synthetic-endo:s{i}",
                source="synthetic-endo",
                image=f"s{i}.jpg",
                width=200,
                height=200,
                modality="endoscopy",
                labels=("polyp",),
                regions=(Region("polyp", (x, y, x + side, y + side)),),
                group_id=f"g{i}",
            )
        )
    return samples


def _answer_geometry(items) -> dict[str, np.ndarray]:
    """Per item: the answer's log area and centre distance less its item's mean, and how
    many options are larger than the answer."""
    out = {"area": [], "centre": [], "larger": []}
    for i in items:
        boxes = np.array([parse_box(o, "abs", 200, 200) for o in i.options])
        at = ord(i.answer) - 65
        area = np.log((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))
        cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
        centre = np.hypot(cx - 100, cy - 100)
        out["area"].append(area[at] - area.mean())
        out["centre"].append(centre[at] - centre.mean())
        out["larger"].append(int((area > area[at]).sum()))
    return {k: np.array(v) for k, v in out.items()}


def test_the_answers_geometry_is_exchangeable_with_its_distractors():
    """Large findings on small frames: the answer's size rank is even and on average it is
    neither larger nor nearer the centre than the others."""
    spec = task("vg", "visual_grounding", SPATIAL, "Visual Grounding", quota=80)
    items = run([spec], _large_findings()).items
    assert len(items) >= 75
    got = _answer_geometry(items)
    larger = np.bincount(got["larger"], minlength=4)
    assert larger.max() - larger.min() <= 2, larger
    assert abs(got["area"].mean()) < 0.03, got["area"].mean()
    assert abs(got["centre"].mean()) < 1.5, got["centre"].mean()  # pixels of a 200 px frame


def _skewed_sets(rng: np.random.Generator, draws: int) -> list[list[tuple]]:
    """``draws`` sets of four boxes on a 100 x 100 frame, the answer first: distractor sides
    drawn from one distribution, the answer's mostly larger and nearer the centre than them."""
    side = float(rng.uniform(20, 40))
    cx, cy = np.clip(rng.normal(50, 12, 2), side / 2, 100 - side / 2)
    answer = (cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2)
    out = []
    for _ in range(draws):
        boxes = [answer]
        for _ in range(3):
            side = float(rng.uniform(12, 48))
            x, y = rng.uniform(0, 100 - side, 2)
            boxes.append((x, y, x + side, y + side))
        out.append(boxes)
    return out


def test_geometry_balance_keeps_a_skewed_draw_exchangeable():
    """Where every draw leans one way (the answer larger and more central than the boxes
    that fit beside it), keeping the first draw shows it; keeping the set the balance picks
    leaves the answer's mean offsets near zero and its size rank even."""
    rng = np.random.default_rng(0)
    balance, first, kept = GeometryBalance(), [], []
    for _ in range(400):
        sets = _skewed_sets(rng, 8)
        first.append(geometry_stats(sets[0], 100, 100))
        kept.append(geometry_stats(sets[balance.choose(sets, 100, 100)], 100, 100))
    first, kept = np.array(first), np.array(kept)
    # columns: log area's offset from the item's mean, rank, largest, smallest; then log
    # aspect's (all boxes square here: ties, the same in every draw), centre distance's,
    # border distance's, distance to the others' mean's; then the area rank one-hot
    bias, left = np.abs(first.mean(axis=0)), np.abs(kept.mean(axis=0))
    assert first[:, 0].mean() > 0.05 and first[:, 8].mean() < -0.07  # larger, more central
    assert first[:, 9].mean() < -0.25  # the answer's centre distance ranks low
    moved = np.r_[0:4, 8:24]
    assert (left[moved] <= 0.6 * bias[moved] + 0.01).all(), (bias.round(3), left.round(3))
    assert (left[moved] ** 2).sum() < (bias[moved] ** 2).sum() / 5
    assert np.array_equal(left[4:8], bias[4:8])


def _area(text: str) -> float:
    x1, y1, x2, y2 = parse_box(text, "abs", 200, 200)
    return (x2 - x1) * (y2 - y1)
