"""A stage output made by other code is rebuilt, not reused (runner.code_fingerprint).

The version number does not change with every edit of a checkout; before this, a build folder
made before the contour tracer changed kept serving the old outlines to a rerun."""

import shutil

from medvqa_build import runner


def _package_copy(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "render").mkdir(parents=True)
    (pkg / "__init__.py").write_text("VERSION = 1\n")
    (pkg / "render" / "contour.py").write_text("def trace(): return 'corners'\n")
    (pkg / "_manifests").mkdir()
    (pkg / "_manifests" / "src.yaml").write_text("id: src\n")
    return pkg


def test_the_code_fingerprint_follows_every_code_and_manifest_file(tmp_path):
    pkg = _package_copy(tmp_path)
    first = runner.code_fingerprint(str(pkg))
    assert len(first) == 64 and runner.code_fingerprint(str(pkg)) == first

    copy = tmp_path / "copy"
    shutil.copytree(pkg, copy)
    assert runner.code_fingerprint(str(copy)) == first  # content, not location
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (copy / "notes.bin").write_bytes(b"\1")
    runner.code_fingerprint.cache_clear()
    assert runner.code_fingerprint(str(copy)) == first  # byte code and other files: no

    (copy / "render" / "contour.py").write_text("def trace(): return 'cracks'\n")
    runner.code_fingerprint.cache_clear()
    edited = runner.code_fingerprint(str(copy))
    (copy / "render" / "contour.py").write_text("def trace(): return 'corners'\n")
    (copy / "_manifests" / "src.yaml").write_text("id: src\nlicence: CC-BY-4.0\n")
    runner.code_fingerprint.cache_clear()
    manifest = runner.code_fingerprint(str(copy))
    assert len({first, edited, manifest}) == 3


def test_a_stage_built_by_other_code_is_rebuilt(tmp_path, monkeypatch):
    calls = []

    def build(out):
        calls.append(out)
        (out / "x.txt").write_text("made")
        return {"n": 1}

    monkeypatch.setattr(runner, "code_fingerprint", lambda: "code-a")
    first = runner.run_stage(tmp_path, "render", "items", {"x": 1}, build)
    again = runner.run_stage(tmp_path, "render", "items", {"x": 1}, build)
    assert not first.reused and again.reused and len(calls) == 1

    monkeypatch.setattr(runner, "code_fingerprint", lambda: "code-b")
    assert not runner.stage_done(tmp_path, "render", "items", {"x": 1})
    other = runner.run_stage(tmp_path, "render", "items", {"x": 1}, build)
    assert not other.reused and len(calls) == 2 and other.path != first.path
