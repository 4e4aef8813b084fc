"""The card's metadata as the Hub reads it (issue 25.7): the one licence id all sources share
or ``other`` with its name and link, the combined terms of a mixed build, size category and
language, no multiple-choice claim for a build without options, the real data folder, and no
local paths. Checked with huggingface_hub's DatasetCard, the stand-in Hub's validation and
``datasets.load_dataset``."""

from __future__ import annotations

import pytest
from huggingface_hub import DatasetCard

from medvqa_build.export import export
from medvqa_build.export.base import ExportContext
from medvqa_build.sources import get_source

from ...hub_server import card_errors
from .conftest import make_item

RECIPE = (
    "name: t\nseed: 3\nsources:\n"
    "- id: sun\n  root: /home/me/data/SUN-SEG\n- id: kvasir\n  root: null\n"
)


def _export(tmp_path, image_root, items, sources):
    manifests = {s: get_source(s).manifest for s in sources}
    ctx = ExportContext(
        items,
        lambda ref: image_root / ref,
        "Bench_Test",
        RECIPE,
        manifests,
        {"problems": 0, "failed": False},
        {},
    )
    out = tmp_path / "hf"
    export("hf", ctx, out)
    card = (out / "README.md").read_text(encoding="utf-8")
    return out, card, DatasetCard(card).data


def _files(out):
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}


def test_single_licence_card_is_valid_and_loads(tmp_path, image_root):
    from datasets import load_dataset

    items = [make_item(n, answer="B") for n in range(3)]
    out, card, data = _export(tmp_path, image_root, items, ["synthetic-endo"])
    assert data.license == "cc0-1.0" and "license_name" not in data.to_dict()
    assert data.language == ["en"] and data.size_categories == ["n<1K"]
    assert data.task_categories == ["visual-question-answering", "multiple-choice"]
    assert card_errors(card, _files(out)) == []
    assert not (out / "LICENSE.md").exists()
    assert "`data/all/test-*`" in card and "data/default" not in card
    ds = load_dataset(str(out), split="test", cache_dir=str(tmp_path / "cache"))
    assert len(ds) == 3 and ds[0]["images"][0].size == (40, 30)


def test_mixed_build_states_combined_terms(tmp_path, image_root):
    """CC BY (hyperkvasir) + non-commercial terms (kvasir): non-commercial, licence other."""
    items = [
        make_item(0, source="hyperkvasir", licence="CC BY 4.0"),
        make_item(1, source="kvasir", licence="Research"),
    ]
    out, card, data = _export(tmp_path, image_root, items, ["hyperkvasir", "kvasir"])
    assert data.license == "other"
    meta = data.to_dict()
    assert meta["license_name"] == "mixed-sources-non-commercial"
    assert meta["license_link"] == "LICENSE.md" and (out / "LICENSE.md").is_file()
    assert "Combined terms: **non-commercial use only**" in card
    assert "| `hyperkvasir` | cc-by-4.0 | allowed |" in card
    assert "non-commercial use only" in (out / "LICENSE.md").read_text(encoding="utf-8")
    assert card_errors(card, _files(out)) == []


def test_a_not_redistributable_source_makes_the_build_so(tmp_path, image_root):
    items = [make_item(0, source="hyperkvasir"), make_item(1, source="sun")]
    _, card, data = _export(tmp_path, image_root, items, ["hyperkvasir", "sun"])
    assert data.license == "other"
    assert data.to_dict()["license_name"] == "mixed-sources-not-allowed"
    assert "Combined terms: **not redistributable" in card


def test_grounding_only_card_claims_no_multiple_choice(tmp_path, image_root):
    """A MedSG-like build answers with boxes: no options, so no multiple-choice category."""
    items = [
        make_item(
            n,
            options=(),
            answer="",
            gt="polyp",
            answer_bbox=(4.0, 5.0, 20.0, 25.0),
            task="Grounding",
            coord_format="abs",
        )
        for n in range(2)
    ]
    out, card, data = _export(tmp_path, image_root, items, ["synthetic-endo"])
    assert data.task_categories == ["visual-question-answering"]
    assert card_errors(card, _files(out)) == []


def test_card_names_no_local_root(tmp_path, image_root):
    _, card, _ = _export(tmp_path, image_root, [make_item(0)], ["synthetic-endo"])
    assert "/home/me" not in card
    assert "root: ${MEDVQA_ROOT_SUN}" in card and "root: null" in card


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("license: cc0-1.0", "license: CC0", "license"),
        ("- multiple-choice", "- multiple-choice-qa", "task_categories"),
        ("- n<1K", "- tiny", "size_categories"),
        ("path: data/all/test-*", "path: data/default/test-*", "data/default/test-*"),
    ],
)
def test_the_stand_in_rejects_what_the_hub_rejects(tmp_path, image_root, old, new, problem):
    out, card, _ = _export(tmp_path, image_root, [make_item(0)], ["synthetic-endo"])
    errors = card_errors(card.replace(old, new, 1), _files(out))
    assert errors and any(problem in e for e in errors), errors
