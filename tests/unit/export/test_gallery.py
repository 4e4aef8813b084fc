"""The card's example galleries: drawn per task with the recipe's seed, only from sources whose
owners allow redistribution, the same PNG bytes each time, and a card that says why when
there is nothing to show (or when an annotations-only upload drops them)."""

from huggingface_hub import DatasetCard

from medvqa_build.export import export, gallery
from medvqa_build.export.base import ExportContext
from medvqa_build.sources import get_source

from ...hub_server import card_errors
from .conftest import make_item


def _export(tmp_path, image_root, items, sources, name="hf"):
    manifests = {s: get_source(s).manifest for s in sources}
    ctx = ExportContext(
        items, lambda ref: image_root / ref, "Bench", "name: t\nseed: 3\n", manifests, {}, {}
    )
    out = tmp_path / name
    export("hf", ctx, out)
    return out, (out / "README.md").read_text(encoding="utf-8")


def _files(out):
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}


def test_each_task_has_a_gallery_and_the_card_stays_valid(tmp_path, image_root):
    items = [make_item(n, images=("b.png",)) for n in range(6)]
    items += [
        make_item(10 + n, task="Region Recognition", options=("a $x$", "b")) for n in range(2)
    ]
    out, card = _export(tmp_path, image_root, items, ["synthetic-endo"])
    assert "![examples of Lesion Type](assets/gallery_lesion_type.png)" in card
    assert "![examples of Region Recognition](assets/gallery_region_recognition.png)" in card
    assert "drawn with seed 3 from the sources whose terms allow redistribution" in card
    png = (out / "assets" / "gallery_lesion_type.png").read_bytes()
    assert png[:4] == b"\x89PNG"
    assert card_errors(card, _files(out)) == [] and DatasetCard(card).data.license == "cc0-1.0"
    again, _ = _export(tmp_path, image_root, items, ["synthetic-endo"], name="again")
    assert (again / "assets" / "gallery_lesion_type.png").read_bytes() == png


def test_only_redistributable_sources_are_drawn(tmp_path, image_root, monkeypatch):
    drawn = {}

    def record(items, resolve, title):
        drawn[title] = [i.source for i in items]
        return b"png"

    monkeypatch.setattr(gallery, "task_gallery", record)
    items = [make_item(n, source="sun" if n % 2 else "hyperkvasir") for n in range(10)]
    items += [make_item(20 + n, source="sun", task="Only SUN") for n in range(3)]
    _, card = _export(tmp_path, image_root, items, ["hyperkvasir", "sun"])
    assert drawn == {"Lesion Type": ["hyperkvasir"] * gallery.PER_TASK}
    assert "gallery_only_sun" not in card
    assert "Items of `sun` are never shown (their owners do not allow" in card


def test_nothing_to_show_says_why(tmp_path, image_root):
    items = [make_item(n, source="sun") for n in range(3)]
    out, card = _export(tmp_path, image_root, items, ["sun"])
    assert not any(p.startswith("assets/gallery_") for p in _files(out))
    assert (
        "No examples are shown: the owners of `sun` do not allow redistributing their images."
        in card
    )


def test_without_galleries_keeps_the_rest_of_the_card():
    card = "# B\n\n## Examples\n\nA few\n\n### T\n\n![x](assets/gallery_t.png)\n\n## Sources\n\nS\n"
    out = gallery.without_galleries(card, "annotations only")
    assert (
        out == "# B\n\n## Examples\n\nNo examples are shown: annotations only.\n\n## Sources\n\nS\n"
    )
    assert gallery.without_galleries("# B\n", "x") == "# B\n"


def test_a_large_image_is_shrunk_before_it_is_drawn_and_a_small_one_is_not():
    """matplotlib's antialiased drawing holds an image as float RGBA (a 6000x6000 image took
    1.9 GB): one whose longer side is over GALLERY_MAX_SIDE is area-averaged down to it first;
    the others are drawn as they are (the demo's galleries keep their bytes)."""
    import numpy as np

    big = np.zeros((6000, 3000, 3), np.uint8)
    big[:, 1500:] = 200
    small = np.zeros((2048, 100, 3), np.uint8)
    assert gallery._shrunk(small) is small
    out = gallery._shrunk(big)
    assert out.shape == (gallery.GALLERY_MAX_SIDE, 1024, 3)
    assert (out[:, :511] == 0).all() and (out[:, 513:] == 200).all()
