"""``python -m dpmt …`` is the ``dpmt`` command."""

import sys

from dpmt.apps.cli import main

sys.exit(main())
