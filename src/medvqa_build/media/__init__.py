"""Decode pixels: 2-D images (cv2 / Pillow headers) and video frames (cv2); DICOM, NIfTI later."""

from .image import ImageProblem, check_image, load_rgb, read_image_size
from .video import VideoProblem, frame_problems, read_frame, video_info

__all__ = [
    "ImageProblem",
    "VideoProblem",
    "check_image",
    "frame_problems",
    "load_rgb",
    "read_frame",
    "read_image_size",
    "video_info",
]
