"""How to mend a damaged Parquet file, shared by the readers that refuse one (``store.parquet``)
and the CLI's one-line translation of a pyarrow error (``cli.failures``); no pyarrow here, so the
CLI can import it at start."""

from __future__ import annotations

from pathlib import Path


def damaged_fix(path: Path | None) -> str:
    """Delete the stage folder holding ``path`` when the file is a build's (a stage is reused
    while its folder is there), else write the file again."""
    stage = next(
        (p for p in (path.parents if path else ()) if (p / "_SUCCESS.json").is_file()), None
    )
    if stage is not None:
        return f"delete the stage folder {stage} and rerun `medvqa-build run`: the stage is rebuilt"
    return (
        "it was changed or cut after it was written: write it again with the command that made it"
    )
