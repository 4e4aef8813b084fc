"""``python -m medvqa_build``."""

import sys

from .cli import main

sys.exit(main())
