"""The ``dpmt`` command line (placeholder; subcommands are wired in as modules land)."""
import sys


def main(argv=None) -> int:
    print("dpmt: no subcommands yet", file=sys.stderr)
    return 2
