#!/usr/bin/env python
"""Entry point: `python eval.py --config configs/example_en.yaml` (see README.md)."""

import os
import sys

# before torch is imported: OpenMP spin-waiting slows CPU inference badly on busy machines
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from evaluate.cli import main

if __name__ == "__main__":
    sys.exit(main())
