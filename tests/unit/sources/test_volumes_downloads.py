"""The volume sources (msd, abdomenct-1k, acdc, brats, camus, sa-med2d-20m) on downloads laid out
as their owners ship them (issue 23): the folders the archives unpack to, the ROOT shapes users
pass, the release quirks public loaders work around, and info / table cells that leave a value
out (the sample is kept, the value counted)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.geometry import rle_decode

from ...fixtures.images import write_png
from ...fixtures.sources import abdomenct_1k, acdc, brats, camus, msd
from ...fixtures.sources import sa_med2d_20m as samed
from ...fixtures.volumes import LPS_AFFINE, ct_volume, label_volume, mri_volume, write_nifti


def _ids_and_images(result) -> list[tuple[str, str]]:
    return [(s.sample_id, s.image) for s in result.samples]


def _same_for_every_root(source_id: str, *roots: Path):
    """Every ROOT gives the same resolved root, sample ids and image paths."""
    results = [load_source(source_id, r) for r in roots]
    first = results[0]
    assert first.samples
    for root, result in zip(roots, results, strict=True):
        assert result.root == first.root, root
        assert _ids_and_images(result) == _ids_and_images(first), root
    return first


# -- msd ------------------------------------------------------------------------------------


def test_msd_task_folder_its_parent_or_above_give_the_same_samples(tmp_path):
    downloads = tmp_path / "downloads"
    msd.write(downloads / "msd")
    task = downloads / "msd" / msd.TASK
    result = _same_for_every_root("msd", task, task.parent, downloads)
    assert result.root == task.resolve()
    assert {s.image for s in result.samples} == {
        "imagesTr/liver_0.nii.gz",
        "imagesTr/liver_1.nii.gz",
    }


def test_msd_two_tasks_under_root_are_ambiguous_and_both_named(tmp_path):
    msd.write_task(tmp_path / "Task03_Liver")
    msd.write_task(tmp_path / "Task09_Spleen")
    with pytest.raises(SourceError, match="ROOT holds the data twice") as err:
        load_source("msd", tmp_path)
    assert "Task03_Liver" in str(err.value) and "Task09_Spleen" in str(err.value)


def _nnunet_v2(task: Path, labels: dict) -> Path:
    """An nnU-Net v2 raw dataset (no training list) converted from the replica."""
    for case in msd.CASES:
        liver, cancer = msd.structures(case)
        img = ct_volume(msd.SHAPE, case, (liver, cancer))
        write_nifti(task / "imagesTr" / f"liver_{case}_0000.nii.gz", img, LPS_AFFINE)
        lab = label_volume(msd.SHAPE, [(1, liver), (2, cancer)])
        write_nifti(task / "labelsTr" / f"liver_{case}.nii.gz", lab, LPS_AFFINE)
    meta = {"channel_names": {"0": "CT"}, "labels": labels, "file_ending": ".nii.gz"}
    (task / "dataset.json").write_text(json.dumps(meta), encoding="utf-8")
    return task


def test_msd_nnunet_dialect_skips_dot_and_underscore_files(tmp_path):
    """nnU-Net's convert_MSD_dataset skips files starting with "." or "_"; so does the reader
    (a "._" AppleDouble or "_" file in labelsTr is not a case)."""
    task = _nnunet_v2(tmp_path / "Dataset003_Liver", {"background": 0, "liver": 1, "cancer": 2})
    (task / "labelsTr" / "._liver_0.nii.gz").write_bytes(b"\x00\x05\x16\x07")
    (task / "labelsTr" / "_liver_9.nii.gz").write_bytes(b"\x00\x05\x16\x07")
    result = load_source("msd", task)
    assert result.counts() == {"found": 12, "converted": 12, "quarantined": 0}


def test_msd_nnunet_region_labels_are_not_structures(tmp_path):
    """nnU-Net v2 region-based dataset.json: a label whose value is a list is a union the
    challenge evaluates, not a voxel value; it is left out instead of stopping the source."""
    labels = {"background": 0, "liver": 1, "cancer": 2, "whole liver": [1, 2]}
    result = load_source("msd", _nnunet_v2(tmp_path / "Dataset003_Liver", labels))
    assert result.counts()["converted"] == 12
    assert {lab for s in result.samples for lab in s.labels} == {"liver", "cancer"}


# -- abdomenct-1k ---------------------------------------------------------------------------


def test_abdomenct_1k_any_root_shape_gives_the_same_samples(tmp_path):
    downloads = tmp_path / "downloads"
    root = abdomenct_1k.write(downloads / "abdomenct-1k")
    part = root / "AbdomenCT-1K-ImagePart2"
    result = _same_for_every_root("abdomenct-1k", root, part, downloads)
    assert result.root == root.resolve()


def test_abdomenct_1k_part_unzipped_into_a_folder_of_its_name(tmp_path):
    """``AbdomenCT-1K-ImagePart1/AbdomenCT-1K-ImagePart1/`` (unzipped into a folder named after
    the zip): the mask is still Mask/Case_NNNNN.nii.gz, found from the case id."""
    root = abdomenct_1k.write(tmp_path / "data")
    part = root / "AbdomenCT-1K-ImagePart1"
    part.rename(root / "unzipping")
    part.mkdir()
    (root / "unzipping").rename(part / "AbdomenCT-1K-ImagePart1")
    result = load_source("abdomenct-1k", root)
    assert result.counts()["quarantined"] == 0
    s = next(x for x in result.samples if x.group_id == "Case_00001")
    assert s.image == "AbdomenCT-1K-ImagePart1/AbdomenCT-1K-ImagePart1/Case_00001_0000.nii.gz"
    assert s.attributes["label_volume"] == "Mask/Case_00001.nii.gz"


def test_abdomenct_1k_masks_unpacked_in_place(tmp_path):
    """Mask.7z holds the masks without a folder: ``7z x Mask.7z`` in the download folder puts
    them beside the image parts, where they are found too."""
    root = abdomenct_1k.write(tmp_path / "data")
    for mask in sorted((root / "Mask").iterdir()):
        mask.rename(root / mask.name)
    (root / "Mask").rmdir()
    result = load_source("abdomenct-1k", root)
    assert result.counts()["quarantined"] == 0 and result.samples
    assert {s.attributes["label_volume"] for s in result.samples} == {
        "Case_00001.nii.gz",
        "Case_00401.nii.gz",
        "Case_00801.nii.gz",
    }


def test_abdomenct_1k_image_without_public_mask_is_quarantined_with_why(tmp_path):
    root = abdomenct_1k.write(tmp_path / "data")
    shape = abdomenct_1k.SHAPE
    extra = root / "AbdomenCT-1K-ImagePart3" / "Case_01062_0000.nii.gz"
    write_nifti(extra, ct_volume(shape, 7), LPS_AFFINE)
    result = load_source("abdomenct-1k", root)
    (entry,) = result.quarantined
    assert entry.file == "AbdomenCT-1K-ImagePart3/Case_01062_0000.nii.gz"
    assert "Mask/Case_01062.nii.gz is missing" in entry.reason
    assert "1000 of the 1062" in entry.reason
    assert {s.group_id for s in result.samples} == {"Case_00001", "Case_00401", "Case_00801"}


def test_abdomenct_1k_one_image_part_alone_converts(tmp_path):
    root = abdomenct_1k.write(tmp_path / "data")
    shutil.rmtree(root / "AbdomenCT-1K-ImagePart1")
    shutil.rmtree(root / "AbdomenCT-1K-ImagePart3")
    result = load_source("abdomenct-1k", root)
    assert result.counts()["quarantined"] == 0
    assert {s.group_id for s in result.samples} == {"Case_00401"}


# -- acdc -----------------------------------------------------------------------------------


def _acdc_patient(base: Path, patient: str, ed: int, es: int, info: str) -> None:
    """One more patient like the fixture's, with its own frame numbers and Info.cfg text."""
    folder = base / patient
    for frame in (ed, es):
        rv, myo, lv = acdc.structures(0, frame == es)
        name = f"{patient}_frame{frame:02d}"
        write_nifti(folder / f"{name}.nii.gz", mri_volume(acdc.SHAPE, frame), acdc.AFFINE)
        lab = label_volume(acdc.SHAPE, [(1, rv), (2, myo), (3, lv)])
        write_nifti(folder / f"{name}_gt.nii.gz", lab, acdc.AFFINE)
    (folder / "Info.cfg").write_text(info, encoding="utf-8")


