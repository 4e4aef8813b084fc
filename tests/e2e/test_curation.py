"""Curation, validation, contamination and review on a real (small) demo build: plant
duplicates, a cross-split patient, a related distractor, skewed letters and a misaligned box,
and see each caught by its rule; bad decisions files change nothing."""

import base64
import json
import shutil
from types import SimpleNamespace

import cv2
import pytest

from medvqa_build.api import validate_build
from medvqa_build.cli import main
from medvqa_build.curate import assign_splits, curate_samples
from medvqa_build.pipeline import BuildDir
from medvqa_build.records import DrawnShape, Sample
from medvqa_build.review import ReviewError, apply_decisions, build_id
from medvqa_build.review.preview import clean_ref
from medvqa_build.store.parquet import write_items
from medvqa_build.validate import run_rules
from medvqa_build.validate.contamination import ContaminationError, check_contamination

SMALL = [
    "--set",
    "sources.0.generate.n_images=40",
    "--set",
    "sources.0.generate.frames_per_video=8",
    "--set",
    "tasks.0.quota=16",
    "--set",
    "tasks.1.quota=8",
    "--set",
    "tasks.2.quota=12",
    "--set",
    "tasks.3.quota=8",
    "--set",
    "tasks.4.quota=8",
    "--set",
    "tasks.5.quota=8",
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, request):
    out = tmp_path_factory.mktemp("curation-build")
    recipe = str(request.config.rootpath / "recipes" / "demo.yaml")
    assert main(["run", recipe, "-o", str(out), "-q", *SMALL]) == 0
    return out


@pytest.fixture
def build(pristine, tmp_path):
    """A private copy of the build (roots in build.json point into the copy)."""
    dst = tmp_path / "build"
    shutil.copytree(pristine, dst, symlinks=True)
    meta = json.loads((dst / "build.json").read_text())
    meta["roots"] = {k: v.replace(str(pristine), str(dst)) for k, v in meta["roots"].items()}
    (dst / "build.json").write_text(json.dumps(meta))
    return dst


def _view(build):
    """A finished build's items, samples (by id), manifests and image resolver, in memory."""
    folder = BuildDir.open(build)
    samples_by_id = {s.sample_id: s for s in folder.samples()}
    return SimpleNamespace(
        items=list(folder.items()),
        samples_by_id=samples_by_id,
        manifests=folder.manifests(),
        resolve=folder.resolver(),
        clean_ref=lambda item, index=0: clean_ref(item, samples_by_id, index),
    )


def test_demo_build_passes_every_rule(build):
    assert validate_build(build, report_dir=build / "validation").problems == []
    doc = json.loads((build / "validation" / "validation.json").read_text())
    assert doc["items_checked"] == 60 and doc["problems"] == 0


def test_planted_duplicates_are_removed_with_their_groups(build):
    view = _view(build)
    root = view.resolve("source://synthetic-endo/")
    samples = sorted(view.samples_by_id.values(), key=lambda s: s.sample_id)
    stills = [s for s in samples if s.frame is None]
    a, b, c = stills[0], stills[1], stills[2]
    shutil.copy(root / a.image, root / "images/zz_copy.jpg")
    cv2.imwrite(str(root / "images/zz_reenc.png"), cv2.imread(str(root / b.image)))
    img = cv2.imread(str(root / c.image))
    cv2.imwrite(str(root / "images/zz_crop.jpg"), img[4:-4, 4:-4])
    planted = [
        Sample(
            "synthetic-endo:zz_copy",
            "synthetic-endo",
            "images/zz_copy.jpg",
            a.width,
            a.height,
            "endoscopy",
            labels=a.labels,
            group_id="other1",
        ),
        Sample(
            "synthetic-endo:zz_reenc",
            "synthetic-endo",
            "images/zz_reenc.png",
            b.width,
            b.height,
            "endoscopy",
            labels=b.labels,
            group_id="other2",
        ),
        Sample(
            "synthetic-endo:zz_crop",
            "synthetic-endo",
            "images/zz_crop.jpg",
            c.width - 8,
            c.height - 8,
            "endoscopy",
            labels=c.labels,
            group_id="other3",
        ),
    ]
    roots = {"synthetic-endo": root}
    spec = {"dedup": {"exact": True, "phash_max_hamming": 6}}
    kept, report = curate_samples(spec, samples + planted, None, roots, seed=0)
    removed = {r["sample_id"]: r for r in report["removed"]}
    for planted_id, original in (("zz_copy", a), ("zz_reenc", b), ("zz_crop", c)):
        rec = removed[f"synthetic-endo:{planted_id}"]
        assert rec["representative"] == original.sample_id and rec["group"].startswith("dup-")
    assert "exact" in removed["synthetic-endo:zz_copy"]["criteria"]
    assert report["kept"] + len(report["removed"]) == report["input"] == len(samples) + 3
    assert len(kept) == report["kept"]
    # every removed sample is a member of the group it names
    groups = {g["group"]: g for g in report["dedup"]["duplicate_groups"]}
    assert all(r["sample_id"] in groups[r["group"]]["members"] for r in report["removed"])


