"""The score as people read it: ``report.md`` (every table of :func:`score_predictions`),
``score.json`` and the one-row leaderboard table a dataset card shows (``--card``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..markdown import md_cell
from ..store.atomic import write_atomic
from .baselines import ENDOBENCH_ABBREVIATIONS

GROUP_TITLES = {
    "task": "Task",
    "subtask": "Subtask",
    "scene": "Scene",
    "prompt_level": "Prompt level",
    "source": "Source",
    "split": "Split",
}


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _ci(ci) -> str:
    return "-" if ci[0] is None else f"{100 * ci[0]:.1f}–{100 * ci[1]:.1f}"


def _accuracy_table(rows: dict, title: str) -> list[str]:
    lines = [
        f"| {title} | items | accuracy % | 95 % CI | chance % |",
        "|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['n']} | {_pct(r['accuracy'])} | {_ci(r['ci95'])} | "
            f"{_pct(r['chance'])} |"
        )
    return lines


def _single(score: dict) -> list[str]:
    sc = score["single_choice"]
    if sc is None:
        return []
    out = ["## Single-choice accuracy", ""]
    out += _accuracy_table({"all": sc["all"]}, "")
    for key, rows in sc["by"].items():
        out += ["", f"### By {GROUP_TITLES[key].lower()}", ""]
        out += _accuracy_table(rows, GROUP_TITLES[key])
    return out + [""]


def _circular(score: dict) -> list[str]:
    circ = score["circular"]
    if circ is None:
        return []
    out = [
        "## Circular evaluation",
        "",
        "Each item was asked once per rotation of its options; circular accuracy counts an "
        "item right only when every rotation is right.",
        "",
        "| task | items | plain % | 95 % CI | circular % | 95 % CI |",
        "|---|---|---|---|---|---|",
    ]
    for task, r in circ.items():
        out.append(
            f"| {task} | {r['n']} | {_pct(r['plain'])} | {_ci(r['plain_ci95'])} | "
            f"{_pct(r['circular'])} | {_ci(r['circular_ci95'])} |"
        )
    return out + [""]


def _multi(score: dict) -> list[str]:
    ms = score["multi_select"]
    if ms is None:
        return []
    out = [
        "## Multi-select",
        "",
        "Per item precision, recall and F1 of the letters named against the answer's letters, "
        "averaged over items; exact match needs the very set.",
        "",
        "| task | items | precision % | recall % | F1 % | exact % | chance exact % |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, r in {**ms["by_task"], "all": ms["all"]}.items():
        out.append(
            f"| {task} | {r['n']} | {_pct(r['precision'])} | {_pct(r['recall'])} | "
            f"{_pct(r['f1'])} | {_pct(r['exact'])} | {_pct(r['chance_exact'])} |"
        )
    return out + [""]


def _grounding(score: dict) -> list[str]:
    g = score["grounding"]
    if g is None:
        return []
    out = [
        "## Grounding",
        "",
        "IoU of the first box in each reply (read in the item's coordinate format) with the "
        "answer box; unparseable = IoU 0. Acc@0.5 = share with IoU >= 0.5 (MedSG-Bench).",
        "",
        "| task | items | mean IoU | Acc@0.5 % | IoU@0.3 % | IoU@0.7 % |",
        "|---|---|---|---|---|---|",
    ]
    for task, r in {**g["by_task"], "all": g["all"]}.items():
        out.append(
            f"| {task} | {int(r['n'])} | {r['mean_iou']:.4f} | {_pct(r['acc@0.5'])} | "
            f"{_pct(r['iou@0.3'])} | {_pct(r['iou@0.7'])} |"
        )
    avg = g["task_average"]
    out += [
        "",
        f"Average over tasks: mean IoU {avg['mean_iou']:.4f}, Acc@0.5 {_pct(avg['acc@0.5'])} %.",
    ]
    return out + [""]


def _categories(score: dict) -> list[str]:
    c = score["categories"]
    if c is None:
        return []
    out = [
        "## Category averages (EndoBench style)",
        "",
        "| category | items | item average % | task average % | tasks |",
        "|---|---|---|---|---|",
    ]
    for name, r in c["categories"].items():
        tasks = ", ".join(
            f"{ENDOBENCH_ABBREVIATIONS.get(t, t)} {_pct(a)}" for t, a in r["tasks"].items()
        )
        out.append(
            f"| {name} | {r['n']} | {_pct(r['item_average'])} | {_pct(r['task_average'])} | "
            f"{tasks} |"
        )
    out += [
        "",
        f"Overall: {_pct(c['item_average'])} % over items, {_pct(c['task_average'])} % as the "
        "mean of task accuracies.",
    ]
    return out + [""]


def _problems(score: dict) -> list[str]:
    u = score["unparseable"]
    out = ["## Unparseable and missing replies", ""]
    for kind, r in u.items():
        out.append(
            f"- {kind}: {r['unparseable']} of {r['n']} replies unparseable ({_pct(r['share'])} %)"
        )
    missing = score["missing"]
    out.append(
        f"- missing: {len(missing)} item(s) without a reply, counted wrong"
        + (
            ": " + ", ".join(missing[:50]) + (" ..." if len(missing) > 50 else "")
            if missing
            else ""
        )
    )
    for kind in score["not_scored"]:
        out.append(f"- not scored: the {kind} items (no reply to any of them)")
    return out + [""]


def _agreement(score: dict) -> list[str]:
    out = ["## Agreement with the clients", ""]
    parsers = {p["parser"] for p in score["predictions"]}
    out.append(
        "Single-choice replies were read with: " + ", ".join(sorted(parsers)) + ". A file "
        "written by VLMEvalKit is read with VLMEvalKit's matcher and one written by lmms-eval "
        "with the exported task's own parser, so the single-choice accuracy above is the "
        "client's. Multi-select items are read by this project (a client reads one letter at "
        "most, so it scores every multi-select answer of two or more letters wrong), and "
        "grounding boxes in the item's coordinate format."
    )
    agree = score["client_per_sample_agreement"]
    if agree:
        out.append(
            f"\nlmms-eval's own per-sample accuracy agrees on {agree['agree']} of "
            f"{agree['n']} single-choice items."
        )
    diffs = score["differences"]
    if diffs:
        out += [
            "",
            f"{len(diffs)} repl(ies) that this project's reader would score differently:",
            "",
            "| item | rotation | reply | why |",
            "|---|---|---|---|",
        ]
        for d in diffs[:50]:
            reply = md_cell((d["reply"] or "")[:60])  # a model's text, shown, never run
            out.append(f"| {d['item_id']} | {d['rotation']} | {reply} | {md_cell(d['why'])} |")
    return out + [""]


def report_markdown(score: dict, title: str = "Score") -> str:
    files = ", ".join(f"`{Path(p['file']).name}` ({p['client']})" for p in score["predictions"])
    lines = [
        f"# {title}",
        "",
        f"Build fingerprint `{score['build_fingerprint']}`; predictions: {files}. 95 % "
        f"intervals: percentile bootstrap, {score['bootstrap_rounds']} rounds, seed "
        f"{score['seed']}.",
        "",
    ]
    for part in (_single, _circular, _multi, _grounding, _categories, _problems, _agreement):
        lines += part(score)
    return "\n".join(lines).rstrip() + "\n"


def leaderboard_table(score: dict, model: str) -> str:
    """A one-row Markdown table for the card: overall and per-task numbers of one model."""
    head, row = ["model"], [md_cell(model)]
    sc = score["single_choice"]
    if sc:
        head.append("accuracy %")
        row.append(_pct(sc["all"]["accuracy"]))
        for task, r in sc["by"]["task"].items():
            head.append(md_cell(ENDOBENCH_ABBREVIATIONS.get(task, task)))
            row.append(_pct(r["accuracy"]))
    if score["circular"]:
        head.append("circular %")
        row.append(_pct(score["circular"]["all"]["circular"]))
    if score["multi_select"]:
        head += ["multi-select F1 %", "multi-select exact %"]
        row += [
            _pct(score["multi_select"]["all"]["f1"]),
            _pct(score["multi_select"]["all"]["exact"]),
        ]
    if score["grounding"]:
        avg = score["grounding"]["task_average"]
        head += ["mean IoU", "Acc@0.5 %"]
        row += [f"{avg['mean_iou']:.4f}", _pct(avg["acc@0.5"])]
    head.append("unparseable %")
    row.append(_pct(score["unparseable"]["all"]["share"]))
    return (
        "\n".join(
            [
                "| " + " | ".join(head) + " |",
                "|" + "---|" * len(head),
                "| " + " | ".join(row) + " |",
            ]
        )
        + "\n"
    )


def write_score(score: dict, out: Path, *, card_model: str | None = None) -> list[Path]:
    """``report.md`` and ``score.json`` in ``out`` (and ``leaderboard.md`` with a model)."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "report.md", out / "score.json"]
    write_atomic(written[0], report_markdown(score))
    write_atomic(written[1], json.dumps(score, indent=2, ensure_ascii=False) + "\n")
    if card_model is not None:
        written.append(out / "leaderboard.md")
        write_atomic(written[-1], leaderboard_table(score, card_model))
    return written


__all__ = ["leaderboard_table", "report_markdown", "write_score"]
