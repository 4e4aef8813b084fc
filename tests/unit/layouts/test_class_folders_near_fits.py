"""Near-fit layouts are one manifest plus its fixture (issue #34.3): ``class_folders`` takes the
class from any folder level or from the file name, names the other levels, and takes the group
and the split from one of them. Each source here is a user manifest (``MEDVQA_MANIFESTS``) over
a replica written by the test; no file in ``src/`` is added."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import pytest
import yaml
from PIL import Image

from medvqa_build import sources
from medvqa_build.api import build, load_recipe, load_source
from medvqa_build.errors import SourceError
from medvqa_build.layouts.base import make_layout
from medvqa_build.pipeline.build_dir import BuildDir

GRADES = {"0": "grade 0", "1": "grade 1", "2": "grade 2", "3": "grade 3"}
# <split>/<grade>/<patient>/<image>.png: patient -> (split folder, grade, images)
PATIENTS = {
    "p01": ("train", "0", 3),
    "p02": ("train", "1", 2),
    "p03": ("train", "2", 3),
    "p04": ("train", "3", 2),
    "p05": ("test", "0", 2),
    "p06": ("test", "1", 3),
    "p07": ("test", "2", 2),
    "p08": ("test", "3", 3),
    "p09": ("val", "1", 2),
    "p10": ("val", "2", 2),
}
# <patient>/<view>/<label>_<n>.jpg
VIEWS = [
    ("q1", "ap", "normal_1.jpg"),
    ("q1", "ap", "fracture_2.jpg"),
    ("q1", "lat", "normal_3.jpg"),
    ("q2", "lat", "fracture_1.jpg"),
    ("q2", "ap", "notes.jpg"),  # no <label>_<n>: quarantined, the pattern named
]
NAME_PATTERN = r"^(?P<label>[a-z]+)_(?P<n>\d+)\."


def _manifest(source_id: str, folder: str, options: dict, label_map: dict) -> dict:
    return {
        "id": source_id,
        "title": f"{source_id} (test)",
        "homepage": "https://example.org",
        "licence": "test only",
        "licence_id": "other",
        "redistribution": "not-allowed",
        "access": "open",
        "access_terms": "test only",
        "citation": "@misc{t, title = {t}}",
        "modality": "x_ray",
        "scene": None,
        "layout": "test",
        "archives": [{"file": f"{folder}.zip", "unpacks_to": folder, "parts": ["images"]}],
        "quirks": ["none"],
        "label_map": label_map,
        "parts": [
            {
                "name": "images",
                "layout": "class_folders",
                "options": {"images_dir": folder, **options},
            }
        ],
    }


def _png(path, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 255, (40, 56, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)


@pytest.fixture
def near_fits(tmp_path, monkeypatch):
    """Two user manifests and the replicas they read."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    graded = _manifest(
        "graded-patients",
        "retina",
        {
            "parent_attributes": ["split_folder"],
            "child_attributes": ["patient"],
            "group_level": "patient",
            "split_level": "split_folder",
        },
        GRADES,
    )
    named = _manifest(
        "named-views",
        "spine",
        {
            "parent_attributes": ["patient", "view"],
            "class_pattern": NAME_PATTERN,
            "group_level": "patient",
        },
        {"normal": "normal", "fracture": "fracture"},
    )
    for m in (graded, named):
        (manifests / f"{m['id']}.yaml").write_text(yaml.safe_dump(m), encoding="utf-8")
    root = tmp_path / "data"
    seed = 0
    for patient, (split, grade, n) in PATIENTS.items():
        for k in range(n):
            _png(root / "retina" / split / grade / patient / f"img{k}.png", seed := seed + 1)
    for patient, view, name in VIEWS:
        _png(root / "spine" / patient / view / name, seed := seed + 1)
    monkeypatch.setenv("MEDVQA_MANIFESTS", str(manifests))
    sources._load_all.cache_clear()
    yield root
    monkeypatch.delenv("MEDVQA_MANIFESTS")
    sources._load_all.cache_clear()


def test_class_at_depth_two_group_and_split_from_folders(near_fits):
    result = load_source("graded-patients", near_fits)
    assert not result.quarantined
    got = sorted((s.labels, s.group_id, s.split, s.attributes) for s in result.samples)
    expected = sorted(
        (
            (GRADES[grade],),
            patient,
            split,
            {"source_label": grade, "split_folder": split, "patient": patient},
        )
        for patient, (split, grade, n) in PATIENTS.items()
        for _ in range(n)
    )
    assert got == expected


def test_class_from_the_file_name_and_folders_as_attributes(near_fits):
    result = load_source("named-views", near_fits)
    got = sorted((s.image, s.labels, s.group_id, s.attributes) for s in result.samples)
    assert got == [
        ("spine/q1/ap/fracture_2.jpg", ("fracture",), "q1",
         {"source_label": "fracture", "patient": "q1", "view": "ap", "n": "2"}),
        ("spine/q1/ap/normal_1.jpg", ("normal",), "q1",
         {"source_label": "normal", "patient": "q1", "view": "ap", "n": "1"}),
        ("spine/q1/lat/normal_3.jpg", ("normal",), "q1",
         {"source_label": "normal", "patient": "q1", "view": "lat", "n": "3"}),
        ("spine/q2/lat/fracture_1.jpg", ("fracture",), "q2",
         {"source_label": "fracture", "patient": "q2", "view": "lat", "n": "1"}),
    ]  # fmt: skip
    assert [(q.file, q.reason) for q in result.quarantined] == [
        ("spine/q2/ap/notes.jpg", f"file name does not match class_pattern {NAME_PATTERN!r}")
    ]


