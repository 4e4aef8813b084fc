"""Builders for the task tests: a recipe over chosen generators, tiny surgical samples with
PSI-AVA-style phase/step/actions, and a generate run over given samples."""

import pytest

from medvqa_build.recipe import Recipe
from medvqa_build.records import Region, Sample
from medvqa_build.sources import get_source
from medvqa_build.stages.generate import generate_items

SPATIAL = "Spatial Localization and Region Understanding"
SURGERY = "Surgical Workflow and Operation Analysis"
LESION = "Lesion Analysis and Grading"
ANATOMY = "Anatomical Structure Recognition"


def task(name, generator, category, task_name, subtask=None, **kw):
    out = dict(
        name=name, generator=generator, category=category, task=task_name, **{"quota": 40, **kw}
    )
    if subtask:
        out["subtask"] = subtask
    return out


def recipe(tasks, seed=0):
    # model_validate, not from_dict: these tests feed hand-made samples (PSI-AVA-like frames) in
    # place of the named source, so the load-time "can the source feed the task" check is skipped
    return Recipe.model_validate(
        {
            "name": "t",
            "benchmark": "EndoBench",
            "seed": seed,
            "sources": [{"id": "synthetic-endo"}],
            "tasks": tasks,
        }
    )


def run(tasks, samples, seed=0):
    manifests = {"synthetic-endo": get_source("synthetic-endo").manifest}
    return generate_items(recipe(tasks, seed), samples, manifests, progress=False)


ACTIONS = ("grasp", "cut", "hold", "pull", "push", "cauterize")
PHASES = ("idle", "retzius space", "pedicle control", "bladder neck")
STEPS = ("idle", "cut prostate", "tie suture", "pull suture", "pass suture")
TOOLS = ("bipolar forceps", "prograsp forceps", "large needle driver", "clip applier")


def surgical_samples(n=80):
    """PSI-AVA-like frames: two instruments with boxes and per-instrument action lists."""
    out = []
    for i in range(n):
        a, b = TOOLS[i % 4], TOOLS[(i + 1) % 4]
        regions = (Region(a, (10.0, 10.0, 60.0, 50.0)), Region(b, (120.0, 60.0, 180.0, 110.0)))
        attrs = {
            "phase": PHASES[i % 4],
            "step": STEPS[i % 5],
            "region0.actions": ACTIONS[i % 6],
            # every third frame: the second tool does two things (skipped)
            "region1.actions": ACTIONS[(i + 2) % 6]
            + ("," + ACTIONS[(i + 3) % 6] if i % 3 == 0 else ""),
            "region0.interaction": ACTIONS[(i + 1) % 6],
        }
        attrs["actions"] = ",".join(
            sorted({attrs["region0.actions"], *attrs["region1.actions"].split(",")})
        )
        out.append(
            Sample(
                sample_id=f"synthetic-endo:surg/{i:03d}",
                source="synthetic-endo",
                image=f"surg/{i:03d}.jpg",
                width=200,
                height=120,
                modality="laparoscopy",
                scene="Surgical Endoscopy",
                labels=tuple(sorted({a, b})),
                attributes=attrs,
                regions=regions,
                group_id=f"CASE{i // 10:03d}",
            )
        )
    return out


@pytest.fixture(scope="session")
def still_samples(synthetic_root):
    from medvqa_build.api import load_source

    return load_source("synthetic-endo", synthetic_root).samples


@pytest.fixture(scope="session")
def big_samples(tmp_path_factory):
    """Enough stills and frames for letter-balance checks (120 stills, 2 x 24 frames)."""
    from medvqa_build.api import load_source
    from medvqa_build.sources.synthetic_endo import write_synthetic_endo

    root = write_synthetic_endo(
        tmp_path_factory.mktemp("big-endo"), n_images=120, n_videos=2, frames_per_video=24, seed=1
    )
    return load_source("synthetic-endo", root).samples
