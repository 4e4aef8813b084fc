"""Kvasir, HyperKvasir, GastroVision and Kvasir-Capsule as their owners' downloads unpack
(issue 23): the archives' folders, the label tables' real spellings and separators, and
missing-value cells that drop one label and keep the sample."""

import shutil
from pathlib import Path

import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.layouts.base import ScanContext
from medvqa_build.layouts.metadata_table import MetadataTable, MetadataTableOptions
from medvqa_build.records import Sample
from medvqa_build.sources import get_source

from ...fixtures.images import write_jpeg
from ...fixtures.sources import gastrovision, hyperkvasir, kvasir, kvasir_capsule


def _by_image(result):
    return {s.image: s for s in result.samples}


def _reasons(result):
    return {q.file: q.reason for q in result.quarantined}


def _ids(source_id, root):
    return sorted(s.sample_id for s in load_source(source_id, root).samples)


def _labeled(result):
    return [s for s in result.samples if s.image.startswith("labeled-images/")]


# --- manifests: archives as the owners publish them -------------------------------------------


@pytest.mark.parametrize(
    "source_id,archive,unpacks_to",
    [
        ("kvasir", "kvasir-dataset-v2.zip", "kvasir-dataset-v2"),
        ("hyperkvasir", "hyper-kvasir-labeled-images.zip", "labeled-images"),
        ("hyperkvasir", "hyper-kvasir-segmented-images.zip", "segmented-images"),
        ("gastrovision", "Gastrovision.zip", "Gastrovision"),
        ("kvasir-capsule", "kvasir-capsule-labeled-images.zip", "labelled_images"),
    ],
)
def test_manifest_names_the_owners_archives(source_id, archive, unpacks_to):
    manifest = get_source(source_id).manifest
    archives = {a.file: a for a in manifest.archives}
    assert archives[archive].unpacks_to == unpacks_to
    assert set(archives[archive].parts) <= {p.name for p in manifest.parts}
    assert archives[archive].parts and manifest.quirks


# --- kvasir -------------------------------------------------------------------------------------


def test_kvasir_zip_wrapper_with_macos_noise_keeps_the_sample_ids(tmp_path):
    """``unzip`` into ``kvasir-dataset-v2/`` gives ``kvasir-dataset-v2/kvasir-dataset-v2/``; a
    Finder-made zip adds ``__MACOSX/`` and ``.DS_Store`` beside it."""
    expected = _ids("kvasir", kvasir.write(tmp_path / "plain"))
    outer = tmp_path / "dl" / "kvasir-dataset-v2"
    kvasir.write(outer)  # outer/kvasir-dataset-v2/<class>/
    (outer / "__MACOSX" / "kvasir-dataset-v2").mkdir(parents=True)
    (outer / ".DS_Store").write_bytes(b"\0")
    for given in (outer, outer / "kvasir-dataset-v2", tmp_path / "dl"):
        assert _ids("kvasir", given) == expected, given


# --- hyperkvasir: the official split spells classes as an earlier release did ----------------


def test_hyperkvasir_split_class_names_of_the_owners_file_match_the_zip_folders(tmp_path):
    """official_splits/2_fold_split.csv says normal-cecum, polyp, oesophagitis-a, hemorroids
    ... where the zip's folders are cecum, polyps, esophagitis-a, hemorrhoids: the images are
    not contradicted, they all get their fold."""
    root = hyperkvasir.write(tmp_path)
    text = (root / "2_fold_split.csv").read_text()
    assert ";normal-cecum;" in text and ";hemorroids;" in text and ";polyp;" in text
    result = load_source("hyperkvasir", root)
    assert result.counts() == {"found": 25, "converted": 25, "quarantined": 0}
    labeled = _labeled(result)
    assert len(labeled) == 23 and None not in {s.split for s in labeled}
    by_folder = {s.attributes["source_label"]: s for s in labeled}
    assert by_folder["cecum"].labels == ("cecum",)
    assert by_folder["hemorrhoids"].labels == ("hemorrhoids",)
    assert by_folder["barretts-short-segment"].split in {"split_0", "split_1"}


def test_hyperkvasir_split_class_unknown_to_the_label_map_is_quarantined(tmp_path):
    root = hyperkvasir.write(tmp_path)
    csv = root / "2_fold_split.csv"
    lines = csv.read_text().splitlines()
    name, _, fold = lines[1].split(";")  # the first image, in the cecum folder
    lines[1] = f"{name};appendix;{fold}"
    csv.write_text("\n".join(lines) + "\n")
    reasons = _reasons(load_source("hyperkvasir", root))
    assert reasons == {
        f"labeled-images/lower-gi-tract/anatomical-landmarks/cecum/{name}": (
            f"2_fold_split.csv lists {name} under class 'appendix', which the manifest's "
            "label_map does not know"
        )
    }


