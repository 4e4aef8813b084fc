"""Validity of the replica builds (issue 32, "Done when"): per task, how well the text alone
answers the items, how evenly the answers are spread, and how hard the distractors are.

    python benchmarks/validity_report.py measure --label after --json /tmp/after.json
    python benchmarks/validity_report.py measure --label before --checkout /path/at/9a43653 \\
        --json /tmp/before.json
    python benchmarks/validity_report.py table /tmp/before.json /tmp/after.json \\
        --markdown benchmarks/validity.md

``measure`` writes the replica fixtures and builds the EndoBench (``quota_scale`` 0.3),
SpineBench and MedSG recipes on them with ``blind: true`` and ``--force`` (so a flagged build
still exports and reports its distractor difficulty), using the code and scripts of
``--checkout`` (default: this one). The measurements themselves always use this checkout's
code, so "before" and "after" are judged alike:

- blind accuracy, chance, z and verdict of this checkout's text-only audit, and whether the
  task meets the issue's bar (accuracy <= 1.2 x chance, or within 2 standard errors of it);
  the audit the build ran with its own code is kept beside it;
- two guessers that never see an image (the issue's): learned on one half of a task's items
  and scored on the other, both ways; one picks the option that was most often the answer,
  the other the option text shown most often;
- the answer distribution: distinct answers, the largest answer's share, and the entropy of
  the answers over the log of the number of distinct answers (1: even);
- distractor difficulty from the build's report (nearest-class-centroid accuracy over the
  offline embeddings; the replica images are noise, so it says little about vision);
- for free-form grounding items (MedSG), the hit rate (IoU >= 0.5) of the mean answer box of
  the other half, against that of another item's answer box (a positional prior).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SPINE_ENV = {
    "rsna-lumbar": "RSNA_LUMBAR",
    "vindr-spinexr": "VINDR_SPINEXR",
    "csxa": "CSXA",
    "buu-lspine": "BUU_LSPINE",
}
MEDSG_ENV = {"msd": "MEDSG_MSD_ROOT", "brats": "MEDSG_BRATS_ROOT"}


def _python(checkout: Path, code: str, *args: str, env: dict | None = None) -> str:
    """Run ``code`` with ``checkout``'s package and tests importable; its stdout."""
    environ = dict(os.environ, **(env or {}), HF_HUB_OFFLINE="1")
    environ["PYTHONPATH"] = f"{checkout / 'src'}{os.pathsep}{checkout}"
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=checkout,
        env=environ,
        capture_output=True,
        text=True,
    )
    if done.returncode not in (0, 2):  # 2: validation failed (the build still exported)
        raise SystemExit(f"{code[:60]!r} failed in {checkout}:\n{done.stderr[-3000:]}")
    return done.stdout


WRITE_FIXTURES = """
import sys
from pathlib import Path
from tests.fixtures import fixture_writer
out = Path(sys.argv[1])
for source in sys.argv[2:]:
    print(source, fixture_writer(source)(out / source))
"""
WRITE_SCALED = """
import sys
from pathlib import Path
sys.path.insert(0, "scripts")
import build_spine_medsg_replicas as r
for source, root in r.write_replicas(Path(sys.argv[1]), tuple(sys.argv[2:])).items():
    print(source, root)
"""


def _replicas(checkout: Path, data: Path, sources: list[str]) -> dict[str, str]:
    """Each source's replica root, by the checkout's scaled script where it has one."""
    script = checkout / "scripts" / "build_spine_medsg_replicas.py"
    code = WRITE_SCALED if script.is_file() else WRITE_FIXTURES
    out = _python(checkout, code, str(data), *sources)
    return dict(line.split(" ", 1) for line in out.splitlines() if line.strip())


REUSE = False  # --reuse: a build folder that holds a report is measured, not rebuilt


def _build(checkout: Path, recipe: str, out: Path, sets: list[str], env: dict) -> None:
    if REUSE and (out / "report.json").is_file():
        return
    args = ["run", str(checkout / "recipes" / recipe), "-o", str(out), "-q", "--force"]
    for item in ["blind=true", *sets]:
        args += ["--set", item]
    code = "import sys; from medvqa_build.cli import main; sys.exit(main(sys.argv[1:]))"
    _python(checkout, code, *args, env=env)


