"""Issue 32.2 through the generate stage: a task's items share one ledger, paced by the task's
planned answers, so over a task with skewed answers each finding is the answer in about a
quarter of the items that show it, as far as its share allows; with ``balance_frequency:
false`` (the old uniform draw) the common finding gives itself away."""

from collections import Counter

from medvqa_build.records import Sample

from .conftest import LESION, run, task

COUNTS = {"polyp": 60, "ulcer": 40, "erosion": 30, "bleeding": 30, "erythema": 20,
          "angiectasia": 20, "esophagitis": 10, "lymphangiectasia": 10}  # fmt: skip


def labelled_samples():
    out = []
    for label, n in COUNTS.items():
        for i in range(n):
            out.append(
                Sample(
                    sample_id=f"synthetic-endo:{label}/{i}",
                    source="synthetic-endo",
                    image=f"{label}/{i}.jpg",
                    width=64,
                    height=64,
                    modality="endoscopy",
                    labels=(label,),
                    group_id=f"{label}-{i}",
                )
            )
    return out


def answer_rates(items):
    shown = Counter(o for i in items for o in i.options)
    answers = Counter(i.gt for i in items)
    return {label: answers[label] / shown[label] for label in shown}


def test_generate_shares_one_ledger_per_task():
    def items(**negatives):
        spec = task(
            "lt",
            "image_classification",
            LESION,
            "Lesion Type Identification",
            quota=220,
            negatives={"strategy": "label_pool", "params": negatives},
            balance=False,  # keep the answers skewed: the ledger is what is tested
        )
        return run([spec], labelled_samples()).items

    new, old = items(), items(balance_frequency=False)
    assert len(new) == len(old) == 220
    rates, old_rates = answer_rates(new), answer_rates(old)

    def spread(r):
        return max(r.values()) - min(r.values())

    assert spread(rates) < 0.5 * spread(old_rates), (rates, old_rates)  # 0.18 against 0.39
    # polyp answers 60 of 220 items: shown at most in the 160 others, its rate is >= 0.27
    assert rates["polyp"] <= 0.35 < 0.45 <= old_rates["polyp"]
    # letters stay balanced either way
    letters = Counter(i.answer for i in new)
    assert max(letters.values()) - min(letters.values()) <= 1