def test_acdc_ed_frame_is_read_from_info_cfg_not_assumed_frame01(tmp_path):
    """patient090's ED is frame04 in the release: the phase comes from Info.cfg."""
    root = acdc.write(tmp_path / "data")
    base = root / "database" / "training"
    info = "ED: 4\nES: 11\nGroup: MINF\nHeight: 170.0\nNbFrame: 30\nWeight: 80.0\n"
    _acdc_patient(base, "patient090", 4, 11, info)
    result = load_source("acdc", root)
    phases = {
        s.attributes["frame"]: s.attributes["phase"]
        for s in result.samples
        if s.group_id == "patient090"
    }
    assert phases == {"frame04": "ED", "frame11": "ES"}
    assert not result.counts_detail["labels_missing"]


@pytest.mark.parametrize("empty", ["", "nan", "NA"])
def test_acdc_empty_info_value_drops_that_attribute_only(tmp_path, empty):
    root = acdc.write(tmp_path / "data")
    info = root / "database" / "training" / "patient001" / "Info.cfg"
    info.write_text(info.read_text().replace("Group: DCM", f"Group: {empty}"))
    result = load_source("acdc", root)
    assert result.counts() == {"found": 20, "converted": 20, "quarantined": 0}
    p1 = [s for s in result.samples if s.group_id == "patient001"]
    assert len(p1) == 10 and all("Group" not in s.attributes for s in p1)
    assert all(s.attributes["phase"] in ("ED", "ES") for s in p1)  # its other values kept
    assert result.counts_detail["labels_missing"] == {"Group": 10}
    assert result.counts_detail["samples_missing_labels"] == 10
    assert {s.attributes["Group"] for s in result.samples if s.group_id == "patient002"} == {"NOR"}


