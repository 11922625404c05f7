"""The sub-configs of :class:`~dpmt.config.TrainConfig`, one per consumer, and the field
and validation helpers every config dataclass shares.

* :class:`DataConfig` — the dataset, its file format and its split (read by the data
  preparation, never by ``fit``);
* :class:`GDConfig` and :class:`SSPConfig` — each private item-step solver's own settings
  (read by its registry entry, :mod:`dpmt.train.methods`);
* :class:`PrivacyConfig` — the (ε, δ) target, the accountant, the noise split and seed (read
  by the plan and the ledger); :class:`NonPrivate` in its place for the non-private baseline.

:mod:`dpmt.config` composes them into :class:`~dpmt.config.TrainConfig`; import them from
there or from here. Every field carries its help text and CLI group in
``dataclasses.field(metadata=...)`` (:func:`config_field`), and one type rule
(:func:`check_types`) holds for every config.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import ClassVar

from dpmt.errors import ConfigError, check_range
from dpmt.registry import ITEM_SOLVES

SPLITS = ("per-user", "heldout-users", "random")
ENCODERS = ("embedding", "mlp")
ACCOUNTANTS = ("pld", "rdp")
OPTIMIZERS = ("sgd", "adam")
USER_SOLVES = ("exact", "cg")
ON_DUPLICATE = ("error", "keep-last")
INITS = ("random", "spectral")
#: how users are folded in (TrainConfig.fold_in)
FOLD_INS = ("auto", "training", "private")

#: upper bound of the scale-like settings (λ, α0, C, β, G, η, noise ratios)
BIG = 1e6
#: largest embedding dimension (the d × d item systems; beyond it memory alone refuses)
MAX_DIM = 4096
#: largest K of the spectral start (a K × K release and eigendecomposition)
MAX_SPECTRAL_ITEMS = 16_384


def config_field(default, help: str, group: str, *, choices=None,
                 flag: str | None = None, none: str | None = None, cli: bool = True,
                 metavar: str | None = None):
    """A dataclass field with its CLI metadata (help, group, choices, what None means)."""
    md = {"help": help, "group": group, "choices": choices, "flag": flag, "none": none,
          "cli": cli, "metavar": metavar}
    return dataclasses.field(default=default, metadata=md)


_f = config_field      # short, for the declarations below


#: noisy GD's steps per sweep when ``gd.steps`` is left to the rule: what the plan calibrates
PLANNED_GD_STEPS = 20


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
        check_types(self, "gd.")
        check_finite(self)
        if self.steps is not None:
            check_range("gd.steps", self.steps, low=1, high=100_000, integer=True)
        check_range("gd.learning_rate", self.learning_rate, low=0.0, high=BIG, low_open=True)
        check_range("gd.clip", self.clip, low=0.0, high=BIG, low_open=True)
        if self.sampling_rate is not None:
            # q = 1 is full batch: say so with None rather than a Poisson event of rate 1
            check_range("gd.sampling_rate", self.sampling_rate, low=0.0, high=1.0,
                        low_open=True, high_open=True)
        check_choice("gd.optimizer", self.optimizer, OPTIMIZERS)
        check_choice("gd.encoder", self.encoder, ENCODERS)
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
class DataConfig:
    """The data and its split: which ratings, how a file is read, which ratings are positives,
    and how users (or ratings) are divided into training, validation and test.

    Read by :func:`dpmt.train.rundir.prepare_data` (and the commands that load data); ``fit``
    takes the prepared :class:`~dpmt.data.Ratings` and never reads this, except
    :attr:`rating_bounds` (the declared rating scale, which bounds the private mean's
    sensitivity). Everything here is public: the split seed decides which part a user would
    be in, not whether anyone is in the data.
    """

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
    seed: int = _f(0, "seed of the split (public: it decides which part a user would be in, "
                   "not whether anyone is in the data); never the noise's", "data")

    def __post_init__(self):
        check_types(self)
        check_finite(self)
        check_choice("split", self.split, SPLITS)
        check_choice("on_duplicate", self.on_duplicate, ON_DUPLICATE)
        if self.items is not None and (not isinstance(self.items, str) or not self.items):
            raise ConfigError(f"items must be the path of an item catalogue file (got "
                              f"{self.items!r})")
        for name in ("dataset", "rating_range"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ConfigError(f"{name} must be a non-empty string "
                                  f"(got {getattr(self, name)!r})")
        check_range("positive_threshold", self.positive_threshold)
        if len(self.split_fractions) != 3 or any(f < 0 for f in self.split_fractions) or \
                abs(sum(self.split_fractions) - 1.0) > 1e-6:
            raise ConfigError("split_fractions must be three non-negative numbers summing to 1 "
                              f"(got {self.split_fractions})")
        check_range("heldout_users", self.heldout_users, low=1, high=10**8, integer=True)
        if self.heldout_fraction is not None:
            check_range("heldout_fraction", self.heldout_fraction, low=0.0, high=0.5,
                        low_open=True, high_open=True)
        # a seed becomes a JAX PRNG key (uint32 pair) and a numpy seed: keep it in range
        check_range("seed", self.seed, low=0, high=2**31 - 1, integer=True)

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


@dataclasses.dataclass(frozen=True)
class SSPConfig:
    """Sufficient-statistics perturbation (Algorithm 1 of Krichene et al. 2023) on the item
    step: Â_i = Σ_j w_ij u_j u_jᵀ + E_i and b̂_i = Σ_j w_ij y_ij u_j + e_i released, then
    each item's system made well-posed and solved by ``item_solve`` (post-processing)."""

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
    b_noise_ratio: float = _f(1.0, "noise of b̂ relative to Â (SSP)", "privacy")

    def __post_init__(self):
        check_types(self)
        check_finite(self)
        check_choice("item_solve", self.item_solve, ITEM_SOLVES)
        check_range("b_noise_ratio", self.b_noise_ratio, low=0.0, high=BIG, low_open=True)


