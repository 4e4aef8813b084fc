"""HyperKvasir's official split CSV and EndoVis 2018's instruments18 XML, on tiny replicas."""

import logging

import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.sources import get_source
from medvqa_build.sources import manifest_capabilities as source_capabilities

from ...fixtures.sources import endovis18, hyperkvasir

SEQ1 = "miccai_challenge_2018_release_1/seq_1"
SEQ5 = "miccai_challenge_release_2/seq_5"


def _labeled(result):
    return [s for s in result.samples if s.image.startswith("labeled-images/")]


def _reasons(result):
    return {q.file: q.reason for q in result.quarantined}


# --- hyperkvasir: official 2-fold split -------------------------------------------------------


def test_hyperkvasir_split_from_the_official_csv(tmp_path):
    root = hyperkvasir.write(tmp_path)
    result = load_source("hyperkvasir", root)
    assert result.counts() == {"found": 25, "converted": 25, "quarantined": 0}
    labeled = _labeled(result)
    assert {s.split for s in labeled} == {"split_0", "split_1"}
    for s in labeled:
        seed = int(s.image.rsplit("/", 1)[1][:8], 16)
        assert s.split == f"split_{hyperkvasir.split_index(seed)}"
    # the segmented part has no official split
    assert {s.split for s in result.samples if s not in labeled} == {None}


def test_hyperkvasir_without_the_csv_has_no_split_and_no_error(tmp_path):
    root = hyperkvasir.write(tmp_path, split_csv=False)
    result = load_source("hyperkvasir", root)
    assert not result.quarantined and len(_labeled(result)) == 23
    assert {s.split for s in result.samples} == {None}


def test_hyperkvasir_csv_rows_without_images_are_ignored_and_logged(tmp_path, caplog):
    root = hyperkvasir.write(tmp_path)
    csv = root / "2_fold_split.csv"
    csv.write_text(csv.read_text() + "not-downloaded.jpg;polyps;1\n")
    with caplog.at_level(logging.WARNING, logger="medvqa_build.layouts.class_folders"):
        result = load_source("hyperkvasir", root)
    assert result.counts()["quarantined"] == 0 and len(_labeled(result)) == 23
    assert "1 row(s) of 2_fold_split.csv name no image under ROOT" in caplog.text
    assert "not-downloaded.jpg" in caplog.text


def test_hyperkvasir_unlisted_image_keeps_no_split(tmp_path):
    root = hyperkvasir.write(tmp_path)
    extra = root / "labeled-images/lower-gi-tract/anatomical-landmarks/cecum/extra.jpg"
    extra.write_bytes(next(extra.parent.glob("*.jpg")).read_bytes())
    result = load_source("hyperkvasir", root)
    by_image = {s.image: s for s in result.samples}
    assert by_image[extra.relative_to(root).as_posix()].split is None


def test_hyperkvasir_csv_class_mismatch_is_quarantined(tmp_path):
    root = hyperkvasir.write(tmp_path)
    csv = root / "2_fold_split.csv"
    lines = csv.read_text().splitlines()
    name, _, fold = lines[1].split(";")  # the first image, a cecum
    lines[1] = f"{name};ileum;{fold}"
    csv.write_text("\n".join(lines) + "\n")
    result = load_source("hyperkvasir", root)
    assert _reasons(result) == {
        f"labeled-images/lower-gi-tract/anatomical-landmarks/cecum/{name}": f"2_fold_split.csv lists {name} under class 'ileum', not its folder 'cecum'"  # noqa: E501
    }


def test_hyperkvasir_csv_with_wrong_separator_names_the_columns(tmp_path):
    root = hyperkvasir.write(tmp_path)
    csv = root / "2_fold_split.csv"
    csv.write_text(csv.read_text().replace(";", ","))
    with pytest.raises(SourceError, match=r"split table lacks column\(s\)"):
        load_source("hyperkvasir", root)


# --- endovis18: instruments18 XML boxes and interactions --------------------------------------


def _by_id(result):
    return {s.sample_id.split(":", 1)[1]: s for s in result.samples}


