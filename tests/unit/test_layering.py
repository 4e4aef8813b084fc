"""The package's layers (ARCHITECTURE.md): imports only go down, there is no import cycle, and
an import inside a function is there only for a module that needs an optional dependency.

    core contracts and storage -> inputs -> domain libraries -> stages -> pipeline -> surface
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

import pytest

import medvqa_build

PACKAGE = Path(medvqa_build.__file__).resolve().parent
LAYERS = {
    # core: contracts, vocabularies and disk primitives, importing nothing above them
    "_version": 0, "errors": 0, "registry": 0, "rng": 0, "vocab": 0, "records": 0, "schema": 0,
    "geometry": 0, "ontology": 0, "store": 0, "licences": 0, "view": 0, "markdown": 0,
    # inputs: what a build reads
    "recipe": 1, "manifest": 1, "media": 1, "layouts": 1, "sources": 1,
    # domain libraries
    "tasks": 2, "negatives": 2, "render": 2, "curate": 2, "validate": 2, "export": 2, "eval": 2,
    # the stages and where their work runs
    "stages": 3, "executors": 3,
    # chaining the stages; the build folder
    "pipeline": 4,
    # the surface
    "api": 5, "cli": 5, "review": 5, "release": 5, "__init__": 5, "__main__": 5,
}  # fmt: skip
# the order among the domain packages (issue 34.5): a package imports only packages of a lower
# rank, so there is no cycle between them. Candidate answers (negatives) and pixels (render)
# know no task; generators plan items from both; validation checks what they made; curation
# (dedup, splits, the blind drop) uses validation's audit; exports publish curated items with
# their audit; evaluation reads exports. Shared helpers sit below all of them: content hashes
# in media.phash, item groups in records, a guess's chance in vocab.
DOMAIN = {
    "negatives": 0,
    "render": 0,
    "tasks": 1,
    "validate": 1,
    "curate": 2,
    "export": 3,
    "eval": 4,
}
# arrows the ranks and layers allow that the design forbids (issue 34.5), package -> packages
# it may not import: generators plan shapes and renderers draw them (tasks rank above render
# for what they share, never through it: shapes are records, box helpers geometry); the
# licence gate reads the build's record of its sources' terms, not the registry; the recipe
# model imports no plug-in (its plug-in names are checked in pipeline/recipes.py)
FORBIDDEN = {
    "tasks": {"render"},
    "export": {"sources"},
    "recipe": {"sources", "layouts"},
}
# modules that import an optional dependency (ray, torch/open_clip, scikit-learn) at their top,
# with that dependency: the only targets an import inside a function may have, so a build
# without the extra still imports
OPTIONAL = {
    "executors.ray_executor": "ray",
    "negatives.open_clip_embedder": "open_clip",
    "validate.blind_sklearn": "sklearn",
}
# the CLI's command modules import the API inside the command that runs (issue 28): `--help`
# and a no-op rerun then never load the pipeline and its libraries
DEFERRED = {("cli", "api")}


def _allowed_inside(module: str, target: str) -> bool:
    return target in OPTIONAL or (module.split(".")[0], target) in DEFERRED


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _target(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    """The package modules an import statement loads (a name may be a submodule)."""
    if node.level == 0:
        if not (node.module or "").startswith("medvqa_build"):
            return []
        base = node.module.split(".")[1:]
    else:
        base = (
            module.split(".")
            if path.name == "__init__.py" and module != "__init__"
            else (module.split(".")[:-1])
        )
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        base = base + (node.module.split(".") if node.module else [])
    name = ".".join(base) or "__init__"
    subs = [f"{name}.{a.name}" if base else a.name for a in node.names]
    out = [s for s in subs if s in MODULES]
    if name in MODULES and len(out) < len(subs):  # a name defined in the module itself
        out.append(name)
    return out


def _imports() -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """Module-level import graph, and every import inside a function."""
    graph: dict[str, set[str]] = defaultdict(set)
    inner = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        functions = [
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        nested = {id(n) for f in functions for n in ast.walk(f) if isinstance(n, ast.ImportFrom)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            for target in _target(module, path, node):
                if target == module:
                    continue
                if id(node) in nested:
                    inner.append((module, target, node.lineno))
                else:
                    graph[module].add(target)
    return graph, inner


def _layer(module: str) -> int:
    return LAYERS[module.split(".")[0]]


@pytest.mark.parametrize("module", sorted(set(MODULES) - {"__main__"}))
def test_every_module_imports(module):
    """Also the modules no other module imports at start (a stale import shows here)."""
    if module in OPTIONAL:
        pytest.importorskip(OPTIONAL[module])
    importlib.import_module("medvqa_build" + ("" if module == "__init__" else f".{module}"))


def test_every_module_has_a_layer():
    assert not [m for m in MODULES if m.split(".")[0] not in LAYERS]


def test_imports_only_go_down():
    graph, _ = _imports()
    upward = sorted(
        f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})"
        for m, targets in graph.items()
        for t in targets
        if _layer(t) > _layer(m)
    )
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    graph, _ = _imports()
    # Tarjan's strongly connected components: a component of two or more is a cycle
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_imports_inside_functions_only_for_optional_dependencies():
    _, inner = _imports()
    bad = sorted(f"{m}:{line} imports {t}" for m, t, line in inner if not _allowed_inside(m, t))
    assert not bad, "\n".join(bad)


def test_no_function_is_longer_than_80_lines():
    """Long functions hide their steps (issue 24): split them into named helpers."""
    long = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n >= 80:
                    long.append(f"{module}.{node.name}: {n} lines")
    assert not long, long


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Module graph -> package graph (the first name of each module)."""
    out: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        for target in targets:
            a, b = module.split(".")[0], target.split(".")[0]
            if a != b:
                out[a].add(b)
    return out


