"""How often each answer text is the right one, per task, over the finished items: what a
guesser that never sees the image can exploit (the report's and the card's table; the policy
that shapes it is ``balance:``, docs/validity.md)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

from ..records import Item
from .balance import spread_of

SHOWN = 8  # answers listed per task in the tables (report.json keeps every count)


class AnswerTally:
    """Per task, the count of each answer text (``gt``) of the items answered by picking
    options; open answers (a box typed out) have no options to guess among and are left out."""

    def __init__(self) -> None:
        self.counts: defaultdict[str, Counter] = defaultdict(Counter)

    def add(self, item: Item) -> None:
        if item.options and item.gt:
            self.counts[item.task][item.gt] += 1

    def spread(self) -> dict[str, dict]:
        """``{task: {items, classes, max_share, entropy, counts}}``, counts most common first."""
        out = {}
        for task, counts in sorted(self.counts.items()):
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            out[task] = {**spread_of(counts.values()), "counts": dict(ranked)}
        return out


def plain_cell(value: object) -> str:
    """``value`` as one table cell of report.md: on one line, ``|`` escaped."""
    return " ".join(str(value).split()).replace("|", "\\|")


def spread_table(spread: dict[str, dict], cell: Callable[[object], str] = plain_cell) -> list[str]:
    """Markdown lines: per task the items, distinct answers, top share, evenness and counts;
    ``cell`` writes a task name or an answer text (the card escapes Markdown and HTML)."""
    if not spread:
        return []
    lines = [
        "## Answer spread per task",
        "",
        "How often each answer text is the right one (items with options). Evenness is the "
        "normalised entropy (1 = every answer equally often); a guesser that never sees the "
        "image and always picks the most common answer scores about the top share.",
        "",
        "| task | items | answers | top share | evenness | counts |",
        "|---|---|---|---|---|---|",
    ]
    for task, s in spread.items():
        shown = list(s["counts"].items())[:SHOWN]
        text = ", ".join(f"{cell(answer)} {n}" for answer, n in shown)
        if len(s["counts"]) > SHOWN:
            text += f", … (+{len(s['counts']) - SHOWN} more)"
        lines.append(
            f"| {cell(task)} | {s['items']} | {s['classes']} | {s['max_share']:.2f} | "
            f"{s['entropy']:.2f} | {text} |"
        )
    return lines + [""]


def balance_lines(balance: dict[str, dict]) -> list[str]:
    """Markdown lines of the generate stage's balance per recipe task: the policy, what it
    cost the quota, and the answer classes short of an even share of it."""
    if not balance:
        return []
    lines = [
        "## Answer balance in generation",
        "",
        "Per recipe task: quota = made + withheld (kept out to meet the `balance` policy) + "
        "pool short (too few usable candidates). Short: the answer classes with fewer usable "
        "candidates than an even share of the quota (items made / candidates available).",
        "",
        "| task | policy | quota | made | withheld | pool short | top share | evenness | "
        "policy met | short |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task, b in sorted(balance.items()):
        short = [
            f"{plain_cell(name)} {c['made']}/{c['available']}"
            for name, c in b["per_class"].items()
            if c["short"] > 0
        ]
        text = ", ".join(short[:SHOWN])
        if len(short) > SHOWN:
            text += f", … (+{len(short) - SHOWN})"
        top = "-" if b["max_share"] is None else f"{b['max_share']:.2f}"
        lines.append(
            f"| {plain_cell(task)} | {_policy(b['policy'])} | {b['quota']} | {b['made']} | "
            f"{b['withheld']} | "
            f"{b['pool_short']} | {top} | {b['entropy']:.2f} | "
            f"{'yes' if b['policy_met'] else '**no**'} | {text or '-'} |"
        )
    return lines + [""]


def _policy(policy: dict) -> str:
    keys = ("max_share", "max_ratio", "min_entropy")
    given = [f"{k} {policy[k]:g}" for k in keys if policy.get(k) is not None]
    if not given:
        return "off"
    return ", ".join(given) + f"; prefer {policy['prefer']}"
