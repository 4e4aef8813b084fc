"""The review gallery in headless Chromium: load, filter, mark items, export decisions,
screenshot; then apply the exported decisions to the build."""

import json
import shutil
import time

import pytest

from medvqa_build.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="headless browser test needs the Debian packages chromium and chromium-driver "
    "(apt-get install -y chromium chromium-driver)",
)
SMALL = [
    "--set",
    "sources.0.generate.n_images=30",
    "--set",
    "sources.0.generate.frames_per_video=6",
    "--set",
    "tasks.0.quota=8",
    "--set",
    "tasks.1.quota=4",
    "--set",
    "tasks.2.quota=6",
    "--set",
    "tasks.3.quota=4",
    "--set",
    "tasks.4.quota=4",
    "--set",
    "tasks.5.quota=4",
]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory, request):
    out = tmp_path_factory.mktemp("review-build")
    recipe = str(request.config.rootpath / "recipes" / "demo.yaml")
    assert main(["run", recipe, "-o", str(out), "-q", *SMALL]) == 0
    return out


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1400,1000",
    ):
        opts.add_argument(flag)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    opts.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    driver.downloads = downloads
    yield driver
    driver.quit()


@pytest.fixture(autouse=True)
def review_cli(monkeypatch):
    """Register ``preview``/``review`` on the CLI if cli.py does not do it (yet)."""
    import argparse

    from medvqa_build import cli
    from medvqa_build.cli.review import register as add_review_commands

    original = cli.make_parser

    def make_parser():
        parser = original()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        if "preview" not in sub.choices:
            add_review_commands(sub)
        return parser

    monkeypatch.setattr(cli, "make_parser", make_parser)


def _wait_for(path_glob, folder, timeout=15.0):
    end = time.time() + timeout
    while time.time() < end:
        done = [p for p in folder.glob(path_glob) if not p.name.endswith(".crdownload")]
        if done:
            return done[0]
        time.sleep(0.1)
    raise AssertionError(f"no {path_glob} downloaded to {folder}")


def test_review_in_headless_chromium(build_dir, browser, tmp_path, capsys):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    page = tmp_path / "preview" / "index.html"
    assert main(["preview", str(build_dir), "-o", str(page)]) == 0
    data = json.loads(page.read_text().split('id="data">', 1)[1].split("</script>", 1)[0])
    n_items = len(data["items"])
    box_ids = [i["item_id"] for i in data["items"] if i["prompt_level"] == "box"]
    assert n_items == 30 and len(box_ids) == 6

    browser.get(page.as_uri())
    cards = browser.find_elements(By.CSS_SELECTOR, ".card")
    assert len(cards) == n_items
    first_img = browser.find_element(By.CSS_SELECTOR, ".card img")
    assert (
        browser.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", first_img
        )
        > 0
    )

    Select(browser.find_element(By.ID, "f-level")).select_by_value("box")
    visible = [c for c in browser.find_elements(By.CSS_SELECTOR, ".card") if c.is_displayed()]
    assert sorted(c.get_attribute("data-item") for c in visible) == sorted(box_ids)
    assert f"{len(box_ids)} of {n_items} shown" in browser.find_element(By.ID, "shown").text
    # a box item shows the rendered image and the clean one
    assert len(visible[0].find_elements(By.CSS_SELECTOR, "img")) == 2

    rejected, edited, accepted = (c.get_attribute("data-item") for c in visible[:3])
    visible[0].find_element(By.CSS_SELECTOR, ".do-reject").click()
    visible[0].find_element(By.CSS_SELECTOR, ".comment").send_keys("box covers two lesions")
    visible[1].find_element(By.CSS_SELECTOR, ".do-edit").click()
    question = visible[1].find_element(By.CSS_SELECTOR, ".e-question")
    question.clear()
    question.send_keys("Which finding does the red box enclose?")
    visible[1].find_element(By.CSS_SELECTOR, ".comment").send_keys("clearer wording")
    visible[2].find_element(By.CSS_SELECTOR, ".do-accept").click()
    browser.find_element(By.ID, "reviewer").send_keys("dr-test")

    Select(browser.find_element(By.ID, "f-status")).select_by_value("reject")
    assert [
        c.get_attribute("data-item")
        for c in browser.find_elements(By.CSS_SELECTOR, ".card")
        if c.is_displayed()
    ] == [rejected]
    Select(browser.find_element(By.ID, "f-status")).select_by_value("")
    browser.save_screenshot(str(tmp_path / "review.png"))
    assert (tmp_path / "review.png").stat().st_size > 10_000

    browser.find_element(By.ID, "export").click()
    exported = _wait_for("decisions-*.json", browser.downloads)
    doc = json.loads(exported.read_text())
    assert doc["build"] == data["build"] and doc["reviewer"] == "dr-test"
    decided = {d["item_id"]: d for d in doc["decisions"]}
    assert (
        decided[rejected]["decision"] == "reject"
        and decided[rejected]["comment"] == "box covers two lesions"
    )
    assert decided[edited]["edits"] == {"question": "Which finding does the red box enclose?"}
    assert decided[accepted]["decision"] == "accept"

    assert main(["review", "apply", str(build_dir), str(exported)]) == 0
    assert "30 -> 29 items" in capsys.readouterr().out
    from medvqa_build.pipeline import BuildDir

    items = BuildDir.open(build_dir).items()
    by_id = {i.item_id: i for i in items}
    assert (
        rejected not in by_id
        and by_id[edited].question == "Which finding does the red box enclose?"
    )
    audit = [
        json.loads(line) for line in (build_dir / "review" / "audit.jsonl").read_text().splitlines()
    ]
    assert audit[-1]["rejected"] == [{"item_id": rejected, "comment": "box covers two lesions"}]
    # the same file again names another build now: refused, nothing applied
    assert main(["review", "apply", str(build_dir), str(exported)]) == 2
    assert "decisions were made on build" in capsys.readouterr().err
    assert len(BuildDir.open(build_dir).items()) == 29


