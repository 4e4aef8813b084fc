"""The generated docs are current, and every source's page says what confirms it (issue 23)."""

import importlib.util
import re

import pytest

from medvqa_build.api import list_sources


def _generator(repo, name):
    path = repo / "docs" / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "script,page", [("gen_sources_md", "sources.md"), ("gen_layouts_md", "layouts.md")]
)
def test_generated_pages_are_current(repo, script, page):
    assert (repo / "docs" / page).read_text(encoding="utf-8") == _generator(
        repo, script
    ).render(), f"run python docs/scripts/{script}.py"


@pytest.mark.parametrize(
    "source_id", [s.id for s in list_sources() if s.manifest.access != "generated"]
)
def test_every_source_page_lists_its_public_evidence(repo, source_id):
    text = (repo / "docs" / "sources" / f"{source_id}.md").read_text(encoding="utf-8")
    for section in ("Archives", "Label files", "Missing values", "Quirks", "Verified against"):
        assert re.search(rf"^##+ {section}", text, re.M), f"{source_id}.md lacks '## {section}'"
    evidence = text[re.search(r"^##+ Verified against", text, re.M).end() :]
    evidence = re.split(r"^## ", evidence, flags=re.M)[0]
    # a bullet naming a page (URL) or a public repository (owner/name)
    bullets = re.findall(r"^\s*[-*] (.+)", evidence, re.M)
    references = [b for b in bullets if re.search(r"https?://|\b[\w.-]+/[\w.-]+\b", b)]
    assert len(references) >= 2, f"{source_id}.md names fewer than two public references"


def test_every_manifest_lists_its_archives_and_quirks():
    for source in list_sources():
        m = source.manifest
        if m.access == "generated":
            continue
        assert m.archives, f"{m.id}: no archives"
        assert m.quirks, f"{m.id}: no quirks"
