"""The polyp-mask sources as their downloads really unpack (issue 23): every ROOT shape, the
PraNet and EndoScene copies, Kaggle re-packs, mask encodings (JPEG noise, palette, 16-bit,
RGBA) and SUN-SEG pathology cells left empty. Each test writes its own replica."""

import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from medvqa_build.api import inspect_source, load_source
from medvqa_build.sources import get_source

from ...fixtures.polyp_masks import mask_array, write_image, write_mask
from ...fixtures.sources import (
    cvc_300,
    cvc_clinicdb,
    cvc_colondb,
    etis_larib,
    kid,
    kvasir_seg,
    polypgen,
    sun,
)

WRITERS = {
    "kvasir-seg": kvasir_seg.write,
    "cvc-clinicdb": cvc_clinicdb.write,
    "cvc-colondb": cvc_colondb.write,
    "cvc-300": cvc_300.write,
    "etis-larib": etis_larib.write,
    "polypgen": polypgen.write,
    "sun": sun.write,
    "kid": kid.write,
}


def _ids(source_id: str, root: Path) -> list[str]:
    return [s.sample_id for s in load_source(source_id, root).samples]


def _quarantined(result) -> dict[str, str]:
    return {q.file: q.reason for q in result.quarantined}


@pytest.mark.parametrize("source_id", sorted(WRITERS))
def test_root_is_the_unpacked_folder_its_parent_or_one_above(source_id, tmp_path):
    """The folder the archive made, the download folder holding it and the folder above that
    all give the same samples with the same ids."""
    root = WRITERS[source_id](tmp_path / "downloads" / source_id)
    expected = _ids(source_id, root)
    assert expected
    for given in (root.parent, root.parent.parent):
        assert _ids(source_id, given) == expected, given


@pytest.mark.parametrize("source_id", sorted(WRITERS))
def test_manifest_names_the_archives_and_the_quirks(source_id):
    manifest = get_source(source_id).manifest
    parts = {p.name for p in manifest.parts}
    assert manifest.archives and manifest.quirks
    for archive in manifest.archives:
        assert archive.file and archive.unpacks_to
        assert set(archive.parts) <= parts, archive.file


@pytest.mark.parametrize("source_id", sorted(WRITERS))
def test_docs_page_has_the_evidence_sections(source_id):
    page = Path(__file__).parents[3] / "docs" / "sources" / f"{source_id}.md"
    text = page.read_text(encoding="utf-8")
    for heading in ("Archives", "Label files", "Missing values", "Quirks", "Verified against"):
        assert f"\n## {heading}\n" in text, heading
    for archive in get_source(source_id).manifest.archives:
        assert archive.unpacks_to in text or archive.unpacks_to == ".", archive.file


# Kvasir-SEG ---------------------------------------------------------------------------------


def _pranet_kvasir(bundle: Path) -> Path:
    """TestDataset/Kvasir/{images,masks}/<id>.png as in the PraNet test bundle: no box file."""
    for k, (stem, polyps) in enumerate(kvasir_seg.POLYPS.items()):
        write_image(bundle / "Kvasir" / "images" / f"{stem}.png", k, kvasir_seg.SIZE_WH)
        write_mask(bundle / "Kvasir" / "masks" / f"{stem}.png", kvasir_seg.SIZE_WH, polyps)
    return bundle


def test_kvasir_seg_pranet_copy_without_box_file_converts(tmp_path):
    """The PraNet copy has no kavsir_bboxes.json; it used to stop the source (the first folder
    shape, images + masks, matched it and then wanted the box file)."""
    bundle = _pranet_kvasir(tmp_path / "TestDataset")
    result = load_source("kvasir-seg", bundle)
    assert result.counts() == {"found": 3, "converted": 3, "quarantined": 0}
    two = next(s for s in result.samples if s.image.endswith("cju0qoxqj9q6s0835b43399p4.png"))
    assert two.sample_id == "kvasir-seg:Kvasir/images/cju0qoxqj9q6s0835b43399p4"
    assert [r.bbox for r in two.regions] == [(40.0, 28.0, 58.0, 44.0), (4.0, 4.0, 14.0, 12.0)]
    assert "source_boxes" not in two.attributes
    assert _ids("kvasir-seg", bundle / "Kvasir") == _ids("kvasir-seg", bundle)


