"""The generated docs are current, every source's page says what confirms it (issue 23), and
the lists the docs keep by hand (export formats, prompt levels, negative strategies, recipe
keys) match the code (issue 34)."""

import importlib.util
import re

import pytest
from pydantic import BaseModel

from medvqa_build.api import list_sources
from medvqa_build.curate.spec import CurateSpec
from medvqa_build.export import EXPORTERS
from medvqa_build.negatives import SAMPLERS
from medvqa_build.recipe import Recipe
from medvqa_build.render import prompt_levels
from medvqa_build.tasks import TASKS


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
    page = repo / "docs" / "sources" / f"{source_id}.md"
    assert page.is_file(), (
        f"write docs/sources/{source_id}.md (CONTRIBUTING.md, 'Add a source', step 5), then "
        "run python docs/scripts/gen_sources_md.py"
    )
    text = page.read_text(encoding="utf-8")
    for section in ("Archives", "Label files", "Missing values", "Quirks", "Verified against"):
        assert re.search(rf"^##+ {section}", text, re.M), f"{source_id}.md lacks '## {section}'"
    evidence = text[re.search(r"^##+ Verified against", text, re.M).end() :]
    evidence = re.split(r"^## ", evidence, flags=re.M)[0]
    # a bullet naming a page (URL) or a public repository (owner/name)
    references = [b for b in _bullets(evidence) if re.search(r"https?://|\b[\w.-]+/[\w.-]+\b", b)]
    assert len(references) >= 2, f"{source_id}.md names fewer than two public references"


def test_every_manifest_lists_its_archives_and_quirks():
    for source in list_sources():
        m = source.manifest
        if m.access == "generated":
            continue
        assert m.archives, f"{m.id}: no archives"
        assert m.quirks, f"{m.id}: no quirks"


def _bullets(text: str) -> list[str]:
    """Each Markdown bullet of ``text`` with its continuation lines (a reference wrapped onto
    the bullet's second line still counts)."""
    return [
        " ".join(line.strip() for line in b.splitlines())
        for b in re.findall(r"^[ \t]*[-*] (.+(?:\n(?![ \t]*(?:[-*] |#)|[ \t]*$).+)*)", text, re.M)
    ]


def test_a_bullet_is_read_to_its_end():
    text = (
        "- one\n  https://a.org/x\n- two, see\n  owner/name\n\n  not part of it\n## Next\n- three"
    )
    assert _bullets(text) == ["one https://a.org/x", "two, see owner/name", "three"]


@pytest.mark.parametrize(
    ("page", "prefix"), [("README.md", "--format FORMAT"), ("docs/recipes.md", "formats:")]
)
def test_the_export_format_lists_are_the_registry(repo, page, prefix):
    """The pages that list the formats by hand list exactly the registered ones, in order."""
    (line,) = [
        x
        for x in (repo / page).read_text(encoding="utf-8").splitlines()
        if prefix in x and "hf |" in x
    ]
    listed = re.search(r"(hf(?: \| [\w-]+)+)", line).group(1).split(" | ")
    assert listed == EXPORTERS.registered(), f"{page}: update the format list ({line.strip()!r})"


def _reference_list(repo, key: str) -> list[str]:
    """The ``a | b | c`` comment after ``key:`` in docs/recipes.md's reference block."""
    text = (repo / "docs" / "recipes.md").read_text(encoding="utf-8")
    (line,) = [x for x in text.splitlines() if re.match(rf"\s*{key}: \S+\s+# ", x)]
    return re.search(r"# ([\w-]+(?: \| [\w-]+)+)", line).group(1).split(" | ")


def test_the_prompt_levels_are_listed_where_recipes_and_pictures_name_them(repo):
    """A new renderer (CONTRIBUTING.md, "Add a renderer") is named in docs/recipes.md's
    ``prompt_level`` list, in the order of ``render/__init__.py``, and has its row in the table
    of docs/visual_prompts.md."""
    assert _reference_list(repo, "prompt_level") == list(prompt_levels())
    page = (repo / "docs" / "visual_prompts.md").read_text(encoding="utf-8")
    table = page[page.index("| level |") :].split("\n\n")[0]
    rows = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert sorted(rows) == sorted(prompt_levels()), "docs/visual_prompts.md: one row per level"


def test_the_negative_strategies_listed_are_the_registry(repo):
    assert sorted(_reference_list(repo, "strategy")) == sorted(SAMPLERS.registered())


def test_every_export_format_has_its_section_in_docs_exports(repo):
    """CONTRIBUTING.md, "Add an exporter": document it in docs/exports.md (a ``## <format>``
    section)."""
    page = (repo / "docs" / "exports.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## ([\w-]+)", page, re.M)
    assert [f for f in EXPORTERS.registered() if f not in sections] == []


def test_every_task_generator_is_named_in_the_docs(repo):
    """CONTRIBUTING.md, "Add a task": a generator a recipe may name is named (in backticks) on
    a page of docs/ (the generators table of docs/recipes.md, or its suite's page)."""
    pages = "\n".join(p.read_text(encoding="utf-8") for p in (repo / "docs").glob("*.md"))
    assert [n for n in TASKS.names() if f"`{n}`" not in pages] == []


def _keys(model: type[BaseModel]) -> set[str]:
    """Every key a recipe may write: the fields of the recipe and of its nested blocks."""
    out = set()
    for name, field in model.model_fields.items():
        out.add(name)
        for arg in (field.annotation, *getattr(field.annotation, "__args__", ())):
            for inner in (arg, *getattr(arg, "__args__", ())):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    out |= _keys(inner)
    return out


def test_the_recipe_reference_names_every_key(repo):
    """docs/recipes.md's reference block has each recipe key (``blind``'s own keys live in
    docs/blind_audit.md), and ``params.templates``, which every generator takes."""
    text = (repo / "docs" / "recipes.md").read_text(encoding="utf-8")
    block = text[text.index("```yaml\n") : text.index("```\n", text.index("```yaml\n") + 8)]
    written = set(re.findall(r"^\s*(?:- )?(\w+):", block, re.M)) | set(
        re.findall(r"\b(\w+): \[", block)
    )
    blind = Recipe.model_fields["blind"].annotation.__args__[0]
    missing = sorted(_keys(Recipe) - _keys(blind) - written)
    assert not missing, f"docs/recipes.md's reference block lacks {missing}"
    assert "templates" in written
    blind_page = (repo / "docs" / "blind_audit.md").read_text(encoding="utf-8")
    assert not [k for k in _keys(blind) if f"{k}:" not in blind_page]
    # and no key the code does not take (``curate`` is a mapping checked by CurateSpec)
    keys = set(re.findall(r"^\s*(?:- )?(\w+):", block, re.M))
    stale = sorted(keys - _keys(Recipe) - _keys(CurateSpec))
    assert not stale, f"docs/recipes.md's reference block names keys no recipe takes: {stale}"


def test_the_curation_page_names_every_curate_key(repo):
    """``curate`` is a free mapping in the recipe model, checked by ``CurateSpec``: its keys
    are documented in docs/curation.md's reference block."""
    page = (repo / "docs" / "curation.md").read_text(encoding="utf-8")
    block = page[page.index("```yaml\n") : page.index("```\n", page.index("```yaml\n") + 8)]
    written = set(re.findall(r"^\s*(\w+):", block, re.M))
    assert sorted(_keys(CurateSpec) - written) == []
