"""Paths cannot leave their roots: image references, table and annotation values, manifest
options and symbolic links are refused with a clear error or quarantined with a reason."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from medvqa_build.api import load_source
from medvqa_build.errors import SourceError
from medvqa_build.layouts.base import ScanContext, make_layout
from medvqa_build.media.refs import resolve_image
from medvqa_build.recipe import Recipe

from ..conftest import REPO
from ..fixtures import fixture_writer
from ..fixtures.images import write_jpeg


@pytest.fixture
def roots(tmp_path):
    root = tmp_path / "root"
    write_jpeg(root / "a" / "x.jpg", 1)
    write_jpeg(tmp_path / "secret.jpg", 2)
    os.symlink(tmp_path / "secret.jpg", root / "a" / "out.jpg")
    os.symlink("x.jpg", root / "a" / "in.jpg")
    return {"s": root}


@pytest.mark.parametrize(
    "ref",
    [
        "source://s/../secret.jpg",
        "source://s/a/../../secret.jpg",
        "source://s//etc/passwd",
        "source://s/../../etc/passwd#frame=3",
        "source://s/a/out.jpg",
        "render://../../etc/passwd",
        "generated://../x.png",
    ],
)
def test_resolve_image_refuses_escapes(roots, tmp_path, ref):
    with pytest.raises(KeyError, match="refused"):
        resolve_image(ref, roots, tmp_path / "render", tmp_path / "generated")


def test_resolve_image_accepts_paths_inside(roots):
    assert resolve_image("source://s/a/x.jpg", roots) == roots["s"] / "a" / "x.jpg"
    assert resolve_image("source://s/a/in.jpg#frame=2", roots) == roots["s"] / "a" / "in.jpg"
    assert (
        resolve_image("source://s/a/../a/x.jpg", roots).resolve()
        == (roots["s"] / "a" / "x.jpg").resolve()
    )


def test_table_values_cannot_leave_the_root(tmp_path):
    root = fixture_writer("synthetic-endo")(tmp_path / "se")
    write_jpeg(tmp_path / "outside.jpg", 3)
    write_jpeg(tmp_path / "abs.jpg", 4)
    with (root / "labels.csv").open("a") as fh:
        fh.write("../../outside,Polyp,P9,train\n")
        fh.write(f"{tmp_path / 'abs'},Polyp,P9,train\n")
    result = load_source("synthetic-endo", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert "leaves the source root" in reasons["images/../../outside.jpg"]
    assert "is absolute" in reasons[f"{tmp_path / 'abs'}.jpg"]
    assert all(not Path(s.image).is_absolute() and ".." not in s.image for s in result.samples)


def test_symlink_to_a_file_outside_the_root_is_quarantined(tmp_path):
    root = fixture_writer("kvasir")(tmp_path / "kvasir")
    write_jpeg(tmp_path / "private.jpg", 5)
    os.symlink(tmp_path / "private.jpg", root / "kvasir-dataset-v2" / "polyps" / "leak.jpg")
    result = load_source("kvasir", root)
    reasons = {q.file: q.reason for q in result.quarantined}
    assert "outside the source root" in reasons["kvasir-dataset-v2/polyps/leak.jpg"]
    assert all("leak" not in s.image for s in result.samples)


def test_coco_file_name_and_msd_entries_cannot_leave_the_root(tmp_path):
    import json

    root = fixture_writer("msd")(tmp_path / "msd") / "Task03_Liver"
    meta = json.loads((root / "dataset.json").read_text())
    meta["training"].append({"image": "../../etc/passwd", "label": "/etc/passwd"})
    (root / "dataset.json").write_text(json.dumps(meta))
    result = load_source("msd", root)
    assert any("leaves the source root" in q.reason for q in result.quarantined)

    root = fixture_writer("psi-ava")(tmp_path / "psi")
    path = sorted(root.rglob("*.json"))[0]
    data = json.loads(path.read_text())
    data["images"].append({**data["images"][0], "id": 777, "file_name": "/etc/hostname"})
    path.write_text(json.dumps(data))
    result = load_source("psi-ava", root)
    assert any("is absolute" in q.reason for q in result.quarantined)


@pytest.mark.parametrize(
    "option",
    [
        {"table": "../labels.csv"},
        {"table": "/etc/passwd"},
        {"table": "labels.csv", "image_dir": "../.."},
    ],
)
def test_manifest_paths_cannot_leave_the_root(tmp_path, option):
    root = tmp_path / "root"
    (root / "images").mkdir(parents=True)
    (root / "labels.csv").write_text("image,finding\n")
    (tmp_path / "labels.csv").write_text("image,finding\n")
    layout = make_layout(
        "label_table",
        {"image_column": "image", "label_column": "finding", "image_dir": "images", **option},
        where="test",
    )
    ctx = ScanContext(source="t", root=root, part="p", modality="endoscopy", scene=None)
    with pytest.raises(SourceError, match="leaves the source root"):
        list(layout.scan(ctx))


@pytest.mark.parametrize("name", ["../evil", "a/b", "/abs"])
def test_recipe_export_name_cannot_name_a_path(name):
    data = Recipe.from_yaml(REPO / "recipes" / "demo.yaml").model_dump(mode="json")
    data["export"]["name"] = name
    with pytest.raises(ValueError, match="it names files"):
        Recipe.model_validate(data)


def test_no_pickle_or_unsafe_torch_load_in_the_library():
    """User-supplied files are never unpickled (np.load defaults to allow_pickle=False)."""
    out = subprocess.run(
        [
            "grep",
            "-rnE",
            r"pickle|torch\.load|allow_pickle=True|joblib\.load|dill",
            str(REPO / "src"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    # The Ray executor moves its own in-memory tasks and results between processes as pickled
    # bytes (as any process pool does); it never reads a pickle from a file.
    transport = "executors/ray_executor.py:"
    hits = [
        line
        for line in out.stdout.splitlines()
        if "weights_only=True" not in line and transport not in line
    ]
    assert not hits, hits
    ray_lines = [line for line in out.stdout.splitlines() if transport in line]
    assert not [line for line in ray_lines if re.search(r"pickle\.load\(|open\(", line)]
