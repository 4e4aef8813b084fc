"""What the visual samplers share: the fitted table of embedded, labelled samples, the query
lookup, and the final choice of distractors from scored candidate classes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..records import Negatives, Sample
from .base import OptionRequest, not_enough
from .embedder import l2_normalise


@dataclass
class EmbeddingTable:
    """Samples with a label and a unit embedding, row-aligned."""

    sample_ids: list[str]
    embeddings: np.ndarray
    labels: list[str]
    sources: np.ndarray
    modalities: np.ndarray
    groups: np.ndarray
    row_of: dict[str, int]

    @classmethod
    def build(
        cls, samples: Sequence[Sample], embeddings: np.ndarray, labels: Sequence[str | None]
    ) -> EmbeddingTable:
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if not (len(samples) == len(embeddings) == len(labels)):
            raise ValueError(
                f"fit needs aligned inputs: {len(samples)} samples, {len(embeddings)} "
                f"embeddings, {len(labels)} labels"
            )
        keep = [i for i, lab in enumerate(labels) if lab]
        kept = [samples[i] for i in keep]
        ids = [s.sample_id for s in kept]
        rows = embeddings if len(keep) == len(labels) else embeddings[keep]  # no copy if all
        return cls(
            sample_ids=ids,
            embeddings=normalise_rows(rows) if keep else embeddings[:0],
            labels=[str(labels[i]) for i in keep],
            sources=np.array([s.source for s in kept], dtype=object),
            modalities=np.array([s.modality for s in kept], dtype=object),
            groups=np.array([s.group_id for s in kept], dtype=object),
            row_of={sid: r for r, sid in enumerate(ids)},
        )

    def query(self, request: OptionRequest) -> tuple[np.ndarray, int | None]:
        """The query vector and its row in the table (``None`` when not fitted on it)."""
        row = self.row_of.get(request.sample.sample_id) if request.sample is not None else None
        if request.embedding is not None:
            return l2_normalise(np.asarray(request.embedding, dtype=np.float32)), row
        if row is None:
            raise unfitted_query(request)
        return self.embeddings[row], row

    def row_mask(self, request: OptionRequest, same_source: bool, same_modality: bool):
        """Rows allowed as references for this query (``None`` means all)."""
        if request.sample is None or not (same_source or same_modality):
            return None
        mask = np.ones(len(self.sample_ids), dtype=bool)
        if same_source:
            mask &= self.sources == request.sample.source
        if same_modality:
            mask &= self.modalities == request.sample.modality
        return mask


def unfitted_query(request: OptionRequest) -> ValueError:
    """The error for a query whose sample the sampler was not fitted on, without a vector."""
    sid = request.sample.sample_id if request.sample is not None else None
    return ValueError(
        f"no embedding for query sample {sid!r}: fit the sampler on it or pass "
        "OptionRequest(embedding=...)"
    )


NORMALISE_ROWS = 8192  # rows normalised at a time: no full-size temporaries


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """:func:`l2_normalise` of a large matrix into one new array, a block of rows at a time
    (each row is normalised on its own, so the values are those of the one-shot call)."""
    out = np.empty(x.shape, np.float32)
    for start in range(0, len(x), NORMALISE_ROWS):
        out[start : start + NORMALISE_ROWS] = l2_normalise(x[start : start + NORMALISE_ROWS])
    return out


def allowed_classes(request: OptionRequest, classes: Sequence[str]) -> list[str]:
    """Classes that may be distractors: not the truth, a relative of it, or a mandatory
    option, and inside ``request.pool`` when the pool is not empty."""
    taken = {m.casefold() for m in request.mandatory_distractors()}
    pool = {p.casefold() for p in request.pool}
    cands = [c for c in classes if c.casefold() not in taken and (not pool or c.casefold() in pool)]
    return request.ontology.allowed_distractors(request.truth, cands)


def choose_top(
    strategy: str,
    request: OptionRequest,
    class_scores: Mapping[str, float],
    what: str,
) -> Negatives:
    """Mandatory options first, then the ``need`` highest-scoring allowed classes (ties by
    name); scores are aligned with candidates, NaN where a mandatory option has no score."""
    mandatory = request.mandatory_distractors()
    need = request.distractors_needed()
    allowed = allowed_classes(request, sorted(class_scores))
    if need < 0 or len(allowed) < need:
        raise not_enough(request, len(allowed), need, what)
    ranked = sorted(allowed, key=lambda c: (-class_scores[c], c))[:need]
    scores = [float(class_scores.get(m, np.nan)) for m in mandatory]
    scores += [float(class_scores[c]) for c in ranked]
    return Negatives(
        strategy=strategy,
        candidates=tuple(mandatory + ranked),
        scores=tuple(round(s, 6) for s in scores),
        pool_size=len(allowed),
    )