def against_rank(graph: dict[str, set[str]]) -> list[str]:
    """Imports between domain packages that do not go to a lower rank, module by module."""
    return sorted(
        f"{m} (rank {DOMAIN[m.split('.')[0]]}) imports {t} (rank {DOMAIN[t.split('.')[0]]})"
        for m, targets in graph.items()
        for t in targets
        if m.split(".")[0] in DOMAIN
        and t.split(".")[0] in DOMAIN
        and m.split(".")[0] != t.split(".")[0]
        and DOMAIN[t.split(".")[0]] >= DOMAIN[m.split(".")[0]]
    )


def forbidden(graph: dict[str, set[str]]) -> list[str]:
    """Imports along an arrow of :data:`FORBIDDEN`, module by module."""
    return sorted(
        f"{m} imports {t}"
        for m, targets in graph.items()
        for t in targets
        if t.split(".")[0] in FORBIDDEN.get(m.split(".")[0], ())
    )


def package_cycles(graph: dict[str, set[str]]) -> list[str]:
    """The packages that reach themselves through imports of other packages."""
    packages = _package_graph(graph)

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in packages.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    return sorted(p for p in list(packages) if p in reach(p))


def layering_problems(graph: dict[str, set[str]]) -> list[str]:
    """Everything the package-level tests below refuse, for one module graph."""
    return against_rank(graph) + forbidden(graph) + package_cycles(graph)


def test_domain_packages_import_only_lower_ranks():
    """card -> eval (while eval imports export), validate -> curate (while curate's blind drop
    imports validate) and the like fail here, each named with the modules that import."""
    graph, _ = _imports()
    assert set(DOMAIN) == {p for p, layer in LAYERS.items() if layer == 2}
    bad = against_rank(graph)
    assert not bad, "\n".join(bad)


def test_no_forbidden_arrow():
    """tasks -> render, export -> sources and recipe -> sources fail here."""
    assert set(FORBIDDEN) <= set(LAYERS)
    assert all(set(targets) <= set(LAYERS) for targets in FORBIDDEN.values())
    graph, _ = _imports()
    bad = forbidden(graph)
    assert not bad, "\n".join(bad)


def test_no_cycle_between_packages():
    """Package by package (not only module by module): a cycle through two packages means
    neither can be understood, or replaced, without the other."""
    graph, _ = _imports()
    cycles = package_cycles(graph)
    assert not cycles, f"packages on a cycle: {cycles}"


# the arrows issue 34 found (its point 6), each added to the package's own import graph: the
# tests above must fail on every one of them
ISSUE_ARROWS = {
    "a generator imports a renderer": [("tasks.base", "render")],
    "a common task helper imports a renderer": [("tasks.common", "render")],
    "visual grounding imports a renderer": [("tasks.visual_grounding", "render")],
    "MedSG draws at generate time": [("tasks.medsg_common", "render.base")],
    "the card imports eval, eval imports export": [
        ("export.card", "eval.scoring"),
        ("eval.score", "export.common"),
    ],
    "curate and validate import each other": [
        ("curate.blind_drop", "validate.blind"),
        ("validate.rules", "curate.splits"),
    ],
    "validate's contamination check imports curate": [("validate.contamination", "curate.dedup")],
    "the licence gate reads the source registry": [("export.licence_gate", "sources")],
    "the recipe model imports a plug-in": [("recipe", "sources")],
}


@pytest.mark.parametrize("arrow", sorted(ISSUE_ARROWS))
def test_the_layering_tests_fail_on_each_arrow_of_the_issue(arrow):
    graph, _ = _imports()
    assert layering_problems(graph) == []  # the package as it is passes
    synthetic = {m: set(t) for m, t in graph.items()}
    for module, target in ISSUE_ARROWS[arrow]:
        assert module in MODULES and target in MODULES, (module, target)
        synthetic.setdefault(module, set()).add(target)
    problems = layering_problems(synthetic)
    assert problems, arrow
    for module, target in ISSUE_ARROWS[arrow]:
        if target.split(".")[0] in FORBIDDEN.get(module.split(".")[0], ()) or (
            module.split(".")[0] in DOMAIN
            and target.split(".")[0] in DOMAIN
            and DOMAIN[target.split(".")[0]] >= DOMAIN[module.split(".")[0]]
        ):
            assert any(p.startswith(f"{module} ") and target in p for p in problems), problems