def _tamper(build, change):
    view = _view(build)
    items = change(list(view.items), view)
    meta = json.loads((build / "build.json").read_text())
    write_items(items, build / meta["items"])
    return items


def test_each_planted_defect_is_caught_by_its_rule(build):
    planted = {}

    def change(items, view):
        out = []
        phase_items = [i for i in items if i.task == "Macro Phases Identification"]
        box = next(i for i in items if i.prompt_level == "box")
        lesion = next(i for i in items if i.gt == "polyp" and i.prompt_level == "image")
        planted.update({"box-matches-region": box.item_id, "distractor-related": lesion.item_id})
        for it in items:
            if it in phase_items:  # every answer moved to A
                opts = [it.gt] + [o for o in it.options if o != it.gt]
                it = it.replace(options=tuple(opts), answer="A")
            if it is box:  # the box moved off its lesion (still inside the image)
                s = it.prompt_geometry[0]
                w = view.samples_by_id[it.sample_ids[0]].width
                x1, y1, x2, y2 = s.bbox
                dx = -x1 if x1 > w - x2 else w - x2
                moved = DrawnShape(
                    0,
                    "box",
                    s.label,
                    s.color,
                    bbox=(x1 + dx, y1, x2 + dx, y2),
                    thickness_px=s.thickness_px,
                )
                it = it.replace(prompt_geometry=(moved,))
            if it is lesion:  # a parent of the truth as distractor
                k = next(n for n, o in enumerate(it.options) if o != it.gt)
                opts = list(it.options)
                opts[k] = "lesion"
                it = it.replace(options=tuple(opts))
            out.append(it)
        # one patient on both sides
        g = view.samples_by_id[out[0].sample_ids[0]].group_id
        same = [i for i, it in enumerate(out) if view.samples_by_id[it.sample_ids[0]].group_id == g]
        assert g and same
        out[same[-1]] = out[same[-1]].replace(split="train")
        if len(same) == 1:  # the patient has one item: give another item of that patient's image
            out.append(out[0].replace(item_id="extra0", split="test"))
        return out

    items = _tamper(build, change)
    problems = validate_build(build, report_dir=build / "validation").problems
    caught = {p.check for p in problems}
    assert {"letter-balance", "box-matches-region", "distractor-related", "split-leak"} <= caught
    for rule, item_id in planted.items():
        assert [p.item_id for p in problems if p.check == rule] == [item_id]
    assert [p.item_id for p in problems if p.check == "letter-balance"] == [
        "task:Macro Phases Identification"
    ]
    doc = json.loads((build / "validation" / "validation.json").read_text())
    assert doc["problems"] == len(problems) == sum(r["problems"] for r in doc["rules"])
    assert doc["items_checked"] == len(items)
    md = (build / "validation" / "validation.md").read_text()
    assert "`split-leak`" in md and "FAILED" in md


def test_assigned_splits_pass_the_leak_rule(build):
    view = _view(build)
    spec = {"split": {"proportions": {"test": 0.7, "train": 0.3}}}
    items = assign_splits(spec, view.items, view.samples_by_id, seed=0)
    assert {i.split for i in items} == {"test", "train"}
    assert (
        run_rules(items, view.samples_by_id, view.manifests, view.resolve, rules=["split-leak"])
        == []
    )


