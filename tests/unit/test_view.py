"""The HTML of an item (view.py): escaped, answer marked, images when a build can give them
and a display without them when none can; seeded draws."""

import pytest

from medvqa_build import view
from medvqa_build.records import Item

PLANTED = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _item(k=0, **changes) -> Item:
    fields = dict(
        item_id=f"id{k}",
        benchmark="B",
        category="C",
        task="Lesion Type Identification",
        subtask="Lesion Type Identification",
        source="src-a" if k % 2 else "src-b",
        sample_ids=(f"s:{k}",),
        images=(f"source://src-a/img_{k}.jpg",),
        question="Which finding is shown?",
        options=("polyp", "ulcer", "bleeding"),
        answer="B",
        gt="ulcer",
        prompt_level="box",
        split="test",
    )
    return Item(**{**fields, **changes})


@pytest.fixture(autouse=True)
def no_builds(monkeypatch):
    monkeypatch.setattr(view, "_THUMBNAILERS", {})


def test_every_text_is_escaped_and_the_answer_marked():
    item = _item(question=PLANTED, options=("polyp", PLANTED, "x & y"), gt=PLANTED, source=PLANTED)
    html = view.item_html(item, ['data:image/jpeg;base64,AAA"onload="x'])
    assert "<script" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert 'src="data:image/jpeg;base64,AAA&quot;onload=&quot;x"' in html
    assert '<li class="correct">&lt;script&gt;' in html and "<li>x &amp; y</li>" in html
    assert html.count('class="correct"') == 1
    # task, source and prompt level are shown, a subtask equal to the task once
    assert html.count("Lesion Type Identification") == 1 and " · box · " in html


def test_multi_select_answers_are_all_marked():
    html = view.item_html(_item(answer="A, C"), None)
    assert html.count('class="correct"') == 2


def test_without_a_build_an_item_shows_without_images():
    html = _item()._repr_html_()
    assert "<img" not in html and "images not shown" in html
    view.register_thumbnailer(
        "b", lambda ref: "data:image/png;base64,QQ==" if "img_0" in ref else None
    )
    html = _item()._repr_html_()
    assert html.count("<img") == 1 and 'src="data:image/png;base64,QQ=="' in html
    # a reference no build resolves: that image is missing, the rest is shown
    html = _item(1)._repr_html_()
    assert "<img" not in html and "(no image file)" in html and "Which finding" in html


def test_the_latest_build_is_asked_first():
    view.register_thumbnailer("old", lambda ref: "data:old")
    view.register_thumbnailer("new", lambda ref: "data:new")
    assert view.thumbnails(["r"]) == ["data:new"]
    view.register_thumbnailer("old", lambda ref: "data:old")  # reopened: now the latest
    assert view.thumbnails(["r"]) == ["data:old"]


def test_pick_items_is_seeded_and_filtered():
    items = [_item(k) for k in range(20)]
    a = view.pick_items(items, 5, seed=3, source="src-a")
    assert [i.item_id for i in a] == [
        i.item_id for i in view.pick_items(items, 5, seed=3, source="src-a")
    ]
    assert len(a) == 5 and all(i.source == "src-a" for i in a)
    assert [i.item_id for i in view.pick_items(items, 5, seed=4, source="src-a")] != [
        i.item_id for i in a
    ]
    assert len(view.pick_items(items, 50)) == 20 and view.pick_items(items, 3, task="none") == []
    gallery = view.Gallery("t <b>", a)
    assert len(gallery) == 5 and "t &lt;b&gt;" in gallery._repr_html_()
