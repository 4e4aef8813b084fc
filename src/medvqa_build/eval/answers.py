"""Reading a model's reply as an answer: the option letter(s) it names, the way each client
reads it, so a build's own score agrees with VLMEvalKit's and lmms-eval's where they are right.

Three readers of a single-choice reply:

* :func:`vlmeval_choice`: VLMEvalKit's rule-based matcher (``vlmeval/utils/matching_util.py``
  ``can_infer``, no judge model): exactly one option letter among the reply's last words
  (after ``.()[],:;!*#{}`` become spaces), else exactly one option whose text the reply
  contains.
* :func:`lmms_choice`: the ``parse_letters`` of the lmms-eval task this build exports
  (``export/lmms_utils.py``, run by lmms-eval itself): the first option letter standing alone.
* :func:`choice_letters`: this project's reader, used for plain prediction files and for every
  multi-select item: letters (``"A,C"``, ``"A and C"``, ``"AC"``), else option text, where an
  option whose text lies inside a longer matching option ("polyp" in "polyp with bleeding")
  gives way to the longer one instead of making the reply ambiguous.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ..export.lmms_utils import parse_letters as _lmms_parse_letters
from ..vocab import LETTERS
from .scoring import parse_letters

_PUNCT = str.maketrans({c: " " for c in ".()[],:;!*#{}"})
_BOXED = re.compile(r"\\boxed\{(.*?)\}")
_VERBOSE_ANSWER = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**([ABCD])\**")
_REFUSALS = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)


def _words(text: str) -> list[str]:
    return text.translate(_PUNCT).split()


def _vlmeval_letter(text: str, letters: str) -> str | None:
    """``can_infer_option``: a letter, ``"Z"`` for a refusal, or ``None``."""
    if any(r in text for r in _REFUSALS):
        return "Z"
    words = _words(text)
    found = [c for c in letters if c in words]
    if len(found) == 1:
        if os.environ.get("VERBOSE", 0) and "A" in words and len(words) > 3:
            return None  # VLMEvalKit's "A might be a quantifier" check (verbose runs only)
        if words.index(found[0]) > len(words) - 5:
            return found[0]
    elif not found and "Z" in words:
        return "Z"
    verbose = _VERBOSE_ANSWER.search(text)
    if verbose and verbose.group(1).upper() in letters:
        return verbose.group(1).upper()
    return None


def vlmeval_choice(text: str, options: Sequence[str]) -> str | None:
    """VLMEvalKit's ``can_infer`` (as of its August 2026 ``matching_util.py``): the letter it
    reads, ``"Z"`` for a refusal, ``None`` when it cannot tell (VLMEvalKit then asks its judge
    model, or with exact matching scores the reply wrong).

    A letter counts when it is the only option letter among the words and stands in the last
    four of them; else "(correct) answer is B" (A-D); else the one option whose text the
    reply contains, if the reply is at most twice as long as all options together."""
    text = str(text)
    letters = LETTERS[: len(options)]
    if "Failed to obtain answer via API" not in text:  # else only the option text is tried
        letter = _vlmeval_letter(text, letters)
        if letter:
            return letter
    low = text.lower()
    if len(low) > 2 * sum(len(str(o)) for o in options):
        return None
    contained = [c for c, o in zip(letters, options, strict=False) if str(o).lower() in low]
    return contained[0] if len(contained) == 1 else None


def lmms_choice(text: str, options: Sequence[str]) -> str | None:
    """The letter the exported lmms-eval task reads (its own code), or ``None``."""
    letters = _lmms_parse_letters(text, len(options))  # single-answer: the first letter
    return letters[0] if letters else None


def _strip_label(text: str) -> str:
    """``"B. polyp"`` / ``"(B) polyp"`` / ``"Answer: polyp"`` -> ``"polyp"``."""
    text = re.sub(r"^\s*(?:answer\s*(?:is)?\s*:?\s*)", "", text, flags=re.I)
    return re.sub(r"^\s*\(?[A-Z]\s*[).:]\s+", "", text).strip().rstrip(".").strip()


def _option_text(text: str, options: Sequence[str], multi: bool) -> frozenset[str]:
    """Letters of the options a reply names by their text."""
    low = " ".join(_strip_label(text).lower().split())
    opts = [" ".join(str(o).lower().split()) for o in options]
    exact = [LETTERS[k] for k, o in enumerate(opts) if o and o == low]
    if exact:
        return frozenset(exact[:1])
    hits = [k for k, o in enumerate(opts) if o and re.search(rf"(?<!\w){re.escape(o)}(?!\w)", low)]
    # an option inside a longer option that also matches is that longer option's words
    hits = [k for k in hits if not any(k != j and opts[k] in opts[j] for j in hits)]
    if multi or len(hits) == 1:
        return frozenset(LETTERS[k] for k in hits)
    return frozenset()


def choice_letters(text: str, options: Sequence[str], multi: bool = False) -> frozenset[str]:
    """The option letters a reply names (empty when it names none, or several for a
    single-choice item). Letters first, then option text."""
    text = str(text or "")
    boxed = _BOXED.search(text)
    if boxed:
        text = boxed.group(1)
    n = len(options)
    if multi:
        letters = parse_letters(text, n)
        return letters or _option_text(text, options, True)
    found = {c for c in LETTERS[:n] if c in _words(text)}
    if len(found) == 1:
        letter = next(iter(found))
        # "A" is also an article: "A polyp with ..." names an option by its text
        words = _words(text)
        if letter != "A" or len(words) <= 3 or not _option_text(text, options, False):
            return frozenset(found)
    if len(found) > 1:
        return frozenset()
    return _option_text(text, options, False)


PARSERS = {"vlmeval": vlmeval_choice, "lmms-eval": lmms_choice}

__all__ = ["PARSERS", "choice_letters", "lmms_choice", "vlmeval_choice"]