def test_contamination_against_tsv_hf_folder_and_hash_list(build, tmp_path):
    view = _view(build)
    item = next(i for i in view.items if i.prompt_level == "box")
    other = next(
        i
        for i in view.items
        if i.prompt_level == "image" and view.clean_ref(i) != view.clean_ref(item)
    )
    clean = view.resolve(view.clean_ref(item))
    reencoded = cv2.imencode(".png", cv2.imread(str(clean)))[1].tobytes()
    tsv = tmp_path / "Public.tsv"
    tsv.write_text("index\timage\tquestion\n0\t" + base64.b64encode(reencoded).decode() + "\tq\n")
    problems = check_contamination(view.items, view.resolve, [tsv], clean_ref=view.clean_ref)
    assert item.item_id in {p.item_id for p in problems}
    assert all("near-copy" in p.message for p in problems)

    import pyarrow as pa
    import pyarrow.parquet as pq

    hf = tmp_path / "hf" / "data"
    hf.mkdir(parents=True)
    other_bytes = view.resolve(view.clean_ref(other)).read_bytes()
    pq.write_table(
        pa.table({"image": [{"bytes": other_bytes, "path": "x.jpg"}]}), hf / "test.parquet"
    )
    problems = check_contamination(
        view.items, view.resolve, [tmp_path / "hf"], clean_ref=view.clean_ref
    )
    assert other.item_id in {p.item_id for p in problems}
    assert any("the same file" in p.message for p in problems)

    import hashlib

    hashes = tmp_path / "hashes.txt"
    hashes.write_text(f"# known images\nsha256:{hashlib.sha256(clean.read_bytes()).hexdigest()}\n")
    problems = check_contamination(view.items, view.resolve, [hashes], clean_ref=view.clean_ref)
    assert item.item_id in {p.item_id for p in problems} and {p.check for p in problems} == {
        "contamination"
    }
    hashes.write_text("not-a-hash\n")
    with pytest.raises(ContaminationError, match="line 1"):
        check_contamination(view.items, view.resolve, [hashes])


def _decisions(build, **over):
    items = _view(build).items
    doc = {
        "format": "medvqa-review-decisions",
        "version": 1,
        "build": build_id(items),
        "reviewer": "t",
        "decisions": [
            {"item_id": items[0].item_id, "decision": "reject", "comment": "blurred"},
            {
                "item_id": items[1].item_id,
                "decision": "edit",
                "comment": "",
                "edits": {"question": "Which lesion is shown?"},
            },
        ],
    }
    doc.update(over)
    return doc


@pytest.mark.parametrize(
    "case, message",
    [
        ("other-build", "decisions were made on build"),
        ("unknown-id", "unknown item id"),
        ("malformed", "malformed decisions file"),
        ("not-json", "not valid JSON"),
        ("bad-edit", "make invalid items"),
    ],
)
def test_bad_decisions_change_nothing(build, tmp_path, case, message):
    doc = _decisions(build)
    if case == "other-build":
        doc["build"] = "0" * 64
    elif case == "unknown-id":
        doc["decisions"].append({"item_id": "nope", "decision": "accept"})
    elif case == "malformed":
        doc["decisions"][0]["decision"] = "maybe"
    elif case == "bad-edit":
        doc["decisions"][1]["edits"] = {"options": ["polyp", "Polyp"]}
    path = tmp_path / "decisions.json"
    path.write_text("{oops" if case == "not-json" else json.dumps(doc))
    before = (build / "build.json").read_bytes()
    with pytest.raises(ReviewError, match=message):
        apply_decisions(build, path)
    assert (build / "build.json").read_bytes() == before
    assert not (build / "review").exists()


def test_apply_decisions_then_validate_and_export(build, tmp_path):
    path = tmp_path / "decisions.json"
    doc = _decisions(build)
    path.write_text(json.dumps(doc))
    entry = apply_decisions(build, path)
    assert entry["items_before"] == 60 and entry["items_after"] == 59
    assert entry["edited"][0]["after"]["question"] == "Which lesion is shown?"
    assert validate_build(build).problems == []
    assert main(["export", str(build), "--format", "vlmeval", "-o", str(tmp_path / "vl")]) == 0
    tsv = next((tmp_path / "vl").glob("*.tsv")).read_text().splitlines()
    assert len(tsv) == 60  # header + 59 items


CURATE_SECTION = """
curate:
  dedup: {exact: true, phash_max_hamming: 12, keep: largest}
  select: {per_label: 3}
  split: {proportions: {test: 0.7, train: 0.3}}
"""


