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


def test_a_shared_box_json_entry_past_max_boxes_per_image_quarantines_its_image(tmp_path):
    """Kvasir-SEG's kavsir_bboxes.json lists one or two boxes an image: under
    max_boxes_per_image=1 the image with two is quarantined naming the limit, the others
    convert; under 2 all convert."""
    from ..fixtures.sources import kvasir_seg

    kvasir_seg.write(tmp_path / "kseg")
    out = tmp_path / "s.parquet"
    runs = {}
    for limit in (2, 1):
        env = {"MEDVQA_LIMITS": f"max_boxes_per_image={limit}"}
        proc = bounded_cli("convert", "kvasir-seg", tmp_path / "kseg", "-o", out, "-q", env=env)
        assert proc.returncode == 0, proc.stderr
        runs[limit] = converted(out)
    assert runs[2][1] == []
    (entry,) = runs[1][1]
    assert entry["file"].endswith("cju0qoxqj9q6s0835b43399p4.jpg")
    assert entry["reason"].startswith(
        "kavsir_bboxes.json entry lists more than 1 boxes for one image, over the "
        "max_boxes_per_image limit of 1"
    )
    assert runs[1][0]["converted"] == runs[2][0]["converted"] - 1


def test_a_frame_xml_past_max_boxes_per_image_quarantines_its_frame(tmp_path):
    """EndoVis 2018 with the instruments18 XML: under a limit one below the most objects a
    frame's XML lists, those frames are quarantined naming the limit and the XML file."""
    from ..fixtures.sources import endovis18

    root = endovis18.write(tmp_path / "ev18", xml=True)
    most = max(len(objs) for seq in endovis18.XML_OBJECTS.values() for objs in seq.values())
    crowded = sum(
        len(objs) == most for seq in endovis18.XML_OBJECTS.values() for objs in seq.values()
    )
    out = tmp_path / "s.parquet"
    env = {"MEDVQA_LIMITS": f"max_boxes_per_image={most - 1}"}
    proc = bounded_cli("convert", "endovis18", root, "-o", out, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    counts, entries = converted(out)
    assert len(entries) == crowded and counts["converted"] > 0
    for entry in entries:
        assert entry["reason"].startswith("annotation frame")
        assert f"lists more than {most - 1:,} boxes for one image" in entry["reason"]
