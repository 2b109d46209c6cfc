#!/usr/bin/env python
"""Entry point: `python eval.py --config configs/example_en.yaml` (see README.md)."""

import sys

from evaluate.cli import main

if __name__ == "__main__":
    sys.exit(main())