@pytest.mark.parametrize("marker", ["", "NaN", "nan", "NA"])
def test_hyperkvasir_empty_split_cell_keeps_the_image_without_a_split(tmp_path, marker):
    root = hyperkvasir.write(tmp_path)
    csv = root / "2_fold_split.csv"
    lines = csv.read_text().splitlines()
    names = []
    for k in (1, 2):
        name, cls, _ = lines[k].split(";")
        lines[k] = f"{name};{cls};{marker}"
        names.append(name)
    name, _, fold = lines[3].split(";")
    lines[3] = f"{name};{marker};{fold}"  # no class: the fold stands, not cross-checked
    csv.write_text("\n".join(lines) + "\n")
    result = load_source("hyperkvasir", root)
    assert result.counts() == {"found": 25, "converted": 25, "quarantined": 0}
    assert result.counts_detail["labels_missing"] == {"split-index": 2}
    assert result.counts_detail["samples_missing_labels"] == 2
    by_name = {Path(s.image).name: s for s in _labeled(result)}
    assert [by_name[n].split for n in names] == [None, None]
    assert by_name[names[0]].labels == ("cecum",)
    assert by_name[name].split == f"split_{fold}"


def test_hyperkvasir_split_file_kept_in_official_splits(tmp_path):
    """Copying the repository's ``official_splits/`` folder into ROOT works as well."""
    root = hyperkvasir.write(tmp_path)
    (root / "official_splits").mkdir()
    shutil.move(root / "2_fold_split.csv", root / "official_splits" / "2_fold_split.csv")
    labeled = _labeled(load_source("hyperkvasir", root))
    assert len(labeled) == 23 and None not in {s.split for s in labeled}


def test_hyperkvasir_image_labels_csv_in_the_zip_is_not_an_image(tmp_path):
    """labeled-images/image-labels.csv (Video file,Organ,Finding,Classification) ships in
    the zip beside the tract folders; it is neither a candidate nor quarantined."""
    root = hyperkvasir.write(tmp_path)
    header = (root / "labeled-images" / "image-labels.csv").read_text().splitlines()[0]
    assert header == "Video file,Organ,Finding,Classification"
    result = load_source("hyperkvasir", root / "labeled-images")
    assert result.resolution.root == root.resolve()
    assert not result.quarantined and len(_labeled(result)) == 23


# --- gastrovision -------------------------------------------------------------------------------


def test_gastrovision_osf_archive_alone_converts_from_its_class_folders(tmp_path):
    """The OSF Gastrovision.zip holds no CSV (the metadata is in the GitHub repository): the
    folders label the images; sample ids are those of the download with the CSV."""
    with_csv = _ids("gastrovision", gastrovision.write(tmp_path / "a"))
    root = gastrovision.write(tmp_path / "dl" / "gv", metadata=False)
    result = load_source("gastrovision", root)
    assert result.counts() == {"found": 7, "converted": 7, "quarantined": 0}
    assert sorted(s.sample_id for s in result.samples) == with_csv
    s = _by_image(result)
    assert s[
        "Gastrovision/Barrett's esophagus/1b8c3047-4e18-430f-a171-a988e8e223b0.jpg"
    ].labels == ("barrett's esophagus",)
    assert s["Gastrovision/Normal stomach/100H0004.jpg"].labels == ("normal stomach",)
    for given in (root / "Gastrovision", root.parent):
        assert _ids("gastrovision", given) == sorted(x.sample_id for x in result.samples)


def test_gastrovision_csv_has_crlf_line_ends_and_may_sit_inside_the_image_folder(tmp_path):
    root = gastrovision.write(tmp_path)
    assert b"\r\n" in (root / "GastroVision_metadata.csv").read_bytes()
    expected = _ids("gastrovision", root)
    shutil.move(root / "GastroVision_metadata.csv", root / "Gastrovision")
    write_jpeg(root / "Gastrovision" / "Pylorus" / "p1.jpg", 9, size_wh=(40, 30))
    result = load_source("gastrovision", root)
    # the CSV is read from there: the unlisted file is reported against it
    assert _reasons(result) == {
        "Gastrovision/Pylorus/p1.jpg": "image in folder 'Pylorus' is listed in "
        "Gastrovision/GastroVision_metadata.csv not at all"
    }
    assert sorted(s.sample_id for s in result.samples) == expected