def test_a_recipe_with_a_curate_section_builds(tmp_path, request):
    """The curate stage runs inside a build (it once failed there: no stage version), no
    item is made from a sample it removed, and the splits assigned over the whole set keep
    every patient on one side."""

    demo = (request.config.rootpath / "recipes" / "demo.yaml").read_text(encoding="utf-8")
    recipe = tmp_path / "curated.yaml"
    recipe.write_text(demo + CURATE_SECTION, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["run", str(recipe), "-o", str(out), "-q", *SMALL]) == 0
    (path,) = (out / "stages" / "curate").glob("*/curate.json")
    report = json.loads(path.read_text())
    assert report["kept"] + len(report["removed"]) == report["input"] > 0
    assert report["dedup"]["removed"] > 0 and report["select"]["removed"] > 0
    removed = {r["sample_id"] for r in report["removed"]}
    items = BuildDir.open(out).items()
    used = {sid for item in items for sid in item.sample_ids}
    assert used and not used & removed
    splits = [item.split for item in items]
    assert set(splits) == {"test", "train"} and splits.count("test") > splits.count("train")
    assert validate_build(out).problems == []  # the split-leak rule included
    assert not list((out / "stages" / "generate").glob("*/items.unsplit.parquet"))


def _page_data(page):
    import re

    html = page.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_build_id_streams_to_the_hash_of_the_whole_sorted_list(build):
    """The id is the sha256 of json.dumps of the rows sorted by id, computed from a table read
    a batch at a time (not a list of every row): decisions files stay valid across versions."""
    import hashlib

    table = BuildDir.open(build).items()
    items = list(table)
    rows = sorted((i.to_row() for i in items), key=lambda r: r["item_id"])
    payload = json.dumps(rows, sort_keys=True, default=str, ensure_ascii=False)
    want = hashlib.sha256(payload.encode("utf-8")).hexdigest()
    assert build_id(table) == build_id(items[::-1]) == want
    assert build_id(items[1:]) != want


def test_preview_sample_covers_every_stratum_and_its_decisions_apply(build, tmp_path):
    view = _view(build)
    strata = {(i.task, i.prompt_level) for i in view.items}
    page = tmp_path / "page" / "index.html"
    assert main(["preview", str(build), "-o", str(page), "--sample", str(len(strata) + 1)]) == 0
    data = _page_data(page)
    shown = data["items"]
    assert len(shown) == len(strata) + 1
    assert {(i["task"], i["prompt_level"]) for i in shown} == strata  # one of each first
    assert data["sampled"] == {"of": len(view.items), "seed": 0, "shown": len(shown)}
    assert data["build"] == build_id(view.items)  # decisions name the whole build
    # each shown item as the full page shows it; the images it names were copied
    full = tmp_path / "full" / "index.html"
    assert main(["preview", str(build), "-o", str(full)]) == 0
    everything = {i["item_id"]: i for i in _page_data(full)["items"]}
    assert "sampled" not in _page_data(full) and len(everything) == len(view.items)
    for item in shown:
        assert item == everything[item["item_id"]]
        assert all((page.parent / p).is_file() for p in item["images"] if p)
    # the same seed draws the same items, another seed others
    again = tmp_path / "again" / "index.html"
    main(["preview", str(build), "-o", str(again), "--sample", str(len(strata) + 1)])
    assert [i["item_id"] for i in _page_data(again)["items"]] == [i["item_id"] for i in shown]
    other = tmp_path / "other" / "index.html"
    main(["preview", str(build), "-o", str(other), "--sample", "20", "--seed", "7"])
    assert {i["item_id"] for i in _page_data(other)["items"]} != {
        i["item_id"] for i in _page_data(page)["items"]
    } or len(view.items) <= 20
    # a decision made on the sample applies to the whole build; the rest stay undecided
    doc = {
        "format": "medvqa-review-decisions",
        "version": 1,
        "build": data["build"],
        "decisions": [{"item_id": shown[0]["item_id"], "decision": "reject", "comment": "x"}],
    }
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps(doc))
    entry = apply_decisions(build, path)
    assert entry["items_before"] == len(view.items) and entry["items_after"] == len(view.items) - 1
    assert entry["undecided"] == len(view.items) - 1
    after = _view(build).items
    assert shown[0]["item_id"] not in {i.item_id for i in after}
    assert entry["build_after"] == build_id(after)
    assert (build / entry["items_file"]).is_file() and not list((build / "review").glob(".*"))
