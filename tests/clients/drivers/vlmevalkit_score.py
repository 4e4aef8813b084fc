"""Score an export's VLMEvalKit TSV with VLMEvalKit's own dataset class and ``evaluate``.

    python vlmevalkit_score.py BUILD MODE WORKDIR [stock]

MODE: ``oracle`` (the answer letters, ``B`` or ``B,D``), ``oracle_text`` (the text of the one
correct option: VLMEvalKit's text matching must find it alone) or ``random`` (a uniform letter,
or a uniform non-empty subset where the question says more than one option may be correct).
The dataset class is the export's ``medvqa_vlmeval.py`` when it has one, unless ``stock``
(VLMEvalKit's ``CustomMCQDataset``, what ``run.py --data NAME`` picks for an unknown TSV).
Prints one JSON line: ``{name: {column: value}}`` of the accuracy report.
"""

import json
import os
import random
import shutil
import string
import sys
from pathlib import Path

build, mode, work = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
stock = len(sys.argv) > 4 and sys.argv[4] == "stock"
sys.path.insert(0, os.environ["MEDVQA_VLMEVALKIT"])
os.environ["LMUData"] = str(work / "LMUData")  # noqa: SIM112 (VLMEvalKit reads this name)
(work / "LMUData").mkdir(parents=True, exist_ok=True)
for tsv in sorted((build / "vlmeval").glob("*.tsv")):
    shutil.copy(tsv, work / "LMUData" / tsv.name)

import pandas as pd  # noqa: E402
from vlmeval.dataset import build_dataset  # noqa: E402
from vlmeval.smp import dump  # noqa: E402

module = build / "vlmeval" / "medvqa_vlmeval.py"
if module.is_file() and not stock:
    sys.path.insert(0, str(module.parent))
    import medvqa_vlmeval

    medvqa_vlmeval.register()

rng = random.Random(0)


def reply(row) -> str:
    letters = [c for c in string.ascii_uppercase if c in row and not pd.isna(row[c])]
    answer = [a.strip() for a in str(row["answer"]).split(",")]
    if mode == "oracle":
        return ",".join(answer)
    if mode == "oracle_text":
        return str(row[answer[0]])
    if "more than one option" in str(row["question"]).lower():
        while True:
            picked = [c for c in letters if rng.random() < 0.5]
            if picked:
                return ", ".join(picked)
    return rng.choice(letters)


report = {}
for tsv in sorted((build / "vlmeval").glob("*.tsv")):
    name = tsv.stem
    dataset = build_dataset(name)
    data = dataset.data.copy()
    data.pop("image")
    data["prediction"] = [reply(row) for _, row in data.iterrows()]
    eval_file = work / f"StandIn_{mode}_{name}.xlsx"
    dump(data, str(eval_file))
    acc = dataset.evaluate(str(eval_file), nproc=1)
    report[name] = {
        "class": type(dataset).__name__,
        **{str(k): v for k, v in acc.iloc[0].to_dict().items()},
    }
print(json.dumps(report, default=str))
