"""``python -m medvqa_build.cli``, the same as ``medvqa-build`` and ``python -m medvqa_build``."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
