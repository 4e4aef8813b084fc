"""Damaged states met by every command through the CLI (issue 33, point 3): a build folder
changed after it was written, a full disk, a recipe that makes no item. Each ends with exactly
one ``error:`` line and exit 2 (never a traceback), nothing partial under a final name, and no
new output folder left behind by a failed command.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

import medvqa_build.store.atomic as atomic
from medvqa_build.cli import main

from ..conftest import REPO

SMALL = [
    "--set",
    "sources.0.generate.n_images=30",
    "--set",
    "sources.0.generate.n_videos=1",
    "--set",
    "sources.0.generate.frames_per_video=8",
    "--set",
    "quota_scale=0.2",
]
DEMO = str(REPO / "recipes" / "demo.yaml")


def _cli(argv: list[str]) -> tuple[int, str]:
    """Exit code and stderr of one in-process CLI call; a traceback fails the test."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def _one_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("damaged") / "build"
    assert _cli(["run", DEMO, "-o", str(out), "-q", *SMALL])[0] == 0
    return out


@pytest.fixture
def build(reference, tmp_path) -> Path:
    """A copy of the reference build to damage."""
    copy = tmp_path / "build"
    shutil.copytree(reference, copy)
    return copy


def _items_path(build: Path) -> Path:
    return build / json.loads((build / "build.json").read_text())["items"]


def test_junk_item_table_is_one_line_for_validate_and_export(build, tmp_path):
    items = _items_path(build)
    items.chmod(0o644)
    items.write_bytes(os.urandom(5000))
    for argv in (
        ["validate", str(build)],
        ["export", str(build), "--format", "vlmeval", "-o", str(tmp_path / "x")],
    ):
        code, err = _cli(argv)
        line = _one_error(err)
        assert code == 2
        assert "damaged Parquet file" in line and str(items) in line
        assert f"delete the stage folder {items.parent}" in line
    assert not (tmp_path / "x").exists()  # the failed export left no folder


def test_item_table_with_other_columns_is_refused(build):
    import pyarrow as pa
    import pyarrow.parquet as pq

    items = _items_path(build)
    items.chmod(0o644)
    pq.write_table(pa.table({"x": [1, 2]}), items)
    code, err = _cli(["validate", str(build)])
    assert code == 2 and "column(s) missing" in _one_error(err)


@pytest.mark.parametrize(
    "value", ["../elsewhere/items.parquet", "/etc/passwd", "stages/../../x.parquet"]
)
def test_build_json_pointing_outside_the_folder_is_refused(build, value):
    meta = json.loads((build / "build.json").read_text())
    meta["items"] = value
    (build / "build.json").write_text(json.dumps(meta))
    for argv in (["validate", str(build)], ["export", str(build), "--format", "hf"]):
        code, err = _cli(argv)
        assert code == 2
        assert "'items' points outside the build folder" in _one_error(err)


def test_build_json_that_is_not_json_is_one_line(build):
    (build / "build.json").write_text("[" * 100_000)
    code, err = _cli(["validate", str(build)])
    assert code == 2 and "build.json is not JSON" in _one_error(err)


def _disk_full_after(monkeypatch, writes: int) -> list[int]:
    """``os.write`` of the package's atomic writes fails with ENOSPC after ``writes`` calls."""
    calls = [0]
    real = os.write

    def write(fd, data):
        calls[0] += 1
        if calls[0] > writes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(atomic.os, "write", write)
    return calls


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith(".noop")
    }


def test_full_disk_during_render_is_one_line_and_the_rerun_is_identical(
    reference, tmp_path, monkeypatch
):
    out = tmp_path / "build"
    calls = _disk_full_after(monkeypatch, 10)  # materialize, convert, ... then render's images
    code, err = _cli(["run", DEMO, "-o", str(out), "-q", *SMALL])
    assert calls[0] > 10
    line = _one_error(err)
    assert code == 2
    assert "the disk is full (ENOSPC" in line and str(out) in line
    # no stage folder of render under its final name, no temp file or folder left
    assert not list(out.glob("stages/render/items-*"))
    assert not [p for p in out.rglob(".*tmp*")]
    assert f"(kept {out}: its " in line  # the finished stages stay, for the rerun
    monkeypatch.undo()
    assert _cli(["run", DEMO, "-o", str(out), "-q", *SMALL])[0] == 0
    assert (out / "checksums.sha256").read_bytes() == (reference / "checksums.sha256").read_bytes()


def test_full_disk_during_export_leaves_the_target_as_it_was(build, tmp_path, monkeypatch):
    target = tmp_path / "tsv"
    _disk_full_after(monkeypatch, 0)
    code, err = _cli(["export", str(build), "--format", "vlmeval", "-o", str(target)])
    assert code == 2 and "the disk is full" in _one_error(err)
    assert not target.exists()
    monkeypatch.undo()
    assert _cli(["export", str(build), "--format", "vlmeval", "-o", str(target)])[0] == 0
    (target / "MedVQA_Demo.tsv").write_text("an older export\n")  # what a new one would replace
    before = _files(target)
    _disk_full_after(monkeypatch, 0)
    assert _cli(["export", str(build), "--format", "vlmeval", "-o", str(target)])[0] == 2
    assert _files(target) == before  # an existing export is untouched by a failed one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "tsv"]


