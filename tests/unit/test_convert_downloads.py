"""`convert` on downloads as shipped (issue 23): the summary names the parts found and missing
and what they cost, and no progress bar is drawn before an error."""

import shutil

from medvqa_build.cli import main

from ..fixtures.sources import hyperkvasir, kvasir, rsna_lumbar


def test_summary_names_parts_found_and_missing(tmp_path, capsys):
    data = hyperkvasir.write(tmp_path / "hk")
    shutil.rmtree(data / "labeled-images")
    out = tmp_path / "hk.parquet"
    assert main(["convert", "hyperkvasir", str(data / "segmented-images"), "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"hyperkvasir: root {data / 'segmented-images'} -> {data}; parts found: segmented; "
        "missing: labeled (not found: labeled-images/)"
    )
    assert lines[1] == (
        "hyperkvasir: found 2, converted 2, quarantined 0; parts found: segmented (2); "
        f"missing: labeled; loses attribute:category, attribute:tract -> {out}"
    )


def test_labels_left_out_are_counted_in_the_summary(tmp_path, capsys):
    root = rsna_lumbar.write(tmp_path / "rsna")
    table = root / "train.csv"
    table.write_text(table.read_text().replace("Moderate", "", 1))
    assert main(["convert", "rsna-lumbar", str(root), "-o", str(tmp_path / "r.parquet")]) == 0
    out = capsys.readouterr().out
    assert "found 4, converted 4, quarantined 0" in out
    assert "labels left out (empty or not assessed): 1 in 1 kept sample(s)" in out


def test_no_progress_bar_before_an_error(tmp_path, capsys):
    """A table without its key column fails at once: the error line alone on stderr."""
    root = rsna_lumbar.write(tmp_path / "rsna")
    table = root / "train.csv"
    table.write_text(table.read_text().replace("study_id", "study", 1))
    assert main(["convert", "rsna-lumbar", str(root), "-o", str(tmp_path / "r.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: rsna-lumbar: train.csv lacks column(s) ['study_id']")
    assert len(err.strip().splitlines()) == 1 and "file/s" not in err and "0file" not in err


def test_convert_from_the_unpacked_folder(tmp_path, capsys):
    """The Kvasir v2 example of the issue: ROOT = the folder the zip made."""
    kvasir.write(tmp_path)
    out = tmp_path / "k.parquet"
    assert main(["convert", "kvasir", str(tmp_path / "kvasir-dataset-v2"), "-o", str(out)]) == 0
    assert "kvasir: found 16, converted 16, quarantined 0; parts found: images (16)" in (
        capsys.readouterr().out
    )
