"""Each validation rule catches the defect planted for it, and only that one."""

import dataclasses

import cv2
import numpy as np
import pytest

from medvqa_build.manifest import SourceManifest
from medvqa_build.records import DrawnShape, Item, Region, Sample
from medvqa_build.validate import RULE_IDS, run_rules, write_validation_report
from medvqa_build.validate.rules import normalise_text

ONTOLOGY = {
    "parents": {"adenomatous polyp": "polyp", "polyp": "lesion", "ulcer": "lesion"},
    "synonyms": {"bleeding": ["haemorrhage"]},
}


def _manifest() -> SourceManifest:
    return SourceManifest(
        id="toy",
        title="Toy",
        homepage="https://example.org",
        licence="CC-BY-4.0",
        licence_id="cc-by-4.0",
        redistribution="allowed",
        access="open",
        access_terms="-",
        citation="@misc{toy, title={Toy}}",
        modality="endoscopy",
        layout="-",
        ontology=ONTOLOGY,
        parts=[{"name": "a", "layout": "class_folders"}],
    )


@pytest.fixture
def world(tmp_path):
    """Twelve clean items on 64x48 images, one sample (and patient) each."""
    rng = np.random.default_rng(0)
    samples, items = {}, []
    truths = ["polyp", "ulcer", "bleeding", "angiectasia"]
    for i in range(12):
        path = tmp_path / f"img{i}.png"
        cv2.imwrite(str(path), rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
        sid = f"toy:img{i}"
        truth = truths[i % 4]
        samples[sid] = Sample(
            sid,
            "toy",
            f"img{i}.png",
            64,
            48,
            "endoscopy",
            labels=(truth,),
            regions=(Region(truth, bbox=(10, 10, 30, 30)),),
            group_id=f"p{i}",
        )
        options = [o for o in ["polyp", "ulcer", "bleeding", "angiectasia"] if o != truth][:3]
        letter = "ABCD"[i % 4]
        options.insert("ABCD".index(letter), truth)
        items.append(
            Item(
                item_id=f"it{i:02d}",
                benchmark="B",
                category="C",
                task="Lesion",
                subtask="S",
                source="toy",
                sample_ids=(sid,),
                images=(f"source://toy/img{i}.png",),
                question="Which finding?",
                options=tuple(options),
                answer=letter,
                gt=truth,
                prompt_level="box",
                split="test",
                licence="CC-BY-4.0",
                prompt_geometry=(DrawnShape(0, "box", truth, "red", bbox=(10, 10, 30, 30)),),
            )
        )
    resolve = lambda ref: tmp_path / ref.split("/", 3)[-1]  # noqa: E731
    return items, samples, {"toy": _manifest()}, resolve


def _run(world, items=None, **kw):
    base, samples, manifests, resolve = world
    return run_rules(items if items is not None else base, samples, manifests, resolve, **kw)


def _checks(problems) -> set[str]:
    return {p.check for p in problems}


def test_clean_world_passes(world):
    assert _run(world) == []


def test_synonym_distractor_is_caught(world):
    items = list(world[0])
    it = items[2]  # truth bleeding
    options = list(it.options)
    j = next(k for k, o in enumerate(options) if o != it.gt)
    options[j] = "Haemorrhage"
    items[2] = it.replace(options=tuple(options))
    problems = _run(world, items)
    assert _checks(problems) == {"distractor-related", "options-unique"}
    assert all(p.item_id == "it02" for p in problems)


def test_parent_and_child_distractors_are_caught(world):
    items = list(world[0])
    it = items[0]  # truth polyp: "lesion" is its parent, "adenomatous polyp" its child
    options = [
        "lesion" if o == "ulcer" else "Adenomatous-Polyp" if o == "bleeding" else o
        for o in it.options
    ]
    items[0] = it.replace(options=tuple(options))
    problems = [p for p in _run(world, items) if p.check == "distractor-related"]
    assert len(problems) == 2 and {p.item_id for p in problems} == {"it00"}


def test_options_unique_folds_case_and_spacing(world):
    items = list(world[0])
    it = items[1]
    options = list(it.options)
    j = next(k for k, o in enumerate(options) if o not in (it.gt, "angiectasia"))
    options[j] = " Angiectasia. "
    items[1] = it.replace(options=tuple(options))
    assert _checks(_run(world, items)) == {"options-unique"}
    assert normalise_text("X-ray.") == normalise_text("x_ray") == "x ray"


def test_answer_not_among_options(world):
    items = list(world[0])
    items[3] = items[3].replace(answer="E")
    items[4] = items[4].replace(answer="B" if items[4].answer != "B" else "C")
    problems = _run(world, items)
    assert {(p.item_id, p.check) for p in problems if p.check == "answer-in-options"} == {
        ("it03", "answer-in-options"),
        ("it04", "answer-in-options"),
    }


def test_box_outside_image_and_misaligned_box(world):
    items = list(world[0])
    outside = DrawnShape(0, "box", items[5].gt, "red", bbox=(50, 10, 70, 30))  # past x = 64
    items[5] = items[5].replace(prompt_geometry=(outside,))
    moved = DrawnShape(0, "box", items[6].gt, "red", bbox=(40, 20, 60, 40))  # inside, wrong place
    items[6] = items[6].replace(prompt_geometry=(moved,))
    empty = DrawnShape(0, "box", items[7].gt, "red", bbox=(10, 10, 10, 30))  # zero width
    items[7] = items[7].replace(prompt_geometry=(empty,))
    problems = _run(world, items)
    got = {(p.item_id, p.check) for p in problems}
    assert ("it05", "box-inside") in got and ("it07", "box-inside") in got
    assert ("it06", "box-matches-region") in got and ("it06", "box-inside") not in got


def test_unbalanced_letters_are_caught(world):
    items = []
    for it in world[0]:
        options = [it.gt] + [o for o in it.options if o != it.gt]
        items.append(it.replace(options=tuple(options), answer="A"))
    problems = _run(world, items)
    assert _checks(problems) == {"letter-balance"}
    assert problems[0].item_id == "task:Lesion" and "A: 12" in problems[0].message


def test_letter_tolerance(world):
    items = list(world[0])
    # move two B answers to A: A 5, B 1, C 3, D 3 of 12 (expected 3 each)
    for k in (1, 5):
        it = items[k]
        options = [it.gt] + [o for o in it.options if o != it.gt]
        items[k] = it.replace(options=tuple(options), answer="A")
    assert "letter-balance" in _checks(_run(world, items, letter_tolerance=0.1))
    assert "letter-balance" not in _checks(_run(world, items, letter_tolerance=0.2))


def test_cross_split_patient_and_near_duplicates(world):
    items, samples, manifests, resolve = world
    samples = dict(samples)
    samples["toy:img1"] = dataclasses.replace(samples["toy:img1"], group_id="p0")  # same patient
    items = list(items)
    items[1] = items[1].replace(split="train")
    items[9] = items[9].replace(split="train")
    problems = run_rules(
        items, samples, manifests, resolve, duplicate_groups=[["toy:img8", "toy:img9"]]
    )
    leaks = [p for p in problems if p.check == "split-leak"]
    assert len(leaks) == 2
    assert any("group toy:p0" in p.message for p in leaks)
    assert any("near-duplicate" in p.message for p in leaks)


def test_image_count_and_decode(world, tmp_path):
    items = list(world[0])
    items[2] = items[2].replace(images=items[2].images * 2)
    (tmp_path / "img3.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    problems = _run(world, items)
    got = {(p.item_id, p.check) for p in problems}
    assert ("it02", "image-count") in got and ("it03", "image-decodes") in got


def test_licence_and_schema(world):
    items = list(world[0])
    items[0] = items[0].replace(licence="")
    items[1] = items[1].replace(licence="MIT")
    items[2] = items[2].replace(question="Which {thing}?")
    items[3] = items[3].replace(item_id="it04")
    problems = _run(world, items)
    got = {(p.item_id, p.check) for p in problems}
    assert {
        ("it00", "licence"),
        ("it01", "licence"),
        ("it02", "schema"),
        ("it04", "item-id-unique"),
    } <= got


def test_report_lists_every_rule_and_counts(world, tmp_path):
    items = list(world[0])
    items[0] = items[0].replace(licence="")
    problems = _run(world, items) + []
    doc = write_validation_report(
        problems, tmp_path / "v.json", tmp_path / "v.md", items_checked=12
    )
    assert [r["id"] for r in doc["rules"]] == list(RULE_IDS)
    assert sum(r["problems"] for r in doc["rules"]) == doc["problems"] == len(problems) == 1
    md = (tmp_path / "v.md").read_text()
    assert "FAILED" in md and "`licence`" in md and "it00" in md


def test_unknown_rule_name(world):
    with pytest.raises(ValueError, match="unknown rule"):
        _run(world, rules=["nope"])


def test_rules_need_no_samples_or_manifests(world):
    items, _, _, resolve = world
    assert run_rules(items, None, None, resolve) == []


def test_image_size_cache_one_entry_an_image_and_bounded(tmp_path, monkeypatch):
    """A decoded size answers the header lookup without another read; a decode error does
    not (the header may still be fine); the cache keeps one entry an image, within its bound."""
    from medvqa_build.validate import rules

    good = tmp_path / "good.png"
    cv2.imwrite(str(good), np.random.default_rng(0).integers(0, 255, (48, 64, 3), np.uint8))
    data = bytearray(good.read_bytes())
    at = data.index(b"IDAT") + 20
    data[at : at + 40] = bytes(v ^ 0xFF for v in data[at : at + 40])
    cut = tmp_path / "cut.png"  # whole, with a readable header; its pixel data is corrupt
    cut.write_bytes(bytes(data))
    reads = []

    def resolve(ref):
        reads.append(ref)
        return tmp_path / ref

    ctx = rules.RuleContext({}, {}, resolve)
    assert ctx.image_size("good.png", decode=True) == (64, 48)
    assert ctx.image_size("good.png") == (64, 48)
    assert ctx.image_size("good.png", decode=True) == (64, 48)
    assert reads == ["good.png"]
    assert isinstance(ctx.image_size("cut.png", decode=True), str)
    assert ctx.image_size("cut.png") == (64, 48)  # read again, in header mode
    assert isinstance(ctx.image_size("cut.png", decode=True), str)
    assert reads == ["good.png", "cut.png", "cut.png", "cut.png"]
    assert len(ctx._sizes) == 2

    monkeypatch.setattr(rules, "SIZE_CACHE", 4)
    ctx = rules.RuleContext({}, {}, lambda ref: good)
    for i in range(10):
        assert ctx.image_size(f"img{i}.png", decode=True) == (64, 48)
        assert len(ctx._sizes) <= 4


def test_nested_option_texts_are_caught(world):
    """'cut' inside 'cutting between ...': VLMEvalKit's text matching would take a reply of the
    longer option for both, so the rule names the pair where the distractors were chosen from
    a larger pool, and lets a set the recipe fixes whole pass."""
    from medvqa_build.records import Negatives

    items = list(world[0])
    it = items[1]
    options = list(it.options)
    j = next(k for k, o in enumerate(options) if o != it.gt)
    options[j] = f"{it.gt} grade two"
    others = tuple(o for o in options if o != it.gt)
    chosen = Negatives(strategy="label_pool", candidates=others, pool_size=10)
    items[1] = it.replace(options=tuple(options), negatives=chosen)
    problems = [p for p in _run(world, items) if p.check == "options-apart"]
    assert [p.item_id for p in problems] == [it.item_id]
    assert repr(it.gt) in problems[0].message and "grade two" in problems[0].message
    whole = Negatives(strategy="label_pool", candidates=others, pool_size=len(others))
    items[1] = items[1].replace(negatives=whole)
    assert not [p for p in _run(world, items) if p.check == "options-apart"]