def test_acdc_frame_no_info_key_names_keeps_its_samples_without_phase(tmp_path):
    root = acdc.write(tmp_path / "data")
    info = root / "database" / "training" / "patient002" / "Info.cfg"
    info.write_text(info.read_text().replace("ES: 8\n", "ES:\n"))
    result = load_source("acdc", root)
    es = [s for s in result.samples if s.attributes["frame"] == "frame08"]
    assert es and all("phase" not in s.attributes and "ES" not in s.attributes for s in es)
    assert result.counts_detail["labels_missing"] == {"ES": 10, "phase": 5}


def test_acdc_collection_download_any_root_shape(tmp_path):
    """The collection download unpacks to ACDC/database/...: ROOT = ACDC/, the folder holding
    it or one above give the same samples."""
    downloads = tmp_path / "downloads"
    acdc.write(downloads / "acdc" / "ACDC")
    collection = downloads / "acdc" / "ACDC"
    result = _same_for_every_root("acdc", collection, collection.parent, downloads)
    assert result.samples[0].image.startswith("ACDC/database/training/")


# -- brats ----------------------------------------------------------------------------------


def test_brats_case_355_misnamed_segmentation_is_read(tmp_path):
    result = load_source("brats", brats.write(tmp_path / "data"))
    s355 = [s for s in result.samples if s.group_id == "BraTS20_Training_355"]
    assert s355 and result.counts()["quarantined"] == 0
    assert {s.attributes["label_volume"] for s in s355} == {
        "MICCAI_BraTS2020_TrainingData/BraTS20_Training_355/W39_1998.09.19_Segm.nii"
    }


def test_brats_name_mapping_and_survival_columns_with_na_cells(tmp_path):
    result = load_source("brats", brats.write(tmp_path / "data"))
    case = {s.group_id: s.attributes for s in result.samples}
    assert case["BraTS20_Training_001"]["Grade"] == "HGG"
    assert case["BraTS20_Training_001"]["Extent_of_Resection"] == "GTR"
    assert case["BraTS20_Training_001"]["Age"] == "60.463"
    assert case["BraTS20_Training_002"]["Survival_days"] == "ALIVE (361 days later)"  # verbatim
    assert "Extent_of_Resection" not in case["BraTS20_Training_002"]  # "NA"
    assert case["BraTS20_Training_355"]["Grade"] == "LGG"
    assert not {"Age", "Survival_days"} & set(case["BraTS20_Training_355"])  # not listed
    per_case = {g: sum(s.group_id == g for s in result.samples) for g in case}
    assert result.counts_detail["labels_missing"] == {
        "Extent_of_Resection": per_case["BraTS20_Training_002"] + per_case["BraTS20_Training_355"],
        "Age": per_case["BraTS20_Training_355"],
        "Survival_days": per_case["BraTS20_Training_355"],
    }


