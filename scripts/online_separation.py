#!/usr/bin/env python
"""Mistakes vs horizon T for private online learners and predictors (Sanyal 2026).

Thin wrapper around :func:`experiments.online_separation.main`; see ``--help``.
``python scripts/online_separation.py --quick`` runs the small version; the run of
``docs/online.md`` (about 2–3 minutes on 2 shared cores)::

    python scripts/online_separation.py --reps 20 --epsilons 1,8 --delta 1e-6 \
        --workers 2 --out runs/online_separation

``--bench`` measures SOA / Name-and-Shame / JDP throughput on 1,024 thresholds.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository root

from experiments.online_separation import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
