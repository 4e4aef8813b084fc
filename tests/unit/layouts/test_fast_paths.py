"""The fast paths of convert give exactly what the plain ones gave.

Each fast path is checked against the slow reference it replaced: the JPEG/PNG header parser
against Pillow and the step-by-step check (sizes and every error message, on intact, cut and
damaged files), the lstat-based containment check against ``Path.resolve``, the run-based
mask components against skimage + ``rle_encode``, and the string path helpers against pathlib.
"""

from __future__ import annotations

import io
import os
import posixpath
import random
import re
from pathlib import Path, PurePosixPath

import cv2
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from medvqa_build.errors import ImageProblem
from medvqa_build.geometry import components_with_boxes, rle_encode
from medvqa_build.layouts.frame_folders import _FrameRows
from medvqa_build.layouts.masks import component_regions
from medvqa_build.media.image import _check_image_slow, check_image, plain_header_size
from medvqa_build.records import MaskRef, Region
from medvqa_build.store.paths import (
    contained_path,
    path_problem,
    sorted_files,
    walk_files,
    without_suffix,
)

# -- image headers ------------------------------------------------------------------------------


def _pil(image: Image.Image, fmt: str, **options) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **options)
    return buf.getvalue()


def _images() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
    pim = Image.fromarray(rgb)
    exif = Image.Exif()
    exif[0x0128] = 2
    exif[0x011A] = (300, 1)
    return {
        "cv.jpg": cv2.imencode(".jpg", rgb)[1].tobytes(),
        "cv_progressive.jpg": cv2.imencode(".jpg", rgb, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[
            1
        ].tobytes(),
        "cv_restart.jpg": cv2.imencode(".jpg", rgb, [cv2.IMWRITE_JPEG_RST_INTERVAL, 4])[
            1
        ].tobytes(),
        "cv_grey.jpg": cv2.imencode(".jpg", rgb[..., 0])[1].tobytes(),
        "cv.png": cv2.imencode(".png", rgb)[1].tobytes(),
        "cv_16bit.png": cv2.imencode(".png", rgb[..., 0].astype(np.uint16) * 257)[1].tobytes(),
        "cv_rgba.png": cv2.imencode(".png", np.dstack([rgb, rgb[..., :1]]))[1].tobytes(),
        "pil.jpg": _pil(pim, "JPEG"),
        "pil_exif.jpg": _pil(pim, "JPEG", exif=exif.tobytes()),
        "pil_icc.jpg": _pil(pim, "JPEG", icc_profile=b"\0" * 200),
        "pil_comment.jpg": _pil(pim, "JPEG", comment=b"hello", dpi=(96, 96)),
        "pil_cmyk.jpg": _pil(pim.convert("CMYK"), "JPEG"),
        "pil.png": _pil(pim, "PNG", dpi=(72, 72)),
        "pil_palette.png": _pil(pim.convert("P"), "PNG", transparency=0),
        "pil_bilevel.png": _pil(pim.convert("1"), "PNG"),
        "pil.tif": _pil(pim, "TIFF"),
        "html.jpg": b"<html>404</html>\n",
    }


def _outcome(fn, path: Path, mode: str = "header"):
    try:
        return ("ok", fn(path, mode))
    except ImageProblem as exc:
        return ("problem", str(exc))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_plain_headers_are_parsed_without_pillow_and_agree_with_it():
    images = _images()
    for name in ("cv.jpg", "cv_progressive.jpg", "cv_restart.jpg", "cv.png", "pil.jpg"):
        with Image.open(io.BytesIO(images[name])) as im:
            assert plain_header_size(images[name]) == im.size, name
    # what the parsers do not know is left to Pillow
    for name in ("pil_exif.jpg", "pil_icc.jpg", "pil.tif", "html.jpg"):
        assert not isinstance(plain_header_size(images[name]), tuple), name


@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow on damaged EXIF/TIFF
def test_check_image_matches_the_step_by_step_check_on_intact_cut_and_damaged_files(tmp_path):
    rng = random.Random(3)
    variants = []
    for name, data in _images().items():
        variants.append((name, data))
        variants += [(f"cut{k}-{name}", data[:k]) for k in range(0, min(len(data), 700), 11)]
        variants += [(f"end{k}-{name}", data[: len(data) - k]) for k in (1, 2, 10)]
        for k in range(25):
            damaged = bytearray(data)
            damaged[rng.randrange(min(len(data), 700))] ^= 1 << rng.randrange(8)
            variants.append((f"flip{k}-{name}", bytes(damaged)))
    for i, (name, data) in enumerate(variants):
        path = tmp_path / f"{i}{Path(name).suffix}"
        path.write_bytes(data)
        for mode in ("header", "decode") if i % 9 == 0 else ("header",):
            assert _outcome(check_image, path, mode) == _outcome(_check_image_slow, path, mode), (
                name
            )


def test_check_image_on_what_is_not_a_regular_file(tmp_path):
    (tmp_path / "dir.jpg").mkdir()
    os.mkfifo(tmp_path / "fifo.jpg")  # must not block the open
    os.symlink("nowhere.jpg", tmp_path / "dangling.jpg")
    os.symlink("loop.jpg", tmp_path / "loop.jpg")
    (tmp_path / "empty.jpg").write_bytes(b"")
    for name in ("dir.jpg", "fifo.jpg", "dangling.jpg", "loop.jpg", "empty.jpg", "missing.jpg"):
        path = tmp_path / name
        assert _outcome(check_image, path) == _outcome(_check_image_slow, path), name
    assert _outcome(check_image, tmp_path / "empty.jpg") == ("problem", "empty file (0 bytes)")


# -- containment --------------------------------------------------------------------------------


def _resolved_reference(root: Path, rel) -> tuple[str, object]:
    """The check before the fast path: resolve every candidate."""
    text = str(rel).replace("\\", "/")
    if text.startswith("/") or re.match(r"^[A-Za-z]:", text):
        return ("problem", f"path {text!r} is absolute; expected a path inside the source root")
    norm = posixpath.normpath(text)
    if norm == ".." or norm.startswith("../"):
        return ("problem", f"path {text!r} leaves the source root through '..'; refused")
    path = root / norm
    try:
        real, real_root = path.resolve(), root.resolve()
    except (OSError, RuntimeError):
        return ("problem", f"path {text!r} is a symbolic link loop")
    if not real.is_relative_to(real_root):
        return ("problem", f"path {text!r} is a symbolic link to a file outside the source root")
    return ("ok", path)


@pytest.fixture
def linked_tree(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.jpg").write_bytes(b"x")
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.jpg").write_bytes(b"f")
    (root / "a" / "file").write_bytes(b"")
    links = {
        "outdir": outside,
        "indir": "a",
        "inlink.jpg": "a/b/f.jpg",
        "outlink.jpg": outside / "x.jpg",
        "loop1": "loop2",
        "loop2": "loop1",
        "dangling.jpg": "nowhere",
        "a/up": "..",
        "a/b/upup": "../../..",
        "self": ".",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    os.symlink(root, tmp_path / "rootlink")
    return tmp_path


RELS = [
    "a/b/f.jpg",
    "outdir/x.jpg",
    "indir/b/f.jpg",
    "inlink.jpg",
    "outlink.jpg",
    "loop1/x",
    "dangling.jpg",
    "a/up/a/b/f.jpg",
    "a/up/outside",
    "a/b/upup/outside/x.jpg",
    "self/a/b/f.jpg",
    "missing/x.jpg",
    "a/file/x",
    ".",
    "a/./b//f.jpg",
    "a/../a/b/f.jpg",
    "a/../../x",
    "/etc/passwd",
    "C:/x",
    "a\\b\\f.jpg",
    Path("a/b/f.jpg"),
]


def test_containment_matches_resolving_every_path(linked_tree):
    rng = random.Random(0)
    for root in (linked_tree / "root", linked_tree / "rootlink"):
        for _ in range(20):
            link_free: set[str] = set()  # one scan: folders checked once
            order = RELS * 2
            rng.shuffle(order)
            for rel in order:
                expected = _resolved_reference(root, rel)
                problem = path_problem(root, rel, link_free)
                try:
                    got = ("ok", contained_path(root, rel, link_free))
                except ImageProblem as exc:
                    got = ("problem", str(exc))
                assert got == expected, rel
                assert problem == (None if expected[0] == "ok" else expected[1]), rel


# -- mask components ----------------------------------------------------------------------------


def _reference_regions(mask, threshold, label, min_area):
    regions = []
    for component, box in components_with_boxes(mask > threshold, min_area_px=min_area):
        size_hw, counts = rle_encode(component)
        regions.append(Region(label=label, bbox=box, mask=MaskRef(size_hw=size_hw, counts=counts)))
    return tuple(regions)


def _masks():
    rng = np.random.default_rng(1)
    for i in range(300):
        h, w = (int(v) for v in rng.integers(1, 40, 2))
        kind = i % 5
        if kind == 0:
            yield (rng.random((h, w)) < rng.random()).astype(np.uint8) * 255
        elif kind == 1:  # discs, some touching the borders
            yy, xx = np.ogrid[:h, :w]
            m = np.zeros((h, w), np.uint8)
            for _ in range(int(rng.integers(0, 5))):
                y, x, r = rng.integers(0, h), rng.integers(0, w), rng.integers(1, 7)
                m[(yy - y) ** 2 + (xx - x) ** 2 <= r * r] = 255
            yield m
        elif kind == 2:  # 0/1 mask
            yield rng.integers(0, 2, (h, w)).astype(np.uint8)
        elif kind == 3:  # 16-bit
            yield rng.integers(0, 256, (h, w)).astype(np.uint16) * 200
        else:  # a colour mask's first channel: not contiguous
            m = (rng.random((h, w)) < 0.4).astype(np.uint8) * 255
            yield np.dstack([m, m, m])[..., 0]


def test_component_regions_equal_components_with_boxes_and_rle_encode():
    n = 0
    for mask in _masks():
        threshold = 127 if mask.max() > 1 else 0
        for min_area in (1, 5):
            expected = _reference_regions(mask, threshold, "polyp", min_area)
            got = component_regions(mask, threshold, "polyp", min_area)
            assert got == expected
            # a transposed view, as a plain PNG mask is read (media/png.py)
            assert component_regions(np.asfortranarray(mask), threshold, "polyp", min_area) == got
            assert all(type(v) is float for r in got for v in r.bbox)
            n += len(got)
    assert n > 1000


def test_component_regions_of_blobs_far_from_the_border_and_of_full_columns():
    """Labelled inside the box of the foreground: blobs in a large empty mask, and a blob
    whose runs go on from one mask column into the next (the box spans whole columns)."""
    rng = np.random.default_rng(3)
    n = 0
    for _ in range(40):
        h, w = (int(v) for v in rng.integers(60, 200, 2))
        mask = np.zeros((h, w), np.uint8)
        for _ in range(int(rng.integers(1, 4))):
            y, x = int(rng.integers(0, h - 10)), int(rng.integers(0, w - 10))
            mask[y : y + int(rng.integers(1, 30)), x : x + int(rng.integers(1, 30))] = 255
        c = int(rng.integers(0, w - 3))
        if rng.random() < 0.5:
            mask[:, c : c + 3] = 255
        for m in (mask, np.asfortranarray(mask)):
            got = component_regions(m, 127, "x", 1)
            assert got == _reference_regions(mask, 127, "x", 1)
            n += len(got)
    assert n > 80


def test_component_regions_on_a_mask_that_could_overflow_16_bit_labels():
    rng = np.random.default_rng(2)  # 265 x 260 possible components: 32-bit labels
    mask = (rng.random((530, 520)) < 0.002).astype(np.uint8) * 255
    assert component_regions(mask, 127, "x", 1) == _reference_regions(mask, 127, "x", 1)


# -- string path helpers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel", ["a/b.jpg", "b.jpg", "a/.jpg", "a/b.", "a.b/c", "a.b/c.d.e", ".x", "a/b..", "a/.."]
)
def test_without_suffix_is_pathlibs_with_suffix(rel):
    assert without_suffix(rel) == PurePosixPath(rel).with_suffix("").as_posix()


def test_walk_files_is_sorted_files(tmp_path):
    for rel in ("b/2.jpg", "b/1.PNG", "a/z/3.jpg", "a/.hidden.jpg", "a/4.txt", "5.jpeg"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    walked = [Path(d) / n for d, n in walk_files(tmp_path)]
    assert walked == sorted_files(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in walked] == [
        "5.jpeg",
        "a/z/3.jpg",
        "b/1.PNG",
        "b/2.jpg",
    ]


def test_frame_rows_look_up_as_loc_does():
    table = pd.DataFrame(
        {"Frame": ["0", "25", "50"], "Phase": ["A", "B", "C"], "Hook": list("010")}
    )
    table = table.set_index(table["Frame"].astype(int))
    rows = _FrameRows(table)
    assert rows.has(25) and not rows.has(1)
    assert rows.cell(50, "Phase") == table.loc[50, "Phase"] == "C"
    assert rows.row(25) == table.loc[25].to_dict()
    duplicated = pd.concat([table, table.iloc[:1]])  # a repeated frame: pandas decides
    rows = _FrameRows(duplicated)
    assert rows.has(0) and rows.cell(0, "Phase").tolist() == ["A", "A"]
    assert _FrameRows(None).table is None


# -- label tables -------------------------------------------------------------------------------


def test_label_table_rows_are_pandas_records(tmp_path, monkeypatch):
    from medvqa_build.layouts import label_table
    from medvqa_build.layouts.base import ScanContext

    text = (
        "image,label,site,note\n"
        "a,polyp,x,\n"  # an empty cell
        'b,"ulcer, deep",y,NA\n'  # a quoted separator, a missing-value marker
        "c,nan\n"  # a short row
        "d,é,z,n/a\n"
        "e,,,\n"
    )
    (tmp_path / "labels.csv").write_text(text, encoding="utf-8")
    monkeypatch.setattr(label_table, "CHUNK_ROWS", 2)  # rows cross chunks
    layout = label_table.LabelTable(
        label_table.LabelTableOptions(
            table="labels.csv", image_column="image", label_column="label"
        )
    )
    ctx = ScanContext("s", tmp_path, "p", "endoscopy", None)
    rows = list(layout._read_table(ctx))
    expected = pd.read_csv(tmp_path / "labels.csv", dtype=str, keep_default_na=False).to_dict(
        "records"
    )
    assert rows == expected and len(rows) == 5
    assert rows[2] == {"image": "c", "label": "nan", "site": "", "note": ""}
    assert all(type(v) is str for row in rows for v in row.values())


def test_unlisted_lookup_is_sorted_strings_index(monkeypatch):
    from medvqa_build.layouts import label_table
    from medvqa_build.store.packed import SortedStrings

    rng = random.Random(0)
    texts = [f"images/{rng.randrange(500):04d}{rng.choice(['', 'é', '.jpg'])}" for _ in range(300)]
    known = SortedStrings(texts[::3] + ["zz", "images/0000"])
    monkeypatch.setattr(label_table, "LOOKUP_BATCH", 7)
    expected = [t for t in texts if known.index(t) is None]
    assert list(label_table._not_in(known, texts)) == expected and 0 < len(expected) < 300
    assert list(label_table._not_in(SortedStrings([]), texts[:5])) == texts[:5]
    assert list(label_table._not_in(known, [])) == []
    odd = ["images/\udcff.jpg", texts[0]]  # a file name that is not UTF-8: index() decides
    with pytest.raises(UnicodeEncodeError):
        list(label_table._not_in(known, odd))


def _is_wrapper_listing_all(path: Path) -> bool:
    """The wrapper test as it was: every entry listed, then judged."""
    from medvqa_build.layouts.discovery import ARCHIVE_SUFFIXES, _is_dir, _skipped

    try:
        entries = [e for e in os.scandir(path) if not _skipped(e.name)]
    except OSError:
        return False
    folders = [e for e in entries if _is_dir(e)]
    others = [e for e in entries if not _is_dir(e)]
    return (
        len(folders) == 1
        and folders[0].name == path.name
        and all(e.name.lower().endswith(ARCHIVE_SUFFIXES) for e in others)
    )


@pytest.mark.parametrize(
    ("entries", "wrapper"),
    [
        (["x/"], True),  # x/x/
        (["x/", "x.zip", ".DS_Store", "__MACOSX/"], True),  # its archive and unzip leftovers
        (["x/", "X.TAR.GZ"], True),
        ([".hidden/", "x/"], True),
        (["x/", "notes.txt"], False),  # a file that is not an archive
        (["a.jpg", "x/"], False),
        (["x/", "y/"], False),  # two folders
        (["y/"], False),  # one folder of another name
        ([], False),
        (["x"], False),  # a file named like the folder
    ],
)
def test_wrapper_folders_are_found_as_before(tmp_path, entries, wrapper):
    from medvqa_build.layouts.discovery import _is_wrapper

    folder = tmp_path / "x"
    folder.mkdir()
    for name in entries:
        if name.endswith("/"):
            (folder / name).mkdir()
        else:
            (folder / name).write_bytes(b"")
    assert _is_wrapper(folder) == _is_wrapper_listing_all(folder) == wrapper
    assert not _is_wrapper(tmp_path / "missing")
