"""Issue 35: a task's box pool keeps at most ``box_pool_size`` true boxes of each (source,
finding), a seeded draw made as the scan streams, so its memory and its weighting follow the
benchmark, not the download; ``all`` keeps every box, and a pool under the cap is the pool of
before, array for array."""

import random
import zlib

import numpy as np
import pytest

from medvqa_build.errors import RecipeError
from medvqa_build.records import Region, Sample
from medvqa_build.tasks.box_options import (
    CHUNK,
    MIN_CLEAR,
    MIN_POOL,
    POOL_SIZE,
    REFERENCE,
    BoxPool,
    _draw_key,
    _iou_matrix,
    _owner,
    fit_weights,
    pool_size,
)

from .conftest import SPATIAL, run, task


def _samples(n_polyp=100, n_ulcer=30, source="src", prefix="", twice=4):
    """Polyp images (every ``twice``-th with a second polyp box) and ulcer images."""
    out = []
    for i in range(n_polyp + n_ulcer):
        label = "polyp" if i < n_polyp else "ulcer"
        w, h = (640, 480) if i % 3 else (720, 576)
        x, y = float(7 * i % 400), float(5 * i % 300)
        boxes = [(x, y, x + 30 + i % 50, y + 20 + i % 40)]
        if label == "polyp" and i % twice == 0:
            boxes.append((x + 200, y + 150, x + 230, y + 190))
        out.append(
            Sample(
                sample_id=f"{source}:{prefix}{i:04d}",
                source=source,
                image=f"{i}.jpg",
                width=w,
                height=h,
                modality="endoscopy",
                regions=tuple(Region(label, b) for b in boxes),
            )
        )
    return out


def _old_weights(rows, max_iou, power=3, rounds=2):
    """fit_weights as it was before issue 35: every box weighed in every round."""
    n = len(rows)
    unit = rows[:, :4] / np.concatenate([rows[:, 4:6], rows[:, 4:6]], axis=1)
    picked = np.sort(np.random.default_rng(0).choice(n, size=min(n, REFERENCE), replace=False))
    weights = np.ones(n)
    for _ in range(rounds):
        q = weights[picked]
        z = np.empty(n)
        for a in range(0, n, CHUNK):
            z[a : a + CHUNK] = (_iou_matrix(unit[a : a + CHUNK], unit[picked]) < max_iou) @ q
        weights = 1.0 / np.maximum(z / q.sum(), MIN_CLEAR) ** power
    return weights


@pytest.mark.parametrize("n", [1, 7, 256, 257, 1000, CHUNK + 5])
@pytest.mark.parametrize("max_iou", [0.1, 0.3])
def test_weights_are_those_of_weighing_every_box_every_round(n, max_iou):
    """The first round now weighs the reference boxes alone (only theirs feed the last)."""
    rng = np.random.default_rng(n)
    w = rng.choice([640.0, 720.0, 1280.0], n)
    h = 0.75 * w
    x1, y1 = rng.uniform(0, 0.8, n) * w, rng.uniform(0, 0.8, n) * h
    x2 = np.minimum(x1 + rng.lognormal(np.log(0.2), 0.5, n) * w, w)
    y2 = np.minimum(y1 + rng.lognormal(np.log(0.2), 0.5, n) * h, h)
    rows = np.column_stack([x1, y1, x2, y2, w, h])
    assert fit_weights(rows, max_iou).tobytes() == _old_weights(rows, max_iou).tobytes()


def _old_pool(samples, max_iou=0.1):
    """The pool as it was before the cap (every box, in the order added), per source:
    rows, label codes, owners, names, weights."""
    rows, labels, owners = {}, {}, {}
    for s in samples:
        for r in s.regions:
            rows.setdefault(s.source, []).append((*map(float, r.bbox), s.width, s.height))
            labels.setdefault(s.source, []).append(r.label)
            owners.setdefault(s.source, []).append(_owner(s.sample_id))
    out = {}
    for src in sorted(rows):
        names = sorted(set(labels[src]))
        arr = np.array(rows[src], dtype=np.float64).reshape(-1, 6)
        out[src] = (
            arr,
            np.array([names.index(x) for x in labels[src]], np.int32),
            np.array(owners[src], np.int64),
            names,
            _old_weights(arr, max_iou),
        )
    return out


def _arrays(pool):
    return {
        src: (b.rows, b.labels, b.owners, b.names, b.weights)
        for src, b in sorted(pool._frozen.items())
    }


def _counts(pool):
    """Boxes kept per (source, finding)."""
    return {
        (src, name): int((b.labels == k).sum())
        for src, b in pool._frozen.items()
        for k, name in enumerate(b.names)
    }


