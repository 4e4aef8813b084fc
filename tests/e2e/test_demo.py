"""The demo recipe end to end: build, rerun (reused), second folder (identical bytes), load."""

import json

import pandas as pd
import pytest

from medvqa_build.cli import main

SMALL = [
    "--set",
    "sources.0.generate.n_images=40",
    "--set",
    "sources.0.generate.frames_per_video=10",
    "--set",
    "tasks.0.quota=20",
    "--set",
    "tasks.1.quota=12",
    "--set",
    "tasks.2.quota=8",
    "--set",
    "tasks.3.quota=8",
    "--set",
    "tasks.4.quota=12",
    "--set",
    "tasks.5.quota=8",
]
TSV_COLUMNS = [
    "index",
    "image",
    "image_path",
    "question",
    "A",
    "B",
    "C",
    "D",
    "answer",
    "category",
    "l2-category",
    "task",
    "subtask",
    "scene",
    "dataset",
    "gt",
]


@pytest.fixture(scope="module")
def builds(tmp_path_factory, request):
    repo = request.config.rootpath
    recipe = str(repo / "recipes" / "demo.yaml")
    a, b = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    assert main(["run", recipe, "-o", str(a), "-q", *SMALL]) == 0
    first = json.loads((a / "report.json").read_text())
    assert main(["run", recipe, "-o", str(a), "-q", *SMALL]) == 0
    second = json.loads((a / "report.json").read_text())
    assert main(["run", recipe, "-o", str(b), "-q", *SMALL]) == 0
    return a, b, first, second


def test_second_run_reuses_every_stage(builds):
    _, _, first, second = builds
    assert not any(s["reused"] for s in first["stages"])
    assert all(s["reused"] for s in second["stages"])
    assert first["exports"] == second["exports"]


def test_report_says_where_the_time_went(builds):
    """Each stage's wall seconds, from its output's marker: a rerun that reuses every stage
    reports the cold build's times, and the times add up per stage."""
    _, _, first, second = builds
    per = first["seconds_per_stage"]
    assert list(per) == list(dict.fromkeys(s["stage"] for s in first["stages"]))
    assert all(isinstance(v, float) and v > 0 for v in per.values())
    for stage, total in per.items():
        assert total == pytest.approx(
            sum(s["seconds"] for s in first["stages"] if s["stage"] == stage), abs=0.01
        )
    assert second["seconds_per_stage"] == per
    assert [s["seconds"] for s in second["stages"]] == [s["seconds"] for s in first["stages"]]


def test_two_builds_give_byte_identical_exports(builds):
    a, b, _, _ = builds
    assert (a / "checksums.sha256").read_text() == (b / "checksums.sha256").read_text()
    listed = [line.split("  ")[1] for line in (a / "checksums.sha256").read_text().splitlines()]
    assert "vlmeval/MedVQA_Demo.tsv" in listed and "hf/README.md" in listed


def test_report_counts_add_up(builds):
    _, _, first, _ = builds
    c = first["sources"]["synthetic-endo"]
    assert c == {  # 40 stills + 2 x 10 frames
        "found": 60,
        "converted": 59,
        "quarantined": 1,
        "labels_missing": {},
        "samples_missing_labels": 0,
        "parts": {
            "stills": {"found": 40, "converted": 39, "quarantined": 1},
            "surgery": {"found": 20, "converted": 20, "quarantined": 0},
        },
        "parts_missing": {},
    }
    assert first["quarantined"][0]["reason"].startswith("truncated JPEG")
    assert first["items"] == sum(first["items_per_task"].values()) == 68
    assert first["validation"]["problems"] == 0


def test_hf_export_loads_with_images(builds, tmp_path):
    from datasets import load_dataset

    a, _, _, _ = builds
    ds = load_dataset(str(a / "hf"), split="test", cache_dir=str(tmp_path))
    assert len(ds) == 68
    row = next(r for r in ds if r["prompt_level"] == "box")
    image = row["images"][0]
    assert image.size[0] > 0 and image.mode == "RGB"
    assert row["options"][ord(row["answer"]) - 65] == row["gt"]
    assert (
        row["prompt_geometry"][0]["kind"] == "box" and row["prompt_geometry"][0]["color"] == "red"
    )
    card = (a / "hf" / "README.md").read_text()
    assert "configs:" in card and "@misc{medvqa_build_synthetic_endo" in card and "CC0-1.0" in card
    # a gallery of examples per task, the images beside the card
    for task in ("lesion_type_identification", "macro_phases_identification"):
        assert f"(assets/gallery_{task}.png)" in card
        assert (a / "hf" / "assets" / f"gallery_{task}.png").read_bytes()[:4] == b"\x89PNG"


