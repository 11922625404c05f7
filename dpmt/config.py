"""Training configuration (one dataclass; validated once, serialised with every run)."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from dpmt.errors import ConfigError, check_range

SOLVERS = ("ssp", "gd")
WEIGHTS = ("uniform", "tail", "adaptive", "adaptive-normalized")
SPLITS = ("per-user", "heldout-users")
ENCODERS = ("embedding", "mlp")
ACCOUNTANTS = ("pld", "rdp")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a run.

    Defaults are the ML-100K settings tuned on the validation split at ε = 5 (RESULTS.md):
    small d and few sweeps, because with 943 users the noise of a release grows with d
    while its signal does not; C = 0.1 is about the typical norm of an exact user solve, so
    clipping costs little signal while the sensitivity √β·C² stays small.

    Data:
      dataset: a dataset name (``ml-100k``...), a ratings file, or ``synthetic:...``.
      positive_threshold: ratings > threshold are positives (implicit feedback).
      split: ``per-user`` (each user's positives split train/validation/test) or
        ``heldout-users`` (Liang et al. 2018).
      split_fractions: train/validation/test fractions for ``per-user``.
      heldout_users: validation and test users each for ``heldout-users``.

    Model (alternating minimisation, Chien et al. 2021 / Krichene et al. 2023):
      dim: embedding dimension d. iterations: alternating-minimisation sweeps.
      reg: ridge λ. gravity: α0, weight of the unobserved pairs (α0 VᵀV / α0 G_U).
      user_clip: C, user embeddings are clipped to ‖u_j‖ ≤ C (bounds the sensitivity).
      init_scale: std of the random initial item embeddings.

    Weights (the paper's w_ij) and budget:
      weights: ``uniform`` (k items sampled per user, weight 1), ``tail`` (the k least popular
        by noisy count), ``adaptive`` (ω ∝ n̂^(−μ), eq. (11), clipped to β per user) or
        ``adaptive-normalized`` (the reference variant: every user exactly at β).
      mu: exponent μ; None means (1+γ)/4 with ``gamma``.
      budget: β (= k for the sampling baselines), Σ_i w_ij² ≤ β for every user.
      count_cap: per-user cap k for the private counts (default: β rounded).

    Solver:
      solver: ``ssp`` (Algorithm 1) or ``gd`` (noisy gradient descent, Algorithm 2).
      gd_steps, gd_learning_rate, gd_clip (G), gd_sampling_rate (Poisson q; None = full
      batch), gd_optimizer (``sgd``/``adam``), encoder (``embedding``/``mlp``), mlp_hidden.

    Privacy:
      private: False trains without noise (the non-private baseline; weights then all 1).
      epsilon, delta: the target for the *whole* run (counts + every iteration), calibrated
        once. accountant: ``pld`` or ``rdp``.
      count_noise_multiplier: fixed z for the counts (None: calibrated with ratio
        ``count_noise_ratio``). b_noise_ratio / gram_noise_ratio: noise of b̂ and Ĝ_U
        relative to Â (the explicit split of the budget).

    Execution:
      devices: shard the item step (items; users for noisy GD with the MLP encoder) and the
        user step (users) over this many devices (:mod:`dpmt.solvers.sharding`). Does not change the model: the noise of item
        i is keyed by i, so 1, 2 or 4 devices give the same V up to float32 round-off. On
        CPU, that many host devices are created when JAX has not started yet.

    seed: everything random derives from ``jax.random.PRNGKey(seed)``.
    """

    dataset: str = "ml-100k"
    data_dir: str = "data"
    positive_threshold: float = 3.5
    split: str = "per-user"
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    heldout_users: int = 100

    dim: int = 8
    iterations: int = 2
    reg: float = 1.0
    gravity: float = 0.5
    user_clip: float = 0.1
    init_scale: float = 0.1

    weights: str = "adaptive"
    mu: float | None = 0.25
    gamma: float = 1.0
    budget: float = 30.0
    count_cap: int | None = None

    solver: str = "ssp"
    gd_steps: int = 10
    gd_learning_rate: float = 100.0
    gd_clip: float = 0.2
    gd_sampling_rate: float | None = None
    gd_optimizer: str = "sgd"
    encoder: str = "embedding"
    mlp_hidden: int = 64

    private: bool = True
    epsilon: float = 5.0
    delta: float = 1e-5
    accountant: str = "pld"
    count_noise_multiplier: float | None = None
    count_noise_ratio: float = 1.0
    b_noise_ratio: float = 1.0
    gram_noise_ratio: float = 1.0

    devices: int = 1
    seed: int = 0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float) and not math.isfinite(v):
                raise ConfigError(f"{f.name} must be a finite number (got {v})")
        for name, allowed in [("solver", SOLVERS), ("weights", WEIGHTS), ("split", SPLITS),
                              ("encoder", ENCODERS), ("accountant", ACCOUNTANTS),
                              ("gd_optimizer", ("sgd", "adam"))]:
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)} "
                                  f"(got {getattr(self, name)!r})")
        check_range("dim", self.dim, low=1, integer=True)
        check_range("iterations", self.iterations, low=1, integer=True)
        check_range("reg", self.reg, low=0.0, low_open=True)
        check_range("gravity", self.gravity, low=0.0)
        check_range("user_clip", self.user_clip, low=0.0, low_open=True)
        check_range("init_scale", self.init_scale, low=0.0, low_open=True)
        check_range("gamma", self.gamma, low=0.0)
        if self.mu is not None:
            check_range("mu", self.mu, low=0.0)
        check_range("budget", self.budget, low=0.0, low_open=True)
        if self.count_cap is not None:
            check_range("count_cap", self.count_cap, low=1, integer=True)
        check_range("gd_steps", self.gd_steps, low=1, integer=True)
        check_range("gd_learning_rate", self.gd_learning_rate, low=0.0, low_open=True)
        check_range("gd_clip", self.gd_clip, low=0.0, low_open=True)
        if self.gd_sampling_rate is not None:
            check_range("gd_sampling_rate", self.gd_sampling_rate, low=0.0, high=1.0,
                        low_open=True)
        check_range("mlp_hidden", self.mlp_hidden, low=1, integer=True)
        check_range("epsilon", self.epsilon, low=0.0, low_open=True)
        check_range("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        if self.count_noise_multiplier is not None:
            check_range("count_noise_multiplier", self.count_noise_multiplier, low=0.0,
                        low_open=True)
        for r in ("count_noise_ratio", "b_noise_ratio", "gram_noise_ratio"):
            check_range(r, getattr(self, r), low=0.0, low_open=True)
        check_range("positive_threshold", self.positive_threshold)
        if len(self.split_fractions) != 3 or any(f < 0 for f in self.split_fractions) or \
                abs(sum(self.split_fractions) - 1.0) > 1e-6:
            raise ConfigError("split_fractions must be three non-negative numbers summing to 1 "
                              f"(got {self.split_fractions})")
        check_range("heldout_users", self.heldout_users, low=1, integer=True)
        check_range("seed", self.seed, low=0, integer=True)
        check_range("devices", self.devices, low=1, integer=True)
        if self.weights in ("uniform", "tail") and not float(self.budget).is_integer():
            raise ConfigError(f"weights={self.weights!r} samples k = budget items per user, so "
                              f"budget must be an integer (got {self.budget})")
        if self.encoder == "mlp" and self.solver != "gd":
            raise ConfigError("encoder='mlp' needs solver='gd' (SSP solves a linear model per "
                              "item)")

    @property
    def effective_mu(self) -> float:
        return (1.0 + self.gamma) / 4.0 if self.mu is None else float(self.mu)

    @property
    def effective_count_cap(self) -> int:
        return int(self.count_cap) if self.count_cap is not None else max(1, int(self.budget))

    @property
    def needs_counts(self) -> bool:
        """Whether the run releases private task sizes (and the user count n̂): the
        non-uniform weights read them, and noisy GD normalises its gradient by n̂ (the true n
        is private under add/remove-one)."""
        return self.private and (self.weights != "uniform" or self.solver == "gd")

    def replace(self, **changes) -> "TrainConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["split_fractions"] = list(self.split_fractions)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown config keys: {', '.join(sorted(unknown))}")
        d = dict(d)
        if "split_fractions" in d:
            d["split_fractions"] = tuple(d["split_fractions"])
        return cls(**d)
