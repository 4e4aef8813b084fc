"""What a visual sampler's cap costs in hardness, against embedding everything (issue 35.1), on
the replica builds.

    python benchmarks/bench_cap_cost.py          # every case: 7 min wall, 200 CPU s on 2 cores
    python benchmarks/bench_cap_cost.py --cases spine-class,demo-class --caps 2,5,10

The embed stage embeds only what generation can use (``stages/embed_demand.py``): a
``visual_class`` task's library of ``library_size`` images per class, a ``visual_neighbor``
task's pool of ``pool_per_class`` images per label, and the first ``embed_candidates``
candidates. This builds each case several times over the same download: with smaller caps
(``--caps``), as shipped, and with the caps lifted (``<cap>: all``, ``embed_candidates: all``;
the baseline). The cases are the recipes' visual tasks and ``--set`` variants of them:

- ``spine-class``: ``recipes/spinebench.yaml`` as shipped (Disease Diagnosis, ``visual_class``,
  ``library_size: 200``, ``aggregate: max``) over the replicas of
  ``scripts/build_spine_medsg_replicas.py``, ``quota_scale=0.005``;
- ``spine-neighbor``: the same task with ``negatives.strategy: visual_neighbor``
  (``pool_per_class`` 1000 by default);
- ``spine-large-class`` / ``spine-large-neighbor``: the two above over the same replicas but
  VinDr-SpineXR's with ``--large-extra`` (1500) images instead of 60, about 250 per disease,
  so that the shipped ``library_size: 200`` caps the five large classes and the candidates
  (``2 x quota + 64`` = 464) are a part of the pool; ``balance: {prefer: quota}`` fills the 200
  items (the six small classes hold one or two images, so the default balance policy stops at
  24);
- ``demo-class``: ``recipes/demo.yaml``'s lesion-type-hard (``visual_class``, ``topk: 5``,
  ``library_size`` 200 by default) over its synthetic-endo source (150 stills, written once);
- ``demo-neighbor``: the same task with ``visual_neighbor``;
- ``endo-class`` / ``endo-neighbor``: ``recipes/endobench.yaml``'s lesion-type (six options,
  ``label_pool`` as shipped) with ``visual_class`` / ``visual_neighbor``, over the replicas of
  ``scripts/build_endobench_replicas.py`` at ``quota_scale=0.08``; the recipe is cut to that
  task and its six sources (to keep the run short).

Every build uses the offline embedder (no weights; the replicas' pixels are synthetic) and one
shared embedding cache and stage cache (a cap changes the embed stage's and generate's
addresses, so those run again; convert is reused): the times are not the point, the hardness is.

Per case and cap it prints: the images of the task's pool embedded (``embedded.demand`` of
``report.json``) and their share of the pool; the pool images drawn against the pool (the
candidates aside) and the largest per-class ``se_factor``; the task's row of the difficulty
report (``report.json`` ``difficulty``: items, distractor_truth_sim, hardest_truth_sim,
image_distractor_sim, image_truth_sim, ncc_accuracy, chance); and the items whose options
(in order) differ from those of the ``all`` build, matched by item id (an item only one of
the two builds has counts as differing); ``short`` is the task's quota shortfall. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@dataclass
class Case:
    name: str
    recipe: str  # file under recipes/
    data: str  # the download it builds from: spine, spine-large, endo or demo
    task: str  # the task's name in the recipe
    strategy: str  # visual_class or visual_neighbor
    shipped: int  # the cap as shipped (the recipe's, else the sampler's default)
    overrides: list[str] = field(default_factory=list)
    only_task: bool = False  # cut the recipe to this task and its sources

    @property
    def cap_key(self) -> str:
        return "library_size" if self.strategy == "visual_class" else "pool_per_class"


NEIGHBOR = "{strategy: visual_neighbor}"
# spinebench's Disease Diagnosis with visual_neighbor (Healthy stays mandatory)
SPINE_NEIGHBOR = ["tasks.0.negatives.strategy=visual_neighbor", "tasks.0.negatives.params={}"]
SPINE = ("spinebench.yaml", "disease-diagnosis")
DEMO = ("demo.yaml", "demo", "lesion-type-hard")
ENDO = ("endobench.yaml", "endo", "lesion-type")
CASES = {
    "spine-class": Case("spine-class", SPINE[0], "spine", SPINE[1], "visual_class", 200),
    "spine-neighbor": Case(
        "spine-neighbor", SPINE[0], "spine", SPINE[1], "visual_neighbor", 1000, SPINE_NEIGHBOR
    ),
    "spine-large-class": Case(
        "spine-large-class", SPINE[0], "spine-large", SPINE[1], "visual_class", 200
    ),
    "spine-large-neighbor": Case(
        "spine-large-neighbor",
        SPINE[0],
        "spine-large",
        SPINE[1],
        "visual_neighbor",
        1000,
        SPINE_NEIGHBOR,
    ),
    "demo-class": Case("demo-class", *DEMO, "visual_class", 200),
    "demo-neighbor": Case(
        "demo-neighbor", *DEMO, "visual_neighbor", 1000, [f"tasks.1.negatives={NEIGHBOR}"]
    ),
    "endo-class": Case(
        "endo-class",
        *ENDO,
        "visual_class",
        200,
        ["tasks.4.negatives={strategy: visual_class}"],
        only_task=True,
    ),
    "endo-neighbor": Case(
        "endo-neighbor",
        *ENDO,
        "visual_neighbor",
        1000,
        [f"tasks.4.negatives={NEIGHBOR}"],
        only_task=True,
    ),
}
DIFFICULTY = (
    "distractor_truth_sim",
    "hardest_truth_sim",
    "image_distractor_sim",
    "image_truth_sim",
    "ncc_accuracy",
    "chance",
)


def write_data(data: Path, cases: list[Case], large_extra: int) -> dict[str, list[str]]:
    """The replicas and the demo's source, once; per download the ``--set`` strings pointing
    the recipe at them."""
    from scripts import build_endobench_replicas, build_spine_medsg_replicas
    from tests.fixtures import fixture_writer

    from medvqa_build.api import make_synthetic

    where: dict[str, list[str]] = {}
    wanted = {c.data for c in cases}
    spine = build_spine_medsg_replicas
    order = [s["id"] for s in _recipe_data("spinebench.yaml")["sources"]]
    for key in ("spine", "spine-large"):
        if key not in wanted:
            continue
        roots = spine.write_replicas(data / key, spine.SPINEBENCH)
        if key == "spine-large":  # VinDr-SpineXR with large_extra images, not 60
            shutil.rmtree(data / key / "vindr-spinexr")
            roots["vindr-spinexr"] = fixture_writer("vindr-spinexr")(
                data / key / "vindr-spinexr", extra=large_extra
            )
        where[key] = ["quota_scale=0.005"]
        if key == "spine-large":  # fill the quota (200 items) from the five large classes
            where[key].append("tasks.0.balance={prefer: quota}")
        where[key] += [f"sources.{order.index(sid)}.root={root}" for sid, root in roots.items()]
    if "endo" in wanted:
        build_endobench_replicas.write_replicas(data / "endo")
        os.environ["ENDOBENCH_DATA"] = str(data / "endo")  # the recipe's roots read it
        where["endo"] = ["quota_scale=0.08"]
    if "demo" in wanted:
        root = data / "synthetic-endo"
        make_synthetic(
            "synthetic-endo", root, n_images=150, n_videos=2, frames_per_video=24, n_corrupt=1
        )
        where["demo"] = ["sources.0.generate=null", f"sources.0.root={root}"]
    return where


def _recipe_data(name: str) -> dict:
    from medvqa_build.store import yaml_text

    return yaml_text.load(yaml_text.read_utf8(REPO / "recipes" / name))


def load(case: Case, overrides: list[str]):
    """The case's recipe with ``overrides`` (``--set`` strings), cut to its task when asked."""
    from medvqa_build.pipeline.recipes import recipe_from_dict
    from medvqa_build.recipe import apply_override

    data = _recipe_data(case.recipe)
    for item in case.overrides + overrides:  # task indices are the shipped recipe's
        apply_override(data, item, case.recipe)
    if case.only_task:
        (task,) = [t for t in data["tasks"] if t["name"] == case.task]
        data["tasks"] = [task]
        data["sources"] = [s for s in data["sources"] if s["id"] in task["sources"]]
    return recipe_from_dict(data, where=case.recipe)


