"""lmms-eval hooks for a medvqa_build benchmark (copied as ``utils.py`` next to the task YAMLs).

Standalone: imports nothing from medvqa_build. Rows are those of the HF export (``images``
is a list of PIL images, ``options`` a list, ``answer`` one letter or several comma-joined,
``answer_bbox`` xyxy pixels with x2/y2 exclusive).

Multiple choice reports ``accuracy`` (exact match of the set of letters) and the set
``precision``, ``recall`` and ``f1`` of the letters given against the correct ones. In a task
of :data:`MULTI_SELECT_TASKS` every letter of the reply counts; elsewhere only the first (a
single-answer reply such as ``"B. A polyp"`` must not read as two letters).
"""

import re

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# tasks whose items may have several correct letters (filled in by the exporter)
MULTI_SELECT_TASKS = frozenset()
_NUM = re.compile(r"-?\d+(?:\.\d+)?")
IOU_THRESHOLDS = (0.3, 0.5, 0.7)


def mcq_docs(dataset):
    return dataset.filter(lambda doc: len(doc["options"]) > 0)


def grounding_docs(dataset):
    return dataset.filter(lambda doc: len(doc["options"]) == 0 and doc["answer_bbox"] is not None)


def doc_to_visual(doc):
    return [image.convert("RGB") for image in doc["images"]]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    kwargs = lmms_eval_specific_kwargs or {}
    lines = [doc["question"]]
    lines += [f"{LETTERS[k]}. {text}" for k, text in enumerate(doc["options"])]
    return kwargs.get("pre_prompt", "") + "\n".join(lines) + kwargs.get("post_prompt", "")


def parse_letters(text, n_options, every=False):
    """Option letters in a reply: a bare letter, ``(B)``, ``B.``, ``Answer: B`` or a list such
    as ``A, C`` / ``A and C``; the first only unless ``every``. In reply order, no repeats."""
    valid = LETTERS[:n_options]
    text = (text or "").strip()
    if len(text) == 1 and text.upper() in valid:
        return [text.upper()]
    found = re.findall(rf"(?:^|[\s(\[:,/&])([{valid}])(?=$|[\s).,:;/&\]])", text)
    letters = list(dict.fromkeys(found))
    return letters if every else letters[:1]


def set_scores(pred, gold):
    """Exact match, precision, recall and F1 of the letter sets ``pred`` against ``gold``."""
    pred, gold = set(pred), set(gold)
    hit = len(pred & gold)
    precision = hit / len(pred) if pred else 0.0
    recall = hit / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
    return {"accuracy": float(pred == gold), "precision": precision, "recall": recall, "f1": f1}


def mcq_process_results(doc, results):
    every = doc.get("task") in MULTI_SELECT_TASKS
    pred = parse_letters(results[0], len(doc["options"]), every=every)
    gold = [a.strip() for a in doc["answer"].split(",") if a.strip()]
    return set_scores(pred, gold)


def parse_box(text, width, height):
    """The first four numbers of a reply as xyxy pixels: values <= 1 are read as 0-1,
    values of a box in a 0-1000 range on a larger image are left as pixels."""
    numbers = [float(n) for n in _NUM.findall(text or "")][:4]
    if len(numbers) < 4:
        return None
    if all(0 <= n <= 1 for n in numbers):
        numbers = [numbers[0] * width, numbers[1] * height, numbers[2] * width, numbers[3] * height]
    return numbers


def box_iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def grounding_process_results(doc, results):
    """IoU of the reply's box; needs ``process_results_use_image: true`` (lmms-eval drops the
    image column before ``process_results`` otherwise) for the image size."""
    width, height = doc["images"][-1].size
    pred = parse_box(results[0], width, height)
    iou = box_iou(pred, list(doc["answer_bbox"])) if pred else 0.0
    out = {"iou": iou}
    for t in IOU_THRESHOLDS:
        out[f"acc_at_{t}"] = float(iou >= t)
    return out