def test_vlmeval_tsv_columns_and_images(builds):
    import base64
    import io

    from PIL import Image

    a, _, _, _ = builds
    tsv = pd.read_csv(a / "vlmeval" / "MedVQA_Demo.tsv", sep="\t")
    assert list(tsv.columns) == TSV_COLUMNS
    assert tsv["index"].tolist() == list(range(68)) and tsv["image_path"].is_unique
    assert (tsv["l2-category"] == tsv["task"]).all() and tsv["category"].notna().all()
    for _, row in tsv.iterrows():
        assert row[row["answer"]] == row["gt"]
    Image.open(io.BytesIO(base64.b64decode(tsv["image"][0]))).verify()
    coord = tsv[tsv["subtask"] == "Coordinate"]
    assert len(coord) and coord["question"].str.contains(r"\[\d+, \d+, \d+, \d+\]").all()


def test_validate_and_export_commands(builds, tmp_path, capsys):
    a, _, _, _ = builds
    assert main(["validate", str(a)]) == 0
    assert "68 items checked, 0 problem(s)" in capsys.readouterr().out
    assert main(["export", str(a), "--format", "vlmeval", "-o", str(tmp_path)]) == 0
    assert f"exported 68 items as vlmeval to {tmp_path}" in capsys.readouterr().out
    assert (tmp_path / "MedVQA_Demo.tsv").read_bytes() == (
        a / "vlmeval" / "MedVQA_Demo.tsv"
    ).read_bytes()


def test_opening_a_build_lets_arrow_return_memory(builds, monkeypatch):
    """validate, export, preview and review stream a whole item table: like a build, they
    first switch Arrow to the pool that gives freed memory back (unless the user chose one)."""
    import pyarrow as pa

    from medvqa_build.pipeline import BuildDir

    a, _, _, _ = builds
    before = pa.default_memory_pool()
    try:
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
        pa.set_memory_pool(pa.mimalloc_memory_pool())
        items = BuildDir.open(a).items()
        assert len(items) == 68
        assert pa.default_memory_pool().backend_name == "system"
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
        pa.set_memory_pool(pa.mimalloc_memory_pool())
        BuildDir.open(a)
        assert pa.default_memory_pool().backend_name == "mimalloc"
    finally:
        pa.set_memory_pool(before)


def test_validate_catches_a_broken_build(builds, tmp_path, capsys):
    import shutil

    a, _, _, _ = builds
    broken = tmp_path / "broken"
    shutil.copytree(a, broken)
    meta = json.loads((broken / "build.json").read_text())
    rendered = sorted((broken / meta["render_dir"] / "images").iterdir())[0]
    rendered.write_bytes(rendered.read_bytes()[:100])
    assert main(["validate", str(broken)]) == 1
    out = capsys.readouterr().out
    assert "[image-decodes]" in out and "not a readable image" in out and "1 problem(s)" in out
    assert (broken / "validation" / "validation.json").is_file()


def test_report_has_difficulty_per_strategy(builds):
    _, _, first, _ = builds
    diff = first["difficulty"]
    pool = diff["Lesion Type Identification [label_pool]"]
    hard = diff["Lesion Type Identification [visual_class]"]
    assert pool["scored"] == 20 and hard["scored"] == 12
    assert 0 <= hard["ncc_accuracy"] <= 1 and hard["chance"] == 0.25
    phases = diff["Macro Phases Identification [label_pool]"]  # video frames are embedded too
    assert phases["scored"] == 8 and 0 <= phases["ncc_accuracy"] <= 1


def test_workers_give_identical_exports(builds, tmp_path, request):
    a, _, _, _ = builds
    recipe = str(request.config.rootpath / "recipes" / "demo.yaml")
    assert main(["run", recipe, "-o", str(tmp_path / "w2"), "-q", "--workers", "2", *SMALL]) == 0
    assert (tmp_path / "w2" / "checksums.sha256").read_text() == (
        a / "checksums.sha256"
    ).read_text()


def test_clean_deletes_an_earlier_runs_stages_and_keeps_the_build(builds, tmp_path, request):
    """A run with another quota leaves the first run's generate/render/validate/export folders
    beside its own; `clean` deletes exactly those, and the next run reuses everything left."""
    import shutil

    a = builds[0]
    work = tmp_path / "tuned"
    shutil.copytree(a, work)
    recipe = str(request.config.rootpath / "recipes" / "demo.yaml")
    tuned = [*SMALL, "--set", "tasks.0.quota=10"]
    before = {p.relative_to(work) for p in work.glob("stages/*/*")}
    assert main(["run", recipe, "-o", str(work), "-q", *tuned]) == 0
    report = json.loads((work / "report.json").read_text())
    used = {s["path"] for s in report["stages"]}
    old = {p for p in before if p.as_posix() not in used}
    assert {p.parts[1] for p in old} >= {"generate", "render", "validate", "export"}
    assert main(["clean", str(work), "--dry-run"]) == 0
    assert all((work / p).is_dir() for p in old)
    assert main(["clean", str(work)]) == 0
    assert not any((work / p).exists() for p in old)
    assert {p.relative_to(work).as_posix() for p in work.glob("stages/*/*")} == used
    checksums = (work / "checksums.sha256").read_text()
    assert main(["run", recipe, "-o", str(work), "-q", *tuned]) == 0
    again = json.loads((work / "report.json").read_text())
    assert all(s["reused"] for s in again["stages"])
    assert (work / "checksums.sha256").read_text() == checksums
    assert main(["validate", str(work)]) == 0
