"""The learning tasks as registry entries (:data:`dpmt.registry.TASKS`, ``TrainConfig.task``).

A :class:`Task` says what the labels are and how a model is judged, as capabilities the
rest of dpmt reads (no code compares ``cfg.task`` with a name):

* ``implicit`` — every positive (a rating above ``positive_threshold``, or every entry of
  implicit data) has label y = 1; models rank items, judged by Recall@20; the popularity
  prior and private tuning apply.
* ``rating`` — the labels are the ratings, centred by a private global mean μ̂ (and private
  item offsets b̂_i) and each user's own offsets, and clipped to ±``label_clip``, so the
  b-statistics' sensitivity uses y_max = ``label_clip``; judged by RMSE on held-out ratings
  of known users.

A task also gives the settings a config leaves at None (:data:`TASK_SETTINGS`,
:meth:`Task.settings`: solver, α0, C, sweeps, label clip, the once-only releases' noise
ratio) and its count cap and ridge rules, from public fields only (``private``, ε).

Plain Python (no numpy): :mod:`dpmt.config` reads it to validate a config.
"""

from __future__ import annotations

import dataclasses
import math

from dpmt.errors import ConfigError


#: the fields of :class:`~dpmt.config.TrainConfig` whose default (None) is the task's
#: (:meth:`Task.settings`)
TASK_SETTINGS = ("solver", "gravity", "user_clip", "iterations", "label_clip",
                 "count_noise_ratio")
#: those of them held by the config's PrivacyConfig (``cfg.privacy``)
PRIVACY_SETTINGS = ("count_noise_ratio",)
#: ``TrainConfig.user_offsets`` of a rating model (dpmt.labels): b_j the shrunk mean of the
#: clipped labels (config version 3's model); b_j refitted to the residual of u_j; and with
#: slopes w_j on the released item statistics (the default)
USER_OFFSETS = ("mean", "refit", "slopes")
#: what None means for them, in the CLI's help
TASK_RULE = "the task's rule (dpmt.tasks: implicit feedback and ratings differ)"


def apply_task_settings(cfg) -> None:
    """The fields of :data:`TASK_SETTINGS` that ``cfg`` leaves at None take its task's values
    (which may depend on ``cfg.private`` and ε: public), written into the frozen config so
    that every reader sees numbers; :meth:`~dpmt.config.TrainConfig.replace` re-applies the
    rule to them (``cfg.replace(privacy=dict(epsilon=1))`` follows it). Those of
    :data:`PRIVACY_SETTINGS` live in ``cfg.privacy`` (a new PrivacyConfig: a sub-config may be
    shared between configs); a non-private config has none. An unknown task is left to the
    config's checks."""
    from dpmt.registry import TASKS

    if not isinstance(cfg.task, str) or cfg.task not in TASKS:
        return
    auto = tuple(f for f in TASK_SETTINGS
                 if getattr(_holder(cfg, f), f, ...) is None)   # ...: NonPrivate has none
    object.__setattr__(cfg, "_by_task", auto)
    if auto:
        values = TASKS[cfg.task].settings(cfg)
        own = {f: values[f] for f in auto if f not in PRIVACY_SETTINGS}
        priv = {f: values[f] for f in auto if f in PRIVACY_SETTINGS}
        for f, v in own.items():
            object.__setattr__(cfg, f, v)
        if priv:
            object.__setattr__(cfg, "privacy", dataclasses.replace(cfg.privacy, **priv))


def _holder(cfg, name: str):
    return cfg.privacy if name in PRIVACY_SETTINGS else cfg


class Task:
    """Base class of a task entry."""

    name: str = ""
    help: str = ""
    labelled: bool = False          # labels are the ratings (centred, clipped), not 1
    ranking: bool = True            # ranks items: Recall@k, the popularity prior, tune
    metric: str = "recall@20"       # the headline metric's key in a metrics dict
    metric_label: str = "Recall@20"
    splits: tuple[str, ...] = ()    # the TrainConfig.split values it accepts
    why_not_split: str = ""

    def y_max(self, cfg) -> float:
        """The bound |y| ≤ y_max on the labels that the b-sensitivity assumes."""
        return 1.0

    def settings(self, cfg) -> dict:
        """The values of the settings a config leaves to its task
        (:data:`dpmt.config.TASK_SETTINGS`), from public fields only (``private``,
        ``epsilon``): the plan is made from them before any data is read."""
        return dict(IMPLICIT_SETTINGS)

    def count_cap(self, cfg) -> int:
        """k of the private counts: ``count_cap``, or β rounded."""
        return int(cfg.count_cap) if cfg.count_cap is not None else max(1, int(cfg.budget))

    def default_reg(self, noisy_users, epsilon: float, private: bool):
        """(λ, reason) of the task's own ridge rule, or None: the solver's
        (:mod:`dpmt.train.defaults`)."""
        return None

    def check(self, cfg) -> None:
        if cfg.data.split not in self.splits:
            takes = " or ".join(f"split={s!r}" for s in self.splits)
            raise ConfigError(f"task={self.name!r} takes {takes} (got {cfg.data.split!r}): "
                              f"{self.why_not_split}")


