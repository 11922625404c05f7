"""Experiments and audit harnesses built on the ``dpmt`` library (not part of the package).

* :mod:`experiments.audits` — empirical privacy audits of dpmt's mechanisms and their
  deliberately broken twins (statistics in :mod:`dpmt.audit`); run by
  ``scripts/privacy_audit.py``.
* :mod:`experiments.regression` — the multi-task linear-regression experiment (weighted vs
  uniform noise); run by ``scripts/regression_experiment.py``.
* :mod:`experiments.online_separation` — the online separation experiment (JDP vs SOA vs
  name-and-shame); run by ``scripts/online_separation.py``.

Import them from the repository root (``python -m pytest`` puts it on ``sys.path``; the
scripts insert it themselves).
"""
