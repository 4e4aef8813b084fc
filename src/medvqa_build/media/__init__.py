"""Decode pixels: 2-D images (cv2 / Pillow headers), DICOM (pydicom), video frames (cv2)."""

from ..errors import ImageProblem
from .dicom import DicomProblem, Window, check_dicom, is_dicom, load_dicom_rgb
from .image import check_image, load_rgb, read_image_size
from .load import check_any_image, export_image_bytes, load_any_rgb
from .video import VideoProblem, frame_problems, read_frame, video_info
from .volume import VolumeProblem, load_slice_rgb

__all__ = [
    "DicomProblem",
    "ImageProblem",
    "VideoProblem",
    "VolumeProblem",
    "Window",
    "check_any_image",
    "check_dicom",
    "export_image_bytes",
    "is_dicom",
    "load_any_rgb",
    "load_dicom_rgb",
    "check_image",
    "frame_problems",
    "load_rgb",
    "load_slice_rgb",
    "read_frame",
    "read_image_size",
    "video_info",
]
