"""Adding or editing a plug-in the recipe does not run rebuilds nothing (issue 34): a stage's
output is addressed by its own code and by the plug-ins it runs (``Stage.plugins``), not by
every plug-in a registry imports.

The demo is built by a copy of the package (a subprocess, the copy first on its path); a
throwaway exporter module is then added (and registered in ``export/__init__``), an unused
exporter, task generator, renderer and embedder are edited and a new layout module appears:
the rerun reuses every stage and the exports are the same bytes. An edit of the hf exporter,
which the demo runs, rebuilds exactly its export.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import medvqa_build
from medvqa_build.cli.noop import RECORD

SMALL = {
    "sources.0.generate.n_images": 24,
    "sources.0.generate.frames_per_video": 6,
    **{f"tasks.{k}.quota": 4 for k in range(6)},
}

THROWAWAY = '''"""A throwaway exporter no recipe names."""

import json

from .base import EXPORTERS, Exporter


@EXPORTERS.register("throwaway")
class Throwaway(Exporter):
    def start(self):
        self.lines = self.text_file("items.jsonl", mode="w", encoding="utf-8")

    def write(self, item):
        self.lines.fh.write(json.dumps(item.item_id) + "\\n")
'''

NEW_LAYOUT = '''"""A throwaway layout no manifest names."""

from .base import LAYOUTS, Layout


@LAYOUTS.register("throwaway_layout")
class ThrowawayLayout(Layout):
    """Nothing."""
'''


def _copy_package(tmp_path: Path, repo: Path) -> Path:
    src = tmp_path / "src"
    package = Path(medvqa_build.__file__).resolve().parent
    shutil.copytree(package, src / "medvqa_build", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "manifests").symlink_to(repo / "manifests")  # found beside src/, as in a checkout
    return src / "medvqa_build"


def _build(package: Path, recipe: Path, out: Path) -> dict:
    (out / RECORD).unlink(missing_ok=True)  # a real run, never a replay (cli/noop.py)
    sets = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
    env = dict(os.environ, PYTHONPATH=str(package.parent), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-m", "medvqa_build", "run", str(recipe), "-o", str(out), "-q", *sets],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        f"{package}"
        in subprocess.run(  # the copy is the code that ran
            [sys.executable, "-c", "import medvqa_build; print(medvqa_build.__file__)"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout
    )
    report = json.loads((out / "report.json").read_text())
    return {
        "built": sorted(
            f"{s['stage']}/{Path(s['path']).name.rsplit('-', 1)[0]}"
            for s in report["stages"]
            if not s["reused"]
        ),
        "stages": len(report["stages"]),
        "checksums": (out / "checksums.sha256").read_text(),
    }


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} lost {old!r}"
    path.write_text(text.replace(old, new, 1))


def test_an_unused_plugin_rebuilds_nothing_and_a_used_one_its_stage(tmp_path, repo):
    package = _copy_package(tmp_path, repo)
    recipe, out = repo / "recipes" / "demo.yaml", tmp_path / "build"
    first = _build(package, recipe, out)
    assert first["stages"] == 8 and len(first["built"]) == 8

    (package / "export" / "throwaway.py").write_text(THROWAWAY)
    line = 'from . import native as _native  # noqa: F401  (registers "medsg", "spinebench")\n'
    _edit(
        package / "export" / "__init__.py", line, line + "from . import throwaway as _t  # noqa\n"
    )
    _edit(package / "export" / "sharegpt.py", 'MCQ_SUFFIX = "Answer', 'MCQ_SUFFIX = "Reply')
    (package / "tasks" / "counting.py").write_text(
        (package / "tasks" / "counting.py").read_text() + "\n_EDITED = 1\n"
    )
    (package / "layouts" / "throwaway_layout.py").write_text(NEW_LAYOUT)
    # the demo embeds offline, draws no point and samples no visual_neighbor distractors
    for unused in (
        "render/point.py",
        "negatives/open_clip_embedder.py",
        "negatives/visual_neighbor.py",
    ):
        (package / unused).write_text((package / unused).read_text() + "\n_EDITED = 1\n")
    again = _build(package, recipe, out)
    assert again["built"] == [] and again["stages"] == 8
    assert again["checksums"] == first["checksums"]

    _edit(package / "export" / "hf.py", "ROW_GROUP_ROWS = 100", "ROW_GROUP_ROWS = 100\n_X = 1")
    edited = _build(package, recipe, out)
    assert edited["built"] == ["export/hf"]
    assert edited["checksums"] == first["checksums"]