def _same_arrays(a, b):
    assert a.keys() == b.keys()
    for src in a:
        for x, y in zip(a[src], b[src], strict=True):
            if isinstance(x, list):
                assert x == y
            else:
                assert x.dtype == y.dtype and np.array_equal(x, y)


def test_a_pool_under_the_cap_is_the_pool_of_before():
    samples = _samples() + _samples(20, 12, source="cvc")
    old = _old_pool(samples)
    for cap in (None, 125, POOL_SIZE):  # the largest group holds 125 boxes
        pool = BoxPool.of(samples, cap=cap, salt=b"seed")
        _same_arrays(_arrays(pool), old)
        assert all(b.seen is None for b in pool._frozen.values())
        assert pool.summary()["groups_capped"] == 0


def test_the_cap_bounds_every_group_and_all_keeps_every_box():
    samples = _samples() + _samples(20, 12, source="cvc")  # polyp groups: 125 and 25 boxes
    full = _counts(BoxPool.of(samples))
    assert full == {("src", "polyp"): 125, ("src", "ulcer"): 30, ("cvc", "polyp"): 25,
                    ("cvc", "ulcer"): 12}  # fmt: skip
    pool = BoxPool.of(samples, cap=16, salt=b"seed")
    assert _counts(pool) == {k: min(n, 16) for k, n in full.items()}
    assert pool.summary() == {
        "box_pool_size": 16,
        "boxes_in_pool": 192,
        "boxes_kept": 60,
        "groups": 4,
        "groups_capped": 3,
    }
    # the scan never holds more than twice the cap of a group
    pool = BoxPool(cap=16, salt=b"seed")
    most = 0
    for s in samples:
        for r in s.regions:
            pool.add(s, r.label, r.bbox)
            most = max(most, *(len(g.seqs) for g in pool._groups.values()))
    assert most < 32
    # "all": every box, the params' spelling and the default
    assert pool_size({"box_pool_size": "all"}) is None
    assert pool_size({}) == POOL_SIZE == 2048
    assert pool_size({"box_pool_size": 8}) == 8
    for bad in (MIN_POOL - 1, 0, -3, "many", 12.5, True):
        with pytest.raises(RecipeError, match="box_pool_size"):
            pool_size({"box_pool_size": bad})


def test_the_draw_is_seeded_stable_and_independent_of_the_scan_order():
    samples = _samples()
    a = BoxPool.of(samples, cap=16, salt=b"one")
    _same_arrays(_arrays(a), _arrays(BoxPool.of(samples, cap=16, salt=b"one")))
    b = BoxPool.of(samples, cap=16, salt=b"two")
    assert a._frozen["src"].owners.tolist() != b._frozen["src"].owners.tolist()

    def kept(pool):
        box = pool._frozen["src"]
        return sorted(zip(box.owners.tolist(), map(tuple, box.rows.tolist()), strict=True))

    shuffled = list(samples)
    random.Random(3).shuffle(shuffled)
    assert kept(BoxPool.of(shuffled, cap=16, salt=b"one")) == kept(a)
    # the boxes of smallest key of a one-shot draw over the whole group, kept in scan order
    polyps = [
        (_draw_key(b"one", s.sample_id, k), (*r.bbox, s.width, s.height))
        for s in samples
        for k, r in enumerate(s.regions)
        if r.label == "polyp"
    ]
    chosen = sorted(range(len(polyps)), key=lambda i: polyps[i][0])[:16]
    box = a._frozen["src"]
    assert box.rows[box.labels == 0].tolist() == [list(polyps[i][1]) for i in sorted(chosen)]
    assert np.array_equal(box.weights, fit_weights(box.rows, 0.1))  # weighed on what is kept


