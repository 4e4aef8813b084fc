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


def _scaled_ct(path, dtype, slope_inter, affine):
    rng = np.random.default_rng(1)
    stored = rng.integers(-1000, 3000, (30, 20, 12)).astype(dtype)
    img = nib.Nifti1Image(stored, affine)
    if slope_inter:
        img.header.set_slope_inter(*slope_inter)
    img.to_filename(str(path))
    return path


def test_scaled_and_wide_volumes_read_as_float32_with_nibabels_values(tmp_path):
    """A scaled int16 CT or a float64 volume reads as float32 (nibabel's own read is
    float64, twice the memory) holding nibabel's values rounded to float32, which is what
    every reader (windows, percentiles, label rounding) turned them into before."""
    from medvqa_build.media.volume import canonical_header, load_volume, loaded_dtype

    tilted = np.array([[0, 0, -2.0, 1], [1.5, 0, 0, 2], [0, -0.7, 0, 3], [0, 0, 0, 1]])
    cases = [
        (_scaled_ct(tmp_path / "ct.nii.gz", np.int16, (1.0, -1024.0), tilted), np.float32),
        (_scaled_ct(tmp_path / "mr.nii.gz", np.int16, (0.37, 2.5), np.eye(4)), np.float32),
        (_scaled_ct(tmp_path / "f64.nii", np.float64, None, tilted), np.float32),
        (_scaled_ct(tmp_path / "plain.nii.gz", np.int16, None, tilted), np.int16),
    ]
    for path, dtype in cases:
        img = nib.load(path)
        assert loaded_dtype(img) == dtype
        expected = nib.as_closest_canonical(img).get_fdata().astype(np.float32)
        got = load_volume(path)
        assert got.dtype == dtype
        assert np.array_equal(np.asarray(got, np.float32), expected), path.name
        header = canonical_header(path)
        assert header.shape == expected.shape
        assert np.array_equal(header.affine, nib.as_closest_canonical(img).affine)


def test_a_volume_over_the_decode_budget_is_refused_from_its_header(tmp_path, monkeypatch):
    """voxels x the item size the reader gives (float32 for a scaled CT, not nibabel's
    float64) against max_decode_bytes, before a voxel is read."""
    import pytest

    from medvqa_build.media.volume import VolumeProblem, canonical_header, load_volume

    path = _scaled_ct(tmp_path / "ct.nii.gz", np.int16, (1.0, -1024.0), np.eye(4))
    voxels = 30 * 20 * 12
    monkeypatch.setenv("MEDVQA_LIMITS", f"max_decode_bytes={voxels * 4}")
    assert load_volume(path).dtype == np.float32  # float32 fits where float64 would not
    monkeypatch.setenv("MEDVQA_LIMITS", f"max_decode_bytes={voxels * 4 - 1}")
    with pytest.raises(VolumeProblem, match=r"as float32\) needs about 28,800 bytes, over the "):
        canonical_header(tmp_path / "ct.nii.gz")


def test_load_canonical_reads_every_channel_of_a_4d_volume_as_float32(tmp_path):
    from medvqa_build.media.volume import load_canonical, load_volume

    rng = np.random.default_rng(2)
    stored = rng.integers(0, 900, (6, 5, 4, 3)).astype(np.int16)
    img = nib.Nifti1Image(stored, np.diag([-1.0, 1.0, 2.0, 1.0]))
    img.header.set_slope_inter(2.0, 1.0)
    path = tmp_path / "four.nii.gz"
    img.to_filename(str(path))
    expected = nib.as_closest_canonical(nib.load(path)).get_fdata().astype(np.float32)
    data = np.asarray(load_canonical(path).dataobj)
    assert data.dtype == np.float32 and np.array_equal(data, expected)
    for channel in range(3):
        assert np.array_equal(load_volume(path, channel), expected[..., channel])
