"""Recipes: one YAML file that names sources, tasks, rendering and exports, validated by
pydantic so a typo is one line naming the key, the bad value and the allowed values."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from .errors import RecipeError, describe_validation_error
from .media.image import DEFAULT_MAX_PIXELS
from .store import yaml_text
from .vocab import COORD_FORMATS

SAMPLE_FILTER_KEYS = ("modality", "scene", "split", "source")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# a name that becomes a file or folder name (build/<recipe>, an export's per-task files)
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.+-]{0,99}")


def file_name(value: str) -> str:
    """``value`` when it can name a file on every system (1-100 of letters, digits, space,
    ``_ . + -``, not starting with a dot or a space); else ValueError saying so."""
    if not _FILE_NAME.fullmatch(value) or value.endswith((" ", ".")):
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise ValueError(
            f"{shown!r} ({len(value)} characters) cannot name a file: use 1-100 letters, "
            "digits, spaces, '_', '.', '+' or '-', starting with a letter or digit"
        )
    return value


class SourceSpec(_Strict):
    """A source and where its raw files are; generated sources take ``generate`` instead."""

    id: str
    root: str | None = None
    generate: dict[str, Any] | None = None
    verify: Literal["header", "decode"] = "header"


class NegativesSpec(_Strict):
    strategy: str = "label_pool"
    mandatory: list[str] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)


class BalanceSpec(_Strict):
    """Answer balance (``balance:``, docs/validity.md): how evenly a task's answer classes (the
    truth each item asks for) are spread. The items are drawn round-robin over the classes; the
    policy caps the most common one. ``balance: false`` turns it off."""

    max_share: float | None = Field(None, gt=0.0, le=1.0)  # of the task's items, per class
    # the most common class at most this many times an even share (1 / answer classes)
    max_ratio: float | None = Field(1.5, ge=1.0)
    min_entropy: float | None = Field(0.95, ge=0.0, le=1.0)  # normalised (1.0 = even)
    # what wins where the pool cannot fill the quota within the policy
    prefer: Literal["balance", "quota"] = "balance"

    @model_validator(mode="before")
    @classmethod
    def _switch(cls, value: Any) -> Any:
        """``true`` is the default policy, ``false`` no policy."""
        if value is True:
            return {}
        if value is False:
            return {"max_share": None, "max_ratio": None, "min_entropy": None}
        return value

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.max_share, self.max_ratio, self.min_entropy))


class TaskSpec(_Strict):
    """One entry of the task list: a generator, its taxonomy, quota and option rules."""

    name: str
    generator: str
    sources: list[str] = Field(default_factory=list)  # empty = every source in the recipe
    category: str
    task: str
    subtask: str | None = None
    quota: int = Field(100, ge=1)
    n_options: int = Field(4, ge=2, le=6)
    negatives: NegativesSpec = Field(default_factory=NegativesSpec)
    prompt_level: str = "image"
    coord_format: Literal[COORD_FORMATS] = "abs"
    where: dict[str, str | list[str]] = Field(default_factory=dict)  # sample filter, e.g. modality
    # "test" = the benchmark; "train" = instruction-tuning items, disjoint by group_id from every
    # test item of the build (EndoVQA-Instruct / MedSG-188K's role)
    split: Literal["test", "train"] = "test"
    params: dict[str, Any] = Field(default_factory=dict)
    # this task's changes to the recipe's ``balance`` (the keys given replace the recipe's)
    balance: BalanceSpec | None = None

    _name = field_validator("name")(file_name)

    @model_serializer(mode="wrap")
    def _without_unset_balance(self, handler) -> dict:
        """A task without ``balance`` dumps as before the key existed."""
        data = handler(self)
        if data.get("balance") is None:
            data.pop("balance", None)
        return data

    @field_validator("where")
    @classmethod
    def _where(cls, value: dict) -> dict:
        bad = sorted(set(value) - set(SAMPLE_FILTER_KEYS))
        if bad:
            raise ValueError(f"cannot filter on {bad}; allowed: {', '.join(SAMPLE_FILTER_KEYS)}")
        return value

    def accepts(self, sample) -> bool:
        """Whether a sample passes the ``where`` filter (values may be one string or a list)."""
        for key, wanted in self.where.items():
            allowed = [wanted] if isinstance(wanted, str) else wanted
            if getattr(sample, key) not in allowed:
                return False
        return True


class RenderSpec(_Strict):
    format: Literal["jpeg", "png"] = "jpeg"
    jpeg_quality: int = Field(92, ge=50, le=100)
    png_level: int = Field(3, ge=0, le=9)
    thickness_px: int | None = None
    max_side: int | None = Field(None, ge=64)  # downscale images whose longer side exceeds this


class ExportSpec(_Strict):
    name: str = "MedVQA"
    formats: list[str] = Field(default_factory=lambda: ["hf", "vlmeval"])
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per-format options

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
            raise ValueError("use letters, digits, '_', '-' and '.' only (it names files)")
        if "mmbench" in value.lower() or "circular" in value.lower():
            raise ValueError(
                "names containing 'mmbench'/'circular' switch VLMEvalKit to circular evaluation"
            )
        return value


class BlindSpec(_Strict):
    """The text-only solvability audit (``blind:``, docs/blind_audit.md): how answerable each
    item is from its question and options alone. By default a cross-validated classifier over
    the build's own items; with ``endpoint`` and ``model`` a text-only language model behind
    an OpenAI-compatible chat-completions endpoint (the only time the build uses network)."""

    threshold: float = Field(0.9, gt=0.0, le=1.0)  # an item answered right with this
    # probability or more is "answered confidently" (blind-solvable)
    margin: float = Field(0.15, ge=0.0, le=1.0)  # a task is flagged above chance + margin ...
    min_z: float = Field(3.0, ge=0.0)  # ... and this many standard errors above chance
    min_items: int = Field(20, ge=4)  # fewer single-answer items in a task: no verdict
    folds: int = Field(5, ge=2, le=20)
    endpoint: str | None = None  # e.g. http://localhost:8000/v1
    model: str | None = None
    api_key_env: str | None = None  # the environment variable holding the key, if one is needed
    cache: str | None = None  # default $MEDVQA_CACHE/blind or ~/.cache/medvqa_build/blind
    timeout_s: float = Field(120.0, gt=0)
    logprobs: bool = True  # ask for the answer letter's probability (vLLM, OpenAI do)

    @model_validator(mode="after")
    def _endpoint_and_model(self) -> BlindSpec:
        if (self.endpoint is None) != (self.model is None):
            raise ValueError("give both endpoint and model (LLM audit), or neither (classifier)")
        return self

    @property
    def uses_llm(self) -> bool:
        return self.endpoint is not None


class Recipe(_Strict):
    """The whole build: sources, tasks, rendering, export, and the one seed."""

    name: str
    benchmark: str = Field(max_length=200)
    seed: int = 0
    # multiplies every task's quota (e.g. 0.1 builds a tenth of EndoBench from what you have)
    quota_scale: float = Field(1.0, gt=0)
    # image embedder for visual hard negatives: "offline", "open_clip:ViT-B-32/openai",
    # {"open_clip": {"model_name": ..., "pretrained": "/path/ckpt.pt"}} (docs/negatives.md)
    embedder: str | dict[str, Any] = "offline"
    embedding_cache: str | None = None  # default $MEDVQA_CACHE/embeddings or ~/.cache/medvqa_build
    # pixels per image: a header claiming more is quarantined before any decode (bombs)
    max_pixels: int = Field(DEFAULT_MAX_PIXELS, ge=1)
    sources: list[SourceSpec]
    tasks: list[TaskSpec]
    # dedup / selection / splits (docs/curation.md); validated by medvqa_build.curate
    curate: dict[str, Any] = Field(default_factory=dict)
    render: RenderSpec = Field(default_factory=RenderSpec)
    export: ExportSpec = Field(default_factory=ExportSpec)
    # the text-only solvability audit; absent = not run (the build's files are as without it)
    blind: BlindSpec | None = None
    # answer balance of every task (docs/validity.md); a task's ``balance`` changes it
    balance: BalanceSpec = Field(default_factory=BalanceSpec)

    @field_validator("blind", mode="before")
    @classmethod
    def _blind_switch(cls, value: Any) -> Any:
        """``blind: true`` is ``blind: {}`` (the classifier), ``blind: false`` no audit."""
        if value is True:
            return {}
        return None if value is False else value

    @model_serializer(mode="wrap")
    def _without_unset_blind(self, handler) -> dict:
        """A recipe without ``blind`` dumps as before the key existed (its fingerprints and
        the cards' recipe text do not change)."""
        data = handler(self)
        if data.get("blind") is None:
            data.pop("blind", None)
        return data

    _name = field_validator("name")(file_name)

    @model_validator(mode="after")
    def _cross_checks(self) -> Recipe:
        ids = [s.id for s in self.sources]
        names = [t.name for t in self.tasks]
        if len(set(names)) != len(names):
            raise ValueError(f"task names must be unique, got {names}")
        for t in self.tasks:
            unknown = [s for s in t.sources if s not in ids]
            if unknown:
                raise ValueError(
                    f"task {t.name!r} names source(s) {unknown} not in the recipe's sources {ids}"
                )
        return self

    # -- loading -----------------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, path: str | os.PathLike, overrides: list[str] | None = None) -> Recipe:
        path = Path(path)
        if not path.exists():
            raise RecipeError("recipe file not found", where=str(path), fix="check the path")
        try:
            data = yaml_text.load(yaml_text.read_utf8(path))
        except yaml_text.YamlProblem as exc:
            raise RecipeError(f"recipe: {exc}", where=str(path)) from None
        return cls.from_dict(data, overrides, where=str(path))

    @classmethod
    def from_dict(
        cls, data: Any, overrides: list[str] | None = None, where: str = "recipe"
    ) -> Recipe:
        """The recipe ``data`` describes, its keys and values checked. Names that live in the
        plug-in registries (sources, generators, negative strategies, prompt levels, export
        formats) are checked where the plug-ins are loaded: ``pipeline.recipes``."""
        if not isinstance(data, dict):
            raise RecipeError("a recipe must be a YAML mapping", where=where)
        for item in overrides or []:
            apply_override(data, item, where)
        try:
            yaml_text.check_sizes(data)
        except yaml_text.YamlProblem as exc:
            raise RecipeError(f"bad recipe: {exc}", where=where) from None
        try:
            recipe = cls.model_validate(data)
        except ValidationError as exc:
            raise RecipeError(
                f"bad recipe: {describe_validation_error(exc)}",
                where=where,
                fix="see docs/recipes.md for every key and its allowed values",
            ) from None
        return recipe

    def resolved_root(self, spec: SourceSpec) -> Path | None:
        """The source root with ``$VAR``/``${VAR}`` expanded; an unset variable is an error."""
        if spec.root is None:
            return None
        expanded = os.path.expandvars(spec.root)
        if "$" in expanded:
            raise RecipeError(
                f"source {spec.id!r}: root {spec.root!r} uses an unset environment variable",
                fix="export the variable or put the path in the recipe",
            )
        return Path(expanded).expanduser()

    def quota(self, spec: TaskSpec) -> int:
        """A task's quota after ``quota_scale`` (at least 1)."""
        return max(1, round(spec.quota * self.quota_scale))

    def balance_for(self, spec: TaskSpec) -> BalanceSpec:
        """The recipe's ``balance`` with the keys the task gives replaced."""
        if spec.balance is None:
            return self.balance
        given = spec.balance.model_dump(include=spec.balance.model_fields_set)
        return self.balance.model_copy(update=given)

    def fingerprint(self, *parts: Any) -> str:
        return fingerprint(self.model_dump(mode="json"), *parts)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def fingerprint(*parts: Any) -> str:
    """Stable hash of JSON-able parts (sorted keys)."""
    payload = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def apply_override(data: dict, item: str, where: str) -> None:
    """Apply ``a.b.0.c=value`` (value parsed as YAML) to a raw recipe mapping."""
    if "=" not in item:
        raise RecipeError(f"--set {item!r} is not KEY=VALUE", where=where, fix="e.g. --set seed=3")
    key, raw = item.split("=", 1)
    try:
        value = yaml_text.load(raw) if raw else ""
    except yaml_text.YamlProblem as exc:
        raise RecipeError(
            f"--set {item!r}: the value {raw!r} is {exc}",
            where=where,
            fix="quote it, e.g. --set 'key=\"text\"'",
        ) from None
    node: Any = data
    parts = key.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise RecipeError(
                    f"--set {key}: {part!r} is not an index of a {len(node)}-item list", where=where
                )
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            raise RecipeError(
                f"--set {key}: cannot descend into {'.'.join(parts[:i])}", where=where
            )
