"""Between two releases of one benchmark: what changed, item by item (:mod:`.diff`), read from
a build folder or an HF export folder alike (:mod:`.snapshot`), written as Markdown, JSON and
a "Changes since" section for the card (:mod:`.changes`)."""

from .changes import (
    FailRule,
    card_section,
    changes_markdown,
    failed_rules,
    parse_fail_on,
    write_card_section,
)
from .diff import diff_releases
from .snapshot import Release, read_release

__all__ = [
    "FailRule",
    "Release",
    "card_section",
    "changes_markdown",
    "diff_releases",
    "failed_rules",
    "parse_fail_on",
    "read_release",
    "write_card_section",
]
