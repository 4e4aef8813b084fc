"""VLMEvalKit dataset class for an export with multi-select items (copied as
``vlmeval/medvqa_vlmeval.py``, with ``DATASETS`` and ``MULTI_SELECT_TASKS`` filled in).

Standalone: imports nothing from medvqa_build, and VLMEvalKit only when used.

Stock VLMEvalKit (``CustomMCQDataset``) extracts one letter from a reply and compares it with
the ``answer`` cell, so a multi-select answer such as ``A,C`` is always a miss. This class
keeps VLMEvalKit's own matching (``mcq_vanilla_eval``) for single-answer rows and scores the
rows of :data:`MULTI_SELECT_TASKS` by the set of letters in the reply: ``hit`` is the exact
match of the sets, and set ``precision``, ``recall`` and ``f1`` are added per task. The report
is VLMEvalKit's ``report_acc`` (Overall, per ``l2-category`` and ``category``) plus columns
``<task> (precision|recall|f1)``, written to ``<eval file>_acc.csv``.

Run from VLMEvalKit's folder with the TSV in ``$LMUData``::

    python /path/to/vlmeval/medvqa_vlmeval.py --data <name> --model <model>

(it registers the class, then runs VLMEvalKit's ``run.py`` with the same arguments).
"""

import re
import runpy
import string
import sys
from pathlib import Path

# the export's TSV names (``<name>`` or ``<name>_partK``), filled in by the exporter
DATASETS = ()
# tasks whose items may have several correct letters (filled in by the exporter)
MULTI_SELECT_TASKS = frozenset()
LETTERS = string.ascii_uppercase
METRICS = ("precision", "recall", "f1")


def parse_letters(text, n_options):
    """Every option letter in a reply (``A, C``, ``A and C``, ``(A) (C)``), in order."""
    valid = LETTERS[:n_options]
    text = str(text or "").strip()
    if len(text) == 1 and text.upper() in valid:
        return [text.upper()]
    found = re.findall(rf"(?:^|[\s(\[:,/&])([{valid}])(?=$|[\s).,:;/&\]])", text)
    return list(dict.fromkeys(found))


def set_scores(pred, gold):
    """Exact match (``hit``), precision, recall and F1 of two letter sets."""
    pred, gold = set(pred), set(gold)
    hit = len(pred & gold)
    precision = hit / len(pred) if pred else 0.0
    recall = hit / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
    return {"hit": int(pred == gold), "precision": precision, "recall": recall, "f1": f1}


def _n_options(row):
    return sum(1 for c in LETTERS if c in row and isinstance(row[c], str) and row[c] != "")


def dataset_class():
    """The ``CustomMCQDataset`` subclass (VLMEvalKit imported here, when it is used)."""
    import pandas as pd
    from vlmeval.dataset.image_mcq import CustomMCQDataset
    from vlmeval.dataset.utils.multiple_choice import mcq_vanilla_eval, report_acc
    from vlmeval.smp import dump, load
    from vlmeval.smp.file import get_intermediate_file_path

    class MedVQAMCQDataset(CustomMCQDataset):
        DATASET_URL = {name: "" for name in DATASETS}
        DATASET_MD5 = {}

        def evaluate(self, eval_file, **judge_kwargs):
            nproc = judge_kwargs.pop("nproc", 4)
            data = load(eval_file).sort_values(by="index")
            data["prediction"] = [str(x) for x in data["prediction"]]
            for k in list(data.keys()):
                data[k.lower() if k not in LETTERS else k] = data.pop(k)
            multi = data["task"].isin(MULTI_SELECT_TASKS)
            parts = []
            if (~multi).any():
                result_file = get_intermediate_file_path(eval_file, "_exact_matching_result", "pkl")
                parts.append(
                    mcq_vanilla_eval(
                        None, data[~multi], self.data, nproc, result_file, self.dataset_name
                    )
                )
            if multi.any():
                rows = data[multi].copy()
                scores = [
                    set_scores(
                        parse_letters(row["prediction"], _n_options(row)),
                        [a.strip() for a in str(row["answer"]).split(",") if a.strip()],
                    )
                    for _, row in rows.iterrows()
                ]
                for key in ("hit", *METRICS):
                    rows[key] = [s[key] for s in scores]
                rows["log"] = "multi-select: letter sets compared"
                parts.append(rows)
            scored = pd.concat(parts).sort_values(by="index")
            dump(scored, get_intermediate_file_path(eval_file, "_exact_matching_result"))
            acc = report_acc(scored.copy())
            for task in sorted(set(scored.loc[scored["task"].isin(MULTI_SELECT_TASKS), "task"])):
                sub = scored[scored["task"] == task]
                for metric in METRICS:
                    acc[f"{task} ({metric})"] = [
                        float(sub[sub["split"] == sp][metric].mean())
                        if "split" in sub
                        else float(sub[metric].mean())
                        for sp in acc["split"]
                    ]
            dump(acc, get_intermediate_file_path(eval_file, "_acc", "csv"))
            return acc

    return MedVQAMCQDataset


def register():
    """Make ``build_dataset(<name>)`` (and so ``run.py --data <name>``) use the class."""
    import vlmeval.dataset as datasets

    cls = dataset_class()
    datasets.MedVQAMCQDataset = cls
    datasets.DATASET_CLASSES.insert(0, cls)
    return cls


if __name__ == "__main__":
    import vlmeval

    register()
    run_py = Path(vlmeval.__file__).resolve().parent.parent / "run.py"
    sys.argv[0] = str(run_py)
    runpy.run_path(str(run_py), run_name="__main__")
