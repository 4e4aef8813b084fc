"""Small hand-made items with real image files, for exporter unit tests."""

from pathlib import Path

import pytest
from PIL import Image

from medvqa_build.export import ExportContext
from medvqa_build.records import Item


def make_item(n: int, images=("a.png",), options=("polyp", "ulcer", "bleeding"), answer="A", **kw):
    gt = options[ord(answer[0]) - 65] if options else "polyp"
    base = dict(
        item_id=f"it{n:03d}",
        benchmark="Bench",
        category="Cat",
        task="Lesion Type",
        subtask="Lesion Type",
        source="synthetic-endo",
        sample_ids=(f"s:{n}",),
        images=tuple(images),
        question=f"Question {n}?",
        options=tuple(options),
        answer=answer,
        gt=gt,
        scene="Colonoscopy",
        split="test",
        licence="CC0-1.0",
    )
    base.update(kw)
    return Item(**base)


@pytest.fixture
def image_root(tmp_path) -> Path:
    root = tmp_path / "imgs"
    root.mkdir()
    for k, name in enumerate(("a.png", "b.png", "c.png", "d.jpg")):
        Image.new("RGB", (40 + 10 * k, 30), (50 * k, 100, 150)).save(root / name)
    return root


@pytest.fixture
def make_ctx(image_root):
    from medvqa_build.sources import get_source

    manifests = {"synthetic-endo": get_source("synthetic-endo").manifest}

    def build(items, name="Bench_Test", options=None, validation=None):
        return ExportContext(
            items,
            lambda ref: image_root / ref,
            name,
            "name: t\nseed: 3\n",
            manifests,
            validation or {"problems": 0, "failed": False},
            options or {},
        )

    return build
