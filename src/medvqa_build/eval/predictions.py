"""Prediction files as the clients write them, read into one list of rows.

* VLMEvalKit's result file (``<model>_<data>.xlsx`` or ``.csv``): ``index`` + ``prediction``,
  plus the TSV's own columns (``answer``, ``question``), which tell a file for another build.
* lmms-eval's ``--log_samples`` JSONL (``<time>_samples_<task>.jsonl``): a line per doc with
  ``doc_id``, ``target``, ``filtered_resps`` and, in older releases, ``doc`` (the HF row less its
  images, so ``item_id``). Without ``doc`` (lmms-eval 0.7), ``doc_id`` is the doc's position in
  the task's split: the build's ``test`` items in export order, multiple-choice ones for a
  ``*_mcq`` task and box answers for a ``*_grounding`` task.
* A plain JSONL or CSV: ``item_id`` (optionally ``rotation``) or ``index``, and ``prediction``;
  a ``build_fingerprint`` column or key, when present, must be the build's.

An ``index`` is a row of the build's VLMEvalKit export: the position of an item among the
multiple-choice items, plus ``k * 1_000_000`` for its ``k``-th circular rotation.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..export.vlmeval import CIRCULAR_STEP
from ..store.limits import read_limits
from ..store.workbook import WorkbookProblem, check_workbook


@dataclass(frozen=True)
class PredictionRow:
    """One reply. ``key`` is an item id (``by == "item_id"``) or a VLMEvalKit index."""

    key: str | int
    by: str  # "item_id" or "index"
    rotation: int
    text: str
    where: str  # "file:line" for messages
    carried: dict[str, Any] = field(default_factory=dict)  # answer/question/fingerprint


@dataclass
class PredictionFile:
    path: Path
    client: str  # "vlmeval", "lmms-eval" or "plain"
    rows: list[PredictionRow]


def _text(value: Any) -> str:
    """A reply cell as text (pandas/openpyxl give None or floats for empty or numeric cells)."""
    if value is None:
        return ""
    if isinstance(value, float) and value != value:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _first_string(value: Any) -> str | None:
    """lmms-eval's ``filtered_resps`` is ``[text]`` or ``[[text]]``: the first string."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        for v in value:
            s = _first_string(v)
            if s is not None:
                return s
    return None


def _int(value: Any, where: str, column: str) -> int:
    try:
        number = float(str(value).strip())
    except ValueError:
        number = float("nan")
    if not number.is_integer():
        raise UsageError(
            f"{column} {value!r} is not an integer", where=where, fix=f"give each row its {column}"
        )
    return int(number)


def _table_rows(records: Iterator[tuple[int, dict]], path: Path) -> PredictionFile:
    """VLMEvalKit result rows or plain rows of a CSV / spreadsheet."""
    rows: list[PredictionRow] = []
    client = "plain"
    for line, rec in records:
        rec = {str(k).strip(): v for k, v in rec.items() if k is not None}
        where = f"{path.name}:{line}"
        if "prediction" not in rec:
            raise UsageError(
                f"{path.name} has no 'prediction' column",
                where=str(path),
                fix="give one reply per row in a column named prediction",
            )
        carried = {k: _text(rec[k]) for k in ("answer", "question") if k in rec}
        if rec.get("build_fingerprint"):
            carried["build_fingerprint"] = _text(rec["build_fingerprint"])
        if rec.get("item_id") not in (None, ""):
            rotation = _int(rec.get("rotation") or 0, where, "rotation")
            key: str | int = _text(rec["item_id"])
            rows.append(PredictionRow(key, "item_id", rotation, _text(rec["prediction"]), where))
            rows[-1].carried.update(carried)
            continue
        if "index" not in rec:
            raise UsageError(
                f"{path.name} has neither an 'item_id' nor an 'index' column",
                where=str(path),
                fix="name each row's item by item_id, or by the index of the vlmeval export",
            )
        index = _int(rec["index"], where, "index")
        if "A" in rec:  # the TSV's option columns come back in VLMEvalKit's result file
            client = "vlmeval"
        key, rotation = index % CIRCULAR_STEP, index // CIRCULAR_STEP
        rows.append(PredictionRow(key, "index", rotation, _text(rec["prediction"]), where))
        rows[-1].carried.update(carried)
    return PredictionFile(path, client, rows)


def _read_csv(path: Path) -> PredictionFile:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        sample = fh.read(4096)
        fh.seek(0)
        delimiter = "\t" if path.suffix.lower() == ".tsv" or "\t" in sample.split("\n")[0] else ","
        reader = csv.DictReader(fh, delimiter=delimiter)
        return _table_rows(((n + 2, r) for n, r in enumerate(reader)), path)


def _read_xlsx(path: Path) -> PredictionFile:
    try:
        import openpyxl
    except ImportError:
        raise UsageError(
            f"reading {path.name} needs openpyxl, which is not installed",
            where=str(path),
            fix="pip install openpyxl, or pass VLMEvalKit's .csv result file instead",
        ) from None
    try:
        check_workbook(path)  # its declared sizes, before openpyxl builds any string
    except WorkbookProblem as exc:
        fix = "pass VLMEvalKit's .csv result instead, or raise the limit in MEDVQA_LIMITS"
        if "is not an .xlsx workbook" in str(exc):
            fix = "pass the .xlsx as VLMEvalKit wrote it, or its .csv result"
        raise UsageError(str(exc), where=str(path), fix=fix) from None
    book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        sheet = book.worksheets[0]
        lines = sheet.iter_rows(values_only=True)
        header = [str(h) if h is not None else None for h in next(lines, ())]
        records = (
            (n + 2, dict(zip(header, values, strict=False))) for n, values in enumerate(lines)
        )
        return _table_rows(
            ((n, r) for n, r in records if any(v is not None for v in r.values())), path
        )
    finally:
        book.close()


