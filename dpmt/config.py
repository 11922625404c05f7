"""Configuration: what defines a model, apart from how it is executed.

* :class:`TrainConfig` — everything that changes the trained model or its privacy guarantee:
  data preparation, the model, the weights, the solver (noisy-GD settings in the sub-config
  :class:`GDConfig`), the privacy target and the seed. Serialised with every run and every
  saved model; a resumed run must match it field for field.
* :class:`ExecutionConfig` — how a run is executed (number of devices, where datasets live,
  progress output). It cannot change the model (tested: 1, 2 and 4 devices give the same V),
  so resume ignores it and it is not part of a model's fingerprint. The split follows
  jax-privacy's separation of performance flags from what changes the model.

Every field carries its help text and CLI group in ``dataclasses.field(metadata=...)``; the
command line (:mod:`dpmt.apps.cli`) is generated from them, so the library and the CLI share
one set of defaults.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any

from dpmt.config_schema import CONFIG_VERSION, migrate
from dpmt.errors import ConfigError, check_range
from dpmt.registry import ITEM_SOLVES, SOLVERS, TASKS, WEIGHTINGS
from dpmt.tasks import TASK_RULE as _TASK, USER_OFFSETS, apply_task_settings

SPLITS = ("per-user", "heldout-users", "random")
ENCODERS = ("embedding", "mlp")
ACCOUNTANTS = ("pld", "rdp")
OPTIMIZERS = ("sgd", "adam")
USER_SOLVES = ("exact", "cg")
ON_DUPLICATE = ("error", "keep-last")
INITS = ("random", "spectral")

#: upper bound of the scale-like settings (λ, α0, C, β, G, η, noise ratios)
BIG = 1e6
#: largest embedding dimension (the d × d item systems; beyond it memory alone refuses)
MAX_DIM = 4096
#: largest K of the spectral start (a K × K release and eigendecomposition)
MAX_SPECTRAL_ITEMS = 16_384


def _f(default, help: str, group: str, *, choices=None, flag: str | None = None,
       none: str | None = None, cli: bool = True, metavar: str | None = None):
    """A dataclass field with its CLI metadata (help, group, choices, what None means)."""
    md = {"help": help, "group": group, "choices": choices, "flag": flag, "none": none,
          "cli": cli, "metavar": metavar}
    return dataclasses.field(default=default, metadata=md)


#: ridge λ where the rule of :mod:`dpmt.train.defaults` does not raise it (``reg=None``)
BASE_REG = 3.0
#: noisy GD's steps per sweep when ``gd.steps`` is left to the rule: what the plan calibrates
PLANNED_GD_STEPS = 20
#: n̂·ε below which ``weights="auto"`` is uniform, above adaptive (:mod:`dpmt.train.defaults`)
WEIGHTS_SCALE = 100_000.0


@dataclasses.dataclass(frozen=True)
class GDConfig:
    """Noisy gradient descent (Algorithm 2 of Krichene et al. 2023) on the item step.

    Each alternating-minimisation iteration runs ``steps`` steps on the noisy gradient
    g = (Σ_j clip_G(∇ℓ_j(θ)) + N(0, (zG)² I)) / n̂ (full batch, or Poisson-sampled users at
    rate q), each step a Gaussian release of sensitivity G; the update is optax's
    ``optimizer`` at ``learning_rate`` (post-processing of the released g: sgd is
    θ ← θ − η g, adam rescales it per coordinate, which makes the step size independent of
    the noise scale — why it wins at small ε).
    """

    steps: int | None = _f(None, "noisy gradient steps per alternating-minimisation "
                           "iteration", "solver",
                           none=f"a rule from n̂ and ε (dpmt.train.defaults): "
                           f"{PLANNED_GD_STEPS}, or half as many at twice the learning "
                           "rate (the same privacy and total step) where n̂·ε ≥ 10⁵")
    learning_rate: float = _f(0.01, "learning rate of the noisy gradient steps", "solver")
    clip: float = _f(0.2, "G, per-user gradient clip norm (the sensitivity of each step)",
                     "solver")
    sampling_rate: float | None = _f(None, "Poisson sampling rate q of users per step",
                                     "solver", none="full batch")
    optimizer: str = _f("adam", "optimizer applied to the noisy gradient (optax)", "solver",
                        choices=OPTIMIZERS)
    encoder: str = _f("embedding", "item encoder: an embedding table, or an MLP over public "
                      "item features (ML-100K genres)", "solver", choices=ENCODERS)
    mlp_hidden: int = _f(64, "hidden width of the MLP encoder", "solver")

    def __post_init__(self):
        _check_types(self, "gd.")
        _check_finite(self)
        if self.steps is not None:
            check_range("gd.steps", self.steps, low=1, high=100_000, integer=True)
        check_range("gd.learning_rate", self.learning_rate, low=0.0, high=BIG, low_open=True)
        check_range("gd.clip", self.clip, low=0.0, high=BIG, low_open=True)
        if self.sampling_rate is not None:
            # q = 1 is full batch: say so with None rather than a Poisson event of rate 1
            check_range("gd.sampling_rate", self.sampling_rate, low=0.0, high=1.0,
                        low_open=True, high_open=True)
        _check_choice("gd.optimizer", self.optimizer, OPTIMIZERS)
        _check_choice("gd.encoder", self.encoder, ENCODERS)
        check_range("gd.mlp_hidden", self.mlp_hidden, low=1, high=65_536, integer=True)

    @property
    def planned_steps(self) -> int:
        """The steps a run plans and calibrates for: ``steps``, or :data:`PLANNED_GD_STEPS`
        when it is left to the rule (whose other choice releases the same privacy:
        :meth:`dpmt.train.methods.noisy_gd.NoisyGDMethod.equivalent_releases`)."""
        return PLANNED_GD_STEPS if self.steps is None else int(self.steps)

    @property
    def uses_mlp(self) -> bool:
        """Whether items are encoded by an MLP over public features (else a table)."""
        return self.encoder == "mlp"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a trained model and its privacy guarantee.

    Defaults, chosen on the quality benchmark (``dpmt quality``, QUALITY.md; validation
    Recall@20, ML-100K held-out users with 3 seeds and the 50k-user synthetic): noisy GD with
    Adam (20 steps, learning rate 0.01 per sweep) won at ε = 1 and 5 on ML-100K by 0.02–0.05
    over SSP and plain noisy GD and tied SSP on the synthetic; d = 32, λ = 3 beat d = 8 and 16;
    four sweeps (every sweep is charged, and yet four beat two on validation at ε = 1, 5 and
    20 on ML-100K's per-user split, at ε = 1 and 5 on its held-out users, at ε = 5 and 20 on
    the synthetic, and tied elsewhere: ``experiments/defaults_sweep.py``). C = 0.1 is about
    the typical norm of an exact user solve, so clipping costs little signal while the
    sensitivity √β·C² stays small. Where n̂·ε ≥ 10⁵ noisy GD takes 10 steps at twice the
    learning rate instead (the same privacy, half the cost; a tie on 10 cells of 8 generators,
    ``experiments/solver_rule.py``). The weights (``auto``) and the
    popularity-prior weight η are chosen by rules from the released n̂ and ε
    (:mod:`dpmt.train.defaults`), never from exact data.

    The model is alternating minimisation (Chien et al. 2021; Krichene et al. 2023): the
    exact user step u_j = (Σ_{i∈I_j} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_i y_ij v_i clipped to
    ‖u_j‖ ≤ C, then a private item step on the weighted objective with weights w_ij,
    Σ_i w_ij² ≤ β for every user. ``help`` in each field's metadata documents it.
    """

    # -- data --------------------------------------------------------------------------
    task: str = _f("implicit", "implicit: the positives (ratings above --positive-threshold) "
                   "with label 1, ranked by Recall@k; rating: predict the ratings themselves "
                   "(RMSE), centred by a private global mean and clipped to ±label_clip",
                   "data", choices=TASKS)
    dataset: str = _f("ml-100k", "dataset name (ml-100k, ml-1m, ml-10m, ml-20m, ml-25m, "
                      "ml-latest-small), a ratings file, tfds:movielens/..., or "
                      "synthetic[:users=..,items=..,interactions=..,alpha=..]", "data")
    columns: str | None = _f(None, "column mapping of a CSV/TSV file with a header, e.g. "
                             "user=uid,item=iid,rating=stars,timestamp=ts", "data",
                             none="userId,movieId,rating,timestamp", metavar="SPEC")
    rating_range: str = _f("auto", "allowed rating range of a ratings file: LOW,HIGH, none "
                           "(no check) or auto (MovieLens formats: 0.5,5)", "data",
                           metavar="LOW,HIGH")
    items: str | None = _f(None, "the public item catalogue of a ratings file: one item id per "
                           "line (or a CSV with an item column); the model's rows are exactly "
                           "these items. Without it a private run selects its items privately "
                           "(MovieLens and synthetic data bring their own catalogue)", "data",
                           none="the dataset's own catalogue, else private selection",
                           metavar="FILE")
    on_duplicate: str = _f("error", "what to do with duplicate (user, item) pairs in a file: "
                           "error, or keep-last (the latest rating)", "data",
                           choices=ON_DUPLICATE)
    label_clip: float | None = _f(None, "rating task: labels y = r − μ̂ − b̂_i clipped to "
                                  "[−c, c] (sensitivity √β·C·c)", "data", none=_TASK)
    item_offsets: bool = _f(True, "rating task: no private item offsets (only the global "
                            "mean centres the ratings)", "data", flag="--no-item-offsets")
    user_bias: bool = _f(True, "rating task: no per-user bias b_j (solved from the user's "
                         "own ratings, never released, like u_j: dpmt.labels)", "data",
                         flag="--no-user-bias")
    user_bias_reg: float = _f(2.0, "rating task: λ_b, the ridge of the user bias b_j", "data")
    user_offsets: str = _f("slopes", "rating task: a user's own offsets (b_j; with slopes on "
                           "b̂_i, log ñ_i; dpmt.labels)", "data", choices=USER_OFFSETS)
    positive_threshold: float = _f(3.5, "ratings above this are positives (3.5: 4 and 5 "
                                   "stars)", "data")
    split: str = _f("per-user", "per-user: each user's positives split train/validation/test; "
                    "heldout-users: whole users held out (Liang et al. 2018); random: the "
                    "ratings themselves split 80/10/10 (the ML-10M RMSE protocol, seed "
                    "1234 + seed)", "data", choices=SPLITS)
    split_fractions: tuple[float, float, float] = _f(
        (0.8, 0.1, 0.1), "train/validation/test fractions of the per-user split", "data",
        cli=False)
    heldout_users: int = _f(100, "validation users and test users (each, on average) for "
                            "heldout-users; a user's role is a keyed hash of that user alone, "
                            "at the fraction heldout_users / (users in the file)", "data")
    heldout_fraction: float | None = _f(None, "fraction of users held out for validation and "
                                        "for test (each) for heldout-users: overrides "
                                        "--heldout-users, and makes the split exactly "
                                        "neighbour-stable (the fraction does not depend on how "
                                        "many users there are)", "data",
                                        none="heldout_users / number of users")

    # -- model -------------------------------------------------------------------------
    dim: int = _f(32, "embedding dimension d", "model")
    iterations: int | None = _f(None, "alternating-minimisation sweeps (each one is "
                                "charged)", "model", none=_TASK)
    reg: float | None = _f(None, "ridge λ of the user and item systems", "model",
                           none="a rule from n̂ and ε (dpmt.train.defaults): 10 for noisy GD "
                           "below n̂·ε = 1200, else 3")
    gravity: float | None = _f(None, "α0, weight of the unobserved pairs", "model", none=_TASK)
    user_clip: float | None = _f(None, "C: user embeddings clipped to ‖u‖ ≤ C (bounds every "
                                 "item-step release's sensitivity)", "model", none=_TASK)
    init_scale: float = _f(0.1, "scale of the data-independent initial item embeddings",
                           "model")
    init: str = _f("random", "initial item embeddings: random (data-independent) or "
                   "spectral (the top-d eigenvectors of a private, noisy co-occurrence of the "
                   "--spectral-items most popular items by the released counts: one more "
                   "release, calibrated and charged with the others; issue 10)", "model",
                   choices=INITS)
    spectral_items: int = _f(2048, "K: how many of the most popular items (by released "
                             "counts) the spectral start's co-occurrence covers (a K × K "
                             "release and one eigendecomposition)", "model")
    popularity_prior: float | None = _f(None, "η, weight of the popularity prior in the "
                                        "scores s_i = ⟨u, v_i⟩ + η·‖u‖·ρ_V·p_i, p = "
                                        "standardised log(1 + n̂_i) of the released counts "
                                        "(free post-processing; the counts are released for "
                                        "it); 0: none", "model",
                                        none="a rule from n̂ and ε (dpmt.train.defaults)")

    # -- weights -----------------------------------------------------------------------
    weights: str = _f("auto", "task-user weights w_ij: uniform (k random items per user), "
                      "tail (the k least popular by noisy count), adaptive (ω ∝ n̂^−μ, eq. 11, "
                      "clipped to β per user), adaptive-normalized (every user at β), or auto "
                      f"(uniform when n̂·ε < {WEIGHTS_SCALE:g}, else adaptive: dpmt.train.defaults)",
                      "weights", choices=WEIGHTINGS)
    mu: float | None = _f(0.25, "exponent μ of ω_i ∝ n̂_i^−μ", "weights",
                          none="(1+γ)/4")
    gamma: float = _f(1.0, "γ of μ = (1+γ)/4 when mu is unset: 0 Lipschitz, 1 strongly "
                      "convex", "weights")
    budget: float = _f(30.0, "β: per-user bound on Σ_i w_ij² (= k items for uniform/tail)",
                       "weights")
    count_cap: int | None = _f(None, "per-user cap k on the items counted by the private "
                               "counts", "weights", none="β rounded; ratings: dpmt.tasks")

    # -- solver ------------------------------------------------------------------------
    solver: str | None = _f(None, "private item step: ssp (sufficient-statistics perturbation, "
                            "Algorithm 1) or gd (noisy GD, Algorithm 2)", "solver",
                            choices=SOLVERS, none=_TASK)
    gd: GDConfig = dataclasses.field(default_factory=GDConfig, metadata={"cli": False})
    item_solve: str = _f("cg", "how SSP makes the noisy item systems well-posed and solves "
                         "them (post-processing, no privacy cost): cg (Â + s·I with s from the "
                         "known noise scale, solved by --cg-steps conjugate-gradient steps from "
                         "the previous V, checked, Cholesky fallback; no d³ factorisation, "
                         "the same test Recall@20 as shift in the 9 SSP cells of "
                         "experiments/cg_quality.py), shift (the same system by one checked "
                         "Cholesky per item; ≥ project in 8 of 9 QUALITY.md cells), project "
                         "(Π(Â) by an eigendecomposition, the reference's Algorithm 1) or "
                         "floor (the eigenvalues of Â + α0Ĝ + λI floored at λ)",
                         "solver",
                         choices=ITEM_SOLVES)
    user_solve: str = _f("cg", "how the (unreleased) user systems are solved: cg "
                         "(--cg-steps matrix-free conjugate-gradient steps from the previous "
                         "iteration's U, which the trainer's checkpoint keeps so that a resume "
                         "is bit-identical; 2.1x faster at ML-20M scale, V within 1e-7 of "
                         "exact and the same quality --quick figures; the first iteration is "
                         "exact) or exact (Cholesky)", "solver",
                         choices=USER_SOLVES)
    cg_steps: int = _f(8, "conjugate-gradient steps per system of item_solve=cg / "
                       "user_solve=cg (implicit's use_cg takes 3; 8 leave ~1e-4 relative "
                       "difference to the exact solve at ML-20M scale)", "solver")

    # -- privacy -----------------------------------------------------------------------
    private: bool = _f(True, "train without noise (the non-private baseline)", "privacy",
                       flag="--no-privacy")
    epsilon: float = _f(5.0, "target ε for the whole run (counts + every iteration)",
                        "privacy")
    delta: float = _f(1e-5, "target δ for the whole run", "privacy")
    accountant: str = _f("pld", "dp_accounting accountant: pld (tight) or rdp", "privacy",
                         choices=ACCOUNTANTS)
    count_noise_multiplier: float | None = _f(None, "fixed noise multiplier z of the private "
                                              "item counts", "privacy", flag="--count-noise",
                                              none="calibrated with the rest")
    count_noise_ratio: float | None = _f(None, "noise of the counts (ratings: and μ̂, b̂_i) "
                                         "relative to the others", "privacy", none=_TASK)
    b_noise_ratio: float = _f(1.0, "noise of b̂ relative to Â (SSP)", "privacy")
    gram_noise_ratio: float = _f(1.0, "noise of the Gramian Ĝ_U relative to Â", "privacy")
    spectral_noise_ratio: float = _f(1.0, "noise of the spectral start's co-occurrence "
                                     "relative to the other releases (init=spectral)",
                                     "privacy")

    seed: int = _f(0, "seed of the split (public: it decides which part a user would be in, "
                   "not whether anyone is in the data); never the noise's", "model")
    noise_seed: int | None = _f(None, "seed of every noise draw, for reproducible experiments "
                                "ONLY: a model trained with it is NOT private against anyone "
                                "who knows the seed", "privacy",
                                none="a secret key from OS entropy, kept in the trainer's "
                                "private state")

    def __post_init__(self):
        apply_task_settings(self)                     # None: the task's (dpmt.tasks)
        if not isinstance(self.gd, GDConfig):
            raise ConfigError(f"gd must be a GDConfig (got {type(self.gd).__name__}); use "
                              "TrainConfig(gd=GDConfig(steps=...))")
        _check_types(self)
        _check_finite(self)
        for name, allowed in [("solver", SOLVERS), ("weights", WEIGHTINGS), ("split", SPLITS),
                              ("accountant", ACCOUNTANTS), ("on_duplicate", ON_DUPLICATE),
                              ("item_solve", ITEM_SOLVES), ("user_solve", USER_SOLVES),
                              ("task", TASKS), ("user_offsets", USER_OFFSETS)]:
            _check_choice(name, getattr(self, name), allowed)
        if self.items is not None and (not isinstance(self.items, str) or not self.items):
            raise ConfigError(f"items must be the path of an item catalogue file (got "
                              f"{self.items!r})")
        for name in ("dataset", "rating_range"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ConfigError(f"{name} must be a non-empty string "
                                  f"(got {getattr(self, name)!r})")
        # upper bounds: beyond them a run is meaningless or overflows float32/float64 (they
        # are far outside anything useful, and refusing is better than a NaN or a traceback)
        check_range("dim", self.dim, low=1, high=MAX_DIM, integer=True)
        check_range("iterations", self.iterations, low=0 if TASKS[self.task].labelled else 1,
                    high=10_000, integer=True)        # ratings: 0 = the bias model alone
        check_range("cg_steps", self.cg_steps, low=1, high=MAX_DIM, integer=True)
        if self.reg is not None:
            check_range("reg", self.reg, low=0.0, high=BIG, low_open=True)
        check_range("gravity", self.gravity, low=0.0, high=BIG)
        check_range("user_clip", self.user_clip, low=0.0, high=BIG, low_open=True)
        check_range("init_scale", self.init_scale, low=0.0, high=BIG, low_open=True)
        _check_choice("init", self.init, INITS)
        # K ≤ 16384: a K × K float32 release is 1 GiB there, and its eigh takes minutes
        check_range("spectral_items", self.spectral_items, low=1, high=MAX_SPECTRAL_ITEMS,
                    integer=True)
        if self.popularity_prior is not None:
            check_range("popularity_prior", self.popularity_prior, low=0.0, high=BIG)
        check_range("gamma", self.gamma, low=0.0, high=BIG)
        if self.mu is not None:
            check_range("mu", self.mu, low=0.0, high=BIG)
        check_range("budget", self.budget, low=0.0, high=BIG, low_open=True)
        if self.count_cap is not None:
            check_range("count_cap", self.count_cap, low=1, high=10**9, integer=True)
        if not isinstance(self.item_offsets, bool):
            raise ConfigError(f"item_offsets must be True or False (got {self.item_offsets!r})")
        if not isinstance(self.private, bool):
            raise ConfigError(f"private must be True or False (got {self.private!r})")
        # ε: below 0.01 no run is useful; above 100 the guarantee means nothing and
        # dp_accounting cannot calibrate reliably. δ: below 1e-12 PLD accounting is
        # numerically unreliable; above 0.1 it protects nobody.
        check_range("epsilon", self.epsilon, low=0.01, high=100.0)
        check_range("delta", self.delta, low=1e-12, high=0.1)
        if self.count_noise_multiplier is not None:
            check_range("count_noise_multiplier", self.count_noise_multiplier, low=0.0,
                        high=BIG, low_open=True)
        for r in ("count_noise_ratio", "b_noise_ratio", "gram_noise_ratio",
                  "spectral_noise_ratio"):
            check_range(r, getattr(self, r), low=0.0, high=BIG, low_open=True)
        check_range("positive_threshold", self.positive_threshold)
        if len(self.split_fractions) != 3 or any(f < 0 for f in self.split_fractions) or \
                abs(sum(self.split_fractions) - 1.0) > 1e-6:
            raise ConfigError("split_fractions must be three non-negative numbers summing to 1 "
                              f"(got {self.split_fractions})")
        check_range("heldout_users", self.heldout_users, low=1, high=10**8, integer=True)
        if self.heldout_fraction is not None:
            check_range("heldout_fraction", self.heldout_fraction, low=0.0, high=0.5,
                        low_open=True, high_open=True)
        check_range("label_clip", self.label_clip, low=0.0, high=BIG, low_open=True)
        check_range("user_bias_reg", self.user_bias_reg, low=0.0, high=BIG)
        TASKS[self.task].check(self)                # the splits the task accepts
        # a seed becomes a JAX PRNG key (uint32 pair) and a numpy seed: keep it in range
        check_range("seed", self.seed, low=0, high=2**31 - 1, integer=True)
        if self.noise_seed is not None:
            check_range("noise_seed", self.noise_seed, low=0, high=2**63 - 1, integer=True)
        WEIGHTINGS[self.weights].check(self)        # e.g. β an integer for uniform/tail
        if self.gd.uses_mlp and self.solver != "gd":
            raise ConfigError("encoder='mlp' needs solver='gd' (SSP solves a linear model per "
                              "item)")
        if self.spectral_start and self.gd.uses_mlp:
            raise ConfigError("init='spectral' starts the embedding table V; the MLP encoder "
                              "(gd.encoder='mlp') does not start from V: use init='random'")

    @property
    def spectral_start(self) -> bool:
        """Whether V starts from the private spectral release (``init="spectral"``)."""
        return self.init == "spectral"

    @property
    def rating_bounds(self) -> tuple[float, float]:
        """[low, high] of the ratings for the private mean: ``rating_range`` when it is
        numeric, else MovieLens's [0.5, 5]."""
        if self.rating_range not in ("auto", "none"):
            lo, _, hi = self.rating_range.partition(",")
            try:
                return float(lo), float(hi)
            except ValueError:
                raise ConfigError(f"rating_range must be LOW,HIGH, none or auto (got "
                                  f"{self.rating_range!r})") from None
        return 0.5, 5.0

    @property
    def y_max(self) -> float:
        """The bound |y| ≤ y_max on the labels that the b-sensitivity assumes."""
        return TASKS[self.task].y_max(self)

    @property
    def effective_mu(self) -> float:
        return (1.0 + self.gamma) / 4.0 if self.mu is None else float(self.mu)

    @property
    def warm_starts_users(self) -> bool:
        """The user step continues from the previous U (``user_solve="cg"``), so a
        checkpoint keeps U for a bit-identical resume."""
        return self.user_solve == "cg"

    @property
    def effective_count_cap(self) -> int:
        return TASKS[self.task].count_cap(self)             # count_cap, or the task's

    @property
    def uses_popularity_prior(self) -> bool:
        """Whether scores add the popularity prior (implicit task, η > 0)."""
        return TASKS[self.task].ranking and (self.popularity_prior is None
                                             or self.popularity_prior > 0)

    @property
    def rating_user_bias(self) -> bool:
        """Whether a rating model takes each user's own bias out of the labels."""
        return TASKS[self.task].labelled and self.user_bias

    @property
    def rating_offsets(self) -> bool:
        """Whether the run releases private per-item offsets (rating task)."""
        return TASKS[self.task].labelled and self.item_offsets

    def replace(self, **changes) -> "TrainConfig":
        """A copy with ``changes``; ``gd=dict(...)`` updates fields of the GD sub-config."""
        if isinstance(changes.get("gd"), dict):
            changes["gd"] = dataclasses.replace(self.gd, **changes["gd"])
        return dataclasses.replace(self, **{**dict.fromkeys(getattr(self, "_by_task", ())),
                                            **changes})   # the task's settings re-applied

    def to_dict(self) -> dict[str, Any]:
        """The fields without ``config_version``: what :meth:`fingerprint` and the grids'
        fingerprints hash (so they do not move with the schema version)."""
        d = dataclasses.asdict(self)
        d["split_fractions"] = list(self.split_fractions)
        return d

    def stored(self, public: bool = False) -> dict[str, Any]:
        """The stored form (``config.json``, ``model.json``): :meth:`to_dict`, or
        :meth:`public_dict` when ``public``, with ``config_version`` (:mod:`dpmt.config_schema`)."""
        return {"config_version": CONFIG_VERSION,
                **(self.public_dict() if public else self.to_dict())}

    def to_json(self) -> str:
        return json.dumps(self.stored(), indent=2)

    def public_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` for a published model: the noise seed's value is withheld (a
        seeded model says so in ``model.json``'s ``noise`` entry instead)."""
        d = self.to_dict()
        d["noise_seed"] = None
        return d

    def fingerprint(self) -> str:
        """SHA-256 (hex, 16 chars) of the canonical JSON: equal iff the configs are equal."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def diff(self, other: "TrainConfig") -> list[str]:
        """``field: mine → other's`` for every field that differs (``gd.steps``...)."""
        a, b = _flat(self.to_dict()), _flat(other.to_dict())
        return [f"{k}: {a.get(k)!r} → {b.get(k)!r}" for k in sorted(set(a) | set(b))
                if a.get(k) != b.get(k)]

    @classmethod
    def from_dict(cls, d: Any) -> "TrainConfig":
        """The one reader of a stored config (run directories, saved models): an older
        ``config_version`` is migrated step by step (:func:`dpmt.config_schema.migrate`); a
        newer one, unknown keys and non-dicts are refused clearly."""
        if not isinstance(d, dict):
            raise ConfigError(f"a config must be a JSON object (got {type(d).__name__})")
        d = migrate(d)
        gd = d.pop("gd", {})
        if not isinstance(gd, dict):
            raise ConfigError(f"config key 'gd' must be an object (got {type(gd).__name__})")
        _unknown(cls, d, "")
        _unknown(GDConfig, gd, "gd.")
        if "split_fractions" in d:
            if not isinstance(d["split_fractions"], (list, tuple)):
                raise ConfigError("split_fractions must be a list of three numbers")
            d["split_fractions"] = tuple(d["split_fractions"])
        try:
            return cls(gd=GDConfig(**gd), **d)
        except TypeError as e:   # a mistyped value that a comparison could not handle
            raise ConfigError(f"invalid config value: {e}") from None


@dataclasses.dataclass(frozen=True)
class ExecutionConfig:
    """How a run is executed; none of it changes the model (so resume ignores it).

    devices: shard the user step (by users) and the item step (by items; by users for noisy
      GD with the MLP encoder) over this many devices (:mod:`dpmt.solvers.sharding`). The noise
      of item i is keyed by i, so 1, 2 or 4 devices give the same V up to float32 round-off.
      On CPU, that many host devices are created when JAX has not started yet.
    data_dir: where datasets are downloaded and read.
    progress: progress bars and status lines on stderr.
    lapack_threads: see :func:`dpmt.runtime.limit_lapack_threads` (one thread per LAPACK call
      is ~6× faster for the solvers' batches of small systems on CPU).
    sharded_data: in a ``jax.distributed`` run, each process was given only its own users'
      ratings (:func:`dpmt.data.shards.read_user_shard`): every release sums the processes'
      exact statistics by a collective before its one noise draw, the user step and U stay
      per process (:mod:`dpmt.train.sharded_data`). The same releases and ε as one process
      holding every user; V equal up to float32 round-off of the summation order.
    """

    devices: int = _f(1, "shard the user and item steps over this many devices; any number "
                      "makes the same releases with the same noise and ε, and V equal up to "
                      "float32 round-off (on CPU: that many host devices, one core each)",
                      "execution")
    data_dir: str = _f("data", "where datasets are downloaded and read", "execution")
    progress: bool = _f(True, "no progress bars", "execution", flag="--quiet")
    lapack_threads: int | None = _f(None, "threads of the OpenBLAS behind the CPU LAPACK "
                                    "kernels (eigh, Cholesky), set when a run starts; 0 leaves "
                                    "it alone", "execution", cli=False,
                                    none="$DPMT_LAPACK_THREADS or 1")
    sharded_data: bool = _f(False, "each jax.distributed process holds only its own users' "
                            "ratings; releases sum the processes' statistics before the noise",
                            "execution", cli=False)

    def __post_init__(self):
        _check_types(self)
        check_range("devices", self.devices, low=1, integer=True)
        if not isinstance(self.data_dir, str) or not self.data_dir:
            raise ConfigError(f"data_dir must be a non-empty path (got {self.data_dir!r})")
        if self.lapack_threads is not None:
            check_range("lapack_threads", self.lapack_threads, low=0, integer=True)


def _check_types(cfg, prefix: str = "") -> None:
    """One type rule for every field, by its annotation: an ``int`` field takes a Python or
    numpy integer, a ``float`` field any real number (Python or numpy), a ``bool`` field
    True/False, a ``str`` field a string; never a string for a number, nor True/False for a
    number. Numpy scalars become Python numbers (so that equal configs serialise and
    fingerprint alike)."""
    import numbers

    for f in dataclasses.fields(cfg):
        kind = str(f.type).replace(" ", "")
        optional = kind.endswith("|None")
        kind = kind.removesuffix("|None")
        v = getattr(cfg, f.name)
        if v is None and optional:
            continue
        name = prefix + f.name
        if kind == "int":
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ConfigError(f"{name} must be an integer (got {v!r})")
            v = int(v)
        elif kind == "float":
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise ConfigError(f"{name} must be a number (got {v!r})")
            v = float(v)
        elif kind == "bool":
            if not isinstance(v, (bool, type(None))) and type(v).__name__ != "bool_":
                raise ConfigError(f"{name} must be True or False (got {v!r})")
            v = bool(v)
        elif kind == "str":
            if not isinstance(v, str):
                raise ConfigError(f"{name} must be a string (got {v!r})")
        elif kind.startswith("tuple[float"):
            if isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or not all(
                    isinstance(x, numbers.Real) and not isinstance(x, bool) for x in v):
                raise ConfigError(f"{name} must be a sequence of numbers (got {v!r})")
            v = tuple(float(x) for x in v)
        else:
            continue
        object.__setattr__(cfg, f.name, v)


def _check_finite(cfg) -> None:
    """±inf is refused here; NaN by each field's range check (whose message gives the
    range)."""
    prefix = "gd." if isinstance(cfg, GDConfig) else ""
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if isinstance(v, float) and math.isinf(v):
            raise ConfigError(f"{prefix}{f.name} must be a finite number (got {v})")


def _check_choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)} (got {value!r})")


def _unknown(cls, d: dict, prefix: str) -> None:
    unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(prefix + k for k in sorted(unknown))}"
                          " (a misspelt name, or a config of a newer dpmt: upgrade it)")


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out