PLANTED = (
    '<script>window.PWNED = 1; document.title = "PWNED"</script>'
    '<img src="x" onerror="window.PWNED = 2">'
)


def test_a_planted_script_label_never_runs(build_dir, browser, tmp_path, capsys):
    """A label holding markup (as a file nobody here wrote may) is shown as text in the preview
    and in an Item's notebook HTML; the images still load."""
    from selenium.webdriver.common.by import By

    from medvqa_build.pipeline import BuildDir, BuildResult
    from medvqa_build.review.decisions import FORMAT, build_id

    items = BuildDir.open(build_dir).items()
    target = next(i for i in items if i.prompt_level == "box")
    decisions = tmp_path / "plant.json"
    options = list(target.options)
    options["ABCD".index(target.answer)] = PLANTED  # the truth's label, and so its option
    edit = {"question": "Which finding? " + PLANTED, "options": options, "gt": PLANTED}
    decisions.write_text(
        json.dumps(
            {
                "format": FORMAT,
                "version": 1,
                "build": build_id(items),
                "reviewer": "test",
                "decisions": [
                    {"item_id": target.item_id, "decision": "edit", "comment": "", "edits": edit}
                ],
            }
        )
    )
    assert main(["review", "apply", str(build_dir), str(decisions)]) == 0
    planted = next(i for i in BuildResult.open(build_dir).items if i.item_id == target.item_id)
    assert planted.gt == PLANTED

    preview = tmp_path / "preview" / "index.html"
    assert main(["preview", str(build_dir), "-o", str(preview)]) == 0
    item_page = tmp_path / "item.html"
    item_page.write_text(f"<!DOCTYPE html><html><body>{planted._repr_html_()}</body></html>")
    for page, n_images in ((preview, None), (item_page, 1)):
        browser.get(page.as_uri())
        time.sleep(0.5)  # an onerror handler would have fired by now
        assert browser.execute_script("return window.PWNED === undefined")
        assert browser.title != "PWNED"
        card = browser.find_element(By.CSS_SELECTOR, f'.mvqa-item[data-item="{target.item_id}"]')
        assert PLANTED in card.find_element(By.CSS_SELECTOR, ".q").text
        assert PLANTED in card.find_element(By.CSS_SELECTOR, "li.correct").text
        images = card.find_elements(By.CSS_SELECTOR, "img")
        assert images and (n_images is None or len(images) == n_images)
        for img in images:
            assert browser.execute_script(
                "return arguments[0].complete && arguments[0].naturalWidth", img
            )
        assert not card.find_elements(By.CSS_SELECTOR, "script")
