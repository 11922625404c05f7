#!/usr/bin/env python
"""Benchmarks of the private iteration: a thin wrapper around ``dpmt bench`` (dpmt/apps/bench.py).

    python scripts/bench.py --suite            # all sizes, d = 64 and 128; BENCHMARKS.md + plot
    python scripts/bench.py --interactions 5000000 --dim 128 --json out.json
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks.bench import main

    argv = sys.argv[1:]
    # `make bench` runs the script without arguments: that means the whole suite
    sys.exit(main(argv if argv else ["--suite"]))
