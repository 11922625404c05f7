"""The measurement harness of dpmt, beside the library and never imported by it.

``bench`` (item/user/GD steps against the matmul peak and ``implicit``; BENCHMARKS.md),
``scaling`` (the memory and communication model, docs/scaling.md), ``quality`` (Recall@20 of
every method, tuned on validation, reported on test; QUALITY.md) and their reports, plus
stand-alone scripts (``parser_bench``, ``noise_bench``, ...). ``bench`` and ``quality`` are
also ``dpmt`` subcommands: they register under the ``dpmt.commands`` entry-point group
(pyproject.toml), the way implicit and LensKit keep benchmarks beside their package.
"""