def test_a_capped_group_keeps_the_draw_of_its_finding_and_never_the_target_image():
    # 40 polyp images, the target's with 5 polyp boxes; 30 ulcer images
    target = Sample(
        sample_id="src:target",
        source="src",
        image="t.jpg",
        width=640,
        height=480,
        modality="endoscopy",
        regions=tuple(Region("polyp", (60.0 * k, 10, 60.0 * k + 40, 50)) for k in range(5)),
    )
    samples = [target, *_samples(40, 30, twice=1000)]
    own = _owner(target.sample_id)
    hit = 0
    for seed in range(40):
        pool = BoxPool.of(samples, cap=MIN_POOL, salt=bytes([seed]))
        box = pool._frozen["src"]
        own_kept = int(((box.owners == own) & (box.labels == 0)).sum())
        rows, weights = pool.candidates(target, "polyp")
        mine = {tuple(r) for r in box.rows[box.owners == own].tolist()}
        assert not mine & {tuple(r) for r in rows.tolist()}  # never its own image
        # the pool holds 40 polyps of other images: the draw stays with the finding even
        # where the cap left fewer than MIN_POOL of them (the target's own boxes drawn)
        assert len(rows) == MIN_POOL - own_kept
        polyp = {tuple(r) for r in box.rows[(box.labels == 0) & (box.owners != own)].tolist()}
        assert {tuple(r) for r in rows.tolist()} == polyp
        assert len(weights) == len(rows)
        hit += own_kept > 0
    assert hit  # some seed drew the target's own boxes into the kept ones
    # a finding with fewer than MIN_POOL boxes of other images in the pool: any finding of
    # the source (kept ones), as before
    rare = [
        Sample(f"src:r{i}", "src", f"r{i}.jpg", 640, 480, "endoscopy",
               regions=(Region("rare", (1.0 + i, 1, 9, 9)),))
        for i in range(5)
    ]  # fmt: skip
    pool = BoxPool.of([*samples[1:], *rare], cap=MIN_POOL, salt=b"x")
    rows, _ = pool.candidates(rare[0], "rare")
    box = pool._frozen["src"]
    assert _counts(pool) == {("src", "polyp"): 8, ("src", "ulcer"): 8, ("src", "rare"): 5}
    assert len(rows) == int((box.owners != _owner(rare[0].sample_id)).sum()) == 20


def test_the_task_draws_with_its_seed_and_reports_its_cap():
    samples = _samples(60, 20, source="synthetic-endo")

    def made(seed, **params):
        spec = task("vg", "visual_grounding", SPATIAL, "Visual Grounding", quota=20, params=params)
        return run([spec], samples, seed=seed)

    a, b = made(0, box_pool_size=16), made(0, box_pool_size=16)
    assert [i.options for i in a.items] == [i.options for i in b.items] and len(a.items) == 20
    assert a.box_pools == {
        "vg": {
            "box_pool_size": 16,
            "boxes_in_pool": 95,
            "boxes_kept": 32,
            "groups": 2,
            "groups_capped": 2,
        }
    }
    assert [i.options for i in made(1, box_pool_size=16).items] != [i.options for i in a.items]
    everything = made(0, box_pool_size="all")
    assert everything.box_pools["vg"]["boxes_kept"] == 95
    assert made(0).box_pools["vg"]["box_pool_size"] == POOL_SIZE
    assert [i.options for i in made(0).items] == [i.options for i in everything.items]


def _crc32_twins() -> tuple[str, str]:
    """Two sample ids whose crc32 is the same: the first pair of a birthday search over
    random hex ids (about 90k of them; ids counted up in decimal or hex differ in too few
    bits for a crc, which is linear, to map two of them to one value)."""
    seen: dict[int, str] = {}
    rng = random.Random(0)
    for _ in range(1 << 20):
        sample_id = f"src:{rng.getrandbits(64):016x}"
        other = seen.setdefault(zlib.crc32(sample_id.encode()), sample_id)
        if other != sample_id:
            return other, sample_id
    raise AssertionError("no crc32 collision among 2**20 ids")


def test_an_image_whose_id_shares_the_targets_crc32_stays_a_distractor():
    """The pool told images apart by a crc32 of the sample id: the boxes of an image whose
    id shared the target's crc32 were left out as the target's own."""
    a, b = _crc32_twins()
    assert a != b and zlib.crc32(a.encode()) == zlib.crc32(b.encode())
    assert _owner(a) != _owner(b)

    def image(sample_id, box):
        return Sample(sample_id, "src", "x.jpg", 640, 480, "endoscopy",
                      regions=(Region("polyp", box),))  # fmt: skip

    target, twin = image(a, (10.0, 10, 50, 50)), image(b, (300.0, 200, 380, 260))
    others = [image(f"src:o{i}", (20.0 * i, 100, 20.0 * i + 40, 140)) for i in range(MIN_POOL)]
    samples = [target, twin, *others]
    by_rows = BoxPool.of(samples)
    by_columns = BoxPool()
    by_columns.add_columns(
        ["src"] * len(samples),
        np.array([(*s.regions[0].bbox, s.width, s.height) for s in samples], np.float64),
        ["polyp"] * len(samples),
        [s.sample_id for s in samples],
    )
    by_columns.freeze()
    _same_arrays(_arrays(by_columns), _arrays(by_rows))
    for pool in (by_rows, by_columns):
        rows, weights = pool.candidates(target, "polyp")
        drawn = {tuple(r[:4]) for r in rows.tolist()}
        assert (300.0, 200.0, 380.0, 260.0) in drawn  # the twin's box
        assert (10.0, 10.0, 50.0, 50.0) not in drawn  # the target's own, never
        assert len(rows) == len(weights) == 1 + MIN_POOL
        rows, _ = pool.candidates(twin, "polyp")
        assert (10.0, 10.0, 50.0, 50.0) in {tuple(r[:4]) for r in rows.tolist()}
