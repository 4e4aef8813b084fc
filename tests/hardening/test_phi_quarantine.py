"""PHI in the paths tests/e2e/test_spine_phi.py does not take: DICOMs that are quarantined
(no pixel data, cut short, unsupported transfer syntax) and every name part or date format of
the fake patient data, in the sample table, quarantine report, counts and logs."""

from __future__ import annotations

import logging

import pydicom

from medvqa_build.cli import main

from ..fixtures.dicom_files import PHI, ramp, write_dicom
from ..fixtures.sources import vindr_spinexr

DATE = PHI["PatientBirthDate"]
NEEDLES = sorted(
    {
        *PHI.values(),
        *PHI["PatientName"].split("^"),
        *PHI["ReferringPhysicianName"].split("^"),
        f"{DATE[:4]}-{DATE[4:6]}-{DATE[6:]}",
        PHI["PatientID"][-5:],
    }
)


def test_quarantined_dicoms_leak_no_phi(tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    root = vindr_spinexr.write(tmp_path / "vindr")
    folder = root / "train_images"
    write_dicom(folder / "nopix.dicom", ramp(48, 64, 1), modality="DX")
    ds = pydicom.dcmread(folder / "nopix.dicom")
    del ds.PixelData
    ds.save_as(folder / "nopix.dicom")
    write_dicom(folder / "cut.dicom", ramp(48, 64, 2), modality="DX")
    (folder / "cut.dicom").write_bytes((folder / "cut.dicom").read_bytes()[:-700])
    with (root / "annotations" / "train.csv").open("a") as fh:
        fh.write("nopix,S,S,rad1,Osteophytes,1,1,5,5\ncut,S,S,rad1,Osteophytes,1,1,5,5\n")
    out = tmp_path / "out" / "samples.parquet"
    assert main(["convert", "vindr-spinexr", str(root), "-o", str(out)]) == 0
    text = capsys.readouterr()
    quarantine = (out.with_name("samples.quarantine.json")).read_text()
    assert "nopix" in quarantine and "cut" in quarantine
    leaks = [
        (p.name, n)
        for p in sorted(out.parent.iterdir())
        for n in NEEDLES
        if n.encode() in p.read_bytes()
    ]
    leaks += [("log", n) for n in NEEDLES if n in text.out + text.err + caplog.text]
    assert not leaks, leaks
