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
from importlib import resources
from pathlib import Path

from .decisions import FORMAT, build_id


def _link_or_copy(src: Path, dst: Path) -> None:
    if dst.exists():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def write_preview(build_dir: str | os.PathLike, out_html: str | os.PathLike | None = None) -> Path:
    """Write the gallery (default ``DIR/preview/index.html``) and its ``images/``; return it."""
    from ..validate.report import open_build_view

    view = open_build_view(build_dir)
    out = Path(out_html) if out_html is not None else view.build_dir / "preview" / "index.html"
    out = out.resolve()
    image_dir = out.parent / "images"
    copied: dict[str, str | None] = {}

    def local(ref: str | None) -> str | None:
        if ref is None:
            return None
        if ref not in copied:
            try:
                src = view.resolve(ref)
            except KeyError:
                src = None
            if src is None or not src.is_file():
                copied[ref] = None
            else:
                name = hashlib.sha256(ref.encode()).hexdigest()[:20] + src.suffix.lower()
                _link_or_copy(src, image_dir / name)
                copied[ref] = f"images/{name}"
        return copied[ref]

    rows = []
    for item in view.items:
        clean = view.clean_ref(item)
        rows.append(
            {
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
                "images": [local(r) for r in item.images],
                "clean": local(clean) if clean is not None and clean != item.images[0] else None,
            }
        )
    data = {
        "format": FORMAT,
        "build": build_id(view.items),
        "name": getattr(view.recipe, "name", ""),
        "items": rows,
    }
    payload = json.dumps(data, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
    template = resources.files(__package__).joinpath("preview.html").read_text(encoding="utf-8")
    html = template.replace("/*DATA*/null", payload).replace("{{TITLE}}", _escape(data["name"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    return out


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )
