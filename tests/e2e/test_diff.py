"""``medvqa-build diff`` on real builds: the demo (with a second source) against the demo with
one changed quota, one changed seed and one dropped source reports exactly those changes, and
its counts add up; a build against its own HF export reports none; two benchmarks exit 2."""

import hashlib
import json

import pytest
import yaml

from medvqa_build import make_synthetic
from medvqa_build.cli import main

QUOTAS = [20, 12, 8, 8, 12, 8]


@pytest.fixture(scope="module")
def releases(tmp_path_factory, request):
    """``old``: the small demo plus a second copy of the synthetic source; ``new``: seed 1,
    the first task's quota 16, the second source dropped."""
    tmp = tmp_path_factory.mktemp("diff")
    manifests = tmp / "manifests"
    manifests.mkdir()
    repo = request.config.rootpath
    text = (repo / "manifests" / "synthetic-endo.yaml").read_text()
    (manifests / "synthetic-endo-twin.yaml").write_text(
        text.replace("id: synthetic-endo\n", "id: synthetic-endo-twin\n", 1)
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("MEDVQA_MANIFESTS", str(manifests))
    twin = make_synthetic("synthetic-endo", tmp / "twin", n_images=30, n_videos=1, seed=5)
    recipe = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    recipe["sources"][0]["generate"] = {"n_images": 40, "n_videos": 1, "frames_per_video": 10}
    recipe["sources"].append({"id": "synthetic-endo-twin", "root": str(twin)})
    for task, quota in zip(recipe["tasks"], QUOTAS, strict=True):
        task["quota"] = quota
    (tmp / "old.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    recipe["seed"] = 1
    recipe["tasks"][0]["quota"] = 16
    recipe["sources"].pop()
    (tmp / "new.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    for name in ("old", "new"):
        assert main(["run", str(tmp / f"{name}.yaml"), "-o", str(tmp / name), "-q"]) == 0
    yield tmp
    mp.undo()


def _diff(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["diff", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_exactly_the_recipe_changes_and_counts_add_up(releases, capsys):
    code, out, _ = _diff(capsys, releases / "old", releases / "new", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["recipe"] == [
        {"key": "seed", "old": 0, "new": 1},
        {"key": "sources[synthetic-endo-twin]", "old": "(present)", "new": None},
        {"key": "tasks[lesion-type].quota", "old": 20, "new": 16},
    ]
    assert d["versions"] == []
    items = d["items"]
    old_report = json.loads((releases / "old" / "report.json").read_text())
    new_report = json.loads((releases / "new" / "report.json").read_text())
    assert (items["old"], items["new"]) == (old_report["items"], new_report["items"])
    assert items["old"] == items["removed"] + items["changed"] + items["unchanged"]
    assert items["new"] == items["added"] + items["changed"] + items["unchanged"]
    # a new seed renames every item (the id hashes it): all removed, all added
    assert (items["removed"], items["added"]) == (items["old"], items["new"])
    for key in ("per_task", "per_source"):
        for row in d[key].values():
            assert row["old"] == row["removed"] + row["changed"] + row["unchanged"]
            assert row["new"] == row["added"] + row["changed"] + row["unchanged"]
        assert sum(r["removed"] for r in d[key].values()) == items["removed"]
    # the dropped source has nothing left; the quota shows in its task's count
    assert d["per_source"]["synthetic-endo-twin"]["new"] == 0
    assert d["per_source"]["synthetic-endo-twin"]["old"] > 0
    assert d["per_task"] == {
        task: {**row, "old": old_report["items_per_task"][task]}
        for task, row in d["per_task"].items()
    }
    assert {t: r["new"] for t, r in d["per_task"].items()} == new_report["items_per_task"]
    assert set(d["distributions"]["source"]) == {"synthetic-endo", "synthetic-endo-twin"}


def test_a_build_and_its_hf_export_are_the_same_release(releases, capsys):
    code, out, _ = _diff(capsys, releases / "old", releases / "old" / "hf", "--json")
    d = json.loads(out)
    assert code == 0 and d["new"]["kind"] == "hf"
    assert d["items"]["unchanged"] == d["items"]["old"] == d["items"]["new"] > 0
    assert d["recipe"] == [] and d["versions"] == []
    # the demo runs the text-only audit: read from report.json and from the card alike
    blind = d["distributions"]["blind_accuracy"]
    assert blind and all(v["old"] == v["new"] for v in blind.values())


def test_outputs_card_and_fail_on(releases, capsys, tmp_path):
    new = releases / "new"
    code, out, err = _diff(
        capsys,
        releases / "old" / "hf",
        new,
        "-o",
        tmp_path,
        "--card",
        "--previous",
        "v0.1",
        "--fail-on",
        "removed>50%",
        "--fail-on",
        "recipe>3",
    )
    assert code == 1
    assert err.splitlines()[-1] == "error: --fail-on removed>50%: removed is 100.0%"
    assert out == (tmp_path / "diff.md").read_text()
    assert "| tasks[lesion-type].quota | 20 | 16 |" in out
    assert json.loads((tmp_path / "diff.json").read_text())["old"]["label"] == "v0.1"
    card = (new / "hf" / "README.md").read_text()
    assert card.count("## Changes since v0.1") == 1
    # the export stage's own card is untouched: a rerun that re-exports restores it
    stage_cards = list((new / "stages" / "export").glob("hf-*/README.md"))
    assert stage_cards and all("Changes since" not in p.read_text() for p in stage_cards)
    line = next(x for x in (new / "checksums.sha256").read_text().splitlines() if "hf/README" in x)
    assert line.split()[0] == hashlib.sha256(card.encode()).hexdigest()
    code, _, _ = _diff(capsys, releases / "old", new, "--fail-on", "recipe>3")
    assert code == 0


def test_two_benchmarks_and_bad_input_exit_2(releases, capsys, tmp_path):
    other = tmp_path / "other"
    recipe = yaml.safe_load((releases / "new.yaml").read_text())
    recipe["benchmark"] = "Another-Bench"
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    assert main(["run", str(tmp_path / "other.yaml"), "-o", str(other), "-q"]) == 0
    code, out, err = _diff(capsys, releases / "new", other)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "different benchmarks" in err
    code, _, err = _diff(capsys, releases / "new", tmp_path)
    assert code == 2 and "neither a build folder" in err
    code, _, err = _diff(capsys, releases / "new", other, "--fail-on", "lots")
    assert code == 2 and "--fail-on 'lots' is not a rule" in err


def test_one_changed_quota_changes_only_its_task(releases, tmp_path, capsys):
    # answer letters come from a stream per task: trimming one task moves no other item
    recipe = yaml.safe_load((releases / "old.yaml").read_text())
    recipe["tasks"][0]["quota"] = 16
    (tmp_path / "q.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    assert main(["run", str(tmp_path / "q.yaml"), "-o", str(tmp_path / "q"), "-q"]) == 0
    code, out, _ = _diff(capsys, releases / "old", tmp_path / "q", "--json")
    d = json.loads(out)
    assert code == 0 and d["recipe"] == [{"key": "tasks[lesion-type].quota", "old": 20, "new": 16}]
    assert d["items"]["changed"] == d["items"]["added"] == 0
    assert d["items"]["removed"] == d["items"]["old"] - d["items"]["new"] > 0
    removed = {t for t, r in d["per_task"].items() if r["removed"]}
    assert len(removed) == 1  # the task of lesion-type only
