"""Source manifests (``manifests/<id>.yaml``): who owns a dataset, on what terms, how it is
laid out on disk and how its label strings map to canonical names.

A new dataset whose layout is already known is one manifest and no code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import SourceError, describe_validation_error
from .licences import HUB_LICENCES, Redistribution, SourceTerms
from .store import yaml_text

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LayoutPart(BaseModel):
    """One configured generic layout; a source may ship several (images + a video part)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    layout: str
    modality: str | None = None
    scene: str | None = None
    # true where nothing of the source makes sense without this part: convert stops (exit 2)
    # when it is missing; otherwise the parts present convert and the report names the rest
    required: bool = False
    options: dict[str, Any] = Field(default_factory=dict)


class Archive(BaseModel):
    """One file the owners publish, and what it unpacks to (for the docs and the tests)."""

    model_config = ConfigDict(extra="forbid")

    file: str  # as the owners name it, e.g. kvasir-dataset-v2.zip
    # the folder it creates, relative to ROOT ("." when its files land in the folder unpacked in)
    unpacks_to: str = "."
    parts: list[str] = Field(default_factory=list)  # the manifest parts it holds
    note: str = ""


class SourceManifest(BaseModel):
    """Metadata that travels with every item built from the source."""

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str
    homepage: str
    licence: str
    # the Hub licence id of the owners' terms ("other" where they are no standard licence) and
    # whether the source's pixels may be published: the gate of `push` (docs/publishing.md)
    licence_id: str
    redistribution: Redistribution
    access: Literal["open", "registration", "request", "generated"]
    access_terms: str
    citation: str
    modality: str
    scene: str | None = None
    layout: str = Field(description="human description of the on-disk layout")
    download: str = ""
    label_map: dict[str, str] = Field(default_factory=dict)
    # canonical image label -> scene, for sources that span scenes (Kvasir: z-line is gastroscopy)
    scene_map: dict[str, str] = Field(default_factory=dict)
    ontology: dict[str, Any] = Field(default_factory=dict)
    # what the source's samples carry (labels, regions, masks, attribute:phase, ...); empty =
    # inferred from the layouts (medvqa_build.tasks.requirements)
    provides: list[str] = Field(default_factory=list)
    # the files the owners publish (one archive may hold several parts, one part come in
    # several archives); quirks the converter handles, each with where it is documented
    archives: list[Archive] = Field(default_factory=list)
    quirks: list[str] = Field(default_factory=list)
    parts: list[LayoutPart]

    @field_validator("id")
    @classmethod
    def _id_is_slug(cls, value: str) -> str:
        if not value or value != value.lower() or " " in value:
            raise ValueError("id must be a lower-case slug such as 'kvasir-seg'")
        return value

    @field_validator("licence_id")
    @classmethod
    def _licence_is_hub_id(cls, value: str) -> str:
        if value not in HUB_LICENCES:
            raise ValueError(
                f"licence_id {value!r} is not a Hub licence id (e.g. cc-by-4.0, cc0-1.0; "
                "'other' for the owners' own terms)"
            )
        return value

    @field_validator("citation")
    @classmethod
    def _citation_is_bibtex(cls, value: str) -> str:
        if not value.strip().startswith("@"):
            raise ValueError("citation must be a BibTeX entry starting with '@'")
        return value.strip() + "\n"

    @model_validator(mode="after")
    def _terms_agree(self) -> SourceManifest:
        if "-nc" in self.licence_id and self.redistribution == "allowed":
            raise ValueError(
                f"licence_id {self.licence_id} is non-commercial: redistribution must be "
                "non-commercial or not-allowed"
            )
        return self

    def terms(self) -> SourceTerms:
        """What a build records of the owners' terms (push's licence gate reads the record)."""
        return SourceTerms(
            title=self.title,
            homepage=self.homepage,
            licence=self.licence,
            licence_id=self.licence_id,
            redistribution=self.redistribution,
            access=self.access,
            access_terms=self.access_terms,
            citation=self.citation,
        )

    @classmethod
    def from_yaml(cls, path: str | Path) -> SourceManifest:
        path = Path(path)
        try:
            # the C loader when libyaml is present: manifests are read on every command
            data = yaml_text.load(yaml_text.read_utf8(path), _YAML_LOADER)
        except yaml_text.YamlProblem as exc:
            raise SourceError(
                f"manifest: {exc}", where=str(path), fix="fix or remove the file"
            ) from None
        try:
            manifest = cls.model_validate(data)
        except ValidationError as exc:
            raise SourceError(
                f"bad manifest: {describe_validation_error(exc)}",
                where=str(path),
                fix="see docs/manifests.md for the manifest keys",
            ) from None
        if manifest.id != path.stem:
            raise SourceError(
                f"manifest id {manifest.id!r} differs from its file name",
                where=str(path),
                fix=f"rename the file to {manifest.id}.yaml",
            )
        return manifest