@dataclasses.dataclass(frozen=True)
class PrivacyConfig:
    """The privacy target of a whole run and how its noise is split and drawn.

    Privacy unit: one user (add/remove-one) — everything a user rated is protected together.
    The run is (``epsilon``, ``delta``)-DP for it, accounted by ``dp_accounting``
    (``accountant``) over every release the plan makes (:mod:`dpmt.train.plan`); the ratios set
    each release's noise relative to the others before one calibration meets the target.
    """

    #: a private run: a plan, a ledger, noise
    private: ClassVar[bool] = True

    epsilon: float = _f(5.0, "target ε for the whole run (counts + every iteration)",
                        "privacy")
    delta: float = _f(1e-5, "target δ for the whole run", "privacy")
    accountant: str = _f("pld", "dp_accounting accountant: pld (tight) or rdp", "privacy",
                         choices=ACCOUNTANTS)
    count_noise_multiplier: float | None = _f(None, "fixed noise multiplier z of the private "
                                              "item counts", "privacy", flag="--count-noise",
                                              none="calibrated with the rest")
    count_noise_ratio: float | None = _f(None, "noise of the counts (ratings: and μ̂, b̂_i) "
                                         "relative to the others", "privacy",
                                         none="the task's rule (dpmt.tasks)")
    gram_noise_ratio: float = _f(1.0, "noise of the Gramian Ĝ_U relative to Â", "privacy")
    spectral_noise_ratio: float = _f(1.0, "noise of the spectral start's co-occurrence "
                                     "relative to the other releases (init=spectral)",
                                     "privacy")
    fold_in_noise_ratio: float = _f(0.5, "noise of the private fold-in choice's release "
                                    "(fold_in=private) relative to the other releases "
                                    "(experiments/charged_foldin.py: ½ against 1 and ¼)",
                                    "privacy")
    noise_seed: int | None = _f(None, "seed of every noise draw, for reproducible experiments "
                                "ONLY: a model trained with it is NOT private against anyone "
                                "who knows the seed", "privacy",
                                none="a secret key from OS entropy, kept in the trainer's "
                                "private state")

    def __post_init__(self):
        check_types(self)
        check_finite(self)
        check_choice("accountant", self.accountant, ACCOUNTANTS)
        # ε: below 0.01 no run is useful; above 100 the guarantee means nothing and
        # dp_accounting cannot calibrate reliably. δ: below 1e-12 PLD accounting is
        # numerically unreliable; above 0.1 it protects nobody.
        check_range("epsilon", self.epsilon, low=0.01, high=100.0)
        check_range("delta", self.delta, low=1e-12, high=0.1)
        if self.count_noise_multiplier is not None:
            check_range("count_noise_multiplier", self.count_noise_multiplier, low=0.0,
                        high=BIG, low_open=True)
        for r in ("count_noise_ratio", "gram_noise_ratio", "spectral_noise_ratio",
                  "fold_in_noise_ratio"):
            if getattr(self, r) is not None:       # count_noise_ratio None: the task's
                check_range(r, getattr(self, r), low=0.0, high=BIG, low_open=True)
        if self.noise_seed is not None:
            check_range("noise_seed", self.noise_seed, low=0, high=2**63 - 1, integer=True)


@dataclasses.dataclass(frozen=True)
class NonPrivate:
    """No privacy: the non-private baseline (``--no-privacy``). Nothing is planned, charged or
    noised; the model's ε is ∞. Stored as ``"privacy": null``."""

    private: ClassVar[bool] = False
    epsilon: ClassVar[float] = math.inf
    delta: ClassVar[float] = 0.0
    #: no noise is drawn, so no seed: a non-private model is reproducible from its data
    noise_seed: ClassVar[None] = None


def check_types(cfg, prefix: str = "") -> None:
    """One type rule for every field, by its annotation: an ``int`` field takes a Python or
    numpy integer, a ``float`` field any real number (Python or numpy), a ``bool`` field
    True/False, a ``str`` field a string; never a string for a number, nor True/False for a
    number. Numpy scalars become Python numbers (so that equal configs serialise and
    fingerprint alike)."""

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


def check_finite(cfg) -> None:
    """±inf is refused here; NaN by each field's range check (whose message gives the
    range)."""
    prefix = "gd." if isinstance(cfg, GDConfig) else ""
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if isinstance(v, float) and math.isinf(v):
            raise ConfigError(f"{prefix}{f.name} must be a finite number (got {v})")


def check_choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)} (got {value!r})")


def refuse_unknown(cls, d: dict, prefix: str) -> None:
    unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(prefix + k for k in sorted(unknown))}"
                          " (a misspelt name, or a config of a newer dpmt: upgrade it)")
