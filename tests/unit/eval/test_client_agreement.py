"""``score`` gives the clients' own single-choice accuracy on the same replies: VLMEvalKit's
``can_infer`` (its rule-based matcher, no judge) and lmms-eval's run of the exported task's
``process_results`` with its ``mean`` aggregation. Each test runs the client's code and is
skipped where that client is not installed."""

import importlib
import importlib.util
import json
import random
from pathlib import Path

import pytest

import medvqa_build.export.lmms as lmms_export
from medvqa_build.eval.answers import vlmeval_choice
from medvqa_build.eval.predictions import read_predictions
from medvqa_build.eval.score import BuildEntries, score_predictions
from medvqa_build.records import Item

OPTION_SETS = [
    ("polyp", "ulcer", "bleeding", "angiectasia"),
    ("polyp", "polyp with bleeding", "ulcer", "normal"),  # one option inside another
    ("cecum", "pylorus", "z-line"),
]


def _client(module: str, name: str):
    """The client's module, or a skip saying why it cannot be imported (missing, or an
    install whose own imports fail)."""
    try:
        return importlib.import_module(module)
    except Exception as exc:
        pytest.skip(f"{name} is not importable here: {type(exc).__name__}: {exc}"[:300])


def _items(n=300, seed=5):
    rng = random.Random(seed)
    out = []
    for k in range(n):
        options = OPTION_SETS[k % len(OPTION_SETS)]
        answer = "ABCD"[rng.randrange(len(options))]
        out.append(
            Item(
                item_id=f"c{k:04d}",
                benchmark="B",
                category="C",
                task="T",
                subtask="T",
                source="s",
                sample_ids=(f"s:{k}",),
                images=("a.png",),
                question=f"Q{k}?",
                options=options,
                answer=answer,
                gt=options["ABCD".index(answer)],
            )
        )
    return out


def _replies(items, seed=9):
    """Replies of every form a model gives: letters bare and decorated, option text (also
    the text of an option inside another), two letters, and noise."""
    rng = random.Random(seed)
    out = []
    for item in items:
        letter = "ABCD"[rng.randrange(len(item.options))]
        text = item.options["ABCD".index(letter)]
        out.append(
            rng.choice(
                [
                    letter,
                    f"({letter})",
                    f"{letter}. {text}",
                    f"The answer is {letter}.",
                    text,
                    f"I think it is {text}",
                    "A and C",
                    "not sure",
                ]
            )
        )
    return out


def _score(items, path, parser="auto"):
    result = score_predictions(
        BuildEntries(items), [read_predictions(path)], lambda r: (1, 1), parser=parser
    )
    return result["single_choice"]["all"]["accuracy"]


@pytest.mark.client
def test_vlmevalkit_can_infer_gives_the_same_accuracy(tmp_path):
    matching = _client("vlmeval.utils.matching_util", "VLMEvalKit (open-compass/VLMEvalKit)")
    items, replies = _items(), _replies(_items())
    hits = []
    lines = ["index,question,A,B,C,D,answer,prediction"]
    for k, (item, reply) in enumerate(zip(items, replies, strict=True)):
        choices = {"ABCD"[j]: o for j, o in enumerate(item.options)}
        hits.append(matching.can_infer(reply, choices) == item.answer)
        opts = list(item.options) + [""] * (4 - len(item.options))
        lines.append(",".join([str(k), item.question, *opts, item.answer, json.dumps(reply)]))
    path = tmp_path / "model_Bench.csv"
    path.write_text("\n".join(lines) + "\n")
    assert _score(items, path) == pytest.approx(sum(hits) / len(hits))


@pytest.mark.client
def test_vlmevalkit_reads_every_reply_as_we_do():
    """Reply by reply, on random word soups of letters, option texts and phrases."""
    matching = _client("vlmeval.utils.matching_util", "VLMEvalKit (open-compass/VLMEvalKit)")
    rng = random.Random(0)
    words = ["A", "B", "C", "D", "Z", "the", "answer", "is", "(B)", "C.", "**D**", "Answer:"]
    words += ["polyp", "ulcer", "polyp with bleeding", "correct", "Answer is **C**", "I", "a"]
    words += ["Cannot determine the answer", "Failed to obtain answer via API", "z-line"]
    for _ in range(5000):
        options = rng.choice(OPTION_SETS)
        reply = " ".join(rng.choice(words) for _ in range(rng.randint(0, 9)))
        choices = {"ABCD"[j]: o for j, o in enumerate(options)}
        assert (matching.can_infer(reply, choices) or None) == vlmeval_choice(reply, options), reply


@pytest.mark.client
def test_lmms_eval_scoring_gives_the_same_accuracy(tmp_path):
    metrics = _client("lmms_eval.api.metrics", "lmms-eval (EvolvingLMMs-Lab/lmms-eval)")
    source = Path(lmms_export.__file__).with_name("lmms_utils.py")
    spec = importlib.util.spec_from_file_location("task_utils", source)
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    items, replies = _items(), _replies(_items())
    lines, values = [], []
    for k, (item, reply) in enumerate(zip(items, replies, strict=True)):
        doc = {"item_id": item.item_id, "options": list(item.options), "answer": item.answer}
        result = utils.mcq_process_results(doc, [reply])
        values.append(result["accuracy"])
        lines.append({"doc_id": k, "doc": doc, "filtered_resps": [reply], **result})
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert _score(items, path) == pytest.approx(metrics.mean(values))
