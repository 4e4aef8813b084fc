"""Generated from the registry: every source has full metadata, a fixture, and converts it."""

import re

import pytest

from medvqa_build.api import list_sources, load_source
from medvqa_build.licences import HUB_LICENCES, REDISTRIBUTION_ORDER

from ..fixtures import fixture_writer

SOURCES = [s.id for s in list_sources()]


@pytest.mark.parametrize("source_id", SOURCES)
def test_manifest_metadata_is_complete(source_id):
    m = next(s for s in list_sources() if s.id == source_id).manifest
    assert m.title and m.licence and m.access_terms and m.layout
    # the licence gate of `push` (docs/publishing.md): a Hub id and a redistribution flag
    assert m.licence_id in HUB_LICENCES and m.redistribution in REDISTRIBUTION_ORDER
    assert re.match(r"https?://", m.homepage)
    assert re.match(r"@\w+\{[^,]+,", m.citation) and m.citation.rstrip().endswith("}")
    assert m.parts, "a source needs at least one layout part"
    for raw, canonical in m.label_map.items():
        assert canonical == canonical.strip() and canonical, raw


@pytest.mark.parametrize("source_id", SOURCES)
def test_source_has_fixture_and_converts_it(source_id, tmp_path):
    writer = fixture_writer(source_id)
    assert writer, f"add tests/fixtures/sources/{source_id.replace('-', '_')}.py with write(root)"
    root = writer(tmp_path / source_id)
    result = load_source(source_id, root)
    assert result.samples, "the fixture produced no samples"
    assert result.found == len(result.samples) + len(result.quarantined)
    assert not result.quarantined, (
        "the fixture converts with nothing quarantined (a bad file belongs to the source's unit "
        f"test): {[(q.file, q.reason) for q in result.quarantined]}"
    )
    ids = [s.sample_id for s in result.samples]
    assert len(set(ids)) == len(ids) and all(i.startswith(f"{source_id}:") for i in ids)
    for s in result.samples:
        assert (result.root / s.image).is_file() and s.width > 0 and s.height > 0
        for r in s.regions:
            if r.bbox is not None:
                assert (
                    0 <= r.bbox[0] < r.bbox[2] <= s.width and 0 <= r.bbox[1] < r.bbox[3] <= s.height
                )
