"""Issue 33, real downloads: layouts public scripts unpack to, a convert that converts nothing,
and where a sample table's image paths are relative to. Each through the CLI, under the
hostile corpus's memory and time ceiling."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import medvqa_build as mb

from ..fixtures.sources import cvc_clinicdb, kvasir, kvasir_capsule
from .bounded_cli import bounded_cli
from .test_declared_sizes import converted


def _keys(out) -> list[str]:
    return sorted(pq.read_table(out, columns=["sample_id"]).column("sample_id").to_pylist())


def test_kvasir_capsule_tarballs_unpacked_into_their_own_folders_convert(tmp_path):
    """labelled_images/normal_clean_mucosa/Normal clean mucosa/*.jpg (one folder per tarball)
    converts, with the sample ids of the flat layout."""
    flat_out, nested_out = tmp_path / "flat.parquet", tmp_path / "nested.parquet"
    flat = kvasir_capsule.write(tmp_path / "flat", layout="simula")
    nested = kvasir_capsule.write(tmp_path / "nested", layout="per_tarball")
    assert (nested / "labelled_images/normal_clean_mucosa/Normal clean mucosa").is_dir()
    for root, out in ((flat, flat_out), (nested, nested_out)):
        proc = bounded_cli("convert", "kvasir-capsule", root, "-o", out, "-q")
        assert proc.returncode == 0, proc.stderr
        counts, entries = converted(out)
        assert (counts["converted"], counts["quarantined"]) == (6, 0), entries
    assert _keys(nested_out) == _keys(flat_out)


def test_a_convert_that_converts_nothing_exits_2_naming_reasons_and_expectation(tmp_path):
    """Class folders one level too deep (not a tarball's own name): every file quarantined,
    exit 2 with the commonest reason and what the layout expects."""
    root = kvasir_capsule.write(tmp_path / "kc", layout="simula")
    images = root / "labelled_images"
    for folder in {row[0] for row in kvasir_capsule.ROWS}:
        (images / "extra").mkdir(exist_ok=True)
        (images / folder).rename(images / "extra" / folder)
    out = tmp_path / "samples.parquet"
    proc = bounded_cli("convert", "kvasir-capsule", root, "-o", out, "-q")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.error_lines()
    assert "converted 0 of 12 files found" in line
    assert "6 x expected 1 folder level below 'labelled_images'" in line
    assert "the source expects: metadata.csv (semicolon-separated" in line
    assert "samples.quarantine.json" in line
    assert converted(out)[0]["quarantined"] == 12  # the report is written for the user to read


@pytest.mark.parametrize("source", ["kvasir", "cvc-clinicdb"])
def test_the_table_records_the_root_its_image_paths_are_relative_to(tmp_path, source):
    """Discovery moves from the ROOT given to the folder holding the data (above it for
    Kvasir's ``kvasir-dataset-v2/``, below it for a CVC-ClinicDB copy with ``PNG/``), so the
    ``image`` values are not paths under the ROOT given. The
    table's metadata, the counts and the console say where they are relative to, and
    ``mb.open_samples`` finds every file through it."""
    from medvqa_build.store.parquet import ROOT_KEY

    data = tmp_path / "dl"
    if source == "kvasir":  # ROOT = the folder the zip made; the data starts above it
        kvasir.write(data)
        given, expected = data / "kvasir-dataset-v2", data
    else:  # a copy holding PNG/{Original,Ground Truth}: the data starts below ROOT
        data.mkdir()
        given, expected = data, cvc_clinicdb.write(tmp_path / "owners").rename(data / "PNG")
    out = tmp_path / "samples.parquet"
    proc = bounded_cli("convert", source, given, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, _ = converted(out)
    root = counts["root"]
    assert Path(root) == expected.resolve() != given.resolve()
    assert f"image paths are relative to {root}" in proc.stdout
    assert pq.read_schema(out).metadata[ROOT_KEY.encode()].decode() == root
    table = mb.open_samples(out)
    assert table.root == Path(root) and table.counts()["converted"] == counts["converted"] > 0
    assert not (given / table.samples[0].image).exists()  # the trap the issue describes
    assert all(table.image_path(s).is_file() for s in table.samples)
    assert mb.load_source(source, given).root == Path(root)


def test_rsna_lumbar_an_ungraded_condition_keeps_its_point_and_level(tmp_path):
    """train.csv leaves a grade empty: the coordinate row's point still locates its level.
    The region is kept, the grade left out and counted."""
    from ..fixtures.sources import rsna_lumbar

    root = rsna_lumbar.write(tmp_path / "rsna")
    table = root / "train.csv"
    header, *rows = table.read_text().splitlines()
    column = header.split(",").index("spinal_canal_stenosis_l5_s1")
    for k, row in enumerate(rows):
        cells = row.split(",")
        if cells[0] == "4003253":
            cells[column] = ""
        rows[k] = ",".join(cells)
    table.write_text("\n".join([header, *rows]) + "\n")
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "rsna-lumbar", root, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, _ = converted(out)
    assert counts["labels_missing"] == {"spinal_canal_stenosis_l5_s1": 1}
    sample = next(s for s in mb.open_samples(out).samples if s.image.endswith("702807833/8.dcm"))
    assert [(r.level, len(r.points)) for r in sample.regions] == [("L4/L5", 1), ("L5/S1", 1)]
    assert not any("L5/S1" in k for k in sample.attributes if k.startswith("severity"))
