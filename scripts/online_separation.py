#!/usr/bin/env python
"""Mistakes vs horizon T for private online learners and predictors (Sanyal 2026).

Thin wrapper around :func:`dpmt.online.experiments.main`; see ``--help``.
``python scripts/online_separation.py --quick`` runs the small version.
"""

import sys

from dpmt.online.experiments import main

if __name__ == "__main__":
    sys.exit(main())
