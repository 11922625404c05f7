"""Applications on top of the library: the command line and its subcommands.

``cli`` (argparse only; arguments generated from the config fields), ``compare`` (head/tail
grids and the demo), ``bench`` (step timings against the measured matmul peak), ``scaling``
(the memory/communication model), ``stream`` (the JDP online predictor on ratings streams).
Nothing in :mod:`dpmt` below this package imports from it.
"""
