"""The diff of two releases on hand-made digests: each kind of item change, the counts adding
up, recipe keys by task name and source id, the fail-on rules, and two benchmarks refused."""

from pathlib import Path

import pytest

from medvqa_build.errors import UsageError
from medvqa_build.release import (
    Release,
    card_section,
    changes_markdown,
    diff_releases,
    failed_rules,
    parse_fail_on,
    write_card_section,
)
from medvqa_build.release.snapshot import ItemDigest


def _digest(task="T", source="s1", benchmark="B", **changes) -> ItemDigest:
    fields = dict(
        benchmark=benchmark,
        task=task,
        subtask="",
        source=source,
        prompt_level="image",
        split="test",
        question="Which finding?",
        options=("polyp", "ulcer", "bleeding"),
        answer="A",
        gt="polyp",
        sample_ids=("s:1",),
        images="h1",
    )
    return ItemDigest(**{**fields, **changes})


RECIPE = {
    "seed": 0,
    "sources": [{"id": "s1"}, {"id": "s2"}],
    "tasks": [{"name": "a", "quota": 10}, {"name": "b", "quota": 5}],
}


def _release(items, recipe=RECIPE, **kw) -> Release:
    return Release(path=Path("/r"), kind="hf", items=items, recipe=recipe, **kw)


def test_each_field_change_is_named_and_counts_add_up():
    old = _release(
        {
            "same": _digest(),
            "q": _digest(),
            "o": _digest(),
            "a": _digest(),
            "i": _digest(source="s2"),
            "sp": _digest(),
            "gone": _digest(task="U", source="s2"),
        }
    )
    new = _release(
        {
            "same": _digest(),
            "q": _digest(question="What is shown?"),
            "o": _digest(options=("polyp", "ulcer", "angiectasia")),
            "a": _digest(answer="B", options=("ulcer", "polyp", "bleeding")),
            "i": _digest(source="s2", images="h2"),
            "sp": _digest(split="train"),
            "new1": _digest(task="U"),
        }
    )
    d = diff_releases(old, new)
    assert {e["item_id"]: e["fields"] for e in d["changed"]} == {
        "a": ["options", "answer"],
        "i": ["images"],
        "o": ["options"],
        "q": ["question"],
        "sp": ["split"],
    }
    items = d["items"]
    assert (items["added"], items["removed"], items["changed"], items["unchanged"]) == (1, 1, 5, 1)
    assert items["old"] == items["removed"] + items["changed"] + items["unchanged"]
    assert items["new"] == items["added"] + items["changed"] + items["unchanged"]
    assert d["per_task"]["U"] == {
        "old": 1, "new": 1, "added": 1, "removed": 1, "changed": 0, "unchanged": 0
    }  # fmt: skip
    assert d["per_source"]["s2"] == {
        "old": 2, "new": 1, "added": 0, "removed": 1, "changed": 1, "unchanged": 0
    }  # fmt: skip
    assert d["removed"] == [{"item_id": "gone", "task": "U", "source": "s2"}]
    # the answer letter moved from A to B but the correct answer is still "polyp"
    letters = d["distributions"]["answer_letters"]["T"]
    assert letters["A"] == {"old": 6, "new": 5} and letters["B"] == {"old": 0, "new": 1}
    assert "T" not in d["distributions"]["answer_content"]
    assert d["distributions"]["source"] == {"s1": {"old": 5, "new": 6}, "s2": {"old": 2, "new": 1}}


def test_recipe_changes_are_keyed_by_task_name_and_source_id():
    new_recipe = {
        "seed": 1,
        "sources": [{"id": "s2"}],
        "tasks": [{"name": "a", "quota": 10}, {"name": "b", "quota": 7}],
    }
    d = diff_releases(_release({"x": _digest()}), _release({"x": _digest()}, new_recipe))
    assert d["recipe"] == [
        {"key": "seed", "old": 0, "new": 1},
        {"key": "sources[s1]", "old": "(present)", "new": None},
        {"key": "tasks[b].quota", "old": 5, "new": 7},
    ]
    assert diff_releases(_release({}), _release({}, None))["recipe"] is None


def test_new_ids_for_the_same_questions_are_counted():
    old = _release({"old-id": _digest(), "other": _digest(sample_ids=("s:2",))})
    new = _release({"new-id": _digest(question="Reworded?")})
    d = diff_releases(old, new)
    assert d["items"]["same_content_new_id"] == 1
    assert (d["items"]["added"], d["items"]["removed"]) == (1, 2)


def test_two_benchmarks_are_refused_in_one_line():
    with pytest.raises(UsageError, match="different benchmarks") as exc:
        diff_releases(
            _release({"x": _digest(benchmark="A")}),
            _release({"y": _digest(benchmark="Other")}),
            old_label="v1",
            new_label="v2",
        )
    assert "\n" not in str(exc.value) and "v1 (A)" in str(exc.value)
    # same name, no shared id (a new seed renames every item): a diff, not an error
    d = diff_releases(_release({"x": _digest()}), _release({"y": _digest()}))
    assert d["items"]["removed"] == d["items"]["added"] == 1