def test_kvasir_seg_download_folder_with_hyperkvasir_is_not_ambiguous(tmp_path):
    """HyperKvasir's segmented-images/ also has images/ + masks/, but its box file is
    bounding-boxes.json: only Kvasir-SEG/ (with kavsir_bboxes.json) is Kvasir-SEG."""
    root = kvasir_seg.write(tmp_path / "downloads")
    other = tmp_path / "downloads" / "segmented-images"
    write_image(other / "images" / "x.jpg", 1, (64, 48))
    write_mask(other / "masks" / "x.jpg", (64, 48), [(2, 2, 20, 20)])
    (other / "bounding-boxes.json").write_text("{}")
    result = load_source("kvasir-seg", tmp_path / "downloads")
    assert result.root == root and len(result.samples) == 3


def test_kvasir_seg_jpeg_mask_noise_is_thresholded(tmp_path):
    """Masks are JPEG: a heavily compressed one still gives the polyp's box (within a pixel)
    and no speckle regions."""
    root = kvasir_seg.write(tmp_path)
    stem = "cju0roawvklrq0799vmjorwfv"
    polyp = kvasir_seg.POLYPS[stem][0]
    mask = cv2.cvtColor(mask_array(kvasir_seg.SIZE_WH, [polyp]), cv2.COLOR_GRAY2BGR)
    rng = np.random.default_rng(0)
    noisy = np.clip(mask.astype(int) + rng.integers(-40, 40, mask.shape), 0, 255).astype(np.uint8)
    ok, data = cv2.imencode(".jpg", noisy, [cv2.IMWRITE_JPEG_QUALITY, 30])
    assert ok
    (root / "masks" / f"{stem}.jpg").write_bytes(data.tobytes())
    sample = next(s for s in load_source("kvasir-seg", root).samples if stem in s.image)
    (region,) = sample.regions
    assert np.allclose(region.bbox, polyp, atol=1)


# mask encodings -------------------------------------------------------------------------------


def _palette_png(path: Path, size_wh, box, colour=(128, 0, 0), adaptive=False) -> None:
    """A palette PNG: index 1 (or 0 with ``adaptive``) is ``colour``, the rest black."""
    index = mask_array(size_wh, [box], 1)
    palette = [0, 0, 0, *colour]
    if adaptive:  # the foreground takes index 0, black index 1
        index = 1 - index
        palette = [*colour, 0, 0, 0]
    image = Image.fromarray(index, "P")
    image.putpalette(palette + [0] * (768 - len(palette)))
    image.save(path)


@pytest.mark.parametrize(
    "encoding", ["palette-red", "palette-adaptive", "uint16", "rgba", "rgb-green", "one-bit"]
)
def test_mask_encodings_give_the_same_region(encoding, tmp_path):
    """A red palette mask read through its first (blue) channel used to be empty; every
    encoding below must give the drawn box."""
    root = cvc_300.write(tmp_path)  # TestDataset/CVC-300 with PNG masks
    size, box = cvc_300.SIZE_WH, cvc_300.FRAMES[149]
    path = root / "masks" / "149.png"
    if encoding == "palette-red":
        _palette_png(path, size, box)
    elif encoding == "palette-adaptive":
        _palette_png(path, size, box, colour=(255, 255, 255), adaptive=True)
    elif encoding == "uint16":
        cv2.imwrite(str(path), mask_array(size, [box], 1).astype(np.uint16) * 65535)
    elif encoding == "rgba":
        rgba = np.zeros((size[1], size[0], 4), np.uint8)
        rgba[..., 3] = 255
        rgba[..., 2] = mask_array(size, [box])  # red in BGRA
        cv2.imwrite(str(path), rgba)
    elif encoding == "rgb-green":
        rgb = np.zeros((size[1], size[0], 3), np.uint8)
        rgb[..., 1] = mask_array(size, [box])
        cv2.imwrite(str(path), rgb)
    else:
        Image.fromarray(mask_array(size, [box])).convert("1").save(path)
    sample = next(s for s in load_source("cvc-300", root).samples if s.image.endswith("149.png"))
    assert [r.bbox for r in sample.regions] == [tuple(float(v) for v in box)]