@pytest.mark.parametrize("marker", ["", "NaN", "N/A"])
def test_gastrovision_empty_cells_drop_that_value_only(tmp_path, marker):
    root = gastrovision.write(tmp_path)
    table = root / "GastroVision_metadata.csv"
    header, *rows = table.read_text().splitlines()
    cells = rows[0].split(",")  # Colon polyps/00a5d194-...: no class
    rows[0] = ",".join([cells[0], marker, *cells[2:]])
    cells = rows[3].split(",")  # Barrett's esophagus: no size, nothing to check
    rows[3] = ",".join([*cells[:2], marker, marker, cells[4]])
    table.write_text("\r\n".join([header, *rows]) + "\r\n")
    result = load_source("gastrovision", root)
    assert result.counts() == {"found": 7, "converted": 7, "quarantined": 0}
    assert result.counts_detail["labels_missing"] == {"Class": 1}
    s = _by_image(result)
    assert s["Gastrovision/Colon polyps/00a5d194-4aa1-495a-afff-5ef6ad6ad3a0.jpg"].labels == (
        "colon polyp",
    )


def test_gastrovision_size_listed_as_float_still_matches(tmp_path):
    """A CSV re-saved by pandas writes 768.0: the same size, not a mismatch."""
    root = gastrovision.write(tmp_path)
    table = root / "GastroVision_metadata.csv"
    header, *rows = table.read_text().splitlines()
    rows = [",".join([*r.split(",")[:2], r.split(",")[2] + ".0", *r.split(",")[3:]]) for r in rows]
    table.write_text("\n".join([header, *rows]) + "\n")
    assert load_source("gastrovision", root).counts()["quarantined"] == 0


# --- kvasir-capsule -------------------------------------------------------------------------------


def test_kvasir_capsule_simula_zip_layout_converts_from_any_root(tmp_path):
    """kvasir-capsule-labeled-images.zip puts metadata.csv inside labelled_images/ beside the
    snake-case tarballs; the OSF project keeps it beside the folder. Same samples either way,
    from the unpacked folder, its parent or a folder above."""
    osf = sorted(
        s.sample_id.split(":", 1)[1]
        for s in load_source("kvasir-capsule", kvasir_capsule.write(tmp_path / "osf")).samples
    )
    root = kvasir_capsule.write(tmp_path / "dl" / "kc", layout="simula")
    images = root / "labelled_images"
    assert (images / "metadata.csv").is_file() and not (root / "metadata.csv").exists()
    assert (images / "normal_clean_mucosa.tar.gz").is_file()
    for given in (images, root, root.parent):
        result = load_source("kvasir-capsule", given)
        assert result.resolution.root == root.resolve(), given
        assert result.counts() == {"found": 6, "converted": 6, "quarantined": 0}
        assert sorted(s.sample_id.split(":", 1)[1] for s in result.samples) == osf
    boxes = [
        r.bbox
        for r in _by_image(result)[
            f"labelled_images/Erosion/{kvasir_capsule.VIDEO_B}_877.jpg"
        ].regions
    ]
    assert boxes == [(10, 20, 60, 80), (200, 210, 250, 300)]


def _edit_rows(root: Path, edit) -> None:
    table = root / "metadata.csv"
    header, *rows = table.read_text().splitlines()
    table.write_text("\n".join([header, *(edit(r.split(";")) for r in rows)]) + "\n")


@pytest.mark.parametrize("marker", ["", "NaN", "None"])
def test_kvasir_capsule_empty_cells_drop_that_value_only(tmp_path, marker):
    root = kvasir_capsule.write(tmp_path)
    a, b = kvasir_capsule.VIDEO_A, kvasir_capsule.VIDEO_B

    def edit(cells):
        if cells[0] == f"{a}_2310.jpg":  # the boxed angiectasia: no class, so no box either
            cells[4] = marker
        if cells[0] == f"{a}_1204.jpg":  # ampulla: no category, no video id
            cells[1], cells[3] = marker, marker
        return ";".join(cells)

    _edit_rows(root, edit)
    result = load_source("kvasir-capsule", root)
    assert result.counts() == {"found": 6, "converted": 6, "quarantined": 0}
    assert result.counts_detail["labels_missing"] == {
        "finding_category": 1,
        "finding_class": 1,
        "video_id": 1,
    }
    assert result.counts_detail["samples_missing_labels"] == 2
    s = _by_image(result)
    angi = s[f"labelled_images/Angiectasia/{a}_2310.jpg"]
    assert angi.labels == ("angiectasia",) and angi.regions == ()  # the folder still labels it
    assert angi.group_id == a and angi.frame == 2310
    ampulla = s[f"labelled_images/Ampulla of vater/{a}_1204.jpg"]
    assert ampulla.labels == ("ampulla of vater",)
    assert ampulla.attributes == {"source_label": "Ampulla of vater"}
    assert ampulla.group_id == f"labelled_images/Ampulla of vater/{a}_1204"
    assert s[f"labelled_images/Erosion/{b}_877.jpg"].group_id == b


