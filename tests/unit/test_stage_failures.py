"""Issue 27: one failure row (``QuarantineEntry``: file, reason, source, stage) for every stage's
per-file failures: what embed, generate and render leave out joins the build's quarantine."""

from __future__ import annotations

import numpy as np
from PIL import Image

from medvqa_build.records import QuarantineEntry, Sample
from medvqa_build.stages.embed import _decodable, _failure, embed_failures
from medvqa_build.stages.generate import generate_failures
from medvqa_build.stages.render import render_failures
from medvqa_build.store.packed import PackedStrings
from medvqa_build.store.quarantine import read_quarantine, write_quarantine


def _sample(image: str, **kw) -> Sample:
    return Sample(
        sample_id=f"s:{image}", source="s", image=image, width=4, height=4, modality="ct", **kw
    )


def test_embed_failures_name_the_file_below_the_root():
    rows = [_failure(_sample("a/b.png"), "cannot\ndecode")]
    rows.append({"sample_id": "s:c.dcm", "file": "", "reason": "no plugin"})
    entries = embed_failures(rows, [_sample("c.dcm"), _sample("x.png")])
    assert entries == [
        QuarantineEntry("a/b.png", "cannot decode", "s", "embed"),
        QuarantineEntry("c.dcm", "no plugin", "s", "embed"),
    ]


def test_decodable_keeps_the_readable_files(tmp_path):
    good = tmp_path / "good.png"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(good)
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    paths, ids = PackedStrings(), PackedStrings()
    for p, i in ((good, "s:good"), (bad, "s:bad")):
        paths.append(str(p))
        ids.append(i)
    kept_paths, kept_ids, failed = _decodable(paths, ids, [], progress=False)
    assert list(kept_ids) == ["s:good"] and list(kept_paths) == [str(good)]
    assert [f["sample_id"] for f in failed] == ["s:bad"]
    assert "cannot decode image" in failed[0]["reason"] and "\n" not in failed[0]["reason"]


def test_render_and_generate_failures_are_typed_rows(tmp_path):
    rendered = render_failures(
        [
            {
                "item_id": "i1",
                "sample_ids": ["s:a"],
                "task": "t",
                "reason": "box outside",
                "file": "source://s/a.png",
                "source": "s",
            }
        ]
    )
    generated = generate_failures(
        [{"task": "t", "sample_id": "s:b", "file": "b.nii.gz", "source": "s", "reason": "cut"}]
    )
    assert rendered == [QuarantineEntry("a.png", "box outside (item i1, task t)", "s", "render")]
    assert generated == [QuarantineEntry("b.nii.gz", "cut (task t)", "s", "generate")]
    path = write_quarantine(rendered + generated, tmp_path / "q.json")
    assert sorted(e.stage for e in read_quarantine(path)) == ["generate", "render"]
