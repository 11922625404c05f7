"""Call the ``dpmt`` command line in-process and return its exit status (argparse errors
exit with status 2 instead of raising)."""

from dpmt.apps.cli import main


def cli(argv) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as e:
        return e.code
