"""Issue 33: quarantine reasons say what really happened (a ``../`` that leaves the root, a
FIFO, a class folder linked from outside the root), through the CLI under the hostile
corpus's ceilings; and nothing is skipped without an entry."""

from __future__ import annotations

import os
import shutil

from ..fixtures.sources import kvasir_capsule
from .bounded_cli import bounded_cli
from .test_declared_sizes import converted, kvasir_polyps


def test_a_fifo_is_named_as_one_and_never_opened(tmp_path):
    """Opening a FIFO blocks until someone writes: the scan would hang. It is refused by
    its kind, not reported as "not found"."""
    polyps = kvasir_polyps(tmp_path / "kvasir")
    os.mkfifo(polyps / "pipe.jpg")
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "kvasir", tmp_path / "kvasir", "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert counts["converted"] == 3
    assert entry["file"] == "kvasir-dataset-v2/polyps/pipe.jpg"
    assert entry["reason"] == (
        "is a FIFO (named pipe), not a regular file; refused without opening it"
    )


def test_a_class_folder_linked_from_outside_the_root_is_quarantined(tmp_path):
    """os.walk does not follow folder links: the folder's files were skipped without a word."""
    kvasir_polyps(tmp_path / "kvasir")
    elsewhere = kvasir_polyps(tmp_path / "elsewhere")
    os.symlink(elsewhere, tmp_path / "kvasir/kvasir-dataset-v2/ulcerative-colitis")
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "kvasir", tmp_path / "kvasir", "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert (counts["converted"], counts["quarantined"]) == (3, 1)
    assert entry["file"] == "kvasir-dataset-v2/ulcerative-colitis"
    assert "symbolic link to a folder outside the source root" in entry["reason"]
    assert "cp -rL" in entry["reason"]
    looked = bounded_cli("inspect", "kvasir", tmp_path / "kvasir")
    assert "problem: kvasir-dataset-v2/ulcerative-colitis: folder is a symbolic link" in (
        looked.stdout
    )


def test_a_table_row_that_climbs_out_with_dotdot_says_so(tmp_path):
    """A metadata.csv row naming ``../../secret.jpg`` (a file that exists outside the root)
    is reported as leaving the root, not as "no such file"."""
    root = kvasir_capsule.write(tmp_path / "kc")
    shutil.copy(next((root / "labelled_images/Pylorus").iterdir()), tmp_path / "secret.jpg")
    table = root / "metadata.csv"
    row = f"../../secret.jpg;{kvasir_capsule.VIDEO_A};9;Anatomy;Pylorus;;;;;;;"
    table.write_text(table.read_text() + row + "\n")
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "kvasir-capsule", root, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert counts["converted"] == 6
    assert entry["file"] == "labelled_images/../../secret.jpg"
    assert "leaves the source root through '..'; refused" in entry["reason"]
    assert "no such file" not in entry["reason"]
