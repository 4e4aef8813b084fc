"""`convert` on the synthetic source, a truncated JPEG included: counts add up, report written."""

import json

from medvqa_build.api import load_source
from medvqa_build.cli import main
from medvqa_build.store.parquet import read_samples


def test_convert_synthetic_with_corrupt_file(synthetic_root, tmp_path, capsys):
    out = tmp_path / "samples.parquet"
    assert main(["convert", "synthetic-endo", str(synthetic_root), "-o", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    # 25 stills + 8 frames were found; one still was truncated on purpose.
    assert "synthetic-endo: found 33, converted 32, quarantined 1" in printed
    quarantine = json.loads((tmp_path / "samples.quarantine.json").read_text())
    assert quarantine == [
        {
            "file": "images/img_00003.jpg",
            "source": "synthetic-endo",
            "stage": "convert",
            "reason": "truncated JPEG (no end-of-image marker); re-download the file",
        }
    ]
    counts = json.loads((tmp_path / "samples.counts.json").read_text())
    assert counts == {
        "source": "synthetic-endo",
        "found": 33,
        "converted": 32,
        "quarantined": 1,
        "labels_missing": {},
        "samples_missing_labels": 0,
        "parts": {
            "stills": {"found": 25, "converted": 24, "quarantined": 1},
            "surgery": {"found": 8, "converted": 8, "quarantined": 0},
        },
        "parts_missing": {},
        "root": str(synthetic_root),
    }
    samples = read_samples(out)
    assert len(samples) == 32
    by_id = {s.sample_id: s for s in samples}
    polyp = by_id["synthetic-endo:images/img_00000"]
    assert polyp.labels == ("polyp",) and polyp.group_id == "P0000" and polyp.split == "test"
    assert polyp.regions and all(r.label == "polyp" for r in polyp.regions)
    normal = by_id["synthetic-endo:images/img_00004"]
    assert normal.labels == ("normal mucosa",) and normal.regions == ()
    frame = by_id["synthetic-endo:videos/video01/video01_000025"]
    assert (
        frame.frame == 25
        and frame.modality == "laparoscopy"
        and frame.scene == "Surgical Endoscopy"
    )
    assert frame.attributes["phase"] == "preparation" and frame.group_id == "video01"


def test_decode_mode_agrees_on_the_synthetic_source(synthetic_root):
    header = load_source("synthetic-endo", synthetic_root)
    decode = load_source("synthetic-endo", synthetic_root, verify="decode")
    assert [s.sample_id for s in header.samples] == [s.sample_id for s in decode.samples]
    assert header.counts() == decode.counts()


def test_convert_missing_root_is_one_line(tmp_path, capsys):
    assert main(["convert", "synthetic-endo", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: source root for 'synthetic-endo' does not exist")
        and err.count("\n") == 1
    )


def test_synthetic_generator_is_deterministic(tmp_path):
    from medvqa_build.sources.synthetic_endo import write_synthetic_endo

    a = write_synthetic_endo(tmp_path / "a", n_images=6, n_videos=1, frames_per_video=2, seed=3)
    b = write_synthetic_endo(tmp_path / "b", n_images=6, n_videos=1, frames_per_video=2, seed=3)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_synthetic_classes_differ_visibly(tmp_path):
    """Mean lesion colour per class is consistent within a class and distinct across classes."""
    import numpy as np

    from medvqa_build.sources.synthetic_endo import FINDINGS, render_still

    means = {}
    for finding in FINDINGS[:4]:
        colours = []
        for i in range(4):
            img, mask = render_still(0, 100 + i, finding)
            colours.append(img[mask].reshape(-1, 3).mean(0))
        means[finding] = np.array(colours)
    centroids = {k: v.mean(0) for k, v in means.items()}
    spread = max(np.linalg.norm(v - centroids[k], axis=1).max() for k, v in means.items())
    gaps = [
        np.linalg.norm(centroids[a] - centroids[b]) for a in centroids for b in centroids if a < b
    ]
    assert min(gaps) > 1.5 * spread
