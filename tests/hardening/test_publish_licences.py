"""push's licence gate (issue 25.6) on a build mixing a CC0 source (synthetic-endo) with one
whose owners forbid redistribution (SUN, from its replica): refused with one line naming it
and the two ways out; --i-have-permission publishes the pixels; --annotations-only publishes
a dataset without them that loads with ``datasets.load_dataset``, and its rebuild script
brings the images back from the user's own copy of SUN, byte-identical to the full build's."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest
import yaml

from medvqa_build.api import recorded_terms
from medvqa_build.cli import main
from medvqa_build.errors import MedvqaError
from medvqa_build.export.annotations_only import withheld
from medvqa_build.export.licence_gate import check_licences
from medvqa_build.sources import get_source

from ..conftest import REPO
from ..fixtures import fixture_writer
from ..hub_server import FakeHub

RECIPE = {
    "name": "mixed",
    "benchmark": "Mixed",
    "seed": 0,
    "embedder": "offline",
    "sources": [
        {
            "id": "synthetic-endo",
            "generate": {"n_images": 30, "n_videos": 1, "frames_per_video": 8},
        },
        {"id": "sun", "root": None},
    ],
    "tasks": [
        {
            "name": "lesion-type",
            "generator": "image_classification",
            "category": "Lesion Analysis and Grading",
            "task": "Lesion Type Identification",
            "quota": 24,
            "n_options": 3,
            "negatives": {"strategy": "label_pool"},
        },
        {
            "name": "region-box",  # rendered images: a box drawn on a SUN frame
            "generator": "region_recognition",
            "sources": ["sun"],
            "category": "Spatial Localization and Region Understanding",
            "task": "Region Recognition",
            "subtask": "Box",
            "quota": 6,
            "n_options": 3,
            "prompt_level": "box",
            "params": {"vocabulary": ["polyp", "ulcer", "erosion", "bleeding"]},
        },
    ],
    "render": {"format": "jpeg", "jpeg_quality": 92},
    "export": {"name": "Mixed", "formats": ["hf"]},
}
PUSH = """
    from medvqa_build.cli import main
    rc = main(["push", {dir!r}, "me/mixed", "-q", *{extra!r}])
    print("RC", rc)
"""
LOAD = """
    from datasets import load_dataset
    ds = load_dataset("me/mixed", split="test")
    print("ROWS", len(ds), "SOURCES", sorted(set(ds["source"])))