def build_all(checkout: Path, work: Path, quota_scale: float, only: set[str]) -> dict[str, Path]:
    """Write the replicas and build the three recipes; the build folders."""
    builds = {}
    if "endobench" in only:
        data = work / "endobench-data"
        script = checkout / "scripts" / "build_endobench_replicas.py"
        _python(checkout, f"import runpy, sys; sys.argv = ['x', {str(data)!r}]; "
                f"runpy.run_path({str(script)!r}, run_name='__main__')")  # fmt: skip
        builds["endobench"] = work / "endobench"
        _build(checkout, "endobench.yaml", builds["endobench"], [f"quota_scale={quota_scale}"],
               {"ENDOBENCH_DATA": str(data)})  # fmt: skip
    if "spinebench" in only:
        roots = _replicas(checkout, work / "spine-data", list(SPINE_ENV))
        builds["spinebench"] = work / "spinebench"
        env = {SPINE_ENV[s]: r for s, r in roots.items()}
        _build(checkout, "spinebench.yaml", builds["spinebench"],
               ["embedder=offline", "quota_scale=0.005"], env)  # fmt: skip
    if "medsg" in only:
        roots = _replicas(checkout, work / "medsg-data", list(MEDSG_ENV))
        builds["medsg"] = work / "medsg"
        env = {MEDSG_ENV[s]: r for s, r in roots.items()}
        _build(checkout, "medsg.yaml", builds["medsg"], ["quota_scale=0.25"], env)
    return builds


# -- measurements (this checkout's code) -------------------------------------------------


def _entropy(counts: Counter) -> tuple[int, float, float]:
    """Distinct answers, the largest share, entropy / log(distinct) (1.0 with one answer
    class is reported as 0: nothing to spread)."""
    total = sum(counts.values())
    if not total:
        return 0, 0.0, 0.0
    p = np.array(list(counts.values()), float) / total
    k = len(p)
    h = float(-(p * np.log(p)).sum() / math.log(k)) if k > 1 else 0.0
    return k, float(p.max()), h


def _guessers(items: list, seed: int = 0) -> tuple[float, float]:
    """The issue's two text-only guessers, each learned on one half and scored on the other
    (both ways): the option most often the answer, and the option text shown most often."""
    rng = np.random.default_rng(seed)
    half = rng.permutation(len(items)) % 2
    right = np.zeros(2)
    for train in (0, 1):
        fit = [i for i, h in zip(items, half, strict=True) if h == train]
        test = [i for i, h in zip(items, half, strict=True) if h != train]
        answered = Counter(i.gt for i in fit)
        shown = Counter(o for i in fit for o in i.options)
        for i in test:
            for g, counts in enumerate((answered, shown)):
                scores = [counts.get(o, 0) + rng.random() * 1e-3 for o in i.options]
                right[g] += i.options[int(np.argmax(scores))] == i.gt
    return float(right[0] / len(items)), float(right[1] / len(items))


def _box_prior(items: list, seed: int = 0) -> tuple[float, float]:
    """Free-form grounding: hit rate (IoU >= 0.5) of the other half's mean answer box, and of
    a random other item's answer box (what a prior-free guess from the same pool gets)."""
    from medvqa_build.geometry import iou

    boxes = [i.answer_bbox for i in items]
    rng = np.random.default_rng(seed)
    half = rng.permutation(len(items)) % 2
    prior = chance = 0
    for k, box in enumerate(boxes):
        others = [b for b, h in zip(boxes, half, strict=True) if h != half[k]]
        mean = tuple(np.mean(others, axis=0))
        prior += iou(mean, box) >= 0.5
        chance += iou(others[int(rng.integers(len(others)))], box) >= 0.5
    return prior / len(items), chance / len(items)


def _hardness(report: dict) -> dict[str, dict]:
    """The report's difficulty rows ("task [strategy]") per task, weighted by items scored."""
    out: dict[str, dict] = {}
    for key, row in (report.get("difficulty") or {}).items():
        task = key.rsplit(" [", 1)[0]
        if not row.get("scored"):
            continue
        acc = out.setdefault(task, {"scored": 0, "ncc": 0.0, "sim": 0.0})
        acc["scored"] += row["scored"]
        acc["ncc"] += row["ncc_accuracy"] * row["scored"]
        acc["sim"] += row["distractor_truth_sim"] * row["scored"]
    return {
        t: {"ncc_accuracy": a["ncc"] / a["scored"], "distractor_truth_sim": a["sim"] / a["scored"]}
        for t, a in out.items()
    }


