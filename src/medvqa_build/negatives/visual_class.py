"""``visual_class``: SpineBench's hard negatives, the classes whose image library looks most
like the query image (SpineBench appendix B: 200 random images per disease, cosine similarity
of the query to every library image, the top different classes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..records import Negatives, Sample
from ..store.packed import PackedStrings, SortedStrings
from .base import SAMPLERS, OptionRequest
from .embedder import l2_normalise
from .visual_base import (
    Balance,
    choose_top,
    draw_per_class,
    normalise_rows,
    per_class_cap,
    unfitted_query,
)

AGGREGATES = ("max", "mean", "topk")


@SAMPLERS.register("visual_class")
class VisualClassSampler:
    """Score each class by ``aggregate`` (max / mean / mean of the ``topk`` best) of the
    query's cosine similarity to that class's library of up to ``library_size`` images; the
    query itself is never in its own comparison. ``same_source`` / ``same_modality`` restrict
    the library to images of the query's source / modality. ``balance_frequency`` (true),
    ``breadth`` (2.0), ``hardness`` (1.0): with the task's ledger, the distractors come from the
    ``breadth x need`` best classes, those owed showings first
    (:class:`~medvqa_build.negatives.visual_base.Balance`)."""

    name = "visual_class"
    needs_embeddings = True
    reads_rows = True  # fit reads the library's rows and each query's row on demand

    draws_library = True  # fit draws the library from the whole pool: only it is embedded
    pool_cap_param = "library_size"  # the per-class cap the build report states

    def __init__(
        self,
        *,
        library_size: int | str = 200,
        aggregate: str = "max",
        topk: int = 5,
        same_source: bool = False,
        same_modality: bool = False,
        seed: int = 0,
        balance_frequency: bool = True,
        breadth: float = 2.0,
        hardness: float = 1.0,
        embed_candidates: int | str | None = None,
    ):
        # how many of the task's candidates a build embeds (stages/embed_demand.py)
        self.embed_candidates = (
            None
            if embed_candidates is None
            else (per_class_cap(embed_candidates, "embed_candidates") or "all")
        )
        if aggregate not in AGGREGATES:
            raise ValueError(f"unknown aggregate {aggregate!r}: use one of {', '.join(AGGREGATES)}")
        self.library_size = per_class_cap(library_size, "library_size")
        self.aggregate, self.topk = aggregate, int(topk)
        self.same_source, self.same_modality, self.seed = same_source, same_modality, seed
        self.balance = Balance.of(balance_frequency, breadth, hardness)
        self._pool: _PoolRows | None = None

    def fit(
        self,
        samples: Sequence[Sample],
        embeddings: np.ndarray,
        labels: Sequence[str | None],
        rng: np.random.Generator | None = None,
    ) -> VisualClassSampler:
        """Draw each class's library and keep only it (vectors, sources, modalities) plus the
        pool's sample ids: a query's vector is read from ``embeddings`` when it is asked for.

        ``embeddings`` is an array or anything indexed like one by a row number or an array
        of them (generate passes rows read from the embed stage's file on demand), so the
        pool's vectors are never all in memory: 10^5 pool images of a 512-d embedder would
        hold 200 MiB for the ~2,000 library rows this sampler compares with."""
        rng = rng if rng is not None else np.random.default_rng(self.seed)
        if not (len(samples) == len(embeddings) == len(labels)):
            raise ValueError(
                f"fit needs aligned inputs: {len(samples)} samples, {len(embeddings)} "
                f"embeddings, {len(labels)} labels"
            )
        keep = [i for i, lab in enumerate(labels) if lab]  # table row r is pool index keep[r]
        has = getattr(embeddings, "has", None)  # a pool with rows left unembedded (the cap)
        lib_rows: list[int] = []
        self._classes: list[str] = []
        self._bounds: list[tuple[int, int]] = []
        for lab, rows in draw_per_class(labels, keep, self.library_size, rng):
            if has is not None:
                rows = [r for r in rows if has(keep[r])]
            self._classes.append(lab)
            self._bounds.append((len(lib_rows), len(lib_rows) + len(rows)))
            lib_rows.extend(int(r) for r in rows)
        self._lib_rows = np.array(lib_rows, dtype=np.int64)
        at = np.array([keep[r] for r in lib_rows], dtype=np.int64)
        if len(at):
            self._lib = normalise_rows(np.asarray(embeddings[at], dtype=np.float32))
        else:
            self._lib = np.zeros((0, _width(embeddings)), np.float32)
        self._lib_sources = np.array([samples[i].source for i in at.tolist()], dtype=object)
        self._lib_modalities = np.array([samples[i].modality for i in at.tolist()], dtype=object)
        ids = getattr(samples, "ids", None)  # generate's packed refs: no object per sample
        if isinstance(ids, PackedStrings):
            pool_ids = SortedStrings.of_packed(ids, keep)
        else:
            pool_ids = SortedStrings([samples[i].sample_id for i in keep])
        self._pool = _PoolRows(pool_ids, keep, embeddings)
        return self

    def embed_demand(self, labels: Sequence[str | None], rng: np.random.Generator) -> np.ndarray:
        """The pool indices :meth:`fit` draws its library from, given the same pool, labels
        and ``rng``: the only pool images (besides the queries) a build needs to embed."""
        keep = [i for i, lab in enumerate(labels) if lab]
        rows = [
            r for _, drawn in draw_per_class(labels, keep, self.library_size, rng) for r in drawn
        ]
        return np.array([keep[r] for r in rows], dtype=np.int64)

    def class_scores(self, request: OptionRequest) -> dict[str, float]:
        """Aggregated similarity of the query to every class with library images left."""
        if self._pool is None:
            raise RuntimeError("visual_class: call fit(samples, embeddings, labels) first")
        q, row = self._pool.query(request)
        sims = self._lib @ q
        valid = np.ones(len(sims), dtype=bool)
        if row is not None:
            valid &= self._lib_rows != row
        if request.sample is not None and self.same_source:
            valid &= self._lib_sources == request.sample.source
        if request.sample is not None and self.same_modality:
            valid &= self._lib_modalities == request.sample.modality
        scores: dict[str, float] = {}
        for lab, (a, b) in zip(self._classes, self._bounds, strict=True):
            s = sims[a:b][valid[a:b]]
            if len(s) == 0:
                continue
            if self.aggregate == "max":
                scores[lab] = float(s.max())
            elif self.aggregate == "mean":
                scores[lab] = float(s.mean())
            else:
                k = min(self.topk, len(s))
                scores[lab] = float(np.partition(s, len(s) - k)[len(s) - k :].mean())
        return scores

    def sample(self, request: OptionRequest, rng: np.random.Generator) -> Negatives:
        return choose_top(
            self.name, request, self.class_scores(request), "visually ranked classes", self.balance
        )


def _width(embeddings) -> int:
    shape = getattr(embeddings, "shape", None)
    return int(shape[1]) if shape is not None and len(shape) == 2 else 0


class _PoolRows:
    """The fitted pool's sample ids as :class:`SortedStrings` (about 50 bytes a sample instead
    of a dict entry and a vector), each with its table row and its row of ``embeddings``."""

    def __init__(self, ids: SortedStrings, index: list[int], embeddings):
        self._ids = ids  # table row r = position r in ``ids``
        self._index = np.asarray(index, dtype=np.int64)  # row of ``embeddings`` per table row
        self._embeddings = embeddings

    def query(self, request: OptionRequest) -> tuple[np.ndarray, int | None]:
        """The unit query vector and the query's table row (``None`` when not fitted on it)."""
        row = self._ids.index(request.sample.sample_id) if request.sample is not None else None
        if request.embedding is not None:
            return l2_normalise(np.asarray(request.embedding, dtype=np.float32)), row
        if row is None:
            raise unfitted_query(request)
        vector = np.asarray(self._embeddings[int(self._index[row])], dtype=np.float32)
        return l2_normalise(vector[None, :])[0], row
