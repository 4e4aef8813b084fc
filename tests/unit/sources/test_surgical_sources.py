"""Surgical sources (Cholec80, PSI-AVA, EndoVis 2017/2018) on tiny replicas of their layouts."""

import json

import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.media import read_frame, video_info

from ...fixtures.images import write_jpeg
from ...fixtures.sources import cholec80, psi_ava


def _reasons(result):
    return sorted((q.file, q.reason) for q in result.quarantined)


# --- cholec80 (video_tables) ---------------------------------------------------------------


def test_cholec80_frames_phases_tools(tmp_path):
    root = cholec80.write(tmp_path)
    result = load_source("cholec80", root)
    assert not result.quarantined
    by_id = {s.sample_id: s for s in result.samples}
    assert sorted(by_id) == [f"cholec80:video0{v}/0000{f:02d}" for v in (1, 2) for f in (0, 25, 50)]
    s = by_id["cholec80:video01/000025"]
    assert (s.image, s.frame, s.width, s.height) == ("videos/video01.mp4", 25, 64, 48)
    assert s.labels == ("grasper", "hook") and s.group_id == "video01"
    assert s.attributes["phase"] == "preparation" and s.attributes["source_label"] == "Preparation"
    assert s.attributes["tool:hook"] == "1" and s.attributes["tool:specimen bag"] == "0"
    assert s.attributes["time_s"] == "1.00"
    assert by_id["cholec80:video01/000050"].attributes["phase"] == "calot triangle dissection"
    # the tool table ends one sample early: the frame keeps its phase, has no tool attributes
    last = by_id["cholec80:video02/000050"]
    assert last.attributes["phase"] == "gallbladder packaging" and last.labels == ()
    assert not any(k.startswith("tool:") for k in last.attributes)


def test_cholec80_frame_step_and_video_reader(tmp_path):
    from medvqa_build.layouts.base import ScanContext, make_layout
    from medvqa_build.sources import get_source

    root = cholec80.write(tmp_path)
    assert video_info(root / "videos" / "video01.mp4")[:1] == (60,)
    assert read_frame(root / "videos" / "video01.mp4", 25).shape == (48, 64, 3)
    assert abs(float(read_frame(root / "videos" / "video01.mp4", 25).mean()) - 200) < 12
    manifest = get_source("cholec80").manifest
    options = {**manifest.parts[0].options, "frame_step": 5}
    layout = make_layout("video_tables", options, where="test")
    ctx = ScanContext(
        "cholec80",
        root,
        "videos",
        "laparoscopy",
        "Surgical Endoscopy",
        label_map=manifest.label_map,
    )
    frames = [s.frame for s in layout.scan(ctx) if s.attributes["video"] == "video01"]
    assert frames == list(range(0, 60, 5))


