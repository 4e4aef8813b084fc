"""YAML a user hands the tool (recipes, manifests, ``--set`` values), read defensively.

A recipe is a few kilobytes of text. A file that is not UTF-8, a "billion laughs" whose
aliases expand to gigabytes, a 10 MB string or a list of millions must end in one line naming
the file and the key, never in a traceback from the parser, pydantic or Arrow far downstream.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 32 << 20  # a recipe or manifest is a few kB; larger is no recipe
MAX_STRING = 4096  # the longest path most file systems accept
MAX_LIST = 10_000  # entries of one list or mapping
MAX_NODES = 200_000  # values after aliases are expanded (a "billion laughs" has 10^9)
# levels of nesting; a recipe has under ten. An alias inside its own anchor (``&a [*a]``) is a
# value nested without end: without this cap the walk's key paths grow with the depth and
# fill memory long before MAX_NODES is reached
MAX_DEPTH = 64


class YamlProblem(ValueError):
    """Why a YAML text cannot be used; the caller wraps it into its one-line error."""


def read_utf8(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text: :class:`YamlProblem` when it is not a regular file, too large or
    not UTF-8 (naming the first bad byte and its offset)."""
    path = Path(path)
    if not path.is_file():
        raise YamlProblem("not a regular file (a folder or a special file)")
    size = path.stat().st_size
    if size > max_bytes:
        raise YamlProblem(f"file is {size:,} bytes, more than the {max_bytes:,} allowed")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlProblem(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None


def load(text: str, loader: type = yaml.SafeLoader) -> Any:
    """Parse with ``loader`` (a safe one); a parse error becomes :class:`YamlProblem` (one
    line), and the value is checked by :func:`check_sizes`."""
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506  (callers pass safe loaders)
    except yaml.YAMLError as exc:
        raise YamlProblem(f"not valid YAML ({' '.join(str(exc).split())})") from None
    except RecursionError:
        raise YamlProblem("not valid YAML (nested too deeply)") from None
    check_sizes(data)
    return data


def check_sizes(
    data: Any,
    max_string: int = MAX_STRING,
    max_list: int = MAX_LIST,
    max_nodes: int = MAX_NODES,
    prefix: str = "",
) -> None:
    """Raise :class:`YamlProblem` naming the first key whose string or list is too long, or
    when the value has more than ``max_nodes`` values once its aliases are expanded (the
    walk counts a shared value each time it is reached, and stops at the budget)."""
    nodes = 0
    stack: list[tuple[str, Any, int]] = [(prefix, data, 0)]
    while stack:
        key, value, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise YamlProblem(
                f"more than {max_nodes:,} values once its aliases are expanded (an alias "
                "bomb?); write the values out instead of repeating anchors"
            )
        where = key or "(top level)"
        if depth > MAX_DEPTH:
            head = ".".join(where.split(".")[:3])
            raise YamlProblem(
                f"{head}…: nested more than {MAX_DEPTH} levels (an alias inside its own "
                "anchor?); write the values out"
            )
        if isinstance(value, str):
            if len(value) > max_string:
                raise YamlProblem(
                    f"{where}: string of {len(value):,} characters, more than {max_string:,}"
                )
        elif isinstance(value, dict):
            if len(value) > max_list:
                raise YamlProblem(f"{where}: {len(value):,} keys, more than {max_list:,}")
            for k, v in value.items():
                stack.append((f"{key}.{k}" if key else str(k), v, depth + 1))
                if isinstance(k, str) and len(k) > max_string:
                    raise YamlProblem(f"{where}: a key of {len(k):,} characters")
        elif isinstance(value, list | tuple):
            if len(value) > max_list:
                raise YamlProblem(f"{where}: list of {len(value):,} items, more than {max_list:,}")
            stack.extend(
                (f"{key}.{i}" if key else str(i), v, depth + 1) for i, v in enumerate(value)
            )
