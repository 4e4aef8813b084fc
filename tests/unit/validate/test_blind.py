"""The text-only (blind) audit: a planted shortcut (the answer is always the longest option,
or always the most frequent one) is flagged far above chance, honest items stay near chance,
the result is deterministic, scikit-learn is optional, and the language-model mode asks an
OpenAI-compatible endpoint once per prompt (a local server written here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest

from medvqa_build.errors import AuditError, RecipeError
from medvqa_build.recipe import BlindSpec, Recipe
from medvqa_build.records import Item
from medvqa_build.validate import run_rules
from medvqa_build.validate.blind import BlindAudit, _rank_within, blind_table, run_audit
from medvqa_build.vocab import LETTERS

pytest.importorskip("sklearn")

NAMES = ["polyp", "ulcer", "erosion", "bleeding", "angiectasia", "erythema", "cancer", "cyst"]
QUESTIONS = ["Which finding is shown?", "What does this image show?", "Identify the finding."]


def _items(task: str, n: int = 120, plant: str | None = None, seed: int = 0) -> list[Item]:
    """``n`` four-option items over ``NAMES`` with balanced answer letters; ``plant``
    rewrites the truth so that it is the longest option, or always the same label."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        truth = NAMES[k % len(NAMES)] if plant != "frequent" else "polyp"
        others = [x for x in NAMES if x != truth]
        distractors = [others[j] for j in rng.choice(len(others), 3, replace=False)]
        if plant == "longest":
            truth = f"{truth} with irregular raised margins"
        at = k % 4
        options = distractors[:at] + [truth] + distractors[at:]
        out.append(
            Item(
                item_id=f"{task}-{k:04d}",
                benchmark="B",
                category="C",
                task=task,
                subtask=task,
                source="s",
                sample_ids=(f"s{k}",),
                images=(f"source://s/{k}.png",),
                question=QUESTIONS[k % 3],
                options=tuple(options),
                answer=LETTERS[at],
                gt=truth,
            )
        )
    return out


def _row(report: dict, task: str) -> dict:
    return next(t for t in report["tasks"] if t["task"] == task)


def test_planted_shortcuts_are_flagged_and_honest_items_are_not():
    items = _items("honest") + _items("longest", plant="longest")
    items += _items("frequent", plant="frequent")
    report = run_audit(items, BlindSpec(), seed=0)
    honest, longest, frequent = (_row(report, t) for t in ("honest", "longest", "frequent"))
    assert honest["chance"] == longest["chance"] == 0.25
    assert not honest["flagged"] and honest["accuracy"] < 0.25 + 0.15
    assert honest["confident"] == 0
    for row in (longest, frequent):
        assert row["flagged"] and row["accuracy"] > 0.9 and row["z"] > 10, row
        assert row["verdict"] == "answerable without the image"
    confident = {c["item_id"] for c in report["confident"]}
    assert len(confident) == longest["confident"] + frequent["confident"] > 200
    assert all(c["probability"] >= 0.9 for c in report["confident"])
    assert not any(i.startswith("honest") for i in confident)
    table = "\n".join(blind_table(report))
    assert "| longest | 120 |" in table and "**answerable without the image**" in table


def test_the_rule_names_the_flagged_task_and_leaves_its_report():
    items = _items("honest") + _items("longest", plant="longest")
    findings: dict = {}
    problems = run_rules(items, None, None, Path, rules=["blind"], blind=BlindSpec(),
                         findings=findings)  # fmt: skip
    assert [(p.item_id, p.check) for p in problems] == [("task:longest", "blind")]
    assert "answerable without the image" in problems[0].message
    assert findings["blind"]["status"] == "ok" and findings["blind"]["items"] == 240
    # without a blind spec the rule checks nothing and reports nothing
    findings = {}
    assert run_rules(items, None, None, Path, rules=["blind"], findings=findings) == []
    assert findings == {}


def test_audit_is_deterministic_and_follows_the_seed():
    items = _items("honest", 80) + _items("longest", 80, plant="longest")
    a, b = run_audit(items, BlindSpec(), 3), run_audit(items, BlindSpec(), 3)
    assert a == b
    assert run_audit(items, BlindSpec(), 4)["tasks"][1]["flagged"]


def test_too_few_items_give_no_verdict_and_multi_select_is_judged_as_a_set():
    items = _items("small", 12, plant="longest")
    report = run_audit(items, BlindSpec(), 0)
    assert report["items"] == 12
    row = _row(report, "small")
    assert row["kind"] == "choice"
    assert not row["flagged"] and row["verdict"].startswith("too few items")
    # one multi-select answer makes the whole task a multi-select one (13 items, sets)
    items.append(items[0].replace(item_id="multi", answer="A,B"))
    report = run_audit(items, BlindSpec(), 0)
    row = _row(report, "small")
    assert report["items"] == 13 and row["items"] == 13 and row["kind"] == "multi-select"
    assert not row["flagged"] and row["verdict"].startswith("too few items")
    assert report["confident"] == []


