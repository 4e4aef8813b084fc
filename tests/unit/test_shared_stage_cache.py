"""Convert once per download, not once per build folder (#35.2): the convert stage's output is
kept in the shared stage cache, addressed by the root's files and the converter's code."""

import os
import shutil

import pytest

from medvqa_build.api import build, load_recipe


@pytest.fixture
def root(synthetic_root, tmp_path):
    copy = tmp_path / "download"
    shutil.copytree(synthetic_root, copy)
    return copy


def _build(repo, root, out, cache):
    overrides = [
        "sources.0.generate=null",
        f"sources.0.root={root}",
        f"embedding_cache={cache}",
        "tasks=[{name: t, generator: image_classification, category: C, task: T, quota: 6}]",
        "export.formats=[hf]",
    ]
    return build(load_recipe(repo / "recipes" / "demo.yaml", overrides), out, progress=False)


def _convert(result):
    return next(s for s in result.stages if s.name == "convert")


def test_a_second_build_folder_takes_convert_from_the_shared_cache(
    repo, root, tmp_path, monkeypatch
):
    monkeypatch.setenv("MEDVQA_STAGE_CACHE", str(tmp_path / "stages"))
    first = _build(repo, root, tmp_path / "a", tmp_path / "emb")
    second = _build(repo, root, tmp_path / "b", tmp_path / "emb")
    a, b = _convert(first), _convert(second)
    assert not a.cached and b.cached and not b.reused
    assert a.fingerprint == b.fingerprint and a.stats == b.stats
    for name in ("samples.parquet", "samples.quarantine.json", "samples.counts.json"):
        assert (a.path / name).read_bytes() == (b.path / name).read_bytes()
    assert first.report["sources"] == second.report["sources"]
    assert (tmp_path / "a" / "checksums.sha256").read_text() == (
        tmp_path / "b" / "checksums.sha256"
    ).read_text()
    # a rerun in the second folder reuses its own copy
    assert _convert(_build(repo, root, tmp_path / "b", tmp_path / "emb")).reused


def test_a_changed_download_or_the_cache_turned_off_converts_again(
    repo, root, tmp_path, monkeypatch
):
    monkeypatch.setenv("MEDVQA_STAGE_CACHE", str(tmp_path / "stages"))
    _build(repo, root, tmp_path / "a", tmp_path / "emb")
    image = next((root / "images").glob("*.jpg"))
    st = image.stat()
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert not _convert(_build(repo, root, tmp_path / "b", tmp_path / "emb")).cached
    monkeypatch.setenv("MEDVQA_STAGE_CACHE", "off")
    assert not _convert(_build(repo, root, tmp_path / "c", tmp_path / "emb")).cached


def test_clean_shared_cache_deletes_the_entries_unused_for_the_given_days(
    repo, root, tmp_path, monkeypatch, capsys
):
    from medvqa_build.cli import main
    from medvqa_build.pipeline import shared

    cache = tmp_path / "stages"
    monkeypatch.setenv("MEDVQA_STAGE_CACHE", str(cache))
    _build(repo, root, tmp_path / "a", tmp_path / "emb")
    (old,) = shared.entries()
    assert old.path.parent.parent == cache and old.bytes > 0
    # a second download converted now; the first one's entry last used 40 days ago
    other = tmp_path / "download2"
    shutil.copytree(root, other)
    (other / "images" / "extra.jpg").write_bytes(next((root / "images").glob("*.jpg")).read_bytes())
    _build(repo, other, tmp_path / "b", tmp_path / "emb")
    forty_days = 40 * 86400
    st = (old.path / shared.MARKER).stat()
    os.utime(old.path / shared.MARKER, (st.st_atime - forty_days, st.st_mtime - forty_days))

    assert main(["clean", "--shared-cache", "--older-than", "30", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete 1 entry" in out and old.path.name in out
    assert old.path.is_dir()

    assert main(["clean", "--shared-cache", "--older-than", "30"]) == 0
    assert "deleted 1 entry" in capsys.readouterr().out
    assert not old.path.exists()
    (kept,) = shared.entries()
    # a fetch marks its use: building the second download into a new folder keeps it fresh
    before = kept.last_used
    os.utime(kept.path / shared.MARKER, (before - forty_days, before - forty_days))
    _build(repo, other, tmp_path / "c", tmp_path / "emb")
    assert shared.entries()[0].last_used > before - 1
    # the build folders still hold their own copies
    assert (tmp_path / "a" / "checksums.sha256").is_file()


def test_clean_without_a_folder_or_shared_cache_is_one_line(capsys):
    from medvqa_build.cli import main

    assert main(["clean"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no build folder given" in err[0] and "--shared-cache" in err[0]