# CVC-ClinicDB ---------------------------------------------------------------------------------


def _kaggle_clinicdb(root: Path) -> Path:
    """The Kaggle re-pack: PNG/{Original,Ground Truth} and TIF/{Original,Ground Truth} hold the
    same frames; metadata.csv and class_dict.csv beside them."""
    for n, box in cvc_clinicdb.FRAMES.items():
        for fmt in ("PNG", "TIF"):
            ext = fmt.lower()
            write_image(root / fmt / "Original" / f"{n}.{ext}", n, cvc_clinicdb.SIZE_WH)
            rgb = cv2.cvtColor(mask_array(cvc_clinicdb.SIZE_WH, [box]), cv2.COLOR_GRAY2BGR)
            (root / fmt / "Ground Truth").mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / fmt / "Ground Truth" / f"{n}.{ext}"), rgb)
    (root / "metadata.csv").write_text(
        "frame_id,sequence_id,png_image_path,png_mask_path\n"
        + "".join(
            f"{n},{1 if n < 26 else 2},PNG/Original/{n}.png,PNG/Ground Truth/{n}.png\n"
            for n in cvc_clinicdb.FRAMES
        )
    )
    (root / "class_dict.csv").write_text("class_names,r,g,b\nbackground,0,0,0\npolyp,255,255,255\n")
    return root


def test_cvc_clinicdb_kaggle_repack_reads_each_frame_once(tmp_path):
    """Only the PNG copy is read (its frames are the TIF copy's), with the owners' ids."""
    root = _kaggle_clinicdb(tmp_path / "cvcclinicdb")
    result = load_source("cvc-clinicdb", root)
    assert result.root == root / "PNG"
    assert result.counts() == {"found": 3, "converted": 3, "quarantined": 0}
    assert [s.sample_id for s in result.samples] == _ids(
        "cvc-clinicdb", cvc_clinicdb.write(tmp_path / "owners")
    )
    groups = {s.image: s.group_id for s in result.samples}
    assert groups == {
        "Original/1.png": "seq01",
        "Original/2.png": "seq01",
        "Original/26.png": "seq02",
    }
    assert result.samples[0].regions[0].bbox == (8.0, 6.0, 30.0, 24.0)  # RGB mask, one region
    assert _ids("cvc-clinicdb", tmp_path / "cvcclinicdb") == _ids("cvc-clinicdb", root / "PNG")


def _endoscene(root: Path, cvc300_frames=(148, 149, 208, 209), clinic_frames=(1, 26)) -> Path:
    """CVC-EndoSceneStill: CVC-300/{bbdd,gtpolyp}/<n>.bmp (frames 1..300 of CVC-ColonDB) and
    CVC-612/bbdd/<n>.bmp with CVC-612/gtpolyp/<n>.tif masks."""
    base = root / "CVC-EndoSceneStill"
    for n in cvc300_frames:
        write_image(base / "CVC-300" / "bbdd" / f"{n}.bmp", n, cvc_300.SIZE_WH)
        write_mask(base / "CVC-300" / "gtpolyp" / f"{n}.bmp", cvc_300.SIZE_WH, [(6, 6, 20, 18)])
    for n in clinic_frames:
        write_image(base / "CVC-612" / "bbdd" / f"{n}.bmp", n, cvc_clinicdb.SIZE_WH)
        write_mask(base / "CVC-612" / "gtpolyp" / f"{n}.tif", cvc_clinicdb.SIZE_WH, [(4, 4, 9, 9)])
    return base


