"""A diff (:func:`.diff.diff_releases`) as people read it: the Markdown report, the card's
"Changes since <previous>" section, and the ``--fail-on`` rules CI stops a release with."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..markdown import md_cell
from ..store.atomic import write_atomic

DETAILS = 20  # item ids listed per kind of change in the Markdown report
START, END = "<!-- medvqa-build changes: start -->", "<!-- medvqa-build changes: end -->"
_RULE = re.compile(r"^\s*(added|removed|changed|any|recipe)\s*>\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


def _cell(value) -> str:
    """A value as table-cell text: never markup (names come from files nobody here wrote)."""
    if value is None:
        return "(absent)"
    return md_cell(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def _counts_table(items: dict) -> list[str]:
    lines = ["| | items |", "|---|---|"]
    lines += [
        f"| {k} | {items[k]} |" for k in ("old", "removed", "changed", "unchanged", "added", "new")
    ]
    lines.append("")
    if items["changed_fields"]:
        fields = ", ".join(f"{k} {v}" for k, v in items["changed_fields"].items())
        lines += [f"Changed fields (an item may change several): {fields}.", ""]
    if items.get("images_not_compared"):
        lines += [
            f"The images of {items['images_not_compared']} item(s) were not compared: one side "
            "was published without their pixels (annotations only).",
            "",
        ]
    if items["same_content_new_id"]:
        lines += [
            f"{items['same_content_new_id']} of the removed items come back under a new id with "
            "the same task, prompt level, images and truth (an item's id hashes the recipe's "
            "seed and benchmark name).",
            "",
        ]
    return lines


def _per_table(title: str, rows: dict[str, dict[str, int]]) -> list[str]:
    cols = ("old", "removed", "changed", "unchanged", "added", "new")
    lines = [f"| {title} | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for key, row in rows.items():
        lines.append(f"| {_cell(key)} | " + " | ".join(str(row[c]) for c in cols) + " |")
    return lines + [""]


def _key_changes(title: str, changes: list[dict] | None, missing: str) -> list[str]:
    if changes is None:
        return [f"## {title}", "", missing, ""]
    if not changes:
        return [f"## {title}", "", "No differences.", ""]
    lines = [f"## {title}", "", "| key | old | new |", "|---|---|---|"]
    lines += [f"| {_cell(c['key'])} | {_cell(c['old'])} | {_cell(c['new'])} |" for c in changes]
    return lines + [""]


def _shift_table(title: str, counts: dict[str, dict[str, int]]) -> list[str]:
    lines = [f"### {title}", "", f"| {title.lower()} | old | new | change |", "|---|---|---|---|"]
    for key, c in counts.items():
        lines.append(f"| {_cell(key)} | {c['old']} | {c['new']} | {c['new'] - c['old']:+d} |")
    return lines + [""]


def _distributions(dist: dict) -> list[str]:
    lines = ["## Distributions", ""]
    for name, title in (
        ("task", "Task"),
        ("source", "Source"),
        ("prompt_level", "Prompt level"),
        ("split", "Split"),
    ):
        lines += _shift_table(title, dist[name])
    if dist["answer_letters"]:
        lines += ["### Answer letters per task (old → new)", ""]
        letters = sorted({k for t in dist["answer_letters"].values() for k in t})
        lines += ["| task | " + " | ".join(letters) + " |", "|---" * (len(letters) + 1) + "|"]
        for task, counts in dist["answer_letters"].items():
            cells = [
                f"{counts[k]['old']} → {counts[k]['new']}" if k in counts else "-" for k in letters
            ]
            lines.append(f"| {_cell(task)} | " + " | ".join(cells) + " |")
        lines.append("")
    if dist["answer_content"]:
        lines += [
            "### Correct answers whose share moved most",
            "",
            "| task | answer | old | new | share change |",
            "|---|---|---|---|---|",
        ]
        for task, rows in dist["answer_content"].items():
            lines += [
                f"| {_cell(task)} | {_cell(r['answer'])} | {r['old']} | {r['new']} | "
                f"{100 * r['share_change']:+.1f} pp |"
                for r in rows
            ]
        lines.append("")
    blind = dist["blind_accuracy"]
    if blind is not None:
        lines += [
            "### Blind (text-only) accuracy",
            "",
            "| task | old | new | chance |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {_cell(t)} | {b['old']:.1%} | {b['new']:.1%} | {b['chance']:.1%} |"
            for t, b in blind.items()
        ]
        lines.append("")
    return lines


def _item_lists(diff: dict, details: int) -> list[str]:
    lines = ["## Items", ""]
    for kind in ("removed", "added", "changed"):
        entries = diff[kind]
        if not entries:
            continue
        first = f", first {details}" if len(entries) > details else ""
        lines += [f"{kind.capitalize()} ({len(entries)}{first}):", ""]
        for e in entries[:details]:
            fields = f": {', '.join(e['fields'])}" if "fields" in e else ""
            lines.append(f"- `{e['item_id']}` ({_cell(e['task'])}, {_cell(e['source'])}){fields}")
        lines.append("")
    return lines


def changes_markdown(diff: dict, *, details: int = DETAILS) -> str:
    """The whole report (``diff.md``)."""
    old, new = diff["old"], diff["new"]
    lines = [
        f"# Changes from {_cell(old['label'])} to {_cell(new['label'])}",
        "",
        f"- Old: `{old['path']}` ({old['kind']}, {old['items']} items)",
        f"- New: `{new['path']}` ({new['kind']}, {new['items']} items)",
        "",
    ]
    lines += _counts_table(diff["items"])
    lines += ["## Per task", ""] + _per_table("task", diff["per_task"])
    lines += ["## Per source", ""] + _per_table("source", diff["per_source"])
    lines += _key_changes("Recipe", diff["recipe"], "One side carries no recipe.")
    lines += _key_changes(
        "Versions", diff["versions"], "One side records no versions (a build without its hf card)."
    )
    if diff["stages"] is not None:
        lines += [
            "## Stages",
            "",
            "Output folders both builds used (same inputs and code), only the new one used "
            "(rebuilt) and only the old one used (dropped).",
            "",
            "| stage | same | rebuilt | dropped |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {s} | {c['same']} | {c['rebuilt']} | {c['dropped']} |"
            for s, c in diff["stages"].items()
        ]
        lines.append("")
    lines += _distributions(diff["distributions"])
    lines += _item_lists(diff, details)
    return "\n".join(lines).rstrip() + "\n"


def card_section(diff: dict, previous: str | None = None) -> str:
    """The card's "Changes since <previous>" section, between markers a later diff replaces."""
    items = diff["items"]
    name = previous or diff["old"]["label"]
    lines = [
        START,
        f"## Changes since {_cell(name)}",
        "",
        f"{items['new']} items (previously {items['old']}): {items['added']} added, "
        f"{items['removed']} removed, {items['changed']} changed, {items['unchanged']} "
        "unchanged.",
        "",
    ]
    lines += _per_table("task", diff["per_task"])
    if diff["recipe"]:
        lines += ["Recipe changes:", ""]
        lines += [
            f"- {_cell(c['key'])}: {_cell(c['old'])} → {_cell(c['new'])}" for c in diff["recipe"]
        ]
        lines.append("")
    if diff["versions"]:
        lines += [
            "Versions: "
            + ", ".join(f"{c['key']} {c['old']} → {c['new']}" for c in diff["versions"]),
            "",
        ]
    return "\n".join([*lines, END]) + "\n"


