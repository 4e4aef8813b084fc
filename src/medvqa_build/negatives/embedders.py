"""``make_embedder``: an embedder from a recipe's ``embedder`` value, among the registered
ones (the weight-free ``offline`` one and open_clip models, which load torch only when
built)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import offline_embedder, open_clip_embedder  # noqa: F401  (register the embedders)
from .embedder import EMBEDDERS, Embedder, EmbedderError


def embedder_name(spec: str | Mapping[str, Any] | Embedder) -> str | None:
    """The registered name a recipe's ``embedder`` value builds (None for an embedder object
    or a value :func:`make_embedder` refuses): without building it, which may load torch."""
    if isinstance(spec, str):
        return spec.partition(":")[0]
    if isinstance(spec, Mapping):
        if "name" in spec:
            return str(spec["name"])
        if len(spec) == 1:
            return str(next(iter(spec)))
    return None


def make_embedder(spec: str | Mapping[str, Any] | Embedder) -> Embedder:
    """Build an embedder from a recipe value.

    ``"offline"`` · ``"open_clip:ViT-B-32"`` (random init) · ``"open_clip:ViT-B-32/openai"`` ·
    ``"open_clip:hf-hub:org/repo"`` · ``"open_clip:local-dir:/path"`` ·
    ``{"open_clip": {"model_name": ..., "pretrained": "/path/ckpt.pt", "batch_size": 64}}`` ·
    ``{"name": "offline", "image_size": 128}``.
    """
    if hasattr(spec, "embed_paths"):
        return spec  # type: ignore[return-value]
    where = "recipe: embedder"
    if isinstance(spec, str):
        name, _, arg = spec.partition(":")
        factory = EMBEDDERS.get(name, where=where)
        if not arg:
            return factory()
        if name != "open_clip":
            raise EmbedderError(f"embedder {name!r} takes no argument", where=where, fix=name)
        if arg.startswith(("hf-hub:", "local-dir:")):
            return factory(model_name=arg)
        model, _, pretrained = arg.partition("/")
        return factory(model_name=model, pretrained=pretrained or None)
    if isinstance(spec, Mapping):
        params = dict(spec)
        if "name" in params:
            name = params.pop("name")
        elif len(params) == 1:
            name, inner = next(iter(params.items()))
            params = dict(inner or {})
        else:
            raise EmbedderError(
                f"cannot read embedder spec {spec!r}",
                where=where,
                fix='use {"name": "offline", ...} or {"open_clip": {"model_name": ...}}',
            )
        factory = EMBEDDERS.get(str(name), where=where)
        try:
            return factory(**params)
        except TypeError as exc:
            raise EmbedderError(f"bad embedder parameters: {exc}", where=where) from exc
    raise EmbedderError(f"cannot read embedder spec {spec!r}", where=where, fix="a string or map")
