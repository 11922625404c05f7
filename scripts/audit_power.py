#!/usr/bin/env python
"""Measured power of the per-mechanism privacy audits: the tables of docs/audit_power.md.

Runs :func:`experiments.audit_power.main`: the exact power of the GDP audit on a Gaussian
mechanism whose true sensitivity is r × the claimed one, the threshold audit's power for
comparison, and the real audits (seeds 0..R-1) at the suite size (4,000 trials per dataset)
and the full size (50,000). See ``experiments/audit_power.py``.

    python scripts/audit_power.py                          # ~1 h on 2 CPU cores
    python scripts/audit_power.py --reps 20 --skip-full    # a few minutes
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository root

from experiments.audit_power import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
