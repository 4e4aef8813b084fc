"""The stand-in model: reads each request's document (lmms-eval's ``task_dict``), asks for its
images through the task's own ``doc_to_visual``, and answers.

* ``oracle``: the answer letters (``B`` or ``B, D``) or the answer box ``[x1, y1, x2, y2]``;
* ``random``: one uniform letter, or (when the prompt says more than one option may be
  correct) a uniform non-empty subset of letters, or a uniform box inside the last image.
"""

import random
import string

from lmms_eval.api.model import lmms


class StandIn(lmms):
    def __init__(self, mode="oracle", seed=0, **kwargs):
        super().__init__()
        if mode not in ("oracle", "random"):
            raise ValueError(f"mode must be oracle or random, not {mode!r}")
        self.mode = mode
        self.rng = random.Random(int(seed))

    def _reply(self, context, doc, visuals):
        if doc["options"]:
            letters = string.ascii_uppercase[: len(doc["options"])]
            if self.mode == "oracle":
                return ", ".join(a.strip() for a in doc["answer"].split(","))
            if "more than one option" in context.lower():
                while True:
                    picked = [c for c in letters if self.rng.random() < 0.5]
                    if picked:
                        return ", ".join(picked)
            return self.rng.choice(letters)
        if self.mode == "oracle":
            return "[" + ", ".join(f"{v:g}" for v in doc["answer_bbox"]) + "]"
        width, height = visuals[-1].size
        xs = sorted(self.rng.uniform(0, width) for _ in range(2))
        ys = sorted(self.rng.uniform(0, height) for _ in range(2))
        return f"[{xs[0]:.1f}, {ys[0]:.1f}, {xs[1]:.1f}, {ys[1]:.1f}]"

    def generate_until(self, requests):
        out = []
        for request in requests:
            context, _gen_kwargs, doc_to_visual, doc_id, task, split = request.args
            doc = self.task_dict[task][split][doc_id]
            visuals = doc_to_visual(doc)
            if not visuals:
                raise ValueError(f"{task} doc {doc_id}: doc_to_visual gave no image")
            out.append(self._reply(context, doc, visuals))
        return out

    def generate_until_multi_round(self, requests):
        return self.generate_until(requests)

    def loglikelihood(self, requests):
        raise NotImplementedError("the exported tasks are generate_until")