def test_fail_on_rules():
    d = diff_releases(
        _release({str(k): _digest() for k in range(10)}),
        _release({**{str(k): _digest() for k in range(9)}, "n": _digest()}),
    )
    rules = parse_fail_on(["removed>0", "removed>10%", "changed>0", "any>1", "recipe>0"])
    assert failed_rules(d, rules) == [
        "--fail-on removed>0: removed is 1",
        "--fail-on any>1: any is 2",
    ]
    assert failed_rules(d, parse_fail_on(["removed>5%"])) == [
        "--fail-on removed>5%: removed is 10.0%"
    ]
    for bad in ("removed", "deleted>1", "recipe>1%", "added<3"):
        with pytest.raises(UsageError, match="--fail-on"):
            parse_fail_on([bad])


def test_blind_accuracy_where_both_have_the_audit():
    audit = {"T": {"items": 6, "accuracy": 0.5, "chance": 0.25}}
    later = {"T": {"items": 6, "accuracy": 0.3, "chance": 0.25}}
    d = diff_releases(
        _release({"x": _digest()}, blind=audit), _release({"x": _digest()}, blind=later)
    )
    assert d["distributions"]["blind_accuracy"] == {"T": {"old": 0.5, "new": 0.3, "chance": 0.25}}
    assert "| T | 50.0% | 30.0% | 25.0% |" in changes_markdown(d)
    d = diff_releases(_release({"x": _digest()}, blind=audit), _release({"x": _digest()}))
    assert d["distributions"]["blind_accuracy"] is None


def test_card_section_replaces_an_earlier_one(tmp_path):
    card = tmp_path / "README.md"
    card.write_text("---\nx: 1\n---\n# B\n\nintro\n\n## Licences\n\nterms\n")
    d = diff_releases(_release({"x": _digest()}), _release({"x": _digest(), "y": _digest()}))
    write_card_section(card, card_section(d, "v1.0 | beta"))
    write_card_section(card, card_section(d, "v1.1"))
    text = card.read_text()
    assert text.count("## Changes since") == 1 and "## Changes since v1.1" in text
    assert text.index("## Changes since") < text.index("## Licences")
    assert "2 items (previously 1): 1 added, 0 removed, 0 changed, 1 unchanged." in text


def test_the_audit_reads_the_same_from_a_report_and_from_a_card():
    from medvqa_build.release.snapshot import _blind_of_report, blind_of_card
    from medvqa_build.validate.blind import blind_summary, blind_table

    tasks = [
        {"task": "Lesion | <Type> & Grade", "items": 40, "accuracy": 0.4567, "chance": 0.25,
         "z": 2.9, "confident": 3, "verdict": "blind-solvable", "flagged": True},
        {"task": "Phase", "items": 12, "accuracy": 0.25, "chance": 1 / 3, "z": -0.5,
         "confident": 0, "verdict": "ok", "flagged": False},
    ]  # fmt: skip
    report = {"method": "tfidf", "margin": 0.1, "min_z": 2.0, "threshold": 0.9}
    report |= {"status": "ok", "tasks": tasks, "confident": []}
    card = "# B\n\n" + "\n".join(blind_table(report)) + "\n## Sources\n\n| x | 1 | 2.0% | 3.0% |\n"
    from_card = blind_of_card(card)
    assert from_card == _blind_of_report(blind_summary(report))
    assert from_card["Phase"] == {"items": 12, "accuracy": 0.25, "chance": 0.333}
    assert blind_of_card("# B\n") is None
    assert "| Lesion \\| &lt;Type&gt; &amp; Grade | 40 |" in card  # the card escapes the name
    assert "Lesion | <Type> & Grade" in from_card
    assert _blind_of_report({**report, "status": "skipped"}) is None


def test_withheld_images_and_missing_versions_are_not_changes():
    from medvqa_build.release.snapshot import WITHHELD

    old = _release({"x": _digest(), "y": _digest()}, versions={"medvqa_build": "0.1.0"})
    new = _release(
        {"x": _digest(images=WITHHELD), "y": _digest(images=WITHHELD, question="New?")},
        versions={"medvqa_build": "0.2.0"},
    )
    d = diff_releases(old, new)
    assert d["items"]["unchanged"] == 1 and d["items"]["images_not_compared"] == 2
    assert d["changed"] == [{"item_id": "y", "task": "T", "source": "s1", "fields": ["question"]}]
    assert d["versions"] == [{"key": "medvqa_build", "old": "0.1.0", "new": "0.2.0"}]
    assert "annotations only" in changes_markdown(d)
    assert diff_releases(old, _release({"x": _digest()}))["versions"] is None


def test_a_folder_that_is_no_release_is_named_in_one_line(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from medvqa_build.errors import SourceError
    from medvqa_build.release import read_release

    with pytest.raises(SourceError, match="neither a build folder"):
        read_release(tmp_path)
    (tmp_path / "README.md").write_text("# someone else's dataset\n")
    (tmp_path / "data" / "train").mkdir(parents=True)
    with pytest.raises(SourceError, match="without Parquet shards"):
        read_release(tmp_path)
    shard = tmp_path / "data" / "train" / "train-00000-of-00001.parquet"
    pq.write_table(pa.table({"text": ["a"], "label": [1]}), shard)
    with pytest.raises(SourceError, match="not a medvqa_build export: no column") as exc:
        read_release(tmp_path)
    assert str(shard) in str(exc.value) and "\n" not in str(exc.value)
