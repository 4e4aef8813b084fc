"""Regenerate docs/sources.md from the manifests: python docs/scripts/gen_sources_md.py."""

from pathlib import Path

from medvqa_build.api import list_sources

HEADER = """# Sources

Generated from `manifests/` by `docs/scripts/gen_sources_md.py`; do not edit by hand.
Each source has its own page in `docs/sources/` (download, the folder to pass as ROOT, layout,
licence, quirks).

| id | title | scene | modality | access | licence | layouts | homepage |
|---|---|---|---|---|---|---|---|
"""


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
            f"| {layouts} | {m.homepage} |"
        )
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    out = Path(__file__).parents[1] / "sources.md"
    out.write_text(render(), encoding="utf-8")
    print(f"wrote {out}")
