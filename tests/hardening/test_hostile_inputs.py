"""Issue 27: inputs nobody on the project wrote, each a row of the issue's table.

Every row ends in exit 2 with one line naming the file (and the key or field), or in a
quarantine entry with every other file converted. The rows that used to end in a traceback
run the CLI as a subprocess, as a user would.
"""

from __future__ import annotations

import json
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pydicom
import pytest
from PIL import Image
from pydicom.encaps import encapsulate
from pydicom.uid import JPEG2000Lossless

from ..conftest import REPO
from ..fixtures.dicom_files import ramp, write_dicom
from ..fixtures.sources import msd, vindr_spinexr
from .bounded_cli import bounded_cli

DEMO = REPO / "recipes" / "demo.yaml"


def cli(*args: str, env: dict | None = None):
    """``medvqa-build ARGS`` in a fresh interpreter (this checkout's package, offline), under
    the hostile corpus's memory and time ceilings (:mod:`.bounded_cli`)."""
    return bounded_cli(*args, env=env)


def assert_one_line_error(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, no traceback, and the error as one line holding ``words``."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    for word in words:
        assert word in errors[0], (word, errors[0])
    return errors[0]


def png_header_only(width: int, height: int) -> bytes:
    """A valid PNG whose header claims ``width x height`` and whose data is a few bytes: a
    decompression bomb as far as any reader that trusts the header goes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def kvasir_with_bomb(root: Path) -> Path:
    polyps = root / "kvasir-dataset-v2" / "polyps"
    polyps.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for k in range(3):
        pixels = rng.integers(0, 255, (40 + k, 50, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(polyps / f"good{k}.jpg", quality=90)
    (polyps / "bomb.png").write_bytes(png_header_only(65000, 65000))
    return root


# -- row 1: a decompression bomb in a class folder ----------------------------------------------


def test_bomb_png_is_quarantined_and_the_good_images_convert(tmp_path):
    root = kvasir_with_bomb(tmp_path / "kvasir")
    out = tmp_path / "samples.parquet"
    proc = cli("convert", "kvasir", str(root), "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    counts = json.loads(out.with_name("samples.counts.json").read_text())
    assert (counts["found"], counts["converted"], counts["quarantined"]) == (4, 3, 1)
    (entry,) = json.loads(out.with_name("samples.quarantine.json").read_text())
    assert entry["file"] == "kvasir-dataset-v2/polyps/bomb.png"
    assert entry["stage"] == "convert"
    assert "65000x65000" in entry["reason"] and "max_pixels" in entry["reason"]


def test_max_pixels_flag_sets_the_limit(tmp_path):
    """--max-pixels sets the limit, inclusive: of the good 50x40, 50x41 and 50x42 images
    (2000, 2050 and 2100 pixels) the last is quarantined with the bomb at 2050."""
    root = kvasir_with_bomb(tmp_path / "kvasir")
    out = tmp_path / "samples.parquet"
    proc = cli("convert", "kvasir", str(root), "-o", str(out), "-q", "--max-pixels", "2050")
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(out.with_name("samples.counts.json").read_text())
    assert (counts["converted"], counts["quarantined"]) == (2, 2)
    entries = json.loads(out.with_name("samples.quarantine.json").read_text())
    assert [e["file"].rsplit("/", 1)[1] for e in entries] == ["bomb.png", "good2.jpg"]
    assert all("limit of 2,050" in e["reason"] for e in entries)


# -- row 2: a DICOM no decoder reads passes convert, then embed quarantines it ------------------

BAD_DICOM = "4e5f60718293a4b5c6d7e8f90a1b2c3d"


def vindr_with_undecodable(root: Path) -> Path:
    """The VinDr replica plus one JPEG 2000 DICOM whose code stream is cut after its first
    marker: its header and file structure are sound (convert keeps it), its pixels are not."""
    vindr_spinexr.write(root)
    path = write_dicom(
        root / "train_images" / f"{BAD_DICOM}.dicom", ramp(48, 64, 99), modality="DX"
    )
    ds = pydicom.dcmread(path)
    ds.file_meta.TransferSyntaxUID = JPEG2000Lossless
    ds.PixelData = encapsulate([b"\xff\x4f\xff\x51" + b"\x00" * 200])
    ds["PixelData"].VR = "OB"
    ds.save_as(path, enforce_file_format=True)
    with (root / "annotations" / "train.csv").open("a") as fh:
        fh.write(vindr_spinexr.row(BAD_DICOM, "Osteophytes", (1.0, 1.0, 20.0, 20.0)) + "\n")
    return root


def test_undecodable_dicom_is_quarantined_by_embed_and_the_build_finishes(tmp_path):
    root = vindr_with_undecodable(tmp_path / "vindr")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"""name: hostile-embed
benchmark: T
embedder: offline
sources:
  - {{id: vindr-spinexr, root: {root}}}
tasks:
  - name: dx
    generator: spine_diagnosis
    category: Spinal Disease Diagnosis
    task: Disease Diagnosis
    quota: 10
    n_options: 3
    negatives: {{strategy: visual_class, params: {{aggregate: max}}}}
    prompt_level: image
export: {{name: T, formats: [hf]}}
"""
    )
    out = tmp_path / "build"
    proc = cli("run", str(recipe), "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    quarantine = json.loads((out / "quarantine.json").read_text())
    embed = [q for q in quarantine if q["stage"] == "embed"]
    assert [q["file"] for q in embed] == [f"train_images/{BAD_DICOM}.dicom"]
    assert "JPEG 2000" in embed[0]["reason"] and "\n" not in embed[0]["reason"]
    report = json.loads((out / "report.json").read_text())
    # counts add up: convert kept all five files; the embed stage left out one, with a reason
    source = report["sources"]["vindr-spinexr"]
    assert (source["found"], source["converted"], source["quarantined"]) == (5, 5, 0)
    assert report["quarantined_per_stage"]["embed"] == 1
    # a later stage may leave out an item drawn from that file (render), and only such items
    assert {q["file"] for q in quarantine} == {f"train_images/{BAD_DICOM}.dicom"}
    embed_stage = next(s for s in report["stages"] if s["stage"] == "embed")
    stats = json.loads((out / embed_stage["path"] / "_SUCCESS.json").read_text())
    # the stage embeds what generation can use: a sample no task can draw on is left out
    counts = stats["stats"]
    assert counts["embedded"] + counts["unembedded"] + counts["left_out"] == counts["samples"] == 5
    assert counts["unembedded"] == 1
    assert "quarantined after convert: embed 1" in proc.stdout


# -- rows 4-9: recipes, manifests and --set -------------------------------------------------------


def _demo_with(tmp_path: Path, old: str, new: str, name: str = "recipe.yaml") -> Path:
    text = DEMO.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _laughs(indent: str, levels: int = 10) -> str:
    """A "billion laughs": 9^levels strings once the aliases are expanded."""
    lines = [f"{indent}l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        refs = ", ".join([f"*l{i - 1}"] * 9)
        lines.append(f"{indent}l{i}: &l{i} [{refs}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("where", ["curate", "params"])
def test_yaml_alias_bomb_is_refused(tmp_path, where):
    if where == "curate":
        recipe = _demo_with(
            tmp_path, "render: {format: jpeg", "curate:\n" + _laughs("  ") + "render: {format: jpeg"
        )
    else:
        recipe = _demo_with(
            tmp_path,
            "    params: {attribute: phase}\n",
            "    params:\n      attribute: phase\n" + _laughs("      "),
        )
    proc = cli("run", str(recipe), "-o", str(tmp_path / "out"), "-q")
    assert_one_line_error(proc, "alias", str(recipe))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "content, expected",
    [
        ("latin-1", "byte 0xe9"),
        ("binary", "not UTF-8"),
    ],
)
def test_recipe_that_is_not_utf8(tmp_path, content, expected):
    path = tmp_path / "recipe.yaml"
    if content == "latin-1":
        text = DEMO.read_text(encoding="utf-8").replace("MedVQA-Demo", "MédVQA")
        path.write_bytes(text.encode("latin-1"))
    else:
        path.write_bytes(bytes(range(256)) * 8)
    proc = cli("run", str(path), "-o", str(tmp_path / "out"), "-q")
    assert_one_line_error(proc, expected, str(path))


def test_manifest_that_is_not_utf8(tmp_path):
    folder = tmp_path / "manifests"
    folder.mkdir()
    text = (REPO / "manifests" / "kvasir.yaml").read_text(encoding="utf-8")
    (folder / "kvasir-copy.yaml").write_bytes(
        text.replace("id: kvasir", "id: kvasir-copy").encode("utf-16")
    )
    proc = cli("sources", env={"MEDVQA_MANIFESTS": str(folder)})
    assert_one_line_error(proc, "not UTF-8", "kvasir-copy.yaml")


def test_set_with_invalid_yaml(tmp_path):
    proc = cli("run", str(DEMO), "-o", str(tmp_path / "out"), "--set", "seed=[1, 2", "-q")
    line = assert_one_line_error(proc, "--set", "'[1, 2'", "not valid YAML")
    assert line.count("\n") == 0


def test_ten_megabyte_benchmark_string(tmp_path):
    recipe = _demo_with(tmp_path, "benchmark: MedVQA-Demo", "benchmark: " + "x" * 10_000_000)
    proc = cli("run", str(recipe), "-o", str(tmp_path / "out"), "-q")
    assert_one_line_error(proc, "benchmark", "10,000,000 characters")


def test_300_character_task_name(tmp_path):
    recipe = _demo_with(tmp_path, "name: lesion-type-hard", "name: " + "t" * 300)
    proc = cli("run", str(recipe), "-o", str(tmp_path / "out"), "-q")
    assert_one_line_error(proc, "tasks.1.name", "300 characters", "cannot name a file")


def test_folder_named_yaml_in_manifests_is_skipped(tmp_path):
    folder = tmp_path / "manifests"
    (folder / "something.yaml").mkdir(parents=True)
    root = kvasir_with_bomb(tmp_path / "kvasir")
    env = {"MEDVQA_MANIFESTS": str(folder)}
    listed = cli("sources", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "something.yaml: not a regular file" in listed.stderr
    assert "kvasir" in {row["id"] for row in json.loads(listed.stdout)}
    out = tmp_path / "samples.parquet"
    converted = cli("convert", "kvasir", str(root), "-o", str(out), "-q", env=env)
    assert converted.returncode == 0, converted.stderr
    assert "Traceback" not in converted.stderr


# -- row 10: MSD dataset.json ---------------------------------------------------------------------


def _msd(tmp_path: Path, mutate) -> Path:
    root = msd.write(tmp_path / "msd")
    path = root / msd.TASK / "dataset.json"
    meta = json.loads(path.read_text())
    mutate(meta)
    path.write_text(json.dumps(meta))
    return root


def _convert_msd(tmp_path: Path, root: Path) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "samples.parquet"
    return cli("convert", "msd", str(root), "-o", str(out), "-q"), out


@pytest.mark.parametrize(
    "mutate, file, words",
    [
        (
            lambda m: m["training"][0].pop("label"),
            "imagesTr/liver_0.nii.gz",
            ("training[0]", "'label'", "missing"),
        ),
        (
            lambda m: m["training"][1].__setitem__("image", None),
            "dataset.json training[1]",
            ("training[1]", "'image'", "None"),
        ),
        (
            lambda m: m["training"].__setitem__(0, "./imagesTr/liver_0.nii.gz"),
            "dataset.json training[0]",
            ("training[0] is str", '{"image"'),
        ),
    ],
    ids=["entry-without-label", "null-file", "one-string-entry"],
)
def test_msd_bad_entry_quarantines_only_its_case(tmp_path, mutate, file, words):
    clean, clean_out = _convert_msd(tmp_path / "clean", msd.write(tmp_path / "clean" / "msd"))
    assert clean.returncode == 0, clean.stderr
    per_case = json.loads(clean_out.with_name("samples.counts.json").read_text())["converted"]
    proc, out = _convert_msd(tmp_path, _msd(tmp_path, mutate))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    counts = json.loads(out.with_name("samples.counts.json").read_text())
    (entry,) = json.loads(out.with_name("samples.quarantine.json").read_text())
    assert entry["file"] == file
    for word in words:
        assert word in entry["reason"], entry["reason"]
    # the other case converts in full: half the slices of the two-case replica
    assert counts["converted"] == per_case // 2 and counts["quarantined"] == 1


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda m: m.__setitem__("training", ["./imagesTr/liver_0.nii.gz"]), ("'training'",)),
        (lambda m: m.__setitem__("labels", ["background", "liver"]), ("'labels'", "got list")),
        (lambda m: m.__setitem__("modality", {"T1": "MRI"}), ("'modality.T1'", "channel number")),
        (lambda m: m.__setitem__("training", "imagesTr"), ("'training'", "got str")),
    ],
    ids=["training-strings", "labels-list", "modality-keys", "training-not-a-list"],
)
def test_msd_unusable_dataset_json_is_one_line(tmp_path, mutate, words):
    proc, _ = _convert_msd(tmp_path, _msd(tmp_path, mutate))
    assert_one_line_error(proc, "dataset.json", *words)
