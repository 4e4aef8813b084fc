import pytest

from medvqa_build.errors import UsageError
from medvqa_build.store.limits import ENV, ReadLimits, read_limits


def test_defaults_without_the_variable(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert read_limits() == ReadLimits()
    assert read_limits().max_pixels == 200_000_000


def test_the_variable_raises_and_lowers_named_limits(monkeypatch):
    monkeypatch.setenv(ENV, "max_voxels=2e9, max_json_depth=8,max_table_bytes=1_000")
    limits = read_limits()
    assert (limits.max_voxels, limits.max_json_depth, limits.max_table_bytes) == (2e9, 8, 1000)
    assert limits.max_pixels == ReadLimits().max_pixels


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("max_voxel=3", "not name=value"),
        ("max_voxels=lots", "not a number"),
        ("max_voxels=0", "below 1"),
        ("max_voxels", "not name=value"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(monkeypatch, text, says):
    monkeypatch.setenv(ENV, text)
    with pytest.raises(UsageError, match=says) as err:
        read_limits()
    assert "\n" not in str(err.value) and ENV in str(err.value)