def cap_overrides(case: Case, recipe_data_task: int, cap: str) -> list[str]:
    """``--set`` strings giving the case's task the cap ``cap`` ("shipped": none)."""
    if cap == "shipped":
        return []
    p = f"tasks.{recipe_data_task}.negatives.params"
    out = [f"{p}.{case.cap_key}={cap}"]
    if cap == "all":
        out.append(f"{p}.embed_candidates=all")
    return out


def task_index(case: Case) -> int:
    return [t["name"] for t in _recipe_data(case.recipe)["tasks"]].index(case.task)


def one_build(case: Case, cap: str, base: list[str], work: Path, cache: Path) -> dict:
    from medvqa_build.api import build

    overrides = base + [f"embedding_cache={cache}", "embedder=offline"]
    overrides += cap_overrides(case, task_index(case), cap)
    recipe = load(case, overrides)
    spec = next(t for t in recipe.tasks if t.name == case.task)
    start = time.process_time()
    result = build(recipe, work, progress=False, force_export=True)  # problems are counted
    cpu = time.process_time() - start
    report = result.report
    demand = report.get("embedded", {}).get("demand", {}).get(case.task, {})
    key = f"{spec.task} [{case.strategy}]"
    options = {
        i.item_id: i.options
        for i in result.items
        if i.task == spec.task and i.negatives and i.negatives.strategy == case.strategy
    }
    classes = demand.get("classes", {})
    se = [c["se_factor"] for c in classes.values() if c.get("se_factor") is not None]
    return {
        "cap": cap,
        "cpu_s": cpu,
        "embedded": demand.get("embedded"),
        "task_pool": demand.get("task_pool"),
        "drawn": sum(c["drawn"] for c in classes.values()),
        "pool": sum(c["pool"] for c in classes.values()),
        "classes": len(classes),
        "largest": max((c["pool"] for c in classes.values()), default=0),
        "max_se": max(se, default=0.0),
        "samples_embedded": report.get("embedded", {}).get("embedded"),
        "samples": report.get("embedded", {}).get("samples"),
        "difficulty": report["difficulty"].get(key, {}),
        "options": options,
        "shortfall": report.get("shortfall", {}).get(case.task, 0),
    }


