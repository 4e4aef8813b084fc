"""Worked example of CONTRIBUTING.md, "Add a task": ``scene_identification``.

Which procedure an image comes from (its sample's ``scene``: Gastroscopy, Colonoscopy,
Surgical Endoscopy, ...), asked of the whole image. Samples without a scene are no candidates.
To add a task, copy this file to ``src/medvqa_build/tasks/<name>.py`` and rename the task and
its class: the tasks package imports every module in it. ``tests/e2e/test_extension_examples.py``
runs this file as it is (registered for the test only).
"""

from collections.abc import Sequence

from medvqa_build.records import Sample
from medvqa_build.tasks.base import TASKS, Candidate, TaskGenerator


@TASKS.register("scene_identification")
class SceneIdentification(TaskGenerator):
    per_sample = True  # a sample's candidates depend on that sample alone: the pool is streamed
    name = "scene_identification"
    needs = "a scene per sample (the manifest's scene, or its scene_map for the label)"
    templates = (  # 5-8 paraphrases that do not give the answer away
        "During which procedure was this image taken?",
        "Which endoscopic procedure does this image come from?",
        "What kind of examination is shown in this image?",
        "Identify the procedure this frame was recorded in.",
        "From which type of endoscopy is this image?",
    )

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        """Any source feeds it: every sample has a scene field (it may be empty)."""
        return [set()]

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        return [Candidate(s, s.scene) for s in samples if s.scene]
