"""No function of the package takes more than 8 positional parameters (issue 34.6): past that,
a call reads as a row of values whose meaning depends on their order (``push`` once took 14).
Such a function takes its options as keyword-only arguments (after ``*``) or as one parameter
object. ``self`` and ``cls`` do not count."""

from __future__ import annotations

import ast
from pathlib import Path

import medvqa_build

PACKAGE = Path(medvqa_build.__file__).resolve().parent
MAX_POSITIONAL = 8


def positional(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names a caller may pass by position."""
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def long_signatures(source: str, name: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names = positional(node)
            if len(names) > MAX_POSITIONAL:
                out.append(f"{name}:{node.lineno} {node.name}({', '.join(names)})")
    return out


def test_the_rule_counts_positional_parameters_only():
    nine = ", ".join(f"a{i}" for i in range(9))
    assert long_signatures(f"def f({nine}): pass", "m") == [f"m:1 f({nine})"]
    assert long_signatures(f"def f(a0, *, {nine}): pass", "m") == []
    assert long_signatures(f"class C:\n    def m(self, {nine[4:]}): pass", "m") == []
    assert long_signatures(f"async def f(self, {nine}, /): pass", "m") != []


def test_no_function_takes_more_than_eight_positional_parameters():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100  # the whole package is read, not an empty folder
    found = [
        hit
        for path in files
        for hit in long_signatures(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE)))
    ]
    assert not found, (
        "make the options keyword-only (after *) or one parameter object: " + "; ".join(found)
    )