def _read_jsonl(path: Path) -> PredictionFile:
    rows: list[PredictionRow] = []
    client = None
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path.name}:{line_no}"
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                why = getattr(exc, "msg", "nested deeper than Python's recursion limit")
                raise UsageError(
                    f"line {line_no} is not JSON ({why})",
                    where=str(path),
                    fix="write one JSON object per line",
                ) from None
            if not isinstance(rec, dict):
                raise UsageError(f"line {line_no} is not a JSON object", where=str(path))
            kind = (
                "lmms-eval"
                if "doc_id" in rec and ("filtered_resps" in rec or "resps" in rec)
                else "plain"
            )
            if client is not None and kind != client:
                raise UsageError(
                    f"line {line_no} mixes lmms-eval samples and plain rows",
                    where=str(path),
                    fix="one kind of prediction per file",
                )
            client = kind
            rows.append(
                _lmms_row(rec, where, _lmms_kind(path))
                if kind == "lmms-eval"
                else _plain_row(rec, where)
            )
    return PredictionFile(path, client or "plain", rows)


def _lmms_kind(path: Path) -> str:
    """Which of the exported tasks wrote a samples file, from its name (``..._grounding``)."""
    return "lmms-grounding" if path.stem.endswith("_grounding") else "lmms-mcq"


def _lmms_row(rec: dict, where: str, kind: str) -> PredictionRow:
    doc = rec.get("doc") or {}
    text = _first_string(rec.get("filtered_resps"))
    if text is None:
        text = _first_string(rec.get("resps")) or ""
    carried: dict[str, Any] = {}
    for metric in ("accuracy", "iou"):
        if isinstance(rec.get(metric), int | float):
            carried[f"client_{metric}"] = float(rec[metric])
    if doc.get("item_id"):
        if isinstance(doc.get("answer"), str):
            carried["answer"] = doc["answer"]
        return PredictionRow(str(doc["item_id"]), "item_id", 0, text, where, carried)
    if kind == "lmms-mcq" and isinstance(rec.get("target"), str):
        carried["answer"] = rec["target"]  # the answer letter(s): tells a file of another build
    return PredictionRow(_int(rec["doc_id"], where, "doc_id"), kind, 0, text, where, carried)


def _plain_row(rec: dict, where: str) -> PredictionRow:
    if "prediction" not in rec:
        raise UsageError(
            "a row has no 'prediction'",
            where=where,
            fix='write {"item_id": ..., "prediction": ...}',
        )
    carried = {k: str(rec[k]) for k in ("answer", "build_fingerprint") if rec.get(k) is not None}
    text = rec["prediction"]
    if isinstance(text, list | tuple):  # a box given as numbers
        text = json.dumps(list(text))
    text = _text(text)
    if rec.get("item_id") is not None:
        rotation = _int(rec.get("rotation") or 0, where, "rotation")
        return PredictionRow(str(rec["item_id"]), "item_id", rotation, text, where, carried)
    if rec.get("index") is None:
        raise UsageError(
            "a row has neither item_id nor index",
            where=where,
            fix="name each row's item by item_id, or by the index of the vlmeval export",
        )
    index = _int(rec["index"], where, "index")
    return PredictionRow(
        index % CIRCULAR_STEP, "index", index // CIRCULAR_STEP, text, where, carried
    )


def _not_utf8(path: Path) -> UsageError:
    """The error for a text file that is not UTF-8, naming its first bad byte and line."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    offset, lines = 0, 1
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                at = max(0, exc.start - (len(exc.object) - len(block)))
                offset += at
                lines += block.count(b"\n", 0, at)
                break
            offset += len(block)
            lines += block.count(b"\n")
    return UsageError(
        f"the prediction file is not UTF-8 text (byte {offset:,}, line {lines})",
        where=str(path),
        fix="save it as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE > NEW, or pandas "
        "to_csv(..., encoding='utf-8'))",
    )


READERS = {".xlsx": _read_xlsx, ".csv": _read_csv, ".tsv": _read_csv, ".jsonl": _read_jsonl}


def read_predictions(path: str | Path) -> PredictionFile:
    """The rows of one prediction file, its client told from its name and columns."""
    path = Path(path)
    if not path.is_file():
        raise UsageError("no such prediction file", where=str(path), fix="check the path")
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise UsageError(
            f"cannot read {path.suffix or 'a file without suffix'} predictions",
            where=str(path),
            fix="pass VLMEvalKit's .xlsx/.csv result, lmms-eval's samples .jsonl, or a plain "
            ".jsonl/.csv with item_id (or index) and prediction",
        )
    size, limit = path.stat().st_size, read_limits().max_table_bytes
    if size > limit:
        raise UsageError(
            f"the prediction file has {size:,} bytes, over max_table_bytes={limit:,}",
            where=str(path),
            fix="split it into several files (score takes many), or raise the limit in "
            "MEDVQA_LIMITS",
        )
    try:
        found = reader(path)
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except csv.Error as exc:  # a field over csv's limit, a NUL byte
        raise UsageError(
            f"the prediction file is not a readable CSV ({exc})",
            where=str(path),
            fix="write it with a CSV writer (pandas to_csv), UTF-8, one reply per row",
        ) from None
    if not found.rows:
        raise UsageError(
            "the prediction file is empty", where=str(path), fix="pass a file with replies"
        )
    return found


__all__ = ["PredictionFile", "PredictionRow", "read_predictions"]
