"""The licence gate's inputs: every manifest names a Hub licence id and a redistribution flag,
the manifest model rejects bad ones in one line, and a mix of sources takes the strictest."""

from __future__ import annotations

import pytest
import yaml

from medvqa_build.errors import SourceError
from medvqa_build.licences import (
    HUB_LICENCES,
    combined_redistribution,
    size_category,
)
from medvqa_build.manifest import SourceManifest

from ..conftest import REPO

MANIFESTS = sorted((REPO / "manifests").glob("*.yaml"))


def test_there_are_31_manifests():
    assert len(MANIFESTS) == 31


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.stem)
def test_every_manifest_states_its_licence_id_and_redistribution(path):
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert raw["licence_id"] in HUB_LICENCES
    assert raw["redistribution"] in ("allowed", "non-commercial", "not-allowed")
    m = SourceManifest.from_yaml(path)
    if m.redistribution == "allowed":  # only a standard open licence lets pixels go public
        assert m.licence_id in {"cc0-1.0", "cc-by-4.0", "cc-by-sa-4.0"}, m.id


def test_the_owners_terms_are_read_as_stated():
    flags = {p.stem: SourceManifest.from_yaml(p) for p in MANIFESTS}
    assert flags["synthetic-endo"].licence_id == "cc0-1.0"
    assert flags["hyperkvasir"].licence_id == "cc-by-4.0"
    assert flags["msd"].licence_id == "cc-by-sa-4.0"
    for sid in ("sun", "endovis17", "endovis18", "vindr-spinexr", "cholec80", "acdc"):
        assert flags[sid].redistribution == "not-allowed", sid
    for sid in ("kvasir", "kvasir-seg"):
        assert flags[sid].redistribution == "non-commercial", sid


def _write(tmp_path, **changes):
    raw = yaml.safe_load((REPO / "manifests" / "kvasir.yaml").read_text(encoding="utf-8"))
    raw.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del raw[key]
    path = tmp_path / "kvasir.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"licence_id": "CC BY 4.0"}, "is not a Hub licence id"),
        ({"licence_id": None}, "licence_id"),
        ({"redistribution": "yes"}, "redistribution"),
        ({"redistribution": None}, "redistribution"),
        ({"licence_id": "cc-by-nc-4.0", "redistribution": "allowed"}, "non-commercial"),
    ],
)
def test_bad_licence_fields_are_one_line_naming_the_file(tmp_path, changes, message):
    path = _write(tmp_path, **changes)
    with pytest.raises(SourceError) as exc:
        SourceManifest.from_yaml(path)
    text = str(exc.value)
    assert message in text and str(path) in text and "\n" not in text


def test_combined_terms_of_a_mixed_build():
    assert combined_redistribution({"allowed"}) == "allowed"
    assert combined_redistribution({"allowed", "non-commercial"}) == "non-commercial"
    assert combined_redistribution({"allowed", "non-commercial", "not-allowed"}) == "not-allowed"
    assert combined_redistribution(set()) == "allowed"


def test_size_categories_are_the_hubs_buckets():
    assert size_category(0) == "n<1K" and size_category(999) == "n<1K"
    assert size_category(1000) == "1K<n<10K" and size_category(250_000) == "100K<n<1M"