def measure(build_dir: Path) -> dict:
    """Every task's row for one build (see the module's docstring)."""
    from medvqa_build.pipeline.build_dir import BuildDir
    from medvqa_build.recipe import BlindSpec
    from medvqa_build.validate.blind import run_audit

    folder = BuildDir.open(build_dir)
    items = list(folder.items())
    report = json.loads((build_dir / "report.json").read_text())
    own = {t["task"]: t for t in (report["validation"].get("blind") or {}).get("tasks", [])}
    audit = {t["task"]: t for t in run_audit(items, BlindSpec(), report["seed"])["tasks"]}
    hardness = _hardness(report)
    rows = []
    for task in sorted({i.task for i in items}):
        mine = [i for i in items if i.task == task]
        choice = [i for i in mine if len(i.options) >= 2]
        k, top, entropy = _entropy(Counter(i.gt for i in mine))
        row = {"task": task, "items": len(mine), "answers": k, "top_share": top,
               "entropy": entropy}  # fmt: skip
        if task in audit:
            a = audit[task]
            se = math.sqrt(a["chance"] * (1 - a["chance"]) / a["items"])
            row["audit"] = {key: a[key] for key in ("items", "accuracy", "chance", "z", "flagged")}
            row["meets_bar"] = (
                a["accuracy"] <= 1.2 * a["chance"] or a["accuracy"] - a["chance"] <= 2 * se
            )
        if task in own:
            row["build_audit"] = {key: own[task][key] for key in ("accuracy", "flagged")}
        if choice:
            row["most_answered"], row["most_shown"] = _guessers(choice)
        boxed = [i for i in mine if not i.options and i.answer_bbox is not None]
        if len(boxed) >= 4:
            row["box_prior_hit"], row["box_other_hit"] = _box_prior(boxed)
        if task in hardness:
            row["hardness"] = hardness[task]
        rows.append(row)
    return {"items": len(items), "shortfall": report.get("shortfall", {}), "tasks": rows}


def _commit(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip() or "?"


# -- the Markdown table --------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _cell(row: dict | None) -> list[str]:
    if row is None:
        return ["–"] * 7
    audit = row.get("audit")
    blind = "–"
    if audit:
        blind = f"{_pct(audit['accuracy'])} / {_pct(audit['chance'])}"
        blind = f"**{blind}**" if audit["flagged"] else blind
        blind += "" if row.get("meets_bar") else " ✗"
    guess = "–"
    if "most_answered" in row:
        guess = f"{_pct(row['most_answered'])} / {_pct(row['most_shown'])}"
    elif "box_prior_hit" in row:
        guess = f"box {_pct(row['box_prior_hit'])} / {_pct(row['box_other_hit'])}"
    hard = row.get("hardness", {}).get("ncc_accuracy")
    own = row.get("build_audit", {}).get("accuracy")
    return [str(row["items"]), blind, _pct(own), guess, f"{row['entropy']:.2f}",
            _pct(row["top_share"]), _pct(hard)]  # fmt: skip


def table(runs: list[dict]) -> str:
    """One section per benchmark: per task, each run's columns side by side."""
    cols = ["items", "blind acc / chance", "build's audit", "guessers", "entropy", "top share",
            "NCC acc"]  # fmt: skip
    lines = []
    names = sorted({b for r in runs for b in r["benchmarks"]})
    for name in names:
        lines += [f"## {name}", ""]
        head = ["task"] + [f"{c} ({r['label']})" for c in cols for r in runs]
        lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        tasks = sorted({t["task"] for r in runs for t in r["benchmarks"].get(name, {"tasks": []})
                        ["tasks"]})  # fmt: skip
        for task in tasks:
            cells = [
                _cell(
                    next(
                        (
                            t
                            for t in r["benchmarks"].get(name, {}).get("tasks", [])
                            if t["task"] == task
                        ),
                        None,
                    )
                )  # fmt: skip
                for r in runs
            ]
            lines.append("| " + " | ".join([task] + [c[j] for j in range(7) for c in cells]) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="build the replicas and measure them")
    m.add_argument("--label", required=True, help="e.g. before / after")
    m.add_argument("--json", type=Path, required=True, help="where the measurements go")
    m.add_argument("--checkout", type=Path, default=REPO, help="code that writes and builds")
    m.add_argument("--work", type=Path, help="folder for replicas and builds (default: temp)")
    m.add_argument("--quota-scale", type=float, default=0.3, help="EndoBench quota_scale")
    m.add_argument("--only", default="endobench,spinebench,medsg")
    m.add_argument("--reuse", action="store_true", help="measure builds already in --work")
    t = sub.add_parser("table", help="the Markdown table of measured runs, side by side")
    t.add_argument("runs", type=Path, nargs="+")
    t.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    if args.command == "table":
        text = table([json.loads(p.read_text()) for p in args.runs])
        if args.markdown:
            args.markdown.write_text(text + "\n")
        print(text)
        return
    global REUSE
    REUSE = args.reuse
    with tempfile.TemporaryDirectory(prefix="validity-") as tmp:
        work = args.work or Path(tmp)
        builds = build_all(args.checkout.resolve(), work, args.quota_scale,
                           set(args.only.split(",")))  # fmt: skip
        run = {"label": args.label, "commit": _commit(args.checkout),
               "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
               "benchmarks": {name: measure(path) for name, path in builds.items()}}  # fmt: skip
    args.json.write_text(json.dumps(run, indent=1) + "\n")
    print(table([run]))


if __name__ == "__main__":
    main()
