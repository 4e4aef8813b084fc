"""A task whose sources lack the annotation it needs is rejected with the reason."""

from medvqa_build.recipe import TaskSpec
from medvqa_build.sources import get_source
from medvqa_build.sources import manifest_capabilities as source_capabilities
from medvqa_build.tasks.requirements import check_task_sources

from .conftest import ANATOMY, SPATIAL, SURGERY


def _manifests(*ids):
    return {i: get_source(i).manifest for i in ids}


def _spec(generator, category, task, **kw):
    return TaskSpec(name="t", generator=generator, category=category, task=task, **kw)


def test_capabilities_come_from_the_layouts():
    assert source_capabilities(get_source("kvasir").manifest) >= {"labels"}
    assert "regions" not in source_capabilities(get_source("kvasir").manifest)
    psi = source_capabilities(get_source("psi-ava").manifest)
    assert {"regions", "attribute:phase", "attribute:step", "region_attribute:actions"} <= psi
    assert {"attribute:phase", "attribute:tool"} <= source_capabilities(
        get_source("cholec80").manifest
    )


def test_grounding_from_a_labels_only_source_is_rejected():
    spec = _spec("visual_grounding", SPATIAL, "Visual Grounding", sources=["kvasir"])
    reason = check_task_sources(spec, _manifests("kvasir", "kvasir-seg"))
    assert reason and "kvasir" in reason and "regions" in reason
    assert (
        check_task_sources(
            spec.model_copy(update={"sources": ["kvasir-seg"]}), _manifests("kvasir", "kvasir-seg")
        )
        is None
    )
    # over all sources, one that can feed it is enough
    assert (
        check_task_sources(
            spec.model_copy(update={"sources": []}), _manifests("kvasir", "kvasir-seg")
        )
        is None
    )


def test_no_source_can_feed_the_task():
    spec = _spec("surgical_step", SURGERY, "Macro Phases Identification", subtask="Surgical Step")
    reason = check_task_sources(spec, _manifests("cholec80", "kvasir"))
    assert reason and "attribute:step" in reason
    assert check_task_sources(spec, _manifests("cholec80", "psi-ava")) is None


def test_contour_level_needs_masks():
    spec = _spec(
        "region_recognition",
        SPATIAL,
        "Region Recognition",
        subtask="Contour",
        prompt_level="contour",
        sources=["see-ai"],
    )
    assert "masks" in check_task_sources(spec, _manifests("see-ai"))
    box = spec.model_copy(update={"prompt_level": "box"})
    assert check_task_sources(box, _manifests("see-ai")) is None


def test_instrument_tasks_accept_tool_tables_or_regions():
    for generator in ("instrument_presence", "instrument_counting"):
        spec = _spec(generator, SURGERY, "Instrument Management")
        assert check_task_sources(spec, _manifests("cholec80")) is None
        assert check_task_sources(spec, _manifests("endovis17")) is None
        assert check_task_sources(spec, _manifests("kvasir")) is not None


def test_generators_without_requirements_are_not_judged():
    spec = _spec("landmark_identification", ANATOMY, "Landmark Identification")
    assert check_task_sources(spec, _manifests("kvasir")) is None
