"""An lmms-eval plugin (``LMMS_EVAL_PLUGINS=medvqa_stand_in``) with one stand-in model that
answers from the document (``mode=oracle``) or at random (``mode=random``), so the exported
tasks run through lmms-eval's own CLI, loading and scoring without model weights."""
