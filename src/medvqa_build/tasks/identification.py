"""EndoBench's image-level identification tasks, each an :class:`ImageClassification` with its
own wording: Landmark Identification, Organ Identification, Lesion Type Identification, Lesion
Severity Grading, and Preoperative Assessment (always two options)."""

from __future__ import annotations

from ..records import Item
from .base import TASKS, Candidate, GenContext
from .common import sampled_distractors, sampled_item
from .image_classification import ImageClassification


@TASKS.register("landmark_identification")
class LandmarkIdentification(ImageClassification):
    name = "landmark_identification"
    needs = "one image-level anatomical-landmark label per sample"
    templates = (
        "Which anatomical landmark is shown in this endoscopic image?",
        "What anatomical landmark can be identified in this image?",
        "Identify the anatomical landmark visible in this endoscopy frame.",
        "Which landmark of the digestive tract does this image depict?",
        "Based on this image, which anatomical structure is being viewed?",
        "What landmark is the endoscope showing here?",
    )


@TASKS.register("organ_identification")
class OrganIdentification(ImageClassification):
    name = "organ_identification"
    needs = "one image-level label per sample that maps to an organ (params.answer_map)"
    templates = (
        "Can you determine which digestive organ is depicted in this image?",
        "Which organ of the digestive tract is shown in this image?",
        "In which organ was this endoscopic image taken?",
        "Identify the organ visible in this endoscopy image.",
        "Which part of the gastrointestinal tract does this image show?",
        "What organ is the endoscope in when capturing this image?",
    )


@TASKS.register("lesion_identification")
class LesionIdentification(ImageClassification):
    name = "lesion_identification"
    needs = "one image-level lesion/finding label per sample"
    templates = (
        "What type of lesion is present in this endoscopic image?",
        "Which abnormality can be seen in this image?",
        "Identify the lesion shown in this endoscopy image.",
        "What is the most likely diagnosis of the finding in this image?",
        "Which of the following lesions does this image show?",
        "Based on its appearance, what kind of lesion is visible here?",
    )


@TASKS.register("severity_grading")
class SeverityGrading(ImageClassification):
    name = "severity_grading"
    needs = "one image-level graded label per sample (e.g. a UC or esophagitis grade)"
    templates = (
        "What is the severity grade of the condition shown in this endoscopic image?",
        "How severe is the disease visible in this image?",
        "Which grade best describes the severity of the finding in this image?",
        "Grade the severity of the lesion shown in this endoscopy image.",
        "Based on the mucosal appearance, what is the disease grade?",
        "Which severity level does this endoscopic image correspond to?",
    )


@TASKS.register("preoperative_assessment")
class PreoperativeAssessment(ImageClassification):
    """Two options always (EndoBench's PA random baseline is 50%): the truth and one other
    answer of the vocabulary, e.g. adequate vs inadequate bowel preparation."""

    name = "preoperative_assessment"
    needs = "one image-level label per sample among two or more assessment classes"
    n_options = 2
    templates = (
        "Which assessment best describes the readiness shown in this endoscopic image?",
        "Based on this image, what is the appropriate preprocedural assessment?",
        "How would you assess the condition shown before the intervention?",
        "Which of the two assessments applies to this endoscopic view?",
        "What is the assessment of this image before the procedure continues?",
    )

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        negatives = sampled_distractors(cand, ctx, cand.truth, self.n_options)
        question, template_id = self.question(cand, index)
        return sampled_item(cand, ctx, negatives, question, template_id)
