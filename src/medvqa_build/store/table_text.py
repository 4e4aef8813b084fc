"""Text tables (a dataset's CSV/TSV label files) checked under :mod:`.limits` before a parser
reads them; JSON annotation files read under the JSON limits (:func:`read_json_file`).

A table is scanned once in 1 MiB chunks before pandas or ``csv`` sees it, so a CSV padded with
NUL bytes to a gigabyte, or one line of a gigabyte, is one :class:`TableProblem` naming the
file and the limit, not a ``MemoryError`` inside pandas; so is a header naming one column twice
(pandas would rename the second, ``csv`` would keep the last: either silently reads the wrong
one). :class:`TableProblem` is a ``ValueError``: a table the whole part needs is then one
error line, one a single candidate needs quarantines that candidate
(``layouts.base.FileLayout.scan``).
"""

from __future__ import annotations

import csv
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from .json_text import JsonTooDeep, load_json
from .limits import ENV, box_count_problem, read_limits

_CHUNK = 1 << 20


def box_lines(
    path: str | os.PathLike, what: str = "box file", heads: int = 0, errors: str = "strict"
) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each non-blank line of a per-image box file (YOLO txt and the
    like), stripped, read one at a time after :func:`check_text_table` (text decoded with
    ``errors``); past ``heads`` leading lines (a count line) and
    ``max_boxes_per_image`` box lines it raises :class:`TableProblem` naming the limit, before
    the rest is read (no header declares how many boxes a file lists: a 60 MB file of valid
    lines is three million boxes for one image)."""
    path = Path(path)
    check_text_table(path, what)
    limit = read_limits().max_boxes_per_image
    n = 0
    with path.open(encoding="utf-8", errors=errors) as fh:
        for number, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line:
                continue
            n += 1
            if n > limit + heads:
                raise TableProblem(box_count_problem(n - heads, f"{what} {path.name}"))
            yield number, line


class TableProblem(ValueError):
    """A text table over a limit, not text, or with a column named twice."""


def check_text_table(
    path: str | os.PathLike, what: str = "label table", sep: str | None = None
) -> None:
    """Raise :class:`TableProblem` when ``path`` is over ``max_table_bytes``, holds a NUL byte
    (not a text table: a padded or binary file), a line over ``max_line_chars`` or, given its
    separator, a header naming a column twice; reads the file in 1 MiB chunks, so the check
    itself holds no more than that. A NUL byte is the refusal wherever it lies (after a long
    line too, so the message does not depend on the chunk size): a file with a long line is
    read to its end (at most ``max_table_bytes``) for one."""
    path = Path(path)
    limits = read_limits()
    size = path.stat().st_size
    if size > limits.max_table_bytes:
        raise _over(path, what, f"is {size:,} bytes", "max_table_bytes", limits.max_table_bytes)
    line = 0  # bytes of the current line so far (a byte bound on its characters)
    offset = 0
    long_at = None  # where the first line over max_line_chars was found
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            nul = chunk.find(b"\x00")
            if nul >= 0:  # a NUL anywhere is the refusal, whatever came before it
                raise TableProblem(
                    f"{what} {path.name} holds a NUL byte at byte {offset + nul:,}: not a text "
                    "table (a padded, cut or binary file); download it again"
                )
            offset += len(chunk)
            if long_at is not None:  # only a NUL can change the refusal now
                continue
            if offset == len(chunk) and sep is not None:
                _check_header(path, what, chunk, sep)
            last = chunk.rfind(b"\n")
            first = chunk.find(b"\n")
            longest = line + (first if first >= 0 else len(chunk))
            if limits.max_line_chars < len(chunk):  # a whole line inside one chunk may be over
                longest = max(longest, _longest_inner(chunk))
            if longest > limits.max_line_chars:
                long_at = offset - len(chunk)
            line = len(chunk) - last - 1 if last >= 0 else line + len(chunk)
    if long_at is None and line > limits.max_line_chars:  # the last line, without a newline
        long_at = offset - line
    if long_at is not None:
        raise _long_line(path, what, long_at, limits.max_line_chars)


def _long_line(path: Path, what: str, near: int, limit: int) -> TableProblem:
    problem = f"has a line of over {limit:,} characters (near byte {near:,})"
    return _over(path, what, problem, "max_line_chars", limit)


def _longest_inner(chunk: bytes) -> int:
    """The longest complete line inside ``chunk`` (between two of its newlines)."""
    longest, start = 0, chunk.find(b"\n")
    while start >= 0:
        end = chunk.find(b"\n", start + 1)
        if end < 0:
            break
        longest = max(longest, end - start - 1)
        start = end
    return longest


def read_json_file(path: str | os.PathLike, what: str = "annotation file"):
    """A dataset's JSON file parsed under ``max_json_bytes`` (checked on its size before it is
    read) and ``max_json_depth`` (:func:`~medvqa_build.store.json_text.load_json`); either
    limit raises a ``ValueError`` naming the file, as malformed JSON does."""
    path = Path(path)
    limit = read_limits().max_json_bytes
    size = path.stat().st_size
    if size > limit:
        raise _over(path, what, f"is {size:,} bytes", "max_json_bytes", limit)
    try:
        return load_json(path.read_bytes())
    except JsonTooDeep as exc:
        raise JsonTooDeep(f"{what} {path.name} is {exc}") from None


def _check_header(path: Path, what: str, head: bytes, sep: str) -> None:
    """A header naming one column twice (after stripping) is refused."""
    first = head.split(b"\n", 1)[0].decode("utf-8-sig", "replace")
    columns = [c.strip() for c in next(csv.reader([first], delimiter=sep), [])]
    twice = sorted(c for c, n in Counter(columns).items() if n > 1 and c)
    if twice:
        raise TableProblem(
            f"{what} {path.name} names column(s) {twice} more than once; which one holds the "
            "values is ambiguous: rename or remove the duplicate"
        )


def _over(path: Path, what: str, problem: str, name: str, limit: int) -> TableProblem:
    return TableProblem(
        f"{what} {path.name} {problem}, over the {name} limit of {limit:,}: a damaged or padded "
        f"file (download it again) or, if genuine, raise the limit ({ENV}={name}=...)"
    )