def test_recipe_that_makes_no_item_stops_after_generate(tmp_path):
    recipe = yaml.safe_load(Path(DEMO).read_text())
    recipe["tasks"] = [t for t in recipe["tasks"] if t["name"] == "surgical-phase"]
    recipe["tasks"][0]["n_options"] = 6  # the source has four phases
    recipe["sources"][0]["generate"] = {"n_images": 6, "n_videos": 1, "frames_per_video": 8}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "build"
    code, err = _cli(["run", str(path), "-o", str(out), "-q"])
    line = _one_error(err)
    assert code == 2
    assert "made no item" in line
    assert "surgical-phase: 0 of 40, 8 candidate(s) dropped" in line
    assert "need 5 for 6 options" in line
    assert not list(out.glob("stages/render/*")) and not (out / "hf").exists()


def test_a_failed_run_leaves_no_new_output_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDVQA_ROOT_NOWHERE", str(tmp_path / "absent"))
    recipe = {
        "name": "nothing",
        "sources": [{"id": "kvasir", "root": "${MEDVQA_ROOT_NOWHERE}"}],
        "tasks": [
            {
                "name": "t",
                "generator": "image_classification",
                "category": "c",
                "task": "Lesion Type Identification",
                "quota": 2,
            }
        ],
        "export": {"formats": ["hf"]},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "out"
    code, err = _cli(["run", str(path), "-o", str(out), "-q"])
    assert code == 2 and _one_error(err)
    assert not out.exists()


def test_long_error_lines_are_cut(tmp_path):
    from medvqa_build.cli.failures import MAX_LINE, one_line

    text = "x" * 5_000_000
    line = one_line(text)
    assert len(line) <= MAX_LINE and line.endswith("characters more)")
    assert f"({5_000_000 - MAX_LINE + 40:,} characters more)" in line


def test_review_decisions_nested_without_end_are_one_line(build, tmp_path):
    decisions = tmp_path / "decisions.json"
    decisions.write_text("[" * 100_000)
    before = (build / "build.json").read_bytes()
    code, err = _cli(["review", "apply", str(build), str(decisions), "-q"])
    assert code == 2
    assert "nested 100,000 levels deep, over max_json_depth=64" in _one_error(err)
    assert (build / "build.json").read_bytes() == before


def test_a_rerun_over_a_damaged_stage_names_the_folder_to_delete(reference, tmp_path):
    # built in place, not copied: the demo's data lives in its build folder, and a moved
    # root is a new conversion (the sample table records its root), not a reuse
    build = tmp_path / "build"
    assert _cli(["run", DEMO, "-o", str(build), "-q", *SMALL])[0] == 0
    items = _items_path(build)
    items.chmod(0o644)
    items.write_bytes(b"PAR1" + os.urandom(3000))
    code, err = _cli(["run", DEMO, "-o", str(build), "-q", *SMALL])
    line = _one_error(err)
    assert code == 2 and "damaged Parquet file" in line
    assert f"fix: delete the stage folder {items.parent} and rerun" in line
    shutil.rmtree(items.parent)  # as the line says
    assert _cli(["run", DEMO, "-o", str(build), "-q", *SMALL])[0] == 0
    assert (build / "checksums.sha256").read_bytes() == (
        reference / "checksums.sha256"
    ).read_bytes()


def test_full_disk_during_convert_leaves_no_new_folder(tmp_path, monkeypatch):
    from ..fixtures.sources import kvasir

    root = kvasir.write(tmp_path / "data")
    out = tmp_path / "new" / "samples.parquet"
    _disk_full_after(monkeypatch, 0)
    code, err = _cli(["convert", "kvasir", str(root), "-o", str(out), "-q"])
    assert code == 2
    assert (
        f"the disk is full (ENOSPC: No space left on device) while writing into {out.parent}"
        in (_one_error(err))
    )
    assert not out.parent.exists()


def test_a_build_whose_review_rejected_every_item_is_not_exported(build, tmp_path):
    from medvqa_build.pipeline import BuildDir
    from medvqa_build.review.decisions import build_id

    items = list(BuildDir.open(build).items())
    decisions = tmp_path / "decisions.json"
    decisions.write_text(
        json.dumps(
            {
                "format": "medvqa-review-decisions",
                "build": build_id(items),
                "decisions": [{"item_id": i.item_id, "decision": "reject"} for i in items],
            }
        )
    )
    assert _cli(["review", "apply", str(build), str(decisions), "-q"])[0] == 0
    for fmt in ("hf", "vlmeval"):
        target = tmp_path / fmt
        code, err = _cli(["export", str(build), "--format", fmt, "-o", str(target)])
        assert code == 2 and "the build has no items" in _one_error(err)
        assert not target.exists()


def test_full_disk_during_preview_leaves_no_preview_folder(build, monkeypatch):
    import medvqa_build.review.preview as preview

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))

    monkeypatch.setattr(preview, "_link_or_copy", full)
    code, err = _cli(["preview", str(build), "-q"])
    assert code == 2
    assert f"while writing into {build / 'preview' / 'images'}" in _one_error(err)
    assert not (build / "preview").exists()
