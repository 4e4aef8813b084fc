"""What the DICOM layouts share: header-only size checks and the manifest's allow-list of
header keywords (nothing else from a DICOM header may reach a sample)."""

from __future__ import annotations

from pathlib import Path

from ..media.dicom import (
    SAFE_KEYWORDS,
    allowed_attributes,
    check_dicom,
    check_pixel_data,
    header_size,
    read_header,
)
from ..media.image import DEFAULT_MAX_PIXELS, pixel_limit


def dicom_size_and_attributes(
    path: Path, verify: str, keywords: list[str], max_pixels: int | None = DEFAULT_MAX_PIXELS
) -> tuple[int, int, dict[str, str]]:
    """``(width, height, allow-listed attributes)``; raises ``DicomProblem`` for a bad file
    (``ImageProblem`` for one whose header claims more than ``max_pixels``, before decoding)."""
    ds = read_header(path)
    width, height = header_size(ds)
    pixel_limit(width, height, max_pixels)
    check_pixel_data(path)
    if verify == "decode":
        check_dicom(path, "decode")
    return width, height, allowed_attributes(ds, keywords)


def check_keywords(keywords: list[str]) -> list[str]:
    """Validate a layout option's allow-list when the manifest is read, not per file."""
    bad = sorted(set(keywords) - SAFE_KEYWORDS)
    if bad:
        raise ValueError(
            f"DICOM keyword(s) {bad} may carry patient data and cannot be allow-listed; "
            f"allowed: {', '.join(sorted(SAFE_KEYWORDS))}"
        )
    return keywords
