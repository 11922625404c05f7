"""What a :class:`dpmt.model.Model` says about itself: the privacy it spent, where its noise
came from, and a few lines of report.

The ε stated is the ledger's composition of every release of the run
(:meth:`dpmt.privacy.PrivacyLedger.epsilon`; with private selection, the tuning's target
is the one reported as such), at the config's δ; a non-private model states ε = ∞, δ = 0.
Public values only: the summary goes into the metrics and ``model.json`` (the noise note).
"""

from __future__ import annotations

import math

from dpmt.metrics import format_metrics, format_rmse
from dpmt.privacy.ledger import ML100K_TUNING_NOTE, PRIVACY_UNIT
from dpmt.privacy.randomness import SEEDED_WARNING


def noise_note(model) -> dict:
    """Where the noise came from, as ``model.json`` states it."""
    if not model.private:
        return {"source": "none", "note": "non-private model: ε = ∞"}
    if model.noise_reproducible:
        return {"source": "user-given seed", "note": SEEDED_WARNING}
    return {"source": "secret key from OS entropy",
            "note": "the key stays in the trainer's private state; no published file "
                    "lets a noise draw be regenerated"}


def privacy_summary(model) -> dict:
    """ε spent, δ, the privacy unit and (private) the accountant, the number of releases
    and the noise note."""
    cfg = model.config
    if model.ledger is None:
        return {"epsilon": math.inf, "delta": 0.0, "private": False,
                "privacy_unit": PRIVACY_UNIT}
    return {"epsilon": model.ledger.epsilon(), "delta": cfg.privacy.delta,
            "target_epsilon": cfg.privacy.epsilon, "private": True,
            "privacy_unit": PRIVACY_UNIT,
            "accountant": cfg.privacy.accountant, "releases": len(model.ledger),
            "noise": noise_note(model)}


def report(model) -> str:
    """A few lines: what was trained, the privacy spent, the metrics, the time."""
    cfg = model.config
    target = cfg.privacy.epsilon
    sel = None if model.ledger is None else getattr(model.ledger, "selection", None)
    if sel is not None and sel.charged and model.ledger.epsilon_budget is not None:
        target = model.ledger.epsilon_budget     # the whole tuning's target, not one run's
    name = ("non-private (ε = ∞)" if not cfg.private else
            f"DP ε={model.epsilon:.3g} (target {target:g}"
            + (", private selection included" if sel is not None and sel.charged else "")
            + f"), δ={cfg.privacy.delta:g}")
    lines = [f"{cfg.data.dataset}: {cfg.solver} / "
             f"{cfg.weights if cfg.private else 'all-ones'} "
             f"weights, d={cfg.dim}, {cfg.iterations} iterations, {name}",
             f"privacy unit: {PRIVACY_UNIT}"]
    if model.private and model.noise_reproducible:
        lines.append(f"WARNING: {SEEDED_WARNING}")
    if model.private and cfg.data.dataset == "ml-100k":
        lines.append(f"note: {ML100K_TUNING_NOTE}")
    if model.auto_settings:
        lines.append(f"chosen by rule from the released statistics: {model.auto_settings}")
    if model.metrics:
        lines += (format_rmse(model.metrics) if "rmse" in model.metrics.get("overall", {})
                  else format_metrics(model.metrics))
    t = f"time: {model.seconds:.1f}s"
    if model.compile_seconds > 0.05:
        t += f" (of which ~{model.compile_seconds:.1f}s compilation)"
    lines.append(t)
    return "\n".join(lines)