def test_endovis18_xml_adds_instrument_boxes_and_interactions(tmp_path):
    root = endovis18.write(tmp_path, xml=True)
    result = load_source("endovis18", root)
    assert result.counts() == {"found": 3, "converted": 3, "quarantined": 0}
    s = _by_id(result)[f"{SEQ1}/frame000"]
    # four mask regions from the colour labels first, then the XML boxes in file order
    assert [r.label for r in s.regions] == [
        "instrument shaft",
        "instrument clasper",
        "instrument wrist",
        "covered kidney",
        "kidney",
        "monopolar curved scissors",
    ]
    kidney, scissors = s.regions[4:]
    assert (kidney.bbox, kidney.level) == ((0.0, 50.0, 128.0, 102.0), "box")  # max inclusive
    assert scissors.bbox == (10.0, 10.0, 80.0, 30.0) and scissors.mask is None
    assert s.attributes["region5.interaction"] == "cutting"
    assert s.attributes["region5.source_label"] == "monopolar_curved_scissors"
    assert s.attributes["region4.source_label"] == "kidney"
    assert "region4.interaction" not in s.attributes  # the tissue side has no interaction
    assert "monopolar curved scissors" in s.labels and "kidney" in s.labels
    later = _by_id(result)[f"{SEQ1}/frame001"]
    n_masks = len(later.regions) - 3
    assert [later.attributes[f"region{n_masks + k}.interaction"] for k in (1, 2)] == [
        "grasping",
        "idle",
    ]
    seq5 = _by_id(result)[f"{SEQ5}/frame000"]
    assert seq5.regions[-1].label == "suction instrument"
    assert seq5.attributes[f"region{len(seq5.regions) - 1}.interaction"] == "suction"


def test_endovis18_frames_without_xml_keep_their_mask_regions(tmp_path):
    root = endovis18.write(tmp_path, xml=True)
    (root / SEQ5 / "xml" / "frame000.xml").unlink()
    result = load_source("endovis18", root)
    seq5 = _by_id(result)[f"{SEQ5}/frame000"]
    assert not result.quarantined
    assert seq5.labels == ("small intestine", "suturing needle")
    assert not any(k.startswith("region") for k in seq5.attributes)


def test_endovis18_bad_xml_is_quarantined_with_the_reason(tmp_path):
    root = endovis18.write(tmp_path, xml=True)
    xml = root / SEQ1 / "xml"
    (xml / "frame000.xml").write_text("<annotation><objects><name>kidney</name></annotation>")
    (xml / "frame001.xml").write_text(
        endovis18.xml_text([("prograsp_forceps", (5, 5, 14, 14), "Juggling")])
    )
    (root / SEQ5 / "xml" / "frame000.xml").write_text(
        endovis18.xml_text([("suction", (50, 50, 200, 55), "Suction")])
    )
    result = load_source("endovis18", root)
    assert result.samples == [] and result.found == 3
    reasons = _reasons(result)
    assert reasons[f"{SEQ1}/left_frames/frame000.png"].startswith(
        "annotation frame000.xml is not well-formed XML (mismatched tag"
    )
    assert reasons[f"{SEQ1}/left_frames/frame001.png"] == (
        "interaction 'Juggling' in frame001.xml is not in the interaction_map"
    )
    assert reasons[f"{SEQ5}/left_frames/frame000.png"] == (
        "frame000.xml: box [50.0, 50.0, 201.0, 56.0] lies outside the 128x102 image"
    )


def test_endovis18_xml_missing_parts_and_unknown_tools_are_quarantined(tmp_path):
    root = endovis18.write(tmp_path, xml=True)
    xml = root / SEQ1 / "xml"
    (xml / "frame000.xml").write_text(
        "<annotation><objects><name>stapler</name><interaction>Staple</interaction>"
        "</objects></annotation>"
    )
    (xml / "frame001.xml").write_text(
        endovis18.xml_text([("harmonic_ace", (5, 5, 14, 14), "Cutting")])
    )
    result = load_source("endovis18", root)
    reasons = _reasons(result)
    assert reasons[f"{SEQ1}/left_frames/frame000.png"] == (
        "annotation frame000.xml: an <objects> has no <bndbox>"
    )
    assert reasons[f"{SEQ1}/left_frames/frame001.png"] == (
        "label 'harmonic_ace' is not in the manifest's label_map"
    )
    assert len(result.samples) == 1


def test_endovis18_declares_the_interaction_field():
    provided = source_capabilities(get_source("endovis18").manifest)
    assert {"region_attribute:interaction", "regions", "masks", "labels"} <= provided