def write_card_section(card: Path, section: str) -> None:
    """Put ``section`` into a card (README.md) before its Licences section, replacing the one
    an earlier diff wrote."""
    text = card.read_text(encoding="utf-8")
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + rest.split(END, 1)[1].lstrip("\n")
    at = text.find("\n## Licences")
    text = text + "\n" + section if at < 0 else text[: at + 1] + section + "\n" + text[at + 1 :]
    write_atomic(card, text)


@dataclass(frozen=True)
class FailRule:
    """``added>10``, ``changed>5%`` (of the old items), ``any>0``, ``recipe>0``."""

    metric: str
    limit: float
    percent: bool

    def value(self, diff: dict) -> float:
        items = diff["items"]
        if self.metric == "recipe":
            return float(len(diff["recipe"] or []))
        n = (
            items["added"] + items["removed"] + items["changed"]
            if self.metric == "any"
            else items[self.metric]
        )
        return 100 * n / max(items["old"], 1) if self.percent else float(n)

    def text(self) -> str:
        return f"{self.metric}>{self.limit:g}{'%' if self.percent else ''}"


def parse_fail_on(rules: list[str]) -> list[FailRule]:
    out = []
    for rule in rules:
        m = _RULE.match(rule)
        if not m or (m[1] == "recipe" and m[3]):
            raise UsageError(
                f"--fail-on {rule!r} is not a rule",
                where="--fail-on",
                fix="write METRIC>N or METRIC>N% with METRIC one of added, removed, changed, "
                "any (added+removed+changed) or recipe (changed recipe keys, no %)",
            )
        out.append(FailRule(m[1], float(m[2]), bool(m[3])))
    return out


def failed_rules(diff: dict, rules: list[FailRule]) -> list[str]:
    """One line per rule the diff breaks."""
    out = []
    for rule in rules:
        value = rule.value(diff)
        if value > rule.limit:
            shown = f"{value:.1f}%" if rule.percent else f"{value:g}"
            out.append(f"--fail-on {rule.text()}: {rule.metric} is {shown}")
    return out


def card_of(release_path: Path, kind: str) -> Path | None:
    """The card a release publishes: an HF folder's README.md, a build's ``hf/README.md``."""
    card = release_path / "README.md" if kind == "hf" else release_path / "hf" / "README.md"
    return card if card.is_file() else None


def refresh_checksum(build: Path, card: Path) -> None:
    """A build's ``checksums.sha256`` line of its card, after the card changed."""
    sums = build / "checksums.sha256"
    if not sums.is_file():
        return
    rel = card.relative_to(build).as_posix()
    digest = hashlib.sha256(card.read_bytes()).hexdigest()
    lines = sums.read_text(encoding="utf-8").splitlines()
    lines = [f"{digest}  {rel}" if line.endswith(f"  {rel}") else line for line in lines]
    write_atomic(sums, "\n".join(lines) + "\n")
