"""Rebuild the images an annotations-only upload withholds, from your own download.

Shipped as ``rebuild_images.py`` beside ``recipe.yaml`` and ``images.sha256`` in a dataset
pushed with ``medvqa-build push --annotations-only``. Usage, in that folder::

    python rebuild_images.py --root SOURCE=/path/to/your/copy [--root ...] -o rebuilt

It reruns the recipe with medvqa_build (install the version the card names) into
``rebuilt/build`` (its ``hf/`` folder is the full dataset), then writes every withheld image to
``rebuilt/images/<path>`` and checks that its SHA-256 is the one the full build published.
Exit status: 0 when every image matches, 1 otherwise, 2 on bad arguments.

Only the standard library and pyarrow (a medvqa_build dependency) are imported.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path


def root_variable(source_id: str) -> str:
    return "MEDVQA_ROOT_" + re.sub(r"[^A-Z0-9]+", "_", source_id.upper())


def _expected(dataset: Path) -> dict[str, str]:
    out = {}
    for line in (dataset / "images.sha256").read_text(encoding="utf-8").splitlines():
        digest, _, path = line.partition("  ")
        if path:
            out[path] = digest
    return out


def _rebuilt_images(hf: Path):
    """``(path, bytes)`` of every image of the rebuilt HF export."""
    import pyarrow.parquet as pq

    for shard in sorted((hf / "data").rglob("*.parquet")):
        for row in pq.read_table(shard, columns=["images"]).column("images").to_pylist():
            for image in row:
                yield image["path"], image["bytes"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="SOURCE=PATH",
        help="your copy of a source (repeat for each source of the recipe)",
    )
    p.add_argument("-o", "--output", default="rebuilt", help="folder to write (default rebuilt)")
    p.add_argument(
        "--dataset",
        default=str(Path(__file__).resolve().parent),
        help="the downloaded dataset folder (default: this script's folder)",
    )
    p.add_argument("--workers", type=int, default=None, help="parallel convert/render tasks")
    args = p.parse_args(argv)
    dataset, out = Path(args.dataset), Path(args.output)
    env = dict(os.environ)
    for spec in args.root:
        source, sep, path = spec.partition("=")
        if not sep or not path:
            print(f"error: --root {spec!r} is not SOURCE=PATH", file=sys.stderr)
            return 2
        env[root_variable(source)] = str(Path(path).expanduser().resolve())
    recipe = (dataset / "recipe.yaml").read_text(encoding="utf-8")
    needed = sorted(set(re.findall(r"\$\{(MEDVQA_ROOT_[A-Z0-9_]+)\}", recipe)) - set(env))
    if needed:
        print(
            f"error: no --root for {', '.join(needed)} — fix: pass --root SOURCE=PATH for each "
            "source of recipe.yaml",
            file=sys.stderr,
        )
        return 2
    build = out / "build"
    cmd = [sys.executable, "-m", "medvqa_build", "run", str(dataset / "recipe.yaml")]
    cmd += ["-o", str(build), "-q", "--set", "export.formats=[hf]"]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    if subprocess.run(cmd, env=env, check=False).returncode != 0:
        print("error: the rebuild failed (see above)", file=sys.stderr)
        return 1
    expected = _expected(dataset)
    written: dict[str, bool] = {}
    for path, data in _rebuilt_images(build / "hf"):
        if path not in expected or path in written or data is None:
            continue
        target = out / "images" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written[path] = hashlib.sha256(data).hexdigest() == expected[path]
    bad = sorted(p for p, ok in written.items() if not ok)
    missing = sorted(set(expected) - set(written))
    print(
        f"rebuilt {len(written)} of {len(expected)} withheld image(s) into {out / 'images'}; "
        f"{len(bad)} differ from the published build, {len(missing)} missing; "
        f"full dataset: {build / 'hf'}"
    )
    for path in (bad + missing)[:20]:
        print(f"  {'differs' if path in bad else 'missing'}: {path}", file=sys.stderr)
    return 0 if not bad and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