def test_brats_case_listed_twice_with_different_values_is_quarantined(tmp_path):
    root = brats.write(tmp_path / "data")
    table = root / "MICCAI_BraTS2020_TrainingData" / "name_mapping.csv"
    table.write_text(table.read_text() + "LGG,NA,NA,NA,NA,BraTS20_Training_002\n")
    result = load_source("brats", root)
    (entry,) = {q.file: q for q in result.quarantined}.values()
    assert entry.file.endswith("BraTS20_Training_002/BraTS20_Training_002_flair.nii")
    assert "listed twice" in entry.reason and "name_mapping.csv" in entry.reason
    assert {s.group_id for s in result.samples} == {"BraTS20_Training_001", "BraTS20_Training_355"}


def test_brats_kaggle_mirror_layout_any_root_shape(tmp_path):
    """The Kaggle mirror unpacks to BraTS2020_TrainingData/MICCAI_BraTS2020_TrainingData/."""
    downloads = tmp_path / "downloads"
    brats.write(downloads / "kaggle" / "BraTS2020_TrainingData")
    outer = downloads / "kaggle" / "BraTS2020_TrainingData"
    result = _same_for_every_root("brats", outer, outer.parent, downloads)
    assert result.root == outer.parent.resolve()
    assert {s.attributes.get("Grade") for s in result.samples} == {"HGG", "LGG"}


# -- camus ----------------------------------------------------------------------------------


def test_camus_empty_info_line_drops_that_attribute_only(tmp_path):
    root = camus.write(tmp_path / "data")
    info = root / "CAMUS_public" / "database_nifti" / "patient0001" / "Info_2CH.cfg"
    info.write_text(info.read_text().replace("EF: 54\n", "EF: \n"))
    result = load_source("camus", root)
    assert result.counts() == {"found": 8, "converted": 8, "quarantined": 0}
    by_id = {s.sample_id: s for s in result.samples}
    s = by_id["camus:patient0001_2CH_ED/axial/0000"]
    assert "EF" not in s.attributes and s.attributes["FrameRate"] == "50"
    assert by_id["camus:patient0001_4CH_ED/axial/0000"].attributes["EF"] == "54"
    assert result.counts_detail["labels_missing"] == {"EF": 2}  # the 2CH ED and ES frames


def test_camus_collection_or_database_nifti_alone_any_root_shape(tmp_path):
    downloads = tmp_path / "downloads"
    camus.write(downloads / "camus")
    collection = downloads / "camus" / "CAMUS_public"
    result = _same_for_every_root("camus", collection, collection.parent, downloads)
    assert result.samples[0].image.startswith("CAMUS_public/database_nifti/patient0001/")
    # the database_nifti folder downloaded alone
    alone = tmp_path / "alone"
    shutil.copytree(collection / "database_nifti", alone / "database_nifti")
    only = _same_for_every_root("camus", alone / "database_nifti", alone)
    assert [s.sample_id for s in only.samples] == [s.sample_id for s in result.samples]


# -- sa-med2d-20m ---------------------------------------------------------------------------


def test_sa_med2d_any_root_shape_gives_the_same_samples(tmp_path):
    downloads = tmp_path / "downloads"
    samed.write(downloads / "sa-med2d-20m")
    folder = downloads / "sa-med2d-20m" / samed.FOLDER
    result = _same_for_every_root("sa-med2d-20m", folder, folder.parent, downloads)
    assert result.root == folder.resolve()


def test_sa_med2d_inverted_optic_disc_masks_are_read_inverted(tmp_path):
    result = load_source("sa-med2d-20m", samed.write(tmp_path))
    s = next(x for x in result.samples if x.attributes["dataset"] == "ichallenge_adam_task2")
    (region,) = s.regions
    assert s.modality == "fundus" and region.label == "optic disc"
    assert region.bbox == (20.0, 12.0, 30.0, 22.0)  # the disc, not the background around it
    assert rle_decode(region.mask.size_hw, region.mask.counts).sum() == 100


def test_sa_med2d_mask_of_another_size_is_left_out_and_counted(tmp_path):
    root = samed.write_corpus(tmp_path / samed.FOLDER)
    stem = "ct_00--AbdomenCT1K--Case_00011--x_0041"
    write_png(root / "masks" / f"{stem}--0002_000.png", np.full((20, 24), 255, np.uint8))
    result = load_source("sa-med2d-20m", root)
    s = next(x for x in result.samples if x.image == f"images/{stem}.png")
    assert [r.label for r in s.regions] == ["liver", "kidney", "kidney"]  # its other masks
    assert result.counts_detail["labels_missing"] == {"mask (size differs from its image)": 1}
    assert result.counts_detail["samples_missing_labels"] == 1
    assert not result.quarantined