def test_endoscene_copy_feeds_cvc_300_test_split_and_clinicdb(tmp_path):
    base = _endoscene(tmp_path)
    cvc300 = load_source("cvc-300", base)
    # EndoScene's CVC-300 holds 300 frames; its test split 149..208 is CVC-300
    assert sorted(s.image for s in cvc300.samples) == [
        "CVC-300/bbdd/149.bmp",
        "CVC-300/bbdd/208.bmp",
    ]
    assert cvc300.found == 2 and cvc300.samples[0].regions[0].bbox == (6.0, 6.0, 20.0, 18.0)
    assert _ids("cvc-300", base / "CVC-300") == _ids("cvc-300", tmp_path) == _ids("cvc-300", base)
    clinic = load_source("cvc-clinicdb", base)
    assert {s.image: s.group_id for s in clinic.samples} == {
        "CVC-612/bbdd/1.bmp": "seq01",
        "CVC-612/bbdd/26.bmp": "seq02",
    }


def test_pranet_bundle_ids_do_not_depend_on_the_folder_passed(tmp_path):
    """TestDataset/ holds five sets; each source gives the same ids from TestDataset/, from its
    own sub-folder and from the folder above."""
    bundle = tmp_path / "TestDataset"
    cvc_colondb.write(tmp_path)
    cvc_300.write(tmp_path)
    _pranet_kvasir(bundle)
    for name in ("CVC-ClinicDB", "ETIS-LaribPolypDB"):
        write_image(bundle / name / "images" / "5.png", 5, (40, 30))
        write_mask(bundle / name / "masks" / "5.png", (40, 30), [(3, 3, 20, 20)])
    folders = {
        "kvasir-seg": "Kvasir",
        "cvc-clinicdb": "CVC-ClinicDB",
        "cvc-colondb": "CVC-ColonDB",
        "cvc-300": "CVC-300",
        "etis-larib": "ETIS-LaribPolypDB",
    }
    for source_id, folder in folders.items():
        ids = _ids(source_id, bundle)
        assert ids, source_id
        assert _ids(source_id, bundle / folder) == ids == _ids(source_id, tmp_path), source_id


# PolypGen -------------------------------------------------------------------------------------


def test_polypgen_reads_no_pooled_copy_overlay_or_stray_txt(tmp_path):
    """imagesAll_positive/ repeats the positive frames, bbox_image*_C<i>/ and
    bbox_image_seq<k>/ hold overlay JPEGs, masks_seq<k>/ stray .txt files: none is a sample."""
    root = polypgen.write(tmp_path)
    assert (root / "imagesAll_positive").is_dir() and (root / "data_C6" / "bbox_images_C6").is_dir()
    result = load_source("polypgen", root)
    images = [s.image for s in result.samples]
    assert result.counts() == {"found": 10, "converted": 10, "quarantined": 0}
    assert len(images) == len(set(images))
    assert not [i for i in images if "imagesAll" in i or "bbox_image" in i]


# SUN-SEG --------------------------------------------------------------------------------------

TRAIN_TABLE = "TrainDataset/Classification/classification.txt"


def _set_row(root: Path, clip: str, frame: int, label: str | None) -> str:
    """Rewrite the train table row of one frame: ``label`` None leaves only the image name."""
    table = root / TRAIN_TABLE
    name = sun.NAME.format(k=clip.split("_")[1], n=frame)
    key = f"{clip}/{name}.jpg"
    rows = []
    for row in table.read_text().splitlines():
        if row.split("\t")[0] == key:
            row = key if label is None else f"{key}\t{label}"
        rows.append(row)
    table.write_text("\n".join(rows) + "\n")
    return f"TrainDataset/Frame/{key}"


