"""Volume slicing: one display orientation whatever the stored affine, CT windows, MRI scaling."""

import nibabel as nib
import numpy as np

from medvqa_build.media.volume import (
    load_slice_rgb,
    plane_to_voxel,
    slice_2d,
    slice_shape_hw,
    window_to_uint8,
)

from ...fixtures.volumes import write_nifti


def test_plane_to_voxel_inverts_slice_2d():
    vol = np.arange(4 * 5 * 6).reshape(4, 5, 6)
    for axis in ("axial", "coronal", "sagittal"):
        plane = slice_2d(vol, axis, 2)
        assert plane.shape == slice_shape_hw(vol.shape, axis)
        for r, c in ((0, 0), (plane.shape[0] - 1, 1)):
            assert vol[plane_to_voxel(axis, r, c, 2, vol.shape)] == plane[r, c]


def test_same_anatomy_same_slice_whatever_the_affine(tmp_path):
    data = np.random.default_rng(0).normal(0, 100, (6, 7, 5)).astype(np.float32)
    write_nifti(tmp_path / "ras.nii.gz", data, np.eye(4))
    flipped = data[::-1, ::-1, :]  # stored LPS: x and y reversed, affine says so
    write_nifti(tmp_path / "lps.nii.gz", flipped, np.diag([-1.0, -1.0, 1.0, 1.0]))
    assert nib.aff2axcodes(nib.load(tmp_path / "lps.nii.gz").affine) == ("L", "P", "S")
    for axis in ("axial", "coronal", "sagittal"):
        a = load_slice_rgb(tmp_path / "ras.nii.gz", axis, 2, window=(0, 400))
        b = load_slice_rgb(tmp_path / "lps.nii.gz", axis, 2, window=(0, 400))
        assert np.array_equal(a, b)


def test_windows():
    hu = np.array([-1000.0, -160.0, 40.0, 240.0, 3000.0])
    assert window_to_uint8(hu, "abdomen").tolist() == [0, 0, 128, 255, 255]
    mri = np.linspace(0, 1000, 1001)
    scaled = window_to_uint8(mri, None)
    assert scaled.min() == 0 and scaled.max() == 255
