"""``curate: {drop_blind_solvable: true}``: remove the items the text-only audit answers
confidently from their question and options alone (docs/blind_audit.md).

The audit needs items, and the curate stage runs on samples before any item exists, so the
drop is a filter the generate stage applies to its own output, after the splits are assigned
(the proportions are those of the items before the drop). It changes the item set, so only
the explicit recipe key turns it on.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import RecipeError
from ..recipe import BlindSpec
from ..store.parquet import ItemWriter
from ..store.tables import ItemTable
from ..validate.blind import BlindAudit


def drop_blind_solvable(path: Path, spec: BlindSpec, seed: int) -> dict:
    """Rewrite the item file at ``path`` without its blind-solvable items; returns the audit
    report of the items before the drop (``confident`` lists the items removed)."""
    report = BlindAudit(spec, seed).add_all(ItemTable(path)).report()
    if report["status"] != "ok":
        raise RecipeError(
            f"curate.drop_blind_solvable needs the text-only audit, which was {report['status']}",
            where="recipe: curate.drop_blind_solvable",
            fix="pip install 'medvqa-build[audit]', or give blind: {endpoint, model}",
        )
    removed = {c["item_id"] for c in report["confident"]}
    if removed:
        kept = path.with_name(f".{path.name}.kept")
        with ItemWriter(kept) as writer:
            for item in ItemTable(path):
                if item.item_id not in removed:
                    writer.add(item)
        os.replace(kept, path)
    return report
