"""A recipe whose datasets are not on the machine: name them all, or build from what is there."""

import json

import yaml

from medvqa_build.cli import main


def _recipe(tmp_path, repo, monkeypatch):
    monkeypatch.delenv("KVASIR_SEG_ROOT", raising=False)
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    data["sources"] += [
        {"id": "kvasir", "root": str(tmp_path / "no-kvasir")},
        {"id": "kvasir-seg", "root": "${KVASIR_SEG_ROOT}"},
    ]
    data["sources"][0]["generate"].update(n_images=20, frames_per_video=6)
    for t in data["tasks"]:
        t["quota"] = 4
    data["tasks"].append(dict(data["tasks"][0], name="kvasir-only", sources=["kvasir"], quota=7))
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_missing_sources_are_all_named(tmp_path, repo, capsys, monkeypatch):
    path = _recipe(tmp_path, repo, monkeypatch)
    assert main(["run", str(path), "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 2 source(s) missing: kvasir (expected at")
    assert (
        "kvasir-dataset-v2.zip" in err
        and "kvasir-seg (root ${KVASIR_SEG_ROOT} uses an unset environment variable" in err
    )
    assert "--allow-missing" in err and err.count("\n") == 1


def test_allow_missing_builds_from_present_sources(tmp_path, repo, capsys, monkeypatch):
    path = _recipe(tmp_path, repo, monkeypatch)
    out = tmp_path / "out"
    assert main(["run", str(path), "-o", str(out), "-q", "--allow-missing"]) == 0
    printed = capsys.readouterr().out
    assert "missing sources: kvasir" in printed and "kvasir-only: 7" in printed
    report = json.loads((out / "report.json").read_text())
    assert [m.split(" ")[0] for m in report["missing_sources"]] == ["kvasir", "kvasir-seg"]
    assert report["shortfall"] == {"kvasir-only": 7}
    assert report["items"] == 24 and list(report["sources"]) == ["synthetic-endo"]
