"""An HF export without the pixels of the sources that may not be redistributed
(``push --annotations-only``).

Same folder, same configs, same Parquet schema: a withheld image keeps its source-relative
reference (``images[].path``, e.g. ``sun/TrainDataset/Frame/case1_1/x.jpg``, or
``rendered/<name>`` for an image drawn from one) with no bytes. Beside the data go the
portable recipe, the SHA-256 of every withheld image (``images.sha256``) and
``rebuild_images.py``, which reruns the recipe on the user's own download and writes those
images, checking that each is byte-identical to the one the full build published.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import UsageError
from . import rebuild_images
from .card import portable_recipe, root_variable
from .gallery import PREFIX as GALLERY_PREFIX
from .gallery import without_galleries
from .licence_gate import Gate

ROW_GROUP_ROWS = 100  # as the hf exporter writes them


def _recipe_of(folder: Path) -> str:
    recipe = folder.parent / "recipe.yaml"
    if not ((folder.parent / "build.json").is_file() and recipe.is_file()):
        raise UsageError(
            "--annotations-only needs the build's recipe (to rebuild the images)",
            where=str(folder),
            fix="pass the build directory (or its hf/ folder inside it)",
        )
    return recipe.read_text(encoding="utf-8")


def _strip(shard: Path, out: Path, blocked: set[str], hashes: dict[str, str]) -> None:
    """``shard`` with the image bytes of ``blocked`` sources' rows set to null."""
    table = pq.read_table(shard)
    images = table.column("images").to_pylist()
    sources = table.column("source").to_pylist()
    for row, source in zip(images, sources, strict=True):
        if source not in blocked:
            continue
        for image in row:
            if image["bytes"] is not None:
                hashes[image["path"]] = hashlib.sha256(image["bytes"]).hexdigest()
                image["bytes"] = None
    field = table.schema.field("images")
    column = pa.array(images, field.type)
    table = table.set_column(table.schema.get_field_index("images"), field, column)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        table, out, compression="zstd", row_group_size=ROW_GROUP_ROWS, write_statistics=True
    )


def _notice(gate: Gate, recipe_yaml: str, n_images: int) -> list[str]:
    import yaml

    roots = [
        s["id"]
        for s in (yaml.safe_load(recipe_yaml) or {}).get("sources") or []
        if s.get("root") is not None
    ]
    args = " ".join(f"--root {sid}=/path/to/{sid}" for sid in roots)
    variables = ", ".join(f"`{root_variable(sid)}`" for sid in roots) or "none"
    return [
        "## Images not included",
        "",
        f"The owners of {', '.join(f'`{s}`' for s in gate.blocked)} do not allow "
        f"redistributing their images, so this upload holds no pixels for their items "
        f"({n_images} images). Each withheld image keeps its source-relative reference "
        "(`images[].path`) with empty bytes; `images.sha256` lists their SHA-256. Rebuild them "
        "from your own download of those sources (same medvqa_build version):",
        "",
        "```bash",
        f"python rebuild_images.py {args} -o rebuilt",
        "```",
        "",
        "It reruns `recipe.yaml` (its source roots are the environment variables "
        f"{variables}) into `rebuilt/build`, whose `hf/` folder is the full dataset, and writes "
        "every withheld image to `rebuilt/images/<path>`, checking that each is "
        "byte-identical to the one the full build published.",
        "",
    ]


def annotations_only_export(folder: Path, gate: Gate, out: Path) -> Path:
    """Write the annotations-only copy of the HF export ``folder`` to ``out``."""
    recipe_yaml = portable_recipe(_recipe_of(folder))
    blocked = set(gate.blocked)
    hashes: dict[str, str] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        target = out / rel
        if rel.parts[0] == "data" and path.suffix == ".parquet":
            _strip(path, target, blocked, hashes)
        elif rel.as_posix() != "README.md" and not rel.name.startswith(GALLERY_PREFIX):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    card = (folder / "README.md").read_text(encoding="utf-8")
    card = without_galleries(
        card, "this upload holds annotations only (see Images not included below)"
    )
    card = card.rstrip("\n") + "\n\n"
    (out / "README.md").write_text(
        card + "\n".join(_notice(gate, recipe_yaml, len(hashes))), encoding="utf-8"
    )
    (out / "recipe.yaml").write_text(recipe_yaml, encoding="utf-8")
    (out / "images.sha256").write_text(
        "".join(f"{h}  {p}\n" for p, h in sorted(hashes.items())), encoding="utf-8"
    )
    shutil.copyfile(rebuild_images.__file__, out / "rebuild_images.py")
    return out


def withheld(folder: Path) -> int:
    """How many images of an HF export folder have no bytes (for the tests and reports)."""
    n = 0
    for shard in (folder / "data").rglob("*.parquet"):
        images = pq.read_table(shard, columns=["images"]).column("images")
        flat = pc.list_flatten(images)
        n += pc.sum(pc.is_null(pc.struct_field(flat, "bytes"))).as_py() or 0
    return n
