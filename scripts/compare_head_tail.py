#!/usr/bin/env python
"""Head/tail comparison grid (weights × ε × solver × seeds): the script form of `dpmt compare`.

Example: python scripts/compare_head_tail.py --weight-grid uniform tail adaptive:0.25 \
             --epsilons 1 5 20 --solvers ssp gd --seeds 0 1 2 --out runs/compare
"""
import sys

from dpmt.apps.cli import script_main

if __name__ == "__main__":
    sys.exit(script_main("compare", "compare_head_tail.py", sys.argv[1:]))