"""


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mixed")
    sun = tmp / "sun-download"
    fixture_writer("sun")(sun)
    recipe = {**RECIPE, "sources": [RECIPE["sources"][0], {"id": "sun", "root": str(sun)}]}
    (tmp / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    assert main(["run", str(tmp / "recipe.yaml"), "-o", str(tmp / "build"), "-q"]) == 0
    return tmp / "build", sun


def _env(hub, home) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(
        {
            "HF_ENDPOINT": hub.url,
            "HF_TOKEN": "hf_token_for_tests",
            "HF_HOME": str(home),
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        }
    )
    return env


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _push(hub, build, home, *extra) -> subprocess.CompletedProcess:
    return _run(PUSH.format(dir=str(build), extra=list(extra)), _env(hub, home))


def _errors(p) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.startswith("error:")]


def _images(folder) -> dict[str, bytes]:
    """path -> bytes of every image with bytes in an HF export."""
    out = {}
    for shard in (folder / "data").rglob("*.parquet"):
        for row in pq.read_table(shard, columns=["images"]).column("images").to_pylist():
            out.update({i["path"]: i["bytes"] for i in row if i["bytes"] is not None})
    return out


def test_a_not_allowed_source_stops_the_push(mixed, tmp_path):
    build, _ = mixed
    with FakeHub() as hub:
        p = _push(hub, build, tmp_path)
        assert not hub.repos and not hub.commits  # nothing was created or sent
    assert "RC 2" in p.stdout and "Traceback" not in p.stderr
    errors = _errors(p)
    assert len(errors) == 1, p.stderr
    assert "sun" in errors[0] and "synthetic-endo" not in errors[0]
    assert "--annotations-only" in errors[0] and "--i-have-permission sun" in errors[0]


def test_permission_names_a_source_of_the_build(mixed, tmp_path):
    build, _ = mixed
    with FakeHub() as hub:
        p = _push(hub, build, tmp_path, "--i-have-permission", "kvasir")
    assert "RC 2" in p.stdout and len(_errors(p)) == 1 and "kvasir" in _errors(p)[0]


def test_with_permission_the_pixels_are_published(mixed, tmp_path):
    build, _ = mixed
    with FakeHub() as hub:
        p = _push(hub, build, tmp_path, "--i-have-permission", "sun")
        files = hub.files("me/mixed")
        private = hub.repos["me/mixed"]["private"]
    assert "RC 0" in p.stdout, p.stderr[-2000:]
    local = {
        q.relative_to(build / "hf").as_posix(): q.read_bytes()
        for q in (build / "hf").rglob("*")
        if q.is_file()
    }
    assert files == local and private


def test_annotations_only_loads_and_rebuilds_byte_identical(mixed, tmp_path):
    build, sun = mixed
    full = _images(build / "hf")
    with FakeHub() as hub:
        p = _push(hub, build, tmp_path, "--annotations-only")
        assert "RC 0" in p.stdout, p.stderr[-3000:]
        assert "withheld the images of sun" in p.stdout
        loaded = _run(LOAD, _env(hub, tmp_path / "home"))
        files = hub.files("me/mixed")
    assert "ROWS 30" in loaded.stdout and "'sun'" in loaded.stdout, loaded.stderr[-3000:]
    download = tmp_path / "download"
    for rel, data in files.items():
        (download / rel).parent.mkdir(parents=True, exist_ok=True)
        (download / rel).write_bytes(data)
    # no SUN pixels went up; the CC0 source's did; every withheld image is listed with its hash
    published = _images(download)
    listed = dict(
        reversed(line.split("  ", 1))
        for line in (download / "images.sha256").read_text().splitlines()
    )
    assert listed and withheld(download) >= len(listed)
    assert not any(path.startswith("sun/") for path in published)
    assert any(path.startswith("sun/") for path in listed)  # the frames themselves
    assert any(path.startswith("rendered/") for path in listed)  # boxes drawn on them
    assert all(full[path] == data for path, data in published.items())
    recipe = (download / "recipe.yaml").read_text()
    assert str(sun) not in recipe and "${MEDVQA_ROOT_SUN}" in recipe
    assert str(sun) not in files["README.md"].decode()
    assert "python rebuild_images.py --root sun=" in files["README.md"].decode()
    # the full card shows examples of the CC0 source only; the annotations-only one shows none
    full_card = (build / "hf" / "README.md").read_text()
    assert "allow redistribution (`synthetic-endo`)" in full_card
    assert "Items of `sun` are never shown" in full_card
    assert "(assets/gallery_lesion_type_identification.png)" in full_card
    card = files["README.md"].decode()
    assert "No examples are shown: this upload holds annotations only" in card
    assert "assets/gallery_" not in card and not any("gallery_" in f for f in files)
    # the documented command, on the user's own copy of SUN
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src")])}
    rebuilt = tmp_path / "rebuilt"
    r = subprocess.run(
        [sys.executable, str(download / "rebuild_images.py"), "--root", f"sun={sun}"]
        + ["-o", str(rebuilt)],
        cwd=download,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert f"rebuilt {len(listed)} of {len(listed)} withheld image(s)" in r.stdout
    for path, digest in listed.items():
        data = (rebuilt / "images" / path).read_bytes()
        assert data == full[path] and hashlib.sha256(data).hexdigest() == digest, path


def test_rebuild_needs_every_root(mixed, tmp_path):
    build, _ = mixed
    with FakeHub() as hub:
        assert "RC 0" in _push(hub, build, tmp_path, "--annotations-only").stdout
        files = hub.files("me/mixed")
    for rel in ("rebuild_images.py", "recipe.yaml", "images.sha256"):
        (tmp_path / rel).write_bytes(files[rel])
    r = subprocess.run(
        [sys.executable, str(tmp_path / "rebuild_images.py"), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 2 and "MEDVQA_ROOT_SUN" in r.stderr and "--root" in r.stderr


def test_the_gate_reads_the_terms_the_build_recorded(mixed, tmp_path, capsys):
    """build.json records each source's terms when the build runs; the gate judges the export
    by that record, not by the manifests registered now (issue 34.5)."""
    build, _ = mixed
    copy = tmp_path / "copy"
    shutil.copytree(build / "hf", copy / "hf")
    for name in ("build.json", "report.json"):
        shutil.copy(build / name, copy / name)
    meta = json.loads((copy / "build.json").read_text())
    assert meta["sources"]["sun"]["redistribution"] == "not-allowed"
    endo = get_source("synthetic-endo").manifest
    assert meta["sources"]["synthetic-endo"] == endo.terms().to_row()
    # a record that allows SUN's pixels lets them through, though its manifest forbids them
    meta["sources"]["sun"]["redistribution"] = "allowed"
    (copy / "build.json").write_text(json.dumps(meta))
    gate = check_licences(copy / "hf", recorded_terms(copy))
    assert gate.sources == ["sun", "synthetic-endo"] and gate.blocked == []
    assert recorded_terms(copy / "hf") == recorded_terms(copy)  # the hf folder of a build
    # a build from before the record: one line telling to rerun, nothing pushed
    del meta["sources"]
    (copy / "build.json").write_text(json.dumps(meta))
    assert main(["push", str(copy), "me/mixed", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no record of its sources' terms" in err
    assert "rerun `medvqa-build run`" in err and "Traceback" not in err
    # an HF folder outside any build holds no record: judged by the registered manifests
    alone = tmp_path / "alone"
    shutil.copytree(build / "hf", alone / "hf")
    with pytest.raises(MedvqaError, match="owners of sun do not allow"):
        check_licences(alone / "hf", recorded_terms(alone / "hf"))