#: the implicit task's settings (chosen on Recall@20: dpmt.config.TrainConfig's docstring)
IMPLICIT_SETTINGS = {"solver": "gd", "gravity": 0.5, "user_clip": 0.1, "iterations": 4,
                     "label_clip": 2.0, "count_noise_ratio": 1.0}


class Implicit(Task):
    name = "implicit"
    help = "the positives with label 1, ranked by Recall@k"
    splits = ("per-user", "heldout-users")
    why_not_split = ("'random' splits the ratings themselves, for task='rating'; implicit "
                     "feedback uses per-user or heldout-users")


class Rating(Task):
    name = "rating"
    help = "predict the ratings (RMSE), centred by a private global mean"
    labelled, ranking = True, False
    metric, metric_label = "rmse", "RMSE"
    splits = ("random", "per-user")
    why_not_split = ("it predicts held-out ratings of known users: use 'random' (the "
                     "ML-10M protocol) or 'per-user'")

    def y_max(self, cfg) -> float:
        return float(cfg.label_clip)

    def settings(self, cfg) -> dict:
        """Rating defaults, chosen on ML-100K validation RMSE and checked on the explicit
        synthetic (experiments/rating_sweep.py; README's rating section): biased ALS —
        exact item solves (ssp), no gravity — and, privately, C = 1, a label clip c from ε
        (:func:`rating_by_epsilon`) and the once-only releases (μ̂, n̂_i, b̂_i) at 0.15 of
        the factors' noise (``count_noise_ratio``: most of the budget). Without privacy 15
        sweeps and no user clip; privately 2 planned sweeps, whose factors a rule skips
        where n̂·ε is small (:func:`dpmt.train.defaults.rating_factors`)."""
        private = cfg.private if isinstance(cfg.private, bool) else True
        if not private:
            return dict(RATING_NONPRIVATE)
        return dict(RATING_PRIVATE, label_clip=rating_by_epsilon(cfg.privacy.epsilon)[0])

    def count_cap(self, cfg) -> int:
        """k of the mean, counts and offsets: ``count_cap``, or by ε
        (:func:`rating_by_epsilon`) and at least β."""
        if cfg.count_cap is not None:
            return int(cfg.count_cap)
        return max(rating_by_epsilon(cfg.privacy.epsilon)[1], int(cfg.budget))

    def default_reg(self, noisy_users, epsilon: float, private: bool):
        if not private:
            return RATING_REG, "ratings, non-private (biased ALS)"
        return RATING_PRIVATE_REG, "ratings, private"


#: rating settings without privacy: biased ALS (exact item solves), no clip of u (C bounds
#: a release's sensitivity, and nothing is released), the residual labels clipped at 2
RATING_NONPRIVATE = {"solver": "ssp", "gravity": 0.0, "user_clip": 1000.0, "iterations": 15,
                     "label_clip": 2.0, "count_noise_ratio": 1.0}
#: rating settings of a private run (the label clip from ε: rating_by_epsilon)
RATING_PRIVATE = {"solver": "ssp", "gravity": 0.0, "user_clip": 1.0, "iterations": 2,
                  "count_noise_ratio": 0.15}
#: λ of the rating task's user and item systems without privacy, and with
RATING_REG, RATING_PRIVATE_REG = 16.0, 30.0
#: the rating task's label clip c and count cap k by ε: (ε below which, c, k); validation
#: RMSE of the private bias model on ML-100K and the 5k-user explicit synthetic
#: (experiments/rating_sweep.py): at ε = 1 both preferred c = 1, k = 50; at ε = 5 and 20,
#: c = 1.5 and k = 100 on ML-100K (k = 50 on the synthetic, whose users rate 32 items)
RATING_BY_EPSILON = ((2.0, 1.0, 50), (math.inf, 1.5, 100))


def rating_by_epsilon(epsilon) -> tuple[float, int]:
    """(c, k) of a private rating run from its ε (:data:`RATING_BY_EPSILON`): the mean's,
    the offsets' and the factors' releases have sensitivity ∝ c (the sums' ∝ √k·c), while
    the labels lose what the clip cuts off and an item's sum grows with k up to the users'
    own counts."""
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):          # refused by the config's own checks
        eps = math.inf
    return next((c, k) for below, c, k in RATING_BY_EPSILON if eps < below)


IMPLICIT, RATING = Implicit(), Rating()
