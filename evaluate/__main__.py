"""`python -m evaluate ...`: the same command line as `eval.py` and the `llm-eval` console script."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
