"""What a build writes from text it was given (issue 33, output hygiene), through the CLI: a
source whose manifest title holds HTML and whose citation holds a code fence, and a recipe
whose task names begin with ``=`` and ``@``.

The card shows the HTML as text and keeps its fences closed; the VLMEvalKit TSV keeps the
cells as the model must see them, and the formula-like ones are warned about and counted in
the export's stats and the build report.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json

import yaml

from medvqa_build import sources
from medvqa_build.cli import main

from ..conftest import REPO
from ..fixtures.sources import kvasir

TITLE = "Kvasir <script>alert('x')</script> & <b>bold</b>"
TASK = '=HYPERLINK("http://evil.example","click")'
CATEGORY = "@SUM(1+1)"


def _hostile_manifest(folder) -> None:
    manifest = yaml.safe_load((REPO / "manifests" / "kvasir.yaml").read_text())
    manifest.update(id="kvasir-hostile", title=TITLE, access_terms="use <i>freely</i> | cite")
    manifest["citation"] = manifest["citation"] + "```\n<img src=x onerror=alert(1)>\n"
    folder.mkdir()
    (folder / "kvasir-hostile.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True))


def test_html_in_the_card_is_text_and_formula_cells_are_flagged(tmp_path, monkeypatch, caplog):
    _hostile_manifest(tmp_path / "manifests")
    monkeypatch.setenv("MEDVQA_MANIFESTS", str(tmp_path / "manifests"))
    sources._load_all.cache_clear()
    try:
        root = kvasir.write(tmp_path / "data", per_class=3)
        recipe = {
            "name": "hostile",
            "benchmark": "Hostile",
            "seed": 0,
            "embedder": "offline",
            "sources": [{"id": "kvasir-hostile", "root": str(root)}],
            "tasks": [
                {
                    "name": "lesion",
                    "generator": "image_classification",
                    "category": CATEGORY,
                    "task": TASK,
                    "quota": 12,
                    "n_options": 4,
                }
            ],
            "export": {"name": "Hostile", "formats": ["hf", "vlmeval"]},
        }
        path = tmp_path / "recipe.yaml"
        path.write_text(yaml.safe_dump(recipe))
        out = tmp_path / "build"
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["run", str(path), "-o", str(out), "-q"])
        assert code == 0, err.getvalue()
    finally:
        monkeypatch.delenv("MEDVQA_MANIFESTS")
        sources._load_all.cache_clear()

    card = (out / "hf" / "README.md").read_text()
    assert (
        "### Kvasir &lt;script&gt;alert('x')&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in card
    )
    assert "<script>" not in card and "<b>" not in card
    assert "use &lt;i&gt;freely&lt;/i&gt; | cite" in card
    # the citation's own ``` cannot close its block: the tag after it stays code
    lines = card.splitlines()
    start = lines.index("````bibtex")
    assert lines.index("<img src=x onerror=alert(1)>") < lines.index("````", start)
    assert '| =HYPERLINK("http://evil.example","click") \\| ' not in card

    with (out / "vlmeval" / "Hostile.tsv").open(newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert rows and all(r["task"] == TASK and r["category"] == CATEGORY for r in rows)
    text = [v for r in rows for k, v in r.items() if k not in ("index", "image", "image_path")]
    flagged = sum(v.startswith(("=", "+", "-", "@")) for v in text)
    assert flagged == 4 * len(rows)  # category, l2-category, task, subtask (the task's name)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(m.startswith(f"vlmeval: {flagged} cell(s) begin with = + - @") for m in warned)
    report = json.loads((out / "report.json").read_text())
    cells = report["formula_cells"]["vlmeval"]
    assert cells["cells"] == flagged
    assert cells["examples"] == [
        "0:category",
        "0:l2-category",
        "0:task",
        "0:subtask",
        "1:category",
    ]
    assert (
        f"Export vlmeval: {flagged} cell(s) begin with = + - @" in (out / "report.md").read_text()
    )

    # the score's leaderboard row for the card: the model's name is text too
    from medvqa_build.pipeline import BuildDir

    predictions = tmp_path / "model.jsonl"
    predictions.write_text(
        "".join(
            json.dumps({"item_id": i.item_id, "prediction": "<b>A</b>"}) + "\n"
            for i in BuildDir.open(out).items()
        )
    )
    scores = tmp_path / "scores"
    model = "<img src=x onerror=alert(1)>"
    with contextlib.redirect_stdout(io.StringIO()):
        argv = ["score", str(out), str(predictions), "-o", str(scores), "--card"]
        assert main([*argv, "--model", model]) == 0
    board = (scores / "leaderboard.md").read_text()
    assert "| &lt;img src=x onerror=alert(1)&gt; |" in board and "<img" not in board
