#!/usr/bin/env python
"""Empirical privacy audit of the whole training run (``dpmt.fit``) and of its broken twin.

Runs :func:`experiments.pipeline_audit.main`: many full private training runs on a synthetic
data set with and without a canary user who alone rates a few items, the empirical ε lower
bound of the released item embeddings next to the ledger's ε, and the same for the pipeline
with the b-hat noise switched off (the ledger still claiming it). See
``experiments/pipeline_audit.py``.

    python scripts/pipeline_audit.py                                  # ML-100K-sized, ε = 1
    python scripts/pipeline_audit.py --size tiny --trials 300 --twin-trials 40
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository root

from experiments.pipeline_audit import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
