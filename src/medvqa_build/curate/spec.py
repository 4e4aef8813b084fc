"""The ``curate:`` section of a recipe: deduplication, representative selection and splits.

Every key is optional; an empty section means exact-duplicate removal only (cheap: one file
hash per sample) and no selection or re-splitting. See docs/curation.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import RecipeError, describe_validation_error

STRATIFY_KEYS = ("task", "label", "source", "scene")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DedupSpec(_Strict):
    """Which duplicates to remove; thresholds ``None`` switch a criterion off."""

    exact: bool = True
    phash_max_hamming: int | None = Field(None, ge=0, le=32)  # of 64 pHash bits
    embed_min_cosine: float | None = Field(None, gt=0.0, le=1.0)
    keep: Literal["largest", "first"] = "largest"
    prefer_sources: list[str] = Field(default_factory=list)  # their copies win, in this order


class SelectSpec(_Strict):
    """k-center greedy selection of representative samples, balanced over labels."""

    method: Literal["kcenter"] = "kcenter"
    per_label: int | None = Field(None, ge=1)
    total: int | None = Field(None, ge=1)


class SplitSpec(_Strict):
    """Group-aware, stratified split of the items."""

    proportions: dict[str, float] = Field(default_factory=lambda: {"test": 1.0})
    by: Literal["group_id", "sample_id"] = "group_id"
    stratify: list[str] = Field(default_factory=lambda: ["task", "label"])
    use_official: bool = False
    official_map: dict[str, str] = Field(default_factory=dict)  # e.g. {val: train}

    @field_validator("proportions")
    @classmethod
    def _proportions(cls, value: dict[str, float]) -> dict[str, float]:
        if not value:
            raise ValueError("give at least one split, e.g. {test: 0.8, train: 0.2}")
        if any(v <= 0 for v in value.values()):
            raise ValueError(f"every proportion must be > 0, got {value}")
        total = sum(value.values())
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"proportions must add up to 1, they add up to {total:g}")
        return value

    @field_validator("stratify")
    @classmethod
    def _stratify(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if v not in STRATIFY_KEYS]
        if bad:
            raise ValueError(f"cannot stratify by {bad}; allowed: {', '.join(STRATIFY_KEYS)}")
        return value


class CurateSpec(_Strict):
    dedup: DedupSpec | None = Field(default_factory=DedupSpec)
    select: SelectSpec | None = None
    split: SplitSpec | None = None
    # remove the items the text-only audit answers confidently (recipe ``blind``, or its
    # defaults): a filter after generate, since it needs the items (docs/blind_audit.md)
    drop_blind_solvable: bool = False

    @property
    def needs_embeddings(self) -> bool:
        """Whether curation uses image embeddings (the pipeline must then embed samples)."""
        return self.select is not None or (
            self.dedup is not None and self.dedup.embed_min_cosine is not None
        )


def parse_curate_spec(
    spec: dict[str, Any] | CurateSpec | None, where: str = "recipe"
) -> CurateSpec:
    """Validate a recipe's ``curate`` mapping; a bad key raises :class:`RecipeError` naming it."""
    if isinstance(spec, CurateSpec):
        return spec
    if spec is not None and not isinstance(spec, dict):
        raise RecipeError(f"curate must be a mapping, got {type(spec).__name__}", where=where)
    try:
        return CurateSpec.model_validate(spec or {})
    except ValidationError as exc:
        raise RecipeError(
            f"bad curate section: {describe_validation_error(exc)}",
            where=f"{where}: curate",
            fix="see docs/curation.md for every curate key and its allowed values",
        ) from None
