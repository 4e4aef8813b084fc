"""A static HTML gallery of a build for clinician review: filters (task, scene, source, prompt
level, decision), each item with its rendered and clean image, question, options and answer,
and accept / reject / edit with a comment; "Export decisions" downloads a JSON file naming the
build (see :mod:`.decisions`). Images are copied beside the page and linked relatively, so the
folder can be zipped and sent; decisions also survive a reload (browser local storage)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path

import pyarrow.parquet as pq
from tqdm.auto import tqdm

from ..errors import UsageError
from ..media.phash import is_image_file
from ..media.refs import source_ref
from ..pipeline import BuildDir
from ..records import Item, Sample
from ..rng import rng_for
from ..store.atomic import AtomicFile
from ..store.parquet import ITEM_READ_ROWS
from ..store.tables import batched
from ..view import item_html
from ..vocab import RENDER_SCHEME
from .decisions import FORMAT, build_id


def _link_or_copy(src: Path, dst: Path) -> None:
    if dst.exists():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def write_preview(
    build_dir: str | os.PathLike,
    out_html: str | os.PathLike | None = None,
    *,
    sample: int | None = None,
    seed: int | None = None,
    progress: bool = False,
) -> Path:
    """Write the gallery (default ``DIR/preview/index.html``) and its ``images/``; return it.

    ``sample``: show that many items, drawn evenly over the (task, prompt level) strata with
    ``seed`` (default: the recipe's), instead of all of them. Decisions still name the whole
    build; items not shown stay undecided. Items are read a batch at a time and only the
    samples of the rendered ones shown are looked up: the page, not the build, sets the cost."""
    if sample is not None and sample < 1:
        raise UsageError(
            f"--sample must be at least 1, got {sample}", fix="pass --sample N, N >= 1"
        )
    folder = BuildDir.open(build_dir)
    build, items, resolve, recipe = folder.path, folder.items(), folder.resolver(), folder.recipe()
    samples = folder.samples()
    out = Path(out_html) if out_html is not None else build / "preview" / "index.html"
    out = out.resolve()
    image_dir = out.parent / "images"
    copied: dict[str, str | None] = {}

    def local(ref: str | None) -> str | None:
        if ref is None:
            return None
        if ref not in copied:
            try:
                src = resolve(ref)
            except KeyError:
                src = None
            if src is None or not src.is_file():
                copied[ref] = None
            else:
                name = hashlib.sha256(ref.encode()).hexdigest()[:20] + src.suffix.lower()
                _link_or_copy(src, image_dir / name)
                copied[ref] = f"images/{name}"
        return copied[ref]

    seed = int(recipe.seed if seed is None else seed)
    shown = _sampled_rows(items, sample, seed) if sample is not None else None
    head, tail = _template(getattr(recipe, "name", ""))
    with AtomicFile(out, "w", encoding="utf-8") as page:
        _write_page(
            page.fh,
            head=head,
            tail=tail,
            items=items,
            shown=shown,
            samples=samples,
            local=local,
            recipe=recipe,
            seed=seed,
            progress=progress,
        )
    return out


def _write_page(fh, *, head, tail, items, shown, samples, local, recipe, seed, progress) -> None:
    """The page, its data written item by item (see :func:`write_preview`)."""
    # the data is json.dumps of {"build", "format", "items", "name"[, "sampled"]} with sorted
    # keys, as one dict would give it, written item by item
    fh.write(head)
    build = build_id(items, progress)
    fh.write(_js(f'{{"build": {_dumps(build)}, "format": {_dumps(FORMAT)}, "items": ['))
    first = True
    if shown is None:
        batches = batched(items, ITEM_READ_ROWS)
    elif hasattr(items, "rows"):
        batches = items.rows(shown)  # only the shown rows are decoded
    else:
        batches = [[i for k, i in enumerate(items) if k in shown]]
    total = len(items) if shown is None else len(shown)
    bar = tqdm(total=total, desc="write page", unit="item", disable=not progress, leave=False)
    for wanted in batches:
        bar.update(len(wanted))
        found = samples.get(rendered_sample_ids(wanted)) if wanted else {}
        for item in wanted:
            clean = clean_ref(item, found)
            fields = _fields(item, local, clean)
            fh.write(_js(("" if first else ", ") + _dumps(fields)))
            first = False
    bar.close()
    fh.write(_js(f'], "name": {_dumps(getattr(recipe, "name", ""))}'))
    if shown is not None:
        total = len(items)
        fh.write(_js(f', "sampled": {_dumps({"of": total, "seed": seed, "shown": len(shown)})}'))
    fh.write("}" + tail)


def _fields(item, local, clean: str | None) -> dict:
    """One item as the page shows it: ``html`` is the fragment a notebook shows too
    (:func:`medvqa_build.view.item_html`, every text escaped); the other fields feed the
    filters and the edit panel."""
    images = [local(r) for r in item.images]
    clean_src = local(clean) if clean is not None and clean != item.images[0] else None
    return {
        "html": item_html(item, images, clean_src),
        "item_id": item.item_id,
        "task": item.task,
        "subtask": item.subtask,
        "scene": item.scene or "",
        "source": item.source,
        "prompt_level": item.prompt_level,
        "split": item.split or "",
        "licence": item.licence,
        "question": item.question,
        "options": list(item.options),
        "answer": item.answer,
        "gt": item.gt,
        "sample_ids": list(item.sample_ids),
        "images": images,
        "clean": clean_src,
    }


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _js(text: str) -> str:
    """JSON made safe inside the page's ``<script>`` element."""
    return text.replace("</", "<\\/")


def _template(name: str) -> tuple[str, str]:
    """The page before and after its data."""
    template = resources.files(__package__).joinpath("preview.html").read_text(encoding="utf-8")
    head, tail = template.split("/*DATA*/null")
    return head.replace("{{TITLE}}", _escape(name)), tail.replace("{{TITLE}}", _escape(name))


def _sampled_rows(items, n: int, seed: int) -> set[int]:
    """Row numbers of ``n`` items drawn evenly over the (task, prompt level) strata: a seeded
    order within each stratum, then one item of each stratum in turn (strata in name order)
    until ``n`` are drawn. Only those two columns are read."""
    if hasattr(items, "path"):
        table = pq.read_table(items.path, columns=["task", "prompt_level"])
        tasks, levels = (table.column(c).to_pylist() for c in ("task", "prompt_level"))
    else:
        tasks, levels = [i.task for i in items], [i.prompt_level for i in items]
    strata: dict[tuple[str, str], list[int]] = {}
    for row, key in enumerate(zip(tasks, levels, strict=True)):
        strata.setdefault(key, []).append(row)
    del tasks, levels
    queues = []
    for key in sorted(strata):
        rows = strata[key]
        order = rng_for(seed, "preview", *key).permutation(len(rows))
        queues.append([rows[k] for k in order])
    chosen: set[int] = set()
    depth = 0
    while len(chosen) < n and any(depth < len(q) for q in queues):
        for q in queues:
            if depth < len(q) and len(chosen) < n:
                chosen.add(q[depth])
        depth += 1
    return chosen


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def clean_ref(item: Item, samples_by_id: Mapping[str, Sample], index: int = 0) -> str | None:
    """The reference of the item's ``index``-th image without any drawn prompt, where there is
    a file for it; a rendered image's sample is looked up in ``samples_by_id``."""
    ref = item.images[index] if index < len(item.images) else None
    if ref is not None and not ref.startswith(RENDER_SCHEME):
        return ref
    sample = samples_by_id.get(item.sample_ids[index]) if index < len(item.sample_ids) else None
    if sample is None or sample.slice is not None or not is_image_file(sample.image):
        return None  # a video frame or volume slice has no file of its own
    return source_ref(sample.source, sample.image)


def rendered_sample_ids(items: Iterable[Item]) -> set[str]:
    """The ids :func:`clean_ref` looks up for ``items``' first images."""
    return {
        i.sample_ids[0]
        for i in items
        if i.images and i.sample_ids and i.images[0].startswith(RENDER_SCHEME)
    }
