"""``python -m repeval {fit,score,compare} ...``"""

import sys

from .cli import main

sys.exit(main())
