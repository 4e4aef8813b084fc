"""The text-only audit's language-model mode: each item's question and options, without the
image, asked of a model behind an OpenAI-compatible chat-completions endpoint.

Requests are deterministic as far as the server allows (temperature 0 and the build's seed);
every answer is cached on disk under a hash of (model, prompt), so a rerun asks nothing again
and an audit already cached needs no network.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

from ..errors import AuditError
from ..recipe import BlindSpec
from ..store.atomic import write_atomic
from ..vocab import LETTERS

INSTRUCTION = (
    "You are answering a multiple-choice question about a medical image that you cannot see. "
    "Choose the most likely option from the text alone. Reply with the option's letter only."
)


def blind_prompt(question: str, options: tuple[str, ...] | list[str]) -> str:
    """The user message: the question and lettered options, as VLMEvalKit lays them out."""
    lines = [f"Question: {question}", "Options:"]
    lines += [f"{LETTERS[k]}. {o}" for k, o in enumerate(options)]
    return "\n".join(lines + ["Answer with the option's letter."])


def default_cache_dir() -> Path:
    """``$MEDVQA_CACHE/blind``, else ``$XDG_CACHE_HOME/medvqa_build/blind``."""
    if os.environ.get("MEDVQA_CACHE"):
        return Path(os.environ["MEDVQA_CACHE"]) / "blind"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medvqa_build" / "blind"


def parse_letter(text: str, n_options: int) -> int:
    """The option index a reply names (its first standalone letter among the options), or -1."""
    for match in re.finditer(r"\b([A-Z])\b", text or ""):
        k = LETTERS.index(match.group(1))
        if k < n_options:
            return k
    return -1


def _letter_probability(choice: dict, letter: str) -> float | None:
    """exp(logprob) of the first reply token that is the letter, when the server sent them."""
    content = (choice.get("logprobs") or {}).get("content") or []
    for token in content:
        if str(token.get("token", "")).strip().strip(".)") == letter:
            return math.exp(float(token["logprob"]))
    return None


class BlindLLM:
    """Answers of one model, asked once per distinct prompt (then read from the cache)."""

    def __init__(self, spec: BlindSpec, seed: int):
        self.spec, self.seed = spec, seed
        self.cache = Path(spec.cache).expanduser() if spec.cache else default_cache_dir()
        base = (spec.endpoint or "").rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.asked = 0  # requests sent this run (the rest came from the cache)

    def answer(self, question: str, options: tuple[str, ...]) -> tuple[int, float]:
        """(option index or -1, probability of that answer; 1.0 when the server gives none)."""
        prompt = blind_prompt(question, options)
        key = hashlib.sha256(json.dumps([self.spec.model, prompt]).encode()).hexdigest()
        path = self.cache / key[:2] / f"{key}.json"
        if path.is_file():
            cached = json.loads(path.read_text(encoding="utf-8"))
        else:
            cached = self._ask(prompt)
            write_atomic(path, json.dumps(cached, indent=1, sort_keys=True) + "\n")
        k = parse_letter(cached["reply"], len(options))
        if k < 0:
            return -1, 0.0
        p = _letter_probability(cached, LETTERS[k])
        return k, 1.0 if p is None else p

    def _ask(self, prompt: str) -> dict:
        body = {
            "model": self.spec.model,
            "messages": [
                {"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": prompt},
            ],
            "temperature": 0,
            "seed": self.seed,
            "max_tokens": 8,
        }
        if self.spec.logprobs:
            body.update(logprobs=True, top_logprobs=5)
        headers = {"Content-Type": "application/json"}
        if self.spec.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ.get(self.spec.api_key_env, '')}"
        request = urllib.request.Request(self.url, json.dumps(body).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=self.spec.timeout_s) as response:
                reply = json.loads(response.read().decode("utf-8"))
            choice = reply["choices"][0]
            text = choice["message"]["content"]
        except (urllib.error.URLError, TimeoutError, OSError, ValueError, KeyError) as exc:
            raise AuditError(
                f"the blind audit could not ask {self.spec.model!r} at {self.url} ({exc})",
                where="recipe: blind.endpoint",
                fix="start the server or correct blind.endpoint/model; without them the "
                "audit uses its offline classifier",
            ) from None
        self.asked += 1
        return {
            "model": self.spec.model,
            "prompt": prompt,
            "reply": text or "",
            "logprobs": choice.get("logprobs"),
        }
