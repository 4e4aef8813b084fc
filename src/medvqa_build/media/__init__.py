"""Decode pixels: 2-D images (cv2 / Pillow headers); DICOM, NIfTI and video frames come later."""

from .image import ImageProblem, check_image, load_rgb, read_image_size

__all__ = ["ImageProblem", "check_image", "load_rgb", "read_image_size"]
