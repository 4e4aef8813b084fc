"""Every export format of the demo recipe, read with its real reader; two builds give identical
bytes; the HF export survives a push to a local Hub and back."""

import json
import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from medvqa_build.cli import main
from medvqa_build.export import EXPORTERS
from medvqa_build.export.tsv_text import decode_cell

from ..hub_server import FakeHub

FORMATS = f"export.formats=[{','.join(EXPORTERS.registered())}]"  # every format there is
SMALL = [
    "--set",
    "sources.0.generate.n_images=30",
    "--set",
    "sources.0.generate.frames_per_video=8",
    "--set",
    "tasks.0.quota=12",
    "--set",
    "tasks.1.quota=8",
    "--set",
    "tasks.2.quota=4",
    "--set",
    "tasks.3.quota=4",
    "--set",
    "tasks.4.quota=8",
    "--set",
    FORMATS,
    "--set",
    "export.options={vlmeval: {circular: true}, sharegpt: {convention: qwen}}",
]


@pytest.fixture(scope="module")
def builds(tmp_path_factory, request):
    recipe = str(request.config.rootpath / "recipes" / "demo.yaml")
    a, b = tmp_path_factory.mktemp("ea"), tmp_path_factory.mktemp("eb")
    for out in (a, b):
        assert main(["run", recipe, "-o", str(out), "-q", *SMALL]) == 0
    return a, b


def test_all_formats_byte_identical(builds):
    a, b = builds
    sums = (a / "checksums.sha256").read_text()
    assert sums == (b / "checksums.sha256").read_text()
    listed = {line.split("  ")[1].split("/")[0] for line in sums.splitlines()}
    assert listed == set(EXPORTERS.registered())


def test_readers(builds, tmp_path):
    from datasets import load_dataset

    a, _ = builds
    ds = load_dataset(str(a / "hf"), split="test", cache_dir=str(tmp_path))
    n = len(ds)
    tsv = pd.read_csv(a / "vlmeval" / "MedVQA_Demo.tsv", sep="\t")
    assert len(tsv) == 4 * n and (tsv["index"] % 1_000_000).nunique() == n  # 4 options: 4 rotations
    for row in tsv.to_dict("records"):
        g = ds[int(row["index"] % 1_000_000)]
        assert decode_cell(str(row[row["answer"]])) == g["gt"]
    records = json.loads((a / "sharegpt" / "MedVQA_Demo.json").read_text())
    assert len(records) == n and all(
        (a / "sharegpt" / p).is_file() for r in records for p in r["images"]
    )
    medsg = json.loads((a / "medsg" / "tasks.json").read_text())
    assert sum(v["items"] for v in medsg.values()) == n
    spine = json.loads((a / "spinebench" / "MedVQA_Demo.json").read_text())
    assert len(spine) == n and all(r["answers"][0] in r["options"] for r in spine)
    assert (a / "lmms-eval" / "medvqa_demo_mcq.yaml").is_file()


def _push(env_extra: dict, code: str) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN")
    }
    env.update({"HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}, **env_extra)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


PUSH = """
    import sys
    import medvqa_build.export.hub
    medvqa_build.export.hub.time.sleep = lambda s: None
    from medvqa_build.cli import main
    rc = main(["push", sys.argv[1] if len(sys.argv) > 1 else {dir!r}, "me/demo", "-q", *{extra!r}])
    print("RC", rc)
"""


def test_push_round_trip(builds, tmp_path):
    a, _ = builds
    with FakeHub() as hub:
        env = {
            "HF_ENDPOINT": hub.url,
            "HF_TOKEN": "secret-token-123",
            "HF_HOME": str(tmp_path / "home"),
        }
        hub.fail = {"/commit/": 1}  # one transient server error: retried
        p = _push(env, PUSH.format(dir=str(a), extra=["--max-commit-mb", "1"]))
        assert "RC 0" in p.stdout, p.stderr[-2000:]
        assert "secret-token-123" not in p.stdout + p.stderr
        # uploaded in several batches, made visible by one commit that holds every file
        assert len(hub.commits) == 1 and "README.md" in hub.commits[0]["paths"]
        assert hub.files("me/demo")["README.md"] == (a / "hf" / "README.md").read_bytes()
        load = """
            from datasets import load_dataset
            remote = load_dataset("me/demo", split="test", cache_dir={c!r})
            local = load_dataset({d!r}, split="test", cache_dir={c!r} + "2")
            drop = lambda ds: ds.remove_columns(["images"]).to_list()
            assert drop(remote) == drop(local) and len(remote) > 0
            assert [i.size for i in remote[0]["images"]] == [i.size for i in local[0]["images"]]
            print("SAME", len(remote))
        """.format(c=str(tmp_path / "cache"), d=str(a / "hf"))
        p = _push(env, load)
        assert "SAME" in p.stdout, p.stderr[-3000:]


def test_push_failures_are_one_line(builds, tmp_path):
    a, _ = builds
    with FakeHub() as hub:
        env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "home")}
        p = _push(env, PUSH.format(dir=str(a), extra=[]))  # no token
        assert "RC 2" in p.stdout and "no Hugging Face token" in p.stderr
        assert "Traceback" not in p.stderr
        env["HF_TOKEN"] = "secret-token-456"
        hub.fail = {"/commit/": 100}
        p = _push(env, PUSH.format(dir=str(a), extra=[]))
        assert "RC 2" in p.stdout and "Traceback" not in p.stderr
        errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "HTTP 500" in errors[0] and "after 4 attempts" in errors[0]
        assert "secret-token-456" not in p.stdout + p.stderr
        p = _push(env, PUSH.format(dir=str(tmp_path), extra=[]))  # not an export
        assert "RC 2" in p.stdout and "not an HF export" in p.stderr
