"""Regenerate docs/sources.md from the manifests: python docs/scripts/gen_sources_md.py."""

from pathlib import Path

from medvqa_build.api import list_sources
from medvqa_build.layouts.base import MISSING_MARKERS

HEADER = """# Sources

Generated from `manifests/` by `docs/scripts/gen_sources_md.py`; do not edit by hand.
Each source has its own page in `docs/sources/` (download, the folder to pass as ROOT, layout,
licence, quirks). "licence id" is the Hub licence id of the owners' terms (`other` where they
are no standard licence) and "redistribution" whether `push` may publish the source's pixels
(`allowed`, `non-commercial`, `not-allowed`; see docs/publishing.md).

| id | title | scene | modality | access | licence | licence id | redistribution | layouts \
| homepage |
|---|---|---|---|---|---|---|---|---|---|
"""


DOWNLOADS = """
## Downloads as shipped

What each source's owners publish and what the converter handles (see each page's "Archives",
"Missing values", "Quirks" and "Verified against" sections). ROOT may be the folder an archive
unpacks to, the folder holding it, or a download folder above that; the parts present
convert and the report names the missing ones. "defaults" are the markers every label table
shares: an empty cell, NaN, NA, N/A, null, None.

| id | archives (-> what each makes under ROOT) | parts | missing-value markers | quirks |
|---|---|---|---|---|
"""


def _markers(source) -> str:
    """The missing-value markers of the source's table-driven parts ("defaults" + extras)."""
    found: list[str] = []
    for _, layout in source.layouts:
        markers = getattr(layout.options, "missing_values", None)
        if markers is None:
            continue
        extra = [m for m in markers if m not in MISSING_MARKERS]
        text = ("defaults" if set(MISSING_MARKERS) <= set(markers) else "") + "".join(
            f", `{m}`" for m in extra
        )
        found.append(text.lstrip(", ") or "none")
    return "; ".join(dict.fromkeys(found)) or "- (no label table)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_downloads() -> str:
    rows = []
    for s in list_sources():
        m = s.manifest
        archives = (
            "<br>".join(
                f"`{a.file}` -> "
                + (f"`{a.unpacks_to}/`" if a.unpacks_to != "." else "its files, into ROOT")
                + (f" ({', '.join(a.parts)})" if a.parts else "")
                for a in m.archives
            )
            or "-"
        )
        parts = ", ".join(p.name + (" (required)" if p.required else "") for p in m.parts)
        quirks = "<br>".join(_cell(q) for q in m.quirks) or "-"
        rows.append(f"| {m.id} | {archives} | {parts} | {_markers(s)} | {quirks} |")
    return DOWNLOADS + "\n".join(rows) + "\n"


def render() -> str:
    rows = []
    for s in list_sources():
        m = s.manifest
        found = {m.scene} | {p.scene for p in m.parts} | set(m.scene_map.values())
        scene = ", ".join(sorted(x for x in found if x)) or "-"
        page = (
            f"[{m.id}](sources/{m.id}.md)"
            if (Path(__file__).parents[1] / "sources" / f"{m.id}.md").is_file()
            else m.id
        )
        layouts = ", ".join(dict.fromkeys(p.layout for p in m.parts))
        rows.append(
            f"| {page} | {m.title} | {scene} | {m.modality} | {m.access} | {m.licence} "
            f"| {m.licence_id} | {m.redistribution} | {layouts} | {m.homepage} |"
        )
    return HEADER + "\n".join(rows) + "\n" + render_downloads()


if __name__ == "__main__":
    out = Path(__file__).parents[1] / "sources.md"
    out.write_text(render(), encoding="utf-8")
    print(f"wrote {out}")
