"""Issue 33, point 1: a per-image box file declares no size, so the number of boxes it lists
is the limit (``max_boxes_per_image``), checked while the file is read line by line: a file
past it quarantines its image naming the limit and how to raise it, and the rest converts.
Every case runs the CLI under the hostile corpus's ceilings (:mod:`.bounded_cli`)."""

from __future__ import annotations

from .bounded_cli import bounded_cli
from .test_declared_sizes import converted


def test_a_yolo_box_file_past_max_boxes_per_image_is_quarantined(tmp_path):
    """10,001 valid YOLO lines for one image, under the default limit of 10,000."""
    from ..fixtures.sources import wcebleedgen

    root = wcebleedgen.write(tmp_path / "wce")
    box_file = sorted(root.rglob("YOLO_TXT/*.txt"))[0]
    line = box_file.read_text().splitlines()[0] + "\n"
    box_file.write_text(line * 10_001)
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "wcebleedgen", root, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert counts["converted"] > 0
    assert entry["file"].endswith(box_file.stem + ".png")
    assert entry["reason"] == (
        f"box file {box_file.name} lists more than 10,000 boxes for one image, over the "
        "max_boxes_per_image limit of 10,000: a damaged or padded file (download it again) "
        "or, if genuine, raise the limit (MEDVQA_LIMITS=max_boxes_per_image=...)"
    )
    # 10,000 lines are within the limit: the image converts
    box_file.write_text(line * 10_000)
    proc = bounded_cli("convert", "wcebleedgen", root, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    assert converted(out)[0]["quarantined"] == 0


def test_a_voc_box_file_past_a_lowered_max_boxes_per_image_is_quarantined(tmp_path):
    """EDD2020's box files list two boxes an image: under max_boxes_per_image=2 they convert;
    a third line (blank lines do not count) quarantines that image, the others convert."""
    from ..fixtures.sources import edd2020

    base = edd2020.write(tmp_path / "edd")
    env = {"MEDVQA_LIMITS": "max_boxes_per_image=2"}
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "edd2020", tmp_path / "edd", "-o", out, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    reference, entries = converted(out)
    assert entries == []
    box_file = base / "bbox" / "EDD2020_ACB0002.txt"
    lines = box_file.read_text().splitlines()
    box_file.write_text("\n\n".join(lines + lines[:1]) + "\n")
    proc = bounded_cli("convert", "edd2020", tmp_path / "edd", "-o", out, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert entry["file"].endswith("EDD2020_ACB0002.jpg")
    assert (
        "lists more than 2 boxes for one image, over the max_boxes_per_image limit of 2"
        in (entry["reason"])
    )
    assert (counts["converted"], counts["quarantined"]) == (reference["converted"] - 1, 1)
