"""`medvqa-build clean`: which stage folders the last run did not use, what deleting them
frees, and when it refuses."""

import json
import os

import pytest

from medvqa_build.pipeline.clean import CleanError, clean_build, stale_stages
from medvqa_build.pipeline.runner import _HOST


def _folder(path, files: dict[str, int]):
    path.mkdir(parents=True)
    for name, size in files.items():
        (path / name).write_bytes(b"x" * size)
    return path


@pytest.fixture
def build(tmp_path):
    out = tmp_path / "b"
    s = out / "stages"
    _folder(s / "materialize" / "src-111", {"a.png": 10})  # named only by build.json's roots
    _folder(s / "convert" / "src-222", {"samples.parquet": 20})
    _folder(s / "convert" / "src-333", {"samples.parquet": 3000})  # an earlier run's
    _folder(s / "render" / "items-444", {"items.parquet": 40})
    old = _folder(s / "render" / "items-555", {"items.parquet": 500, "x.jpg": 700})
    os.link(old / "x.jpg", tmp_path / "exported.jpg")  # an export hard-linked out of it
    _folder(s / "export" / "hf-666", {"data.parquet": 60})
    (out / "report.json").write_text(
        json.dumps(
            {
                "stages": [
                    {"stage": "convert", "path": "stages/convert/src-222"},
                    {"stage": "render", "path": "stages/render/items-444"},
                    {"stage": "export", "path": "stages/export/hf-666"},
                ]
            }
        )
    )
    (out / "build.json").write_text(
        json.dumps(
            {
                "roots": {"src": str(s / "materialize" / "src-111")},
                "items": "stages/render/items-444/items.parquet",
                "render_dir": "stages/render/items-444",
                "generated_dir": "stages/generate/items-777",
            }
        )
    )
    return out


def test_stale_folders_are_those_the_last_run_did_not_name(build):
    stale = stale_stages(build)
    assert [s.path.relative_to(build).as_posix() for s in stale] == [
        "stages/convert/src-333",
        "stages/render/items-555",
    ]
    # what deleting frees: the hard-linked file's data stays with its other name
    assert [s.bytes for s in stale] == [3000, 500]


def test_dry_run_deletes_nothing_and_clean_deletes_only_the_stale(build):
    before = sorted(p.relative_to(build) for p in build.rglob("*"))
    assert len(clean_build(build, dry_run=True)) == 2
    assert sorted(p.relative_to(build) for p in build.rglob("*")) == before
    clean_build(build)
    left = sorted(p.relative_to(build).as_posix() for p in (build / "stages").glob("*/*"))
    assert left == [
        "stages/convert/src-222",
        "stages/export/hf-666",
        "stages/materialize/src-111",
        "stages/render/items-444",
    ]
    assert (build.parent / "exported.jpg").read_bytes() == b"x" * 700
    assert stale_stages(build) == []


def test_refuses_while_a_build_runs_and_without_a_finished_build(build, tmp_path):
    running = build / "stages" / "render" / f".items.tmp-{_HOST}-{os.getpid()}-abc"
    running.mkdir()
    with pytest.raises(CleanError, match="a build is running"):
        clean_build(build)
    assert (build / "stages" / "convert" / "src-333").is_dir()
    running.rename(build / "stages" / "render" / f".items.tmp-{_HOST}-999999999-abc")
    assert len(clean_build(build)) == 2  # a killed run's folder does not block (nor is listed)
    (build / "report.json").unlink()
    with pytest.raises(CleanError, match="no finished build"):
        clean_build(build)
    with pytest.raises(CleanError, match="no finished build"):
        clean_build(tmp_path / "nowhere")
