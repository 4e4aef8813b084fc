"""Generated from the layout registry: every layout is a :class:`FileLayout` with strict
options, says what it needs under the root, and provides exactly what its samples carry.

``provides()`` feeds the recipe's task-against-source check; a claim no sample bears out
lets a recipe through that builds nothing, and a capability the samples carry but the layout
does not claim makes the check refuse a recipe that would work. So each claim is checked
against the samples every source's fixture gives for each part that uses the layout.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from medvqa_build.api import load_source
from medvqa_build.layouts import LAYOUTS
from medvqa_build.layouts.base import FileLayout, Sample
from medvqa_build.sources import all_sources, get_source

from ..fixtures import fixture_writer

USES: dict[str, list[tuple[str, str]]] = {}  # layout -> (source, part)
for _sid in sorted(all_sources()):
    for _part in get_source(_sid).manifest.parts:
        USES.setdefault(_part.layout, []).append((_sid, _part.name))
PART_USES = sorted((layout, sid, part) for layout, uses in USES.items() for sid, part in uses)
TESTS = Path(__file__).resolve().parents[1] / "unit" / "layouts"
CAPABILITY = re.compile(r"^(labels|regions|masks|points|(region_)?attribute:[\w:.-]+)$")


def observed(samples: list[Sample]) -> set[str]:
    """The capabilities (tasks/requirements.py) the samples actually carry."""
    out: set[str] = set()
    for s in samples:
        if s.labels:
            out.add("labels")
        for r in s.regions:
            out |= {"regions"} if r.bbox is not None else set()
            out |= {"masks"} if r.mask is not None else set()
            out |= {"points"} if r.points else set()
        for key in s.attributes:
            if key.startswith("tool:"):
                out.add("attribute:tool")
            elif m := re.match(r"^region\d+\.(.+)$", key):
                out.add(f"region_attribute:{m.group(1)}")
            else:
                out.add(f"attribute:{key}")
    return out


@pytest.mark.parametrize("name", LAYOUTS.names())
def test_layout_is_a_file_layout_with_strict_options(name):
    cls = LAYOUTS.get(name)
    assert issubclass(cls, FileLayout), f"{name}: subclass layouts.base.FileLayout"
    with pytest.raises(ValidationError, match="colour"):
        cls.Options(colour="red")
    tested = (TESTS / f"test_{name}.py").is_file()
    assert USES.get(name) or tested, (
        f"{name}: no manifest uses it; add tests/unit/layouts/test_{name}.py"
    )


@pytest.mark.parametrize(("layout", "source_id", "part"), PART_USES)
def test_layout_expects_and_provides_what_its_samples_carry(layout, source_id, part, tmp_path):
    source = get_source(source_id)
    part_spec, layout_obj = next((p, lo) for p, lo in source.layouts if p.name == part)
    expects = layout_obj.expects()
    assert expects and all(alternative for alternative in expects)
    claims = layout_obj.provides()
    assert claims and all(CAPABILITY.match(c) for c in claims), claims

    root = fixture_writer(source_id)(tmp_path / source_id)
    resolution = source.resolve(root)
    if part not in resolution.found:
        assert not part_spec.required, f"{source_id}: required part {part} not in the fixture"
        pytest.skip(f"{source_id}'s fixture leaves out the optional part {part}")
    ctx = source.context(part_spec, layout_obj, resolution.root, "header")
    samples = [e for _, e in source.scan_part(layout_obj, ctx) if isinstance(e, Sample)]
    assert samples, f"{source_id}: part {part} gave no samples"
    carried = observed(samples)
    kinds = {"labels", "regions", "masks", "points"}
    # what the samples are (labels, boxes, masks, points) holds per part: the report's "what a
    # missing part costs" rests on it; an attribute may show on some parts' samples only
    # (a lesion level on the lateral views), so attributes are held to the whole fixture
    assert claims & kinds <= carried, f"{layout} claims {sorted(claims & kinds - carried)}"
    assert carried & kinds <= claims, f"{layout} does not claim {sorted(carried & kinds - claims)}"
    attributes = claims - kinds - OPTIONAL_INPUTS.get(source_id, set())
    missing = attributes - carried - observed(_all_samples(source_id, root))
    assert not missing, f"{layout} claims {sorted(missing)}; no sample of {source_id} has it"


# attributes read from files the owners do not ship (required: false), absent from the
# default fixture: EndoVis18's instrument interactions come from third-party XML files
OPTIONAL_INPUTS = {"endovis18": {"region_attribute:interaction"}}


def _all_samples(source_id: str, root) -> list[Sample]:
    return list(load_source(source_id, root).samples)
