"""Property-based fuzzing of what users and datasets hand the CLI (issue 27, point 6): recipe
YAML (text, bytes, structure, aliases, ``--set``) and each source's annotation files (CSV,
JSON, TXT, CFG, XML, XLSX of the fixture replicas), mutated by hypothesis.

Whatever the input, the CLI ends with exit code 0, 1 or 2; a non-zero exit prints exactly one
``error:`` line and never a traceback (an uncaught exception fails the test with it).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from medvqa_build.cli import main
from medvqa_build.sources import all_sources

from ..fixtures import fixture_writer

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,  # one seed: the same examples on every run and machine
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a guard, reported as found
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _cli(argv: list[str]) -> tuple[int, str]:
    """Exit code and stderr of one in-process CLI call."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def _one_line_outcome(code: int, stderr: str) -> None:
    assert code in (0, 1, 2), (code, stderr)
    assert "Traceback" not in stderr, stderr
    if code:
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, stderr
        assert len(errors[0]) < 2000, errors[0][:300]


# -- values YAML and JSON can hold -------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(node, prefix=()):
    """Every path to a node of a nested dict/list, the root included."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _replace(node, path, value):
    if not path:
        return value
    node = copy.deepcopy(node)
    parent = node
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return node


@st.composite
def mutated_tree(draw, base):
    """``base`` with one node replaced by an arbitrary value, or a key added to a mapping."""
    paths = list(_paths(base))
    path = draw(st.sampled_from(paths))
    if draw(st.booleans()):
        return _replace(base, path, draw(values))
    target = base
    for key in path:
        target = target[key]
    if isinstance(target, dict):
        extra = {**target, draw(st.text(max_size=12)): draw(values)}
        return _replace(base, path, extra)
    return _replace(base, path, draw(values))


# -- recipes -----------------------------------------------------------------------------------


def _base_recipe(missing: Path) -> dict:
    """A valid recipe whose one source is absent: a run stops after reading it (exit 2)."""
    return {
        "name": "fuzz",
        "benchmark": "Fuzz",
        "seed": 0,
        "embedder": "offline",
        "sources": [{"id": "vindr-spinexr", "root": str(missing)}],
        "tasks": [
            {
                "name": "diagnosis",
                "generator": "image_classification",
                "category": "Lesion Analysis and Grading",
                "task": "Lesion Type Identification",
                "quota": 5,
                "n_options": 4,
                "negatives": {"strategy": "label_pool"},
                "prompt_level": "image",
            }
        ],
        "render": {"format": "jpeg", "jpeg_quality": 90},
        "export": {"name": "Fuzz", "formats": ["hf"]},
    }


@pytest.fixture(scope="module")
def recipe_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("recipes")


def _run_recipe(folder: Path, data: bytes, overrides: tuple[str, ...] = ()) -> tuple[int, str]:
    work = Path(tempfile.mkdtemp(dir=folder))
    try:
        recipe = work / "recipe.yaml"
        recipe.write_bytes(data)
        argv = ["run", str(recipe), "-o", str(work / "build"), "-q"]
        for item in overrides:
            argv += ["--set", item]
        return _cli(argv)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _dump(tree) -> bytes:
    return yaml.safe_dump(tree, sort_keys=False, allow_unicode=True).encode("utf-8")


@SETTINGS
@given(data=st.data())
def test_structurally_mutated_recipes_end_in_one_line(recipe_dir, data):
    tree = data.draw(mutated_tree(_base_recipe(recipe_dir / "missing")))
    _one_line_outcome(*_run_recipe(recipe_dir, _dump(tree)))


@SETTINGS
@given(text=st.text(max_size=200))
def test_arbitrary_text_recipes_end_in_one_line(recipe_dir, text):
    _one_line_outcome(*_run_recipe(recipe_dir, text.encode("utf-8")))


@SETTINGS
@given(cut=st.integers(0, 600), junk=st.text(max_size=20))
def test_truncated_recipes_end_in_one_line(recipe_dir, cut, junk):
    text = _dump(_base_recipe(recipe_dir / "missing"))
    _one_line_outcome(*_run_recipe(recipe_dir, text[:cut] + junk.encode("utf-8")))


OVERRIDE_KEYS = st.sampled_from(
    ["seed", "name", "benchmark", "tasks.0.quota", "tasks.0.params", "tasks.9.quota", "curate",
     "sources.0.root", "render.format", "export.formats", "quota_scale", "x.y.z", "tasks.-1"]
)  # fmt: skip
YAML_FRAGMENTS = st.sampled_from(
    ["[", "{a", "*x", "&a [*a, *a]", "!!python/object/apply:os.system [true]", ": :", "'", "\t",
     "[[[[[[[[[[", "1e999", "-.inf", "null", "~", "{}", "[]", "!!binary AAAA", "%YAML 9.9"]
)  # fmt: skip


@SETTINGS
@given(
    overrides=st.lists(
        st.text(max_size=40)
        | st.builds(lambda k, v: f"{k}={v}", OVERRIDE_KEYS, YAML_FRAGMENTS | st.text(max_size=20)),
        min_size=1,
        max_size=3,
    )
)
def test_fuzzed_set_overrides_end_in_one_line(recipe_dir, overrides):
    text = _dump(_base_recipe(recipe_dir / "missing"))
    _one_line_outcome(*_run_recipe(recipe_dir, text, tuple(overrides)))


@SETTINGS
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_recipes_end_in_one_line(recipe_dir, data):
    _one_line_outcome(*_run_recipe(recipe_dir, data))


def _alias_chain(depth: int, width: int) -> str:
    """YAML whose aliases expand to ``width ** depth`` items ("billion laughs")."""
    lines = ["a0: &a0 [lol]"]
    for k in range(1, depth + 1):
        lines.append(f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * width)}]")
    return "\n".join(lines), f"*a{depth}"


@SETTINGS
@given(
    depth=st.integers(1, 5),  # at most 6**5 items: the structure, not the bomb (test_hostile)
    width=st.integers(2, 6),
    where=st.sampled_from(["curate", "params", "benchmark", "tasks"]),
)
def test_alias_expansions_end_in_one_line(recipe_dir, depth, width, where):
    anchors, alias = _alias_chain(depth, width)
    text = _dump(_base_recipe(recipe_dir / "missing")).decode("utf-8")
    if where == "params":
        text = text.replace("prompt_level: image", f"prompt_level: image\n  params: {alias}")
    elif where == "tasks":
        text = text.replace("tasks:\n", f"tasks: {alias}\nunused:\n")
    else:
        text = (
            text.replace(f"{where}: Fuzz", f"{where}: {alias}")
            if where == "benchmark"
            else (text + f"curate: {alias}\n")
        )
    recipe = f"x-anchors:\n  {anchors.replace(chr(10), chr(10) + '  ')}\n{text}"
    _one_line_outcome(*_run_recipe(recipe_dir, recipe.encode("utf-8")))


# -- annotation files --------------------------------------------------------------------------

ANNOTATION_SUFFIXES = (".csv", ".json", ".txt", ".cfg", ".xml", ".xlsx")
NOT_ANNOTATIONS = re.compile(r"(LICENSE|SHA256SUMS|README)", re.IGNORECASE)


def _annotation_files(root: Path) -> list[str]:
    """One annotation file of each kind in a replica (kind: suffix and name with digits
    folded, so 200 per-image TXT files count once)."""
    kinds: dict[tuple[str, str], str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        kind = (path.suffix.lower(), re.sub(r"\d+", "#", rel))
        wanted = kind[0] in ANNOTATION_SUFFIXES and not NOT_ANNOTATIONS.search(path.name)
        if wanted and path.is_file():
            kinds.setdefault(kind, rel)
    return sorted(kinds.values())


def _cases() -> list[tuple[str, str]]:
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for source in sorted(all_sources()):
            writer = fixture_writer(source)
            if writer is None:
                continue
            root = Path(tmp) / source
            writer(root)
            cases += [(source, rel) for rel in _annotation_files(root)]
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory) -> dict[str, Path]:
    """Each source's replica, written once and restored after every example."""
    base = tmp_path_factory.mktemp("replicas")
    out = {}
    for source in sorted({s for s, _ in CASES}):
        fixture_writer(source)(base / source)
        out[source] = base / source  # the folder holding the download, as in _cases
    return out


