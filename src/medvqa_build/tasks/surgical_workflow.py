"""Surgical workflow: EndoBench's Macro Phases Identification (surgical phase, surgical step)
and Micro Operation Analysis (surgical action, tool-tissue interaction).

Phase and step are frame attributes (Cholec80 phase tables, PSI-AVA ``phase``/``step``).
Actions and interactions are per instrument where the source says so (PSI-AVA's
``region<k>.actions``): the question names the instrument, and an instrument whose label occurs
twice in the frame or that does several things at once is skipped (the answer would be
ambiguous). Without per-region values the frame-level attribute is used when single-valued.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..records import Item, Sample
from .attribute_classification import AttributeClassification, single_value
from .base import TASKS, Candidate, GenContext
from .columns import Columns, NotColumnar, map_entries, strings
from .common import sampled_distractors, sampled_item, templated


@TASKS.register("surgical_phase")
class SurgicalPhase(AttributeClassification):
    name = "surgical_phase"
    needs = "a phase attribute per frame (params.attribute, default phase)"
    default_attribute = "phase"
    templates = (
        "Which surgical phase is shown in this frame?",
        "What phase of the procedure does this image belong to?",
        "Identify the surgical phase depicted in this frame.",
        "During which phase of the operation was this frame captured?",
        "Which stage of the surgery is shown here?",
        "At what phase of the operation is the surgical team in this image?",
    )


@TASKS.register("surgical_step")
class SurgicalStep(AttributeClassification):
    name = "surgical_step"
    needs = "a step attribute per frame (params.attribute, default step)"
    default_attribute = "step"
    templates = (
        "Which surgical step is being performed in this frame?",
        "What step of the procedure does this image show?",
        "Identify the surgical step depicted in this image.",
        "Which step of the operation is under way in this frame?",
        "What is the surgeon doing at this step of the procedure?",
    )


class InstrumentActivity(AttributeClassification):
    """Per-instrument value of ``params.field`` (``region<k>.<field>`` attributes), else the
    frame's single value of it. ``values`` keeps only those answers."""

    default_attribute = "actions"
    frame_templates: tuple[str, ...] = ()

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        field = params.get("field", params.get("attribute", cls.default_attribute))
        return [{f"region_attribute:{field}", "regions"}, {f"attribute:{field}"}]

    @property
    def field(self) -> str:
        return str(self.params.get("field", self.params.get("attribute", self.default_attribute)))

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        only = set(self.params.get("values", []))
        out = []
        for s in samples:
            per_region = [
                k for k in range(len(s.regions)) if f"region{k}.{self.field}" in s.attributes
            ]
            if per_region:
                twice = {lab for lab, n in Counter(r.label for r in s.regions).items() if n > 1}
                for k in per_region:
                    value = single_value(s.attributes[f"region{k}.{self.field}"])
                    region = s.regions[k]
                    if (
                        value is not None
                        and region.label not in twice
                        and (not only or value in only)
                    ):
                        out.append(Candidate(s, value, region, k))
                continue
            value = single_value(s.attributes.get(self.field))
            if value is not None and (not only or value in only):
                out.append(Candidate(s, value))
        return out

    plan_columns = ("attributes", "regions.list.element.label")

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``attributes`` and region labels: a sample with a
        ``region<k>.<field>`` entry for one of its regions asks about those regions (in
        order of ``k``), another about the frame."""
        only = strings(self.params.get("values", []))
        n = len(pool)
        parents, keys, values = map_entries(batch, pool)
        regions = batch["regions"]
        if len(pool) < len(regions):
            regions = regions.take(pa.array(pool, pa.int64()))
        owner = np.asarray(pc.list_parent_indices(regions), np.int64)
        flat = pc.list_flatten(regions)
        if flat.null_count or pc.struct_field(flat, "label").null_count:
            raise NotColumnar("a region without a label")
        n_regions = np.bincount(owner, minlength=n)
        starts = np.r_[0, np.cumsum(n_regions)[:-1]]  # each sample's first region in flat
        # region<k>.<field>, k written as f"region{k}" writes it, below the region count
        pattern = r"^region(?P<k>0|[1-9][0-9]{0,8})\." + re.escape(self.field) + "$"
        found = pc.extract_regex(keys, pattern)
        hit = np.asarray(pc.is_valid(found))
        k = np.asarray(pc.cast(pc.struct_field(found, "k").filter(pa.array(hit)), pa.int64()))
        at, raw = parents[hit], values.filter(pa.array(hit))
        real = k < n_regions[at]
        at, k, raw = at[real], k[real], raw.filter(pa.array(real))
        per_region = np.bincount(at, minlength=n) > 0
        if len(np.unique(at * (int(k.max()) + 1 if len(k) else 1) + k)) != len(k):
            raise NotColumnar("an attribute twice in a sample")
        order = np.lexsort((k, at))
        at, k, raw = at[order], k[order], raw.take(pa.array(order, pa.int64()))
        # labels twice in the frame: its regions are not asked about
        label = pc.struct_field(flat, "label").dictionary_encode()
        codes = np.asarray(label.indices, np.int64)
        width = len(label.dictionary) or 1
        pairs, counts = np.unique(owner * width + codes, return_counts=True)
        twice = np.isin(owner * width + codes, pairs[counts > 1])
        ok_region = ~twice[starts[at] + k] if len(at) else np.zeros(0, bool)
        region_truth = self._values(raw, only)
        keep = ok_region & np.asarray(pc.is_valid(region_truth))
        # the frame's value where no region has one
        frame = np.flatnonzero(~per_region)
        frame_raw = _lookup_last(parents, keys, values, self.field, frame, n)
        frame_truth = self._values(frame_raw, only)
        frame_keep = np.asarray(pc.is_valid(frame_truth))
        # both, ordered by sample, then k (a frame candidate is its sample's only one)
        rows = np.concatenate([at[keep], frame[frame_keep]])
        truths = pa.concat_arrays(
            [region_truth.filter(pa.array(keep)), frame_truth.filter(pa.array(frame_keep))]
        )
        order = np.argsort(rows, kind="stable")
        rows = rows[order]
        starts_of = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]]) if len(rows) else rows
        run = np.repeat(starts_of, np.diff(np.r_[starts_of, len(rows)])) if len(rows) else rows
        ordinals = np.arange(len(rows), dtype=np.int64) - run
        return pool[rows], ordinals, truths.take(pa.array(order, pa.int64()))

    @staticmethod
    def _values(raw: pa.Array, only: list[str]) -> pa.Array:
        """Each raw value's :func:`single_value` where it is one of ``only`` (or any), else
        null; each distinct raw value mapped once."""
        encoded = raw.dictionary_encode()
        mapped = [single_value(v) for v in encoded.dictionary.to_pylist()]
        mapped = [v if v is not None and (not only or v in only) else None for v in mapped]
        return pa.array(mapped, pa.string()).take(encoded.indices)

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        negatives = sampled_distractors(cand, ctx, cand.truth, ctx.spec.n_options)
        if cand.region is not None:
            question, template_id = templated(self, index, tool=cand.region.label)
        else:
            k = index % len(self.frame_templates)
            question, template_id = self.frame_templates[k], f"{self.name}/frame/{k}"
        return sampled_item(
            cand,
            ctx,
            negatives,
            question,
            template_id,
            prompt_geometry=self.prompt_shapes(cand, ctx.shape_kind, "red"),
        )


def _lookup_last(parents, keys, values, key: str, frame: np.ndarray, n: int) -> pa.Array:
    """The value of ``key`` (the last entry, as a dict keeps it) of the pool samples
    ``frame``, null where it has none."""
    is_key = np.asarray(pc.equal(keys, key))
    at = parents[is_key]
    entry = np.full(n, -1, np.int64)
    entry[at] = np.flatnonzero(is_key)  # a later entry of a sample overwrites an earlier one
    picked = entry[frame]
    return values.take(pa.array(picked, pa.int64(), mask=picked < 0))


@TASKS.register("surgical_action")
class SurgicalAction(InstrumentActivity):
    name = "surgical_action"
    needs = "per-instrument action lists (region<k>.actions) or a single-valued actions attribute"
    default_attribute = "actions"
    templates = (
        "What action is the {tool} performing in this frame?",
        "Which action is being carried out with the {tool}?",
        "Identify the action of the {tool} in this surgical image.",
        "What is the {tool} doing in this image?",
        "Which atomic action does the {tool} perform here?",
    )
    frame_templates = (
        "What action is being performed in this surgical frame?",
        "Which surgical action is shown in this image?",
        "Identify the action carried out by the instrument in this frame.",
        "What is the instrument doing in this image?",
        "Which atomic action is under way in this frame?",
    )


@TASKS.register("tool_tissue_interaction")
class ToolTissueInteraction(InstrumentActivity):
    name = "tool_tissue_interaction"
    needs = "per-instrument interaction values (region<k>.<field>) or a single-valued attribute"
    default_attribute = "interaction"
    templates = (
        "How is the {tool} interacting with the tissue in this frame?",
        "What interaction between the {tool} and the tissue is shown?",
        "Which tool-tissue interaction does the {tool} perform here?",
        "Describe the interaction of the {tool} with the tissue in this image.",
        "What is the {tool} doing to the tissue?",
    )
    frame_templates = (
        "How is the instrument interacting with the tissue in this frame?",
        "Which tool-tissue interaction is shown in this image?",
        "What interaction between instrument and tissue is under way here?",
        "Describe the tool-tissue interaction visible in this frame.",
        "What is the instrument doing to the tissue in this image?",
    )
