"""``python -m medvqa_build.cli``, the same as ``medvqa-build`` and ``python -m medvqa_build``."""

import sys

from . import main

sys.exit(main())