def _box_items(task: str, n: int, spread: bool, seed: int = 0) -> list[Item]:
    """Free-form grounding items (no options, a box answer) on a 336 x 336 image: boxes in
    one place give or take a few pixels (a positional prior), or anywhere."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        w, h = rng.integers(30, 60, 2)
        x, y = rng.integers(0, 336 - 60, 2) if spread else 100 + rng.integers(-6, 7, 2)
        out.append(
            _items(task, 1)[0].replace(
                item_id=f"{task}-{k:04d}",
                options=(),
                answer=f"[{x}, {y}, {x + w}, {y + h}]",
                gt=f"[{x}, {y}, {x + w}, {y + h}]",
                answer_bbox=(float(x), float(y), float(x + w), float(y + h)),
            )
        )
    return out


def test_free_form_boxes_in_one_place_are_flagged_and_spread_ones_are_not():
    """Issue 32.3: a grounding task whose answer box is (nearly) always in the same place is
    answered by the mean box of the other items, without the image."""
    report = run_audit(
        _box_items("fixed", 60, spread=False) + _box_items("spread", 60, spread=True),
        BlindSpec(),
        0,
    )
    fixed, spread = _row(report, "fixed"), _row(report, "spread")
    assert fixed["kind"] == spread["kind"] == "box"
    assert fixed["items"] == spread["items"] == 60
    assert fixed["flagged"] and fixed["accuracy"] > 0.75
    assert fixed["chance"] < fixed["accuracy"] - 0.15  # a random other box hits less often
    assert not spread["flagged"] and spread["accuracy"] < 0.1
    table = "\n".join(blind_table(report))
    assert "| fixed (box) | 60 |" in table and "**answerable without the image**" in table


def _set_items(task: str, n: int, prior: bool, seed: int = 0) -> list[Item]:
    """Multi-select items over five levels with two correct each: with ``prior``, the two
    lowest levels in three items of five; else both are drawn at random."""
    rng = np.random.default_rng(seed)
    levels = ["L1/L2", "L2/L3", "L3/L4", "L4/L5", "L5/S1"]
    out = []
    for k in range(n):
        options = [levels[i] for i in rng.permutation(5)]
        if prior and k % 5 < 3:
            truth = {"L4/L5", "L5/S1"}
        else:
            truth = {levels[i] for i in rng.choice(5, 2, replace=False)}
        letters = [LETTERS[i] for i, lv in enumerate(options) if lv in truth]
        out.append(
            _items(task, 1)[0].replace(
                item_id=f"{task}-{k:04d}",
                options=tuple(options),
                answer=",".join(letters),
                gt=",".join(lv for lv in options if lv in truth),
            )
        )
    return out


def test_multi_select_level_prior_is_flagged_and_random_sets_are_not():
    """Issue 32.3: the exact-set guess of the levels most often in the answer, against a
    random set of the size the answers take (1 / C(5, 2) = 10 %)."""
    report = run_audit(
        _set_items("prior", 100, prior=True) + _set_items("random", 100, prior=False),
        BlindSpec(),
        0,
    )
    prior, rand = _row(report, "prior"), _row(report, "random")
    assert prior["kind"] == rand["kind"] == "multi-select"
    assert prior["chance"] == pytest.approx(0.1) and rand["chance"] == pytest.approx(0.1)
    assert prior["flagged"] and prior["accuracy"] > 0.5
    assert not rand["flagged"] and rand["accuracy"] < 0.2


def test_without_scikit_learn_the_audit_is_skipped(monkeypatch):
    monkeypatch.setitem(sys.modules, "medvqa_build.validate.blind_sklearn", None)
    report = run_audit(_items("longest", plant="longest"), BlindSpec(), 0)
    assert report["status"].startswith("skipped: install medvqa-build[audit]")
    assert report["tasks"] == [] and "Audit skipped" in "\n".join(blind_table(report))


def test_rank_within_items():
    values = np.array([3.0, 1.0, 3.0, 2.0, 5.0, 4.0])
    item = np.array([0, 0, 0, 0, 1, 1])
    rank, largest, smallest = _rank_within(values, item, np.array([4, 2]))
    assert rank.tolist() == [5 / 6, 0.0, 5 / 6, 1 / 3, 1.0, 0.0]
    assert largest.tolist() == [1, 0, 1, 0, 1, 0]
    assert smallest.tolist() == [0, 1, 0, 0, 0, 1]


def test_recipe_key():
    base = {"name": "r", "benchmark": "B", "sources": [], "tasks": []}
    assert Recipe.from_dict(dict(base)).blind is None
    assert "blind" not in Recipe.from_dict(dict(base)).to_yaml()  # fingerprints unchanged
    assert Recipe.from_dict({**base, "blind": True}).blind == BlindSpec()
    assert Recipe.from_dict({**base, "blind": False}).blind is None
    with pytest.raises(RecipeError, match="give both endpoint and model"):
        Recipe.from_dict({**base, "blind": {"endpoint": "http://x"}})
    with pytest.raises(RecipeError, match="blind.thresh"):
        Recipe.from_dict({**base, "blind": {"thresh": 0.5}})


class _LongestAnswerer(BaseHTTPRequestHandler):
    """A chat-completions endpoint that answers the letter of the longest option."""

    bodies: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append({"path": self.path, **body})
        lines = body["messages"][-1]["content"].splitlines()
        options = [ln for ln in lines if len(ln) > 2 and ln[1] == "." and ln[0].isupper()]
        letter = max(options, key=len)[0]
        reply = {
            "choices": [
                {
                    "message": {"role": "assistant", "content": letter},
                    "logprobs": {"content": [{"token": letter, "logprob": -0.01}]},
                }
            ]
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        return None


@pytest.fixture
def server():
    _LongestAnswerer.bodies = []
    httpd = HTTPServer(("127.0.0.1", 0), _LongestAnswerer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_language_model_mode_asks_once_per_prompt_and_caches(server, tmp_path):
    spec = BlindSpec(endpoint=server, model="tiny", cache=str(tmp_path / "cache"))
    items = _items("honest", 40) + _items("longest", 40, plant="longest")
    report = run_audit(items, spec, seed=7)
    assert report["method"] == "language model tiny"
    longest, honest = _row(report, "longest"), _row(report, "honest")
    assert longest["accuracy"] == 1.0 and longest["flagged"] and longest["confident"] == 40
    assert honest["accuracy"] < 0.5
    bodies = _LongestAnswerer.bodies
    assert {b["path"] for b in bodies} == {"/v1/chat/completions"}
    assert all(b["temperature"] == 0 and b["seed"] == 7 and b["model"] == "tiny" for b in bodies)
    asked = len(bodies)
    assert asked == len({b["messages"][-1]["content"] for b in bodies})  # once per prompt
    assert len(list((tmp_path / "cache").rglob("*.json"))) == asked
    # a rerun reads the cache: no request, the same report
    assert run_audit(items, spec, seed=7) == report and len(bodies) == asked


def test_language_model_mode_unreachable_is_one_clear_error(tmp_path):
    spec = BlindSpec(endpoint="http://127.0.0.1:9/v1", model="m", cache=str(tmp_path), timeout_s=2)
    with pytest.raises(AuditError, match=r"could not ask 'm' at http://127.0.0.1:9/v1/chat"):
        BlindAudit(spec, 0).add_all(_items("t", 1))


def test_same_audit_in_every_process():
    """Option keys are stable hashes (Python's ``hash`` is salted per process): the folds,
    hence the audit, do not depend on PYTHONHASHSEED."""
    code = (
        "import json; from tests.unit.validate.test_blind import _items; "
        "from medvqa_build.recipe import BlindSpec; from medvqa_build.validate.blind import "
        "run_audit; print(json.dumps(run_audit(_items('t', 60) + _items('l', 60, 'longest'), "
        "BlindSpec(), 0)))"
    )
    root = Path(__file__).resolve().parents[3]
    outs = [
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root / "src")},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    ]
    assert outs[0] == outs[1] and json.loads(outs[0])["tasks"][0]["flagged"]


def test_a_task_name_is_one_escaped_cell_of_the_table():
    report = run_audit(_items("a|b <script>", plant="longest"), BlindSpec(), 0)
    row = next(line for line in blind_table(report) if line.startswith("| a"))
    assert row.startswith("| a\\|b &lt;script&gt; | 120 |")
    assert row.count(" | ") == 6  # seven cells, the name did not cut the row


def test_a_box_the_question_writes_is_copied_where_it_is_the_answer():
    """Issue 32.3: a tracking question that writes the reference box of a structure that does
    not move is answered by copying it; a question box unrelated to the answer is not used."""
    spread = _box_items("copied", 60, spread=True)
    copied = [
        i.replace(question=f"Track the object in the first image ({i.answer}).") for i in spread
    ]
    decoy = [
        i.replace(item_id=f"decoy-{k}", task="decoy", question="Find it ([300, 300, 330, 330]).")
        for k, i in enumerate(_box_items("decoy", 60, spread=True, seed=1))
    ]
    report = run_audit(copied + decoy, BlindSpec(), 0)
    row = _row(report, "copied")
    assert row["kind"] == "box" and row["flagged"] and row["accuracy"] == 1.0
    assert row["chance"] < 0.1
    decoy_row = _row(report, "decoy")
    assert not decoy_row["flagged"] and decoy_row["accuracy"] < 0.1