def test_kvasir_capsule_table_resaved_by_pandas(tmp_path):
    """A metadata.csv re-saved by a data-frame tool writes every number of a column with empty
    cells as a float (101.0, frame 2310.0) and may write the empties as NaN: the same samples
    come out, and no label is counted missing."""
    root = kvasir_capsule.write(tmp_path)
    before = {
        s.image: (s.frame, [r.bbox for r in s.regions], s.labels)
        for s in load_source("kvasir-capsule", root).samples
    }

    def edit(cells):
        cells = cells + [""] * (13 - len(cells))
        cells[2] = f"{cells[2]}.0"
        cells[5:] = ["NaN" if not c else f"{c}.0" for c in cells[5:]]
        return ";".join(cells)

    _edit_rows(root, edit)
    result = load_source("kvasir-capsule", root)
    after = {s.image: (s.frame, [r.bbox for r in s.regions], s.labels) for s in result.samples}
    assert after == before and not result.counts_detail.get("labels_missing")


def test_kvasir_capsule_tarball_unpacked_into_its_own_folder_converts_with_the_same_ids(tmp_path):
    """Unpacking normal_clean_mucosa.tar.gz into normal_clean_mucosa/ adds a level that names
    the class folder again: read as the class folder, with the ids of the flat layout. Any
    other extra level is reported with the reason, not silently dropped."""
    root = kvasir_capsule.write(tmp_path)
    flat = _ids("kvasir-capsule", root)
    images = root / "labelled_images"
    shutil.move(images / "Normal clean mucosa", tmp_path / "x")
    (images / "normal_clean_mucosa").mkdir()
    shutil.move(tmp_path / "x", images / "normal_clean_mucosa" / "Normal clean mucosa")
    result = load_source("kvasir-capsule", root)
    assert result.counts()["quarantined"] == 0
    assert _ids("kvasir-capsule", root) == flat
    name = f"{kvasir_capsule.VIDEO_B}_15.jpg"
    nested = _by_image(result)[f"labelled_images/normal_clean_mucosa/Normal clean mucosa/{name}"]
    assert nested.labels == ("normal clean mucosa",)
    shutil.move(images / "normal_clean_mucosa", images / "other")
    reasons = _reasons(load_source("kvasir-capsule", root))
    assert reasons[f"labelled_images/other/Normal clean mucosa/{name}"] == (
        "expected 1 folder level below 'labelled_images' (or a class folder inside a folder of "
        "the same name), found 2"
    )


# --- metadata_table without class folders: an unlabelled row keeps an unlabelled sample ----------


def test_metadata_table_row_without_label_keeps_the_sample_with_no_label(tmp_path):
    write_jpeg(tmp_path / "img" / "a.jpg", 1)
    write_jpeg(tmp_path / "img" / "b.jpg", 2)
    (tmp_path / "t.csv").write_text("file,label,kind\na.jpg,,x\nb.jpg,polyp,NaN\n")
    layout = MetadataTable(
        MetadataTableOptions(
            table="t.csv",
            images_dir="img",
            file_column="file",
            label_column="label",
            attribute_columns=["kind"],
        )
    )
    ctx = ScanContext("t", tmp_path, "p", "endoscopy", None)
    samples = [e for e in layout.scan(ctx) if isinstance(e, Sample)]
    assert [(s.image, s.labels, s.attributes) for s in samples] == [
        ("img/a.jpg", (), {"source_label": "", "kind": "x"}),
        ("img/b.jpg", ("polyp",), {"source_label": "polyp"}),
    ]
    assert dict(ctx.labels_missing) == {"label": 1, "kind": 1}


def test_metadata_table_optional_table_needs_class_folders():
    with pytest.raises(SourceError, match="needs class_folders"):
        MetadataTable(
            MetadataTableOptions(
                table="t.csv", table_required=False, file_column="f", label_column="l"
            )
        )