@pytest.mark.parametrize(
    "label", ["", "NaN", "nan", "None", None], ids=["empty", "NaN", "nan", "None", "no-field"]
)
def test_sun_pathology_left_out_keeps_the_frame_and_its_mask(label, tmp_path):
    """An empty pathology cell, NaN or None (or a row with no label) drops the pathology only:
    the frame keeps its mask regions (labelled polyp), other frames keep theirs, and the
    report counts one pathology left out."""
    root = sun.write(tmp_path)
    image = _set_row(root, "case1_1", 1, label)
    result = load_source("sun", root)
    assert result.counts() == {"found": 7, "converted": 7, "quarantined": 0}
    assert result.counts_detail["labels_missing"] == {"pathology": 1}
    assert result.counts_detail["samples_missing_labels"] == 1
    by_image = {s.image: s for s in result.samples}
    kept = by_image[image]
    assert kept.labels == () and "source_label" not in kept.attributes
    assert [(r.label, r.bbox) for r in kept.regions] == [("polyp", (10.0, 10.0, 30.0, 30.0))]
    assert kept.group_id == "case1" and kept.split == "train"
    other = by_image[image.replace("image0001", "image0002")]
    assert other.labels == ("low-grade adenoma",)
    assert result.found == len(result.samples) + len(result.quarantined)


def test_sun_frame_listed_twice_with_two_pathologies_is_quarantined(tmp_path):
    root = sun.write(tmp_path)
    table = root / TRAIN_TABLE
    first = table.read_text().splitlines()[0]
    key = first.split("\t")[0]
    table.write_text(table.read_text() + f"{key}\thyperplastic_polyp\n")
    result = load_source("sun", root)
    assert _quarantined(result) == {
        f"TrainDataset/Frame/{key}": f"listed twice in {TRAIN_TABLE} with different labels "
        "'low_grade_adenoma' and 'hyperplastic_polyp'"
    }


def test_sun_test_set_without_a_table_keeps_its_frames(tmp_path):
    """The owners' tree shows Classification/ under TrainDataset only: a test set without a
    table converts, every pathology counted as left out."""
    root = sun.write(tmp_path)
    shutil.rmtree(root / "TestHardDataset" / "Unseen" / "Classification")
    result = load_source("sun", root)
    assert result.counts() == {"found": 7, "converted": 7, "quarantined": 0}
    (hard,) = [s for s in result.samples if s.split == "test_hard_unseen"]
    assert hard.labels == () and [r.label for r in hard.regions] == ["polyp", "polyp"]
    assert result.counts_detail["labels_missing"] == {"pathology": 1}


def test_sun_inspect_names_the_table_and_its_columns(tmp_path):
    root = sun.write(tmp_path)
    facts = inspect_source("sun", root).to_dict()
    train = next(p for p in facts["parts"] if p["name"] == "train")
    assert train["tables"] == {TRAIN_TABLE: ["image", "pathology"]}


def test_sun_annotation_folder_before_the_final_rename(tmp_path):
    """reorganize.py alone leaves the tree in SUN-SEG-Annotation/ (reorganize.sh renames it):
    the same samples and ids."""
    root = sun.write(tmp_path / "a")
    renamed = tmp_path / "b" / "SUN-SEG-Annotation"
    shutil.copytree(root, renamed)
    assert _ids("sun", renamed) == _ids("sun", root) == _ids("sun", tmp_path / "b")


# KID ------------------------------------------------------------------------------------------


def test_kid_three_channel_masks_give_the_grey_regions(tmp_path):
    """KID 2 masks read as 3-channel images by public loaders: the same regions as grey."""
    root = kid.write(tmp_path)
    mask = root / "vascular-annotations" / "2m.png"
    grey = cv2.imread(str(mask), cv2.IMREAD_GRAYSCALE)
    cv2.imwrite(str(mask), cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR))
    sample = next(s for s in load_source("kid", root).samples if s.image == "vascular/2.png")
    assert sorted(r.bbox for r in sample.regions) == [
        (2.0, 24.0, 10.0, 32.0),
        (20.0, 20.0, 30.0, 30.0),
    ]