@st.composite
def mutated_file(draw, original: bytes, suffix: str):
    """New bytes for an annotation file: random bytes, a cut, a line changed, dropped or
    doubled, a cell changed, or (JSON) one node replaced by any JSON value."""
    kinds = ["bytes", "cut"]
    text = None
    if suffix != ".xlsx":
        try:
            text = original.decode("utf-8")
            kinds += ["line", "drop", "double", "cell"]
        except UnicodeDecodeError:
            pass
    if suffix == ".json" and text is not None:
        kinds += ["json"] * 3
    kind = draw(st.sampled_from(kinds))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "cut":
        return original[: draw(st.integers(0, max(0, len(original) - 1)))]
    if kind == "json":
        tree = json.loads(text)
        mutated = draw(mutated_tree(tree))
        return json.dumps(mutated, allow_nan=True).encode("utf-8")
    lines = text.splitlines(keepends=True) or [""]
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "line":
        lines[i] = draw(st.text(max_size=60)) + "\n"
    elif kind == "drop":
        del lines[i]
    elif kind == "double":
        lines.insert(i, lines[i])
    else:  # one comma/space separated cell of the line
        cells = re.split(r"([,\t; ])", lines[i].rstrip("\n"))
        j = draw(st.integers(0, len(cells) - 1))
        cells[j] = draw(st.text(max_size=20) | st.sampled_from(["", "nan", "-1", "1e309", '"']))
        lines[i] = "".join(cells) + "\n"
    return "".join(lines).encode("utf-8")


@pytest.mark.parametrize(("source", "rel"), CASES, ids=[f"{s}:{r}" for s, r in CASES])
def test_mutated_annotation_files_end_in_one_line(replicas, tmp_path, source, rel):
    path = replicas[source] / rel
    original = path.read_bytes()

    @settings(SETTINGS, max_examples=20)
    @given(data=st.data())
    def check(data):
        path.write_bytes(data.draw(mutated_file(original, path.suffix.lower())))
        out = Path(tempfile.mkdtemp(dir=tmp_path))
        try:
            code, stderr = _cli(
                ["convert", source, str(replicas[source]), "-o", str(out / "s.parquet"), "-q"]
            )
        finally:
            path.write_bytes(original)
            shutil.rmtree(out, ignore_errors=True)
        _one_line_outcome(code, stderr)

    check()
