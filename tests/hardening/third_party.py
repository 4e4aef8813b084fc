"""Files nobody on the project wrote: the test data pydicom, nibabel and scikit-image ship in
their wheels, found in the installed packages (nothing is downloaded)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pydicom
import skimage
from nibabel.testing import data_path as NIBABEL_DATA

PYDICOM_DATA = Path(pydicom.__file__).parent / "data" / "test_files"
SKIMAGE_DATA = Path(skimage.__file__).parent / "data"
NIBABEL_DATA = Path(NIBABEL_DATA)
# header elements that identify a patient, a clinician, a place or a date (PS3.15 E.1-1)
PHI_KEYWORDS = (
    "PatientName",
    "PatientID",
    "PatientBirthDate",
    "OtherPatientIDs",
    "StudyDate",
    "SeriesDate",
    "AcquisitionDate",
    "ContentDate",
    "InstitutionName",
    "InstitutionAddress",
    "ReferringPhysicianName",
    "PerformingPhysicianName",
    "OperatorsName",
    "AccessionNumber",
    "StationName",
)


def files(folder: Path, suffixes: tuple[str, ...] | None = None) -> list[Path]:
    """Every file below ``folder`` in a fixed order (no caches)."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and (suffixes is None or p.name.lower().endswith(suffixes))
    )


def pydicom_files() -> list[Path]:
    return files(PYDICOM_DATA)


def read_dicom(path: Path):
    """pydicom's own reading, or None when pydicom cannot read the file."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pydicom.dcmread(path)
    except Exception:
        return None


def pixel_array(path: Path):
    """pydicom's own ``pixel_array``, or None when it gives none."""
    ds = read_dicom(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return None if ds is None else ds.pixel_array
    except Exception:
        return None


def phi_values(paths: list[Path]) -> list[str]:
    """The identifying header values of ``paths`` long and specific enough to grep for (a
    value such as "1" or "ANON" would match unrelated bytes)."""
    out: set[str] = set()
    for path in paths:
        ds = read_dicom(path)
        if ds is None:
            continue
        for keyword in PHI_KEYWORDS:
            value = ds.get(keyword)
            values = value if type(value).__name__ == "MultiValue" else [value]
            for v in values:
                text = str(v or "").strip()
                out.update(part for part in [text, *text.split("^")] if _specific(part))
    return sorted(out)


def _specific(text: str) -> bool:
    text = text.strip()
    if len(text) < 6 or not text.isprintable():
        return False
    return not text.isdigit() or len(text) == 8  # a DA date, not a short number


def nifti_files() -> list[Path]:
    """nibabel's NIfTI-1/NIfTI-2 test images (3-D and 4-D, big- and little-endian)."""
    return files(NIBABEL_DATA, (".nii", ".nii.gz"))


def nibabel_non_nifti() -> list[Path]:
    """Other formats nibabel ships (MGH, MINC, PAR, DICOM, text): hostile stand-ins for a
    volume named ``.nii.gz``."""
    return files(NIBABEL_DATA, (".mgz", ".mnc", ".par", ".dcm", ".rst", ".trk"))


def skimage_files() -> list[Path]:
    return files(SKIMAGE_DATA)


IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")  # store.paths.IMAGE_EXTENSIONS
