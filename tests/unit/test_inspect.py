"""`medvqa-build inspect`: the resolved root, parts found and missing, file counts, label
columns and values, labels left out, the first problems, and the convert command to run."""

import json
import shutil

from medvqa_build.api import inspect_source
from medvqa_build.cli import main

from ..fixtures.sources import hyperkvasir, kvasir_seg, rsna_lumbar


def test_partial_hyperkvasir_download(tmp_path, capsys):
    """Only labeled-images unpacked (class_folders), ROOT one level above the data."""
    data = hyperkvasir.write(tmp_path / "downloads" / "hyper-kvasir")
    shutil.rmtree(data / "segmented-images")
    report = inspect_source("hyperkvasir", tmp_path / "downloads")
    assert report.resolution.root == data
    assert report.resolution.found == ["labeled"]
    assert list(report.resolution.missing) == ["segmented"]
    assert report.lost == {"segmented": ["attribute:box_count", "masks", "regions"]}
    (labeled,) = report.parts
    assert (labeled.candidates, labeled.read, labeled.converted) == (23, 23, 23)
    assert labeled.tables == {"2_fold_split.csv": ["file-name", "class-name", "split-index"]}
    assert labeled.labels["polyp"] == 1 and len(labeled.labels) == 23
    assert set(labeled.attributes) == {"source_label", "tract", "category"}

    assert main(["inspect", "hyperkvasir", str(tmp_path / "downloads")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"hyperkvasir: root {tmp_path / 'downloads'} -> {data}")
    assert "missing: segmented (not found: segmented-images/images/" in lines[0]
    assert "  without part segmented: loses attribute:box_count, masks, regions" in lines
    assert "part labeled (class_folders): 23 candidate file(s); read 23: 23 convert, 0 " in (
        "\n".join(lines)
    )
    assert lines[-1] == f"next: medvqa-build convert hyperkvasir {data} -o hyperkvasir.parquet"


def test_rsna_tables_empty_cells_and_problems_as_json(tmp_path, capsys):
    """A table-driven layout: its tables and columns, a cell left empty, a bad row."""
    root = rsna_lumbar.write(tmp_path / "rsna")
    table = root / "train.csv"
    table.write_text(table.read_text().replace("Severe", "", 1))
    with (root / "train_label_coordinates.csv").open("a") as fh:
        fh.write("4003253,702807833,99,Spinal Canal Stenosis,L4/L5,1,1\n")  # no such DICOM
    assert main(["inspect", "rsna-lumbar", str(root), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    (part,) = facts["parts"]
    assert part["tables"]["train.csv"][0] == "study_id" and len(part["tables"]["train.csv"]) == 26
    assert part["tables"]["train_label_coordinates.csv"] == [
        "study_id", "series_id", "instance_number", "condition", "level", "x", "y",
    ]  # fmt: skip
    assert part["labels_missing"] == {"spinal_canal_stenosis_l4_l5": 1}
    assert part["problems"] == [
        {"file": "train_images/4003253/702807833/99.dcm", "reason": "file not found"}
    ]
    assert (part["candidates"], part["converted"], part["quarantined"]) == (5, 4, 1)
    assert (
        facts["convert_command"]
        == f"medvqa-build convert rsna-lumbar {root} -o rsna-lumbar.parquet"
    )


def test_limit_reads_few_but_counts_every_file(tmp_path):
    """image_mask_pairs routes candidates through the shard seam: all counted, one read."""
    root = kvasir_seg.write(tmp_path)
    (part,) = inspect_source("kvasir-seg", root, limit=1).parts
    assert (part.candidates, part.counted_all, part.read) == (3, True, 1)
    assert part.region_labels == {"polyp": 1}


def test_a_folder_without_the_data_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "nothing").mkdir()
    assert main(["inspect", "kvasir", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "found none of its parts (images: kvasir-dataset-v2/)" in err[0]
