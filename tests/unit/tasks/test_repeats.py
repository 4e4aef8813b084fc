"""Issue 32.3: one image gives one answer text per task. A second region of the same finding in
an image is dropped, listed with its reason and counted; other findings of the image, and
answers that differ per region (boxes) or are drawn at random (colours), are kept."""

from collections import Counter

from medvqa_build.records import Region, Sample

from .conftest import SPATIAL, run, task


def two_region_samples(n=12):
    """Even images: two polyps; odd images: a polyp and an ulcer."""
    out = []
    for i in range(n):
        second = "polyp" if i % 2 == 0 else "ulcer"
        out.append(
            Sample(
                sample_id=f"synthetic-endo:r{i}",
                source="synthetic-endo",
                image=f"r{i}.jpg",
                width=200,
                height=200,
                modality="endoscopy",
                labels=tuple(sorted({"polyp", second})),
                regions=(
                    Region("polyp", (10.0, 10.0, 50.0, 50.0)),
                    Region(second, (120.0, 120.0, 170.0, 170.0)),
                ),
                group_id=f"g{i}",
            )
        )
    return out


def test_a_second_polyp_of_one_image_is_dropped_and_counted():
    spec = task(
        "rb",
        "region_recognition",
        SPATIAL,
        "Region Recognition",
        "Box",
        prompt_level="box",
        n_options=2,
        quota=100,
        params={"vocabulary": ["polyp", "ulcer", "erosion"]},
        balance=False,  # repeats alone: answer balance would also trim the polyps (12 vs 6)
    )
    result = run([spec], two_region_samples())
    pairs = Counter((i.sample_ids, i.gt) for i in result.items)
    assert max(pairs.values()) == 1
    assert len(result.items) == 18  # 6 images x 1 polyp + 6 images x (polyp, ulcer)
    repeats = [d for d in result.dropped if d["reason"].startswith("repeat:")]
    assert len(repeats) == result.repeats["rb"] == 6
    assert "already gave the answer 'polyp'" in repeats[0]["reason"]


def test_box_and_colour_answers_are_never_repeats():
    specs = [
        task("vg", "visual_grounding", SPATIAL, "Visual Grounding", quota=100),
        task(
            "rs", "region_selection", SPATIAL, "Region Selection", prompt_level="multi", quota=100
        ),
    ]
    samples = two_region_samples(40)
    result = run(specs, samples)
    assert not result.repeats
    per_task = Counter(i.task for i in result.items)
    assert per_task["Visual Grounding"] + sum(d["task"] == "vg" for d in result.dropped) == 2 * len(
        samples
    )


def test_a_box_shown_before_in_the_task_is_not_an_answer_again():
    # frames of one video often hold the same box: as answers, its text would be seen more
    # often than any distractor's, and the count would tell the answer without the image
    samples = []
    for i in range(30):
        x = 10.0 if i < 6 else 5.0 * (i % 6) + 40.0 * (i // 6 % 4)  # images 0-5: one box
        y = 10.0 if i < 6 else 8.0 * (i % 5) + 30.0 * (i // 10)
        samples.append(
            Sample(
                sample_id=f"synthetic-endo:v{i}",
                source="synthetic-endo",
                image=f"v{i}.jpg",
                width=400,
                height=400,
                modality="endoscopy",
                labels=("polyp",),
                regions=(Region("polyp", (x, y, x + 30.0, y + 30.0)),),
                group_id=f"g{i}",
            )
        )
    spec = task("vg", "visual_grounding", SPATIAL, "Visual Grounding", quota=100)
    result = run([spec], samples)
    shown = Counter(o for i in result.items for o in i.options)
    assert result.items and max(shown.values()) == 1  # every box text shown once in the task
    again = [d for d in result.dropped if d["reason"].startswith("repeat: the box")]
    assert len(again) >= 5  # the first of images 0-5 (or a distractor) shows the box first
    assert "was already shown in this task" in again[0]["reason"]
    assert len(result.items) + len(result.dropped) == 30
