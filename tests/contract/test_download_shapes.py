"""Generated from the registry: every source converts from the folders a user really points
at, and every part of a multi-part source converts alone (issue 23).

A fixture writes the data as its archives unpack, into ``<downloads>/<id>/``. ROOT may then be
that folder, the folder an archive made inside it (the manifest's ``archives[].unpacks_to``,
else the first folder a part expects), the download folder above it, or any of these with
the ``<name>/<name>/`` wrapper some unzip tools add. Every variant must give the same sample
ids as the fixture's own root.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from medvqa_build.api import list_sources, load_source
from medvqa_build.errors import SourceError
from medvqa_build.sources import get_source

from ..fixtures import fixture_writer

SOURCES = [s.id for s in list_sources() if fixture_writer(s.id)]
MULTI_PART = [
    (s.id, p.name) for s in list_sources() if len(s.manifest.parts) > 1 for p in s.manifest.parts
]


def _ids(source_id: str, root: Path) -> list[str]:
    return [s.sample_id for s in load_source(source_id, root).samples]


def _unpacked_folders(source_id: str, root: Path) -> list[Path]:
    """The folders the source's archives unpack to, as they exist under its ``root``."""
    source = get_source(source_id)
    names = [a.unpacks_to for a in source.manifest.archives if a.unpacks_to not in ("", ".")]
    if not source.manifest.archives:
        names = [
            e.literal_prefix[0]
            for _, layout in source.layouts
            for alternative in layout.expects()
            for e in alternative
            if len(e.literal_prefix) > 1 or (e.literal_prefix and e.kind == "dir")
        ]
    return [root / n for n in dict.fromkeys(names) if (root / n).is_dir()]


@pytest.fixture
def written(tmp_path, request):
    source_id = request.param
    downloads = tmp_path / "downloads"
    root = fixture_writer(source_id)(downloads / source_id)
    return source_id, Path(root)


@pytest.mark.parametrize("written", SOURCES, indirect=True, ids=SOURCES)
def test_root_may_be_the_unpacked_folder_its_parent_or_above(written, tmp_path):
    """The fixture writes ``downloads/<id>/...`` (some writers put the data a folder or two
    below, as their archives unpack): the data's own root, every folder from it up to the
    download folder (at least the folder holding the unpacked one and the one above that),
    and each archive's folder, give the same samples."""
    source_id, given = written
    expected = _ids(source_id, given)
    assert expected
    root = load_source(source_id, given).root  # where the data starts
    downloads = tmp_path / "downloads"
    shapes = {f"the data root {root.name}": root, "the download folder": downloads}
    if root.parent == downloads:  # the archives unpack into downloads/<id>: one more level
        shapes["the folder above the download folder"] = downloads.parent
    folder = root
    while folder != downloads:  # every folder between the data and the download folder
        shapes[f"the folder {folder.name}"] = folder
        folder = folder.parent
    for archive in _unpacked_folders(source_id, root):
        shapes[f"the unpacked folder {archive.name}"] = archive
    for shape, folder in shapes.items():
        assert _ids(source_id, folder) == expected, shape


@pytest.mark.parametrize("written", SOURCES, indirect=True, ids=SOURCES)
def test_a_wrapper_folder_from_the_unzip_tool_is_looked_through(written, tmp_path):
    """``unzip`` into a folder of the archive's own name gives ``<name>/<name>/``."""
    source_id, root = written
    expected = _ids(source_id, root)
    wrapper = tmp_path / "wrapped" / root.name
    shutil.copytree(root, wrapper / root.name)
    assert _ids(source_id, wrapper) == expected
    assert _ids(source_id, wrapper.parent) == expected


@pytest.mark.parametrize("source_id,part", MULTI_PART, ids=[f"{s}-{p}" for s, p in MULTI_PART])
def test_each_part_converts_alone(source_id, part, tmp_path):
    """A download holding only ``part`` converts it; the other parts are reported missing."""
    root = Path(fixture_writer(source_id)(tmp_path / source_id))
    source = get_source(source_id)
    layouts = dict((p.name, layout) for p, layout in source.layouts)
    keep = {e.path for alt in layouts[part].expects() for e in alt}
    for name, layout in layouts.items():
        if name == part:
            continue
        for alternative in layout.expects():
            for e in alternative:
                if e.path not in keep and (root / e.path).exists():
                    target = root / e.path
                    (shutil.rmtree if target.is_dir() else Path.unlink)(target)
    result = load_source(source_id, root)
    assert result.resolution.found == [part]
    assert set(result.resolution.missing) == set(layouts) - {part}
    assert result.samples, f"part {part} alone gave no sample"
    assert result.counts_detail["parts"][part]["converted"] == len(result.samples)
    assert result.found == len(result.samples) + len(result.quarantined)


def test_nothing_found_names_what_was_looked_for_once(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError) as err:
        load_source("hyperkvasir", tmp_path / "empty")
    message = str(err.value)
    assert "labeled: labeled-images/" in message and "segmented-images/images/" in message
    assert message.count(str(tmp_path / "empty")) == 1  # the path once, not doubled
    assert "\n" not in message


def test_two_copies_are_ambiguous_and_both_named(tmp_path):
    writer = fixture_writer("kvasir")
    writer(tmp_path / "downloads" / "kvasir-2019")
    writer(tmp_path / "downloads" / "kvasir-2021")
    with pytest.raises(SourceError, match="ROOT holds the data twice") as err:
        load_source("kvasir", tmp_path / "downloads")
    assert "kvasir-2019" in str(err.value) and "kvasir-2021" in str(err.value)


def test_a_required_part_missing_stops_convert(tmp_path, monkeypatch):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    text = get_source("hyperkvasir").manifest.model_dump()
    text["id"] = "hyperkvasir-required"
    text["parts"][1]["required"] = True
    import yaml

    (manifests / "hyperkvasir-required.yaml").write_text(yaml.safe_dump(text))
    monkeypatch.setenv("MEDVQA_MANIFESTS", str(manifests))
    from medvqa_build.sources import _load_all

    _load_all.cache_clear()
    try:
        root = fixture_writer("hyperkvasir")(tmp_path / "data")
        shutil.rmtree(root / "segmented-images")
        with pytest.raises(SourceError, match="required part.* segmented missing"):
            load_source("hyperkvasir-required", root)
        assert load_source("hyperkvasir", root).resolution.found == ["labeled"]
    finally:
        _load_all.cache_clear()