def run_case(case: Case, caps: list[int], base: list[str], tmp: Path) -> list[dict]:
    cache = tmp / "embeddings"
    shown = [c for c in caps if c < case.shipped]
    rows = []
    for cap in [*map(str, shown), "shipped", "all"]:
        row = one_build(case, cap, base, tmp / "out" / f"{case.name}-{cap}", cache)
        rows.append(row)
        print(f"  {case.name} {cap}: {row['cpu_s']:.1f} CPU s", file=sys.stderr, flush=True)
    return rows


def differ(a: dict, b: dict) -> int:
    """Items whose options (in order) differ, by item id; one build's only items count."""
    return sum(1 for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def show(case: Case, rows: list[dict]) -> None:
    full = rows[-1]
    print(
        f"\n== {case.name}: {case.recipe} {case.task} [{case.strategy}], {case.cap_key} "
        f"(shipped {case.shipped}); task pool {full['task_pool']}, {full['classes']} classes "
        f"(largest {full['largest']}); samples {full['samples']}"
    )
    head = f"{'cap':>8s} {'embedded':>8s} {'share':>6s} {'drawn/pool':>10s} {'max_se':>6s} "
    head += f"{'items':>5s} {'short':>5s} {'differ':>6s} " + " ".join(
        f"{d[:10]:>10s}" for d in DIFFICULTY
    )
    print(head)
    for r in rows:
        d = r["difficulty"]
        cells = " ".join(f"{d.get(k) if d.get(k) is not None else '-':>10}" for k in DIFFICULTY)
        cap = f"{r['cap']}" if r["cap"] != "shipped" else f"{case.shipped}*"
        share = (r["embedded"] or 0) / max(r["task_pool"] or 1, 1)
        print(
            f"{cap:>8s} {r['embedded'] or 0:8d} {share:6.1%} "
            f"{str(r['drawn']) + '/' + str(r['pool']):>10s} {r['max_se']:6.3f} "
            f"{d.get('items', 0):5d} {r['shortfall']:5d} "
            f"{differ(r['options'], full['options']):6d} {cells}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument(
        "--caps",
        default="2,5,10,20,50",
        help="smaller caps built besides the shipped one and 'all' (those under the shipped cap)",
    )
    ap.add_argument(
        "--large-extra",
        type=int,
        default=1500,
        help="VinDr-SpineXR images of the spine-large replica (the script writes 60)",
    )
    args = ap.parse_args()
    cases = [CASES[c] for c in args.cases.split(",")]
    caps = sorted(int(c) for c in args.caps.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-cap-cost-") as tmp:
        os.environ["MEDVQA_STAGE_CACHE"] = str(Path(tmp) / "stages")
        base = write_data(Path(tmp) / "data", cases, args.large_extra)
        print(
            "per case: cap (* as shipped), the task pool's images embedded and their share, "
            "the library/pool drawn against the pool, the largest se_factor, the difficulty "
            "report's row, and the items whose options differ from the 'all' build's"
        )
        for case in cases:
            rows = run_case(case, caps, base[case.data], Path(tmp))
            show(case, rows)


if __name__ == "__main__":
    main()
