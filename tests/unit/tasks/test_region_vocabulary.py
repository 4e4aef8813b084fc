"""``region_recognition``'s ``params.vocabulary`` fills only a source whose own findings are
too few for the task's options: a vocabulary word that is never the answer would tell a blind
reader which option is right (the text-only audit of issue 26 caught it on EndoBench)."""

from medvqa_build.tasks import TASKS


def _findings(gen, samples) -> set[str]:
    return {c.truth for c in gen.candidates(samples)}


def test_a_source_with_enough_findings_draws_only_its_own(still_samples):
    extra = ["lymphangiectasia", "foreign body", "cancer"]
    probe = TASKS.get("region_recognition")({"vocabulary": extra})
    own = _findings(probe, still_samples)
    assert len(own) >= 2
    enough = TASKS.get("region_recognition")({"vocabulary": extra}, n_options=len(own))
    assert enough.vocabulary(still_samples) == sorted(own)
    too_few = TASKS.get("region_recognition")({"vocabulary": extra}, n_options=len(own) + 1)
    assert too_few.vocabulary(still_samples) == sorted(own | set(extra))
    # a generator built without the task's option count keeps the whole vocabulary
    assert probe.vocabulary(still_samples) == sorted(own | set(extra))