def test_a_patients_images_never_cross_splits_in_a_build(near_fits, tmp_path):
    """A whole build over the graded source: the splitter keeps each patient in one split,
    and ``use_official`` keeps the split folder (val renamed to train)."""
    recipe = {
        "name": "near-fit",
        "benchmark": "Near-Fit",
        "seed": 0,
        "embedder": "offline",
        "sources": [{"id": "graded-patients", "root": str(near_fits)}],
        "tasks": [
            {
                "name": "grade",
                "generator": "image_classification",
                "category": "Lesion Analysis and Grading",
                "task": "Grading",
                "quota": 24,
                "n_options": 4,
                "prompt_level": "image",
                "params": {
                    "templates": [
                        "Which grade fits this image?",
                        "What is the grade shown here?",
                        "Grade this image.",
                        "Which severity grade does this image show?",
                        "How severe is what this image shows?",
                    ]
                },
            }
        ],
        "curate": {"split": {"proportions": {"test": 0.5, "train": 0.5}}},
        "render": {"format": "png"},
        "export": {"name": "Near_Fit", "formats": ["hf"]},
        "blind": False,
        "balance": False,
    }
    splits_of = defaultdict(set)
    for official in (False, True):
        recipe["curate"]["split"]["use_official"] = official
        recipe["curate"]["split"]["official_map"] = {"val": "train"}
        path = tmp_path / f"recipe-{official}.yaml"
        path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
        out = tmp_path / f"out-{official}"
        build(load_recipe(path), out)
        items = list(BuildDir(out).items())
        assert items
        for item in items:
            (sample_id,) = item.sample_ids
            patient = sample_id.split("/")[-2]
            splits_of[official, patient].add(item.split)
            if official:
                folder = PATIENTS[patient][0]
                assert item.split == {"val": "train"}.get(folder, folder)
    assert all(len(s) == 1 for s in splits_of.values()), dict(splits_of)
    assert {next(iter(s)) for (o, _), s in splits_of.items() if not o} == {"test", "train"}


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"class_pattern": r"(?P<grade>\d)"}, "has no named group 'label'"),
        ({"class_pattern": r"(?P<label>"}, "is no regular expression"),
        (
            {"class_pattern": r"(?P<label>\w+)_", "child_attributes": ["v"]},
            "name every folder level in parent_attributes",
        ),
        ({"split_level": "split"}, "split_level 'split' names no folder level"),
        (
            {
                "parent_attributes": ["split"],
                "split_level": "split",
                "split_table": {"file": "s.csv", "file_column": "f", "split_column": "s"},
            },
            "split_level and split_table both give the split",
        ),
        (
            {"parent_attributes": ["n"], "class_pattern": r"(?P<label>\w+)_(?P<n>\d+)"},
            "name(s) ['n'] used twice",
        ),
    ],
)
def test_bad_near_fit_options_are_one_line_naming_the_option(options, problem):
    with pytest.raises(SourceError, match=re.escape(problem)):
        make_layout("class_folders", options, where="m.yaml: parts.images")


def test_pattern_groups_are_claimed_attributes():
    layout = make_layout(
        "class_folders",
        {"parent_attributes": ["patient"], "class_pattern": NAME_PATTERN},
        where="test",
    )
    assert layout.provides() == {
        "labels",
        "attribute:source_label",
        "attribute:patient",
        "attribute:n",
    }


def test_the_worked_layout_examples_names_need_no_code(tmp_path):
    """CONTRIBUTING.md says the names of its "Add a layout" example,
    ``bowel_<n>_score_<s>_<k>.jpg``, are read by ``class_folders`` options too."""
    from medvqa_build.layouts.base import LabelProblem, ScanContext

    for k, name in enumerate(["bowel_1_score_0_001.jpg", "bowel_2_score_3_001.jpg", "notes.jpg"]):
        _png(tmp_path / "frames" / name, k)
    layout = make_layout(
        "class_folders",
        {
            "images_dir": "frames",
            "class_pattern": r"^(?P<group>bowel_\d+)_score_(?P<label>\d)_",
            "group_level": "group",
        },
        where="test",
    )
    ctx = ScanContext(
        source="t",
        root=tmp_path,
        part="p",
        modality="endoscopy",
        scene=None,
        label_map={"0": "bbps 0", "3": "bbps 3"},
    )
    got = []
    for candidate in layout.candidates(ctx):
        try:
            s = layout.read(ctx, candidate)
            got.append((s.image, s.labels, s.group_id))
        except LabelProblem as e:  # the base quarantines it with this reason
            got.append((candidate.rel, str(e)))
    assert sorted(got) == [
        ("frames/bowel_1_score_0_001.jpg", ("bbps 0",), "bowel_1"),
        ("frames/bowel_2_score_3_001.jpg", ("bbps 3",), "bowel_2"),
        ("frames/notes.jpg", "file name does not match class_pattern "
         "'^(?P<group>bowel_\\\\d+)_score_(?P<label>\\\\d)_'"),
    ]  # fmt: skip