def test_cholec80_quarantine_truncated_video_and_unknown_phase(tmp_path):
    root = cholec80.write(tmp_path)
    data = (root / "videos" / "video02.mp4").read_bytes()
    (root / "videos" / "video02.mp4").write_bytes(data[: len(data) // 3])
    phase = root / "phase_annotations" / "video01-phase.txt"
    phase.write_text(phase.read_text().replace("25\tPreparation", "25\tPrep"))
    (root / "videos" / "video03.mp4").write_bytes(b"")  # no tables either
    result = load_source("cholec80", root, verify="decode")
    assert [s.sample_id for s in result.samples] == [
        "cholec80:video01/000000",
        "cholec80:video01/000050",
    ]
    reasons = _reasons(result)
    unknown = "frame 25: label 'Prep' is not in the manifest's label_map"
    assert reasons[0] == ("videos/video01.mp4", unknown)
    truncated = [r for f, r in reasons if f == "videos/video02.mp4"]
    assert len(truncated) == 3 and truncated[0].startswith("frame 0: cannot open video")
    missing = "annotation table phase_annotations/video03-phase.txt is missing"
    assert ("videos/video03.mp4", missing) in reasons
    assert result.found == 2 + 1 + 3 + 1


def test_cholec80_layout_errors_name_what_is_missing(tmp_path):
    with pytest.raises(SourceError, match=r"found none of its parts \(videos: videos/"):
        load_source("cholec80", tmp_path)
    root = cholec80.write(tmp_path)
    (root / "phase_annotations" / "video01-phase.txt").write_text("Frame,Phase\n0,Preparation\n")
    with pytest.raises(SourceError, match=r"lacks column\(s\) \['Frame', 'Phase'\]"):
        load_source("cholec80", root)


# --- psi-ava (coco_json) --------------------------------------------------------------------


def test_psi_ava_boxes_phases_steps_actions(tmp_path):
    root = psi_ava.write(tmp_path)
    result = load_source("psi-ava", root)
    assert not result.quarantined and len(result.samples) == 4
    by_id = {s.sample_id: s for s in result.samples}
    s = by_id["psi-ava:CASE021/00001"]
    assert (s.image, s.width, s.height) == ("PSIAVA/keyframes/CASE021/00001.jpg", 128, 80)
    assert (s.group_id, s.split) == ("CASE021", "fold1")
    assert s.labels == ("bipolar forceps", "monopolar curved scissors")
    assert s.attributes["phase"] == "developing the space of retzius"
    assert s.attributes["source_phase"] == "Retzius_Space"
    assert s.attributes["step"] == "prevesical dissection"
    assert s.attributes["region0.actions"] == "hold,pull"
    assert s.attributes["actions"] == "cauterize,cut,hold,pull,push"
    # COCO [x, y, w, h] -> xyxy; an edge overshoot of 1e-8 px is clipped to the image
    assert s.regions[0].bbox == pytest.approx((0.0, 38.6, 82.1, 80.0))
    assert s.regions[1].bbox == pytest.approx((113.83, 13.0, 128.0, 18.1))
    assert [r.label for r in s.regions] == ["bipolar forceps", "monopolar curved scissors"]
    empty = by_id["psi-ava:CASE021/02900"]
    assert empty.regions == () and "phase" not in empty.attributes
    other = by_id["psi-ava:CASE015/00036"]
    assert (other.group_id, other.split) == ("CASE015", "fold2")
    assert other.attributes["phase"] == "right pelvic isolated lymphadenectomy"


def test_psi_ava_quarantine_reasons(tmp_path):
    root = psi_ava.write(tmp_path)
    path = root / "data_annotations/psi-ava/fold1/coco_anns/val_coco_anns_v3_35s.json"
    data = json.loads(path.read_text())
    data["annotations"][0]["bbox"] = [100.0, 10.0, 40.0, 5.0]  # ends at x = 140 > 128
    data["annotations"][2]["category_id"] = 42
    data["annotations"].append({**data["annotations"][2], "id": 9, "image_id": 9999})
    data["images"].append({**data["images"][2], "id": 700, "file_name": "CASE021/09999.jpg"})
    path.write_text(json.dumps(data))
    write_jpeg(root / "PSIAVA/keyframes/CASE021/02900.jpg", 5, size_wh=(64, 40))
    fold2 = root / "data_annotations/psi-ava/fold2/coco_anns/val_coco_anns_v3_35s.json"
    data = json.loads(fold2.read_text())
    data["annotations"][1]["phase"] = 5
    fold2.write_text(json.dumps(data))
    result = load_source("psi-ava", root)
    assert result.samples == [] and result.found == 5 + 1
    assert _reasons(result) == sorted(
        [
            (
                "PSIAVA/keyframes/CASE021/00001.jpg",
                "box [100.0, 10.0, 140.0, 15.0] lies outside the 128x80 image",
            ),
            (
                "PSIAVA/keyframes/CASE021/02865.jpg",
                "category id 42 is not in the file's categories",
            ),
            ("PSIAVA/keyframes/CASE021/02900.jpg", "image is 64x40, the annotation says 128x80"),
            ("PSIAVA/keyframes/CASE021/09999.jpg", "file not found"),
            (
                "data_annotations/psi-ava/fold1/coco_anns/val_coco_anns_v3_35s.json",
                "annotation 9 names unknown image 9999",
            ),
            (
                "PSIAVA/keyframes/CASE015/00036.jpg",
                "annotations disagree on the image's phase: [2, 5]",
            ),
        ]
    )


def test_psi_ava_missing_annotation_file_or_key_is_a_clear_error(tmp_path):
    with pytest.raises(SourceError, match=r"found none of its parts \(fold1: data_annotations/"):
        load_source("psi-ava", tmp_path)
    root = psi_ava.write(tmp_path)
    path = root / "data_annotations/psi-ava/fold1/coco_anns/val_coco_anns_v3_35s.json"
    data = json.loads(path.read_text())
    del data["step_categories"]
    path.write_text(json.dumps(data))
    with pytest.raises(SourceError, match=r"lacks key\(s\) \['step_categories'\]"):
        load_source("psi-ava", root)
