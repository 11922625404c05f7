"""The learning tasks as registry entries (:data:`dpmt.registry.TASKS`, ``TrainConfig.task``).

A :class:`Task` says what the labels are and how a model is judged, as capabilities the
rest of dpmt reads (no code compares ``cfg.task`` with a name):

* ``implicit`` — every positive (a rating above ``positive_threshold``, or every entry of
  implicit data) has label y = 1; models rank items, judged by Recall@20; the popularity
  prior and private tuning apply.
* ``rating`` — the labels are the ratings, centred by a private global mean μ̂ (and private
  item offsets b̂_i) and clipped to ±``label_clip``, so the b-statistics' sensitivity uses
  y_max = ``label_clip``; judged by RMSE on held-out ratings of known users.

Plain Python (no numpy): :mod:`dpmt.config` reads it to validate a config.
"""

from __future__ import annotations

from dpmt.errors import ConfigError


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

    def check(self, cfg) -> None:
        if cfg.data.split not in self.splits:
            takes = " or ".join(f"split={s!r}" for s in self.splits)
            raise ConfigError(f"task={self.name!r} takes {takes} (got {cfg.data.split!r}): "
                              f"{self.why_not_split}")


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


IMPLICIT, RATING = Implicit(), Rating()
