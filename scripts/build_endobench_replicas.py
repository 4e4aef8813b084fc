"""Write tiny replicas of the 20 EndoBench sources, one folder per source id, so that
``recipes/endobench.yaml`` can be tried without downloading any dataset.

The replicas are the test fixtures of ``tests/fixtures/sources/`` (synthetic pixels in each
source's real folder layout, file names and annotation formats), a few of them scaled up so
that every EndoBench task and subtask gets items at ``quota_scale=0.08``::

    python scripts/build_endobench_replicas.py /tmp/endobench-replicas
    ENDOBENCH_DATA=/tmp/endobench-replicas \\
        medvqa-build run recipes/endobench.yaml -o /tmp/endobench-build --set quota_scale=0.08

Run it from a checkout of the repository (the fixtures live in ``tests/``). The images are
noise, so the build exercises conversion, generation, rendering, validation and export; it
says nothing about model accuracy.
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

# recipes/endobench.yaml's sources, in its order
SOURCES = (
    "kvasir", "hyperkvasir", "kvasir-capsule", "gastrovision", "kid", "wcebleedgen", "see-ai",
    "kvasir-seg", "cvc-clinicdb", "cvc-colondb", "cvc-300", "etis-larib", "edd2020", "sun",
    "ldpolypvideo", "polypgen", "cholec80", "endovis17", "endovis18", "psi-ava",
)  # fmt: skip
# size keywords of the fixture writers that have them; the rest write their default replica.
# kvasir/hyperkvasir: landmark, organ, lesion, severity and bowel-preparation classes;
# wcebleedgen: frames to count bleeding regions on; psi-ava: keyframes with phases, steps,
# single per-instrument actions (the contract replica has too few distinct ones) and 1 to 4
# instruments each; see-ai: single-label frames of several classes (lesion type needs a few
# per source); endovis18: frames with instruments18 XML (instrument boxes and tool-tissue
# interactions); kvasir-seg: images with 1 to 5 polyps of varied size and place; edd2020:
# images with 1 to 4 regions whose classes are dealt evenly from all five; kid, sun: one-lesion
# frames of each category / pathology in turn. The last five give counts, classes and positions
# varied enough that a build can balance its answers, over the task and within each source
# (issue 32): the contract replicas alone hold mostly "2" instruments, single polyps and polyp
# regions, and a source whose findings are not as frequent as each other gives its most
# frequent one as the answer more often (the audit's answer share per source). see-ai: three
# single-box frames of each of its 12 classes. kid's normal frames: 24 more of each organ, so that
# Organ Identification's pool (hyperkvasir's landmarks give stomach and large intestine twice as
# often as esophagus and small intestine) fills its quota with every organ as often.
SCALED: dict[str, dict[str, int]] = {
    "kvasir": {"per_class": 6},
    "hyperkvasir": {"per_class": 6},
    "wcebleedgen": {"extra_bleeding": 12},
    "psi-ava": {"extra": 48},
    "see-ai": {"extra": 36},
    "endovis18": {"extra": 48},
    "kvasir-seg": {"extra": 12},
    "edd2020": {"extra": 25},
    "kid": {"extra": 12, "normal": 24},
    "sun": {"extra": 12},
}


def write_replicas(data_dir: Path, sources: tuple[str, ...] = SOURCES) -> dict[str, Path]:
    """Write every source's replica so that ``data_dir/<id>`` is the ROOT its manifest expects
    (some writers put the dataset one or two folders below the path they are given)."""
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
            written = writer(Path(staging) / source_id, **SCALED.get(source_id, {}))
            os.replace(written, target)
            roots[source_id] = target
    return roots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path, help="folder to write <source id>/ replicas into")
    args = parser.parse_args(argv)
    roots = write_replicas(args.data_dir)
    print(f"wrote {len(roots)} replicas under {args.data_dir.resolve()}")
    print(
        f"next: ENDOBENCH_DATA={args.data_dir.resolve()} medvqa-build run recipes/endobench.yaml "
        "-o build/endobench-replicas --set quota_scale=0.08"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
