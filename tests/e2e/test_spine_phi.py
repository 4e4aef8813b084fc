"""No patient data leaves: DICOMs carrying fake names, IDs, dates and an institution go through
convert and a whole spine build; every file written and everything logged or printed is
grepped for those values."""

import json
import logging
from pathlib import Path

import pytest
import yaml

from medvqa_build.cli import main

from ..fixtures.dicom_files import PHI
from ..fixtures.sources import buu_lspine, csxa, rsna_lumbar, vindr_spinexr

NEEDLES = [v.encode() for v in PHI.values()] + [PHI["PatientName"].split("^")[0].encode()]


def _leaks(folder: Path, text: str) -> list[str]:
    found = [
        f"{p}: {n!r}"
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        for n in NEEDLES
        if n in p.read_bytes()
    ]
    return found + [f"log/stdout: {n!r}" for n in NEEDLES if n.decode() in text]


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("spine-sources")
    return {
        "rsna-lumbar": rsna_lumbar.write(base / "rsna"),
        "vindr-spinexr": vindr_spinexr.write(base / "vindr"),
        "csxa": csxa.write(base / "csxa"),
        "buu-lspine": buu_lspine.write(base / "buu"),
    }


@pytest.mark.parametrize("source_id", ["rsna-lumbar", "vindr-spinexr"])
def test_convert_outputs_carry_no_phi(source_id, roots, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    dicoms = [p for p in roots[source_id].rglob("*") if p.suffix in (".dcm", ".dicom")]
    assert dicoms and all(NEEDLES[0] in p.read_bytes() for p in dicoms)  # the fixture has PHI
    out = tmp_path / "samples.parquet"
    assert main(["convert", source_id, str(roots[source_id]), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert not _leaks(tmp_path, captured.out + captured.err + caplog.text)


def test_spine_build_exports_carry_no_phi(roots, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    recipe = yaml.safe_load((Path(__file__).parents[2] / "recipes/spinebench.yaml").read_text())
    recipe["embedder"] = "offline"
    recipe["sources"] = [{"id": k, "root": str(v)} for k, v in roots.items()]
    for task in recipe["tasks"]:
        task["quota"] = 6
    recipe["tasks"][0]["n_options"] = 3  # the tiny fixtures hold few diseases
    recipe["export"]["formats"] = ["hf", "vlmeval", "spinebench"]
    path = tmp_path / "spine.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "build"
    assert main(["run", str(path), "-o", str(out), "-q"]) == 0
    captured = capsys.readouterr()
    assert (out / "hf").is_dir() and (out / "vlmeval").is_dir()
    report = json.loads((out / "report.json").read_text())
    assert report["items"] > 0 and report["validation"]["problems"] == 0
    assert (
        report["items_per_task"]["Disease Diagnosis"] == 6
        and report["items_per_task"]["Lesion Localization"] > 0
    )
    assert not _leaks(out, captured.out + captured.err + caplog.text)
