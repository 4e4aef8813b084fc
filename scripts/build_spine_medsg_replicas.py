"""Write replicas of the SpineBench and MedSG recipes' sources, one folder per source id, so
that ``recipes/spinebench.yaml`` and ``recipes/medsg.yaml`` can be tried without any dataset::

    python scripts/build_spine_medsg_replicas.py /tmp/replicas
    RSNA_LUMBAR=/tmp/replicas/rsna-lumbar VINDR_SPINEXR=/tmp/replicas/vindr-spinexr \\
    CSXA=/tmp/replicas/csxa BUU_LSPINE=/tmp/replicas/buu-lspine \\
        medvqa-build run recipes/spinebench.yaml -o /tmp/spine --set embedder=offline \\
        --set quota_scale=0.005
    MEDSG_MSD_ROOT=/tmp/replicas/msd MEDSG_BRATS_ROOT=/tmp/replicas/brats \\
        medvqa-build run recipes/medsg.yaml -o /tmp/medsg --set quota_scale=0.25

The replicas are the test fixtures of ``tests/fixtures/sources/`` (synthetic pixels in each
source's real layout); VinDr-SpineXR is scaled up so that Disease Diagnosis has enough items,
every kept class as often, for the text-only audit to give a verdict, and MSD and BraTS so
that their structures are not in one place in every case (issue 32). Run it from a
checkout of the repository (the fixtures live in ``tests/``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.fixtures import fixture_writer  # noqa: E402

SPINEBENCH = ("rsna-lumbar", "vindr-spinexr", "csxa", "buu-lspine")
MEDSG = ("msd", "brats")
# vindr-spinexr: train images with one kept lesion type each (or "No finding"), dealt in turn;
# msd, brats: cases whose structures lie in varied places (the contract cases nearly coincide,
# so the mean answer box of the others was a fair guess: object_tracking 66.7 % against 33.3 %)
SCALED: dict[str, dict[str, int]] = {
    "vindr-spinexr": {"extra": 60},
    "msd": {"extra": 20},
    "brats": {"extra": 16},
}


def write_replicas(data_dir: Path, sources: tuple[str, ...] = SPINEBENCH + MEDSG) -> dict:
    """Write each source's replica; ``{source id: the root its recipe expects}`` (a writer
    may put the dataset a folder below the path it is given)."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    roots = {}
    with tempfile.TemporaryDirectory(dir=data_dir, prefix=".staging-") as staging:
        for source_id in sources:
            writer = fixture_writer(source_id)
            if writer is None:
                raise SystemExit(f"no fixture writer for {source_id!r} in tests/fixtures/sources")
            target = data_dir / source_id
            if target.exists():
                shutil.rmtree(target)
            staged = Path(staging) / source_id
            written = writer(staged, **SCALED.get(source_id, {}))
            os.replace(staged, target)
            roots[source_id] = target / written.relative_to(staged)
    return roots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path, help="folder to write <source id>/ replicas into")
    args = parser.parse_args(argv)
    for source_id, root in write_replicas(args.data_dir).items():
        print(f"{source_id}: {root.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
