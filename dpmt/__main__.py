"""``python -m dpmt …`` is the ``dpmt`` command."""

import sys

from dpmt.cli import main

sys.exit(main())
