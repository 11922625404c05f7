"""Configuration: what defines a model, apart from how it is executed — one dataclass per
consumer.

* :class:`TrainConfig` — everything that changes the trained model or its privacy guarantee.
  Its own fields are the model that ``fit`` trains (task, dimension, sweeps, ridge, gravity,
  clip, start, prior, the rating model's labels, the weights and the item-step solver); the
  rest is grouped by what reads it:

  - :class:`DataConfig` (``cfg.data``) — the dataset, its file format and the split: read by
    :func:`dpmt.train.rundir.prepare_data`, never by ``fit``;
  - :class:`GDConfig` (``cfg.gd``) and :class:`SSPConfig` (``cfg.ssp``) — each item-step
    solver's own settings, read by its registry entry;
  - :class:`PrivacyConfig` (``cfg.privacy``) — the (ε, δ) target, the accountant, the noise
    split and the noise seed, read by the plan and the ledger; :class:`NonPrivate` in its
    place trains the non-private baseline (no plan, no noise, ε = ∞), as jax-privacy's
    configs say "no DP" with an object rather than a flag.

  Serialised (:meth:`TrainConfig.stored`) with every run and every saved model, nested as
  above, with ``config_version`` (:mod:`dpmt.config_schema` migrates older flat ones); a
  resumed run must match it field for field.
* :class:`ExecutionConfig` — how a run is executed (number of devices, where datasets live,
  progress output). It cannot change the model (tested: 1, 2 and 4 devices give the same V),
  so resume ignores it and it is not part of a model's fingerprint. The split follows
  jax-privacy's separation of performance flags from what changes the model.

Every field carries its help text and CLI group in ``dataclasses.field(metadata=...)``; the
command line (:mod:`dpmt.apps.cli`) is generated from them (one flag per field, whichever
sub-config holds it: ``--epsilon``, ``--dataset``, ``--item-solve``; GDConfig's as
``--gd-*``), so the library and the CLI share one set of defaults. :func:`route` maps those
flat names to the sub-configs (the CLI, ``dpmt tune --grid`` and ``dpmt compare`` use it).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from typing import Any, Mapping

from dpmt.config_groups import (BIG, FOLD_INS, INITS, MAX_DIM, MAX_SPECTRAL_ITEMS,
                                USER_SOLVES, DataConfig, GDConfig, NonPrivate, PrivacyConfig,
                                SSPConfig, check_choice, check_finite, check_types, refuse_unknown)
from dpmt.config_groups import config_field as _f
from dpmt.config_schema import CONFIG_VERSION, migrate
from dpmt.errors import ConfigError, check_range
from dpmt.registry import SOLVERS, TASKS, WEIGHTINGS
from dpmt.tasks import PRIVACY_SETTINGS, USER_OFFSETS, apply_task_settings
from dpmt.tasks import TASK_RULE as _TASK

#: ridge λ where the rule of :mod:`dpmt.train.defaults` does not raise it (``reg=None``)
BASE_REG = 3.0
#: n̂·ε below which ``weights="auto"`` is uniform, above adaptive (:mod:`dpmt.train.defaults`)
WEIGHTS_SCALE = 100_000.0
#: ε from which ``fold_in="auto"`` chooses the fold-in privately (dpmt.train.fold_in_choice):
#: at ε = 1 and 2 the release's share of the budget cost what the choice won (test Recall@20
#: −0.0008 and −0.0000 on average over the generators of experiments/solver_rule.py and
#: ML-100K), at ε = 5 and 20 it gained +0.0043 and +0.0094 (experiments/charged_foldin.py)
FOLD_IN_EPSILON = 3.0
#: CG steps per item system by default (``cg_steps=None``): noisy (private) systems, whose
#: solution is used to ~1e-4 at ML-20M scale, and exact (non-private) ones
NOISY_CG_STEPS = 8
EXACT_CG_STEPS = 3


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
    sensitivity √β·C² stays small. Where n̂·ε ≥ 10⁵ noisy GD takes 6 steps at 20/6 times the
    learning rate instead (the same privacy, under a third of the cost; overall a tie on 10
    cells of 8 generators, 2 seeds, the tail buckets ahead, ``experiments/solver_rule.py``).
    Where n̂·ε ≥ 4.5·10⁵ and the released counts average ≥ 170 per item the solver left to
    the rule is SSP with λ = 20 (the plan's privacy kept; on a 50k-user generator at ε = 20
    test Recall@20 0.282 → 0.303, ``experiments/ssp_prior.py``). The weights (``auto``) and the
    popularity-prior weight η are chosen by rules from the released n̂ and ε
    (:mod:`dpmt.train.defaults`), never from exact data. At ε ≥ :data:`FOLD_IN_EPSILON`
    (``fold_in="auto"``) the fold-in's λ and α0 are chosen after training by one more
    charged release (:mod:`dpmt.train.fold_in_choice`; +0.004 / +0.009 test Recall@20 at
    ε = 5 / 20 on average over 8 generators and ML-100K, ``experiments/charged_foldin.py``).

    The model is alternating minimisation (Chien et al. 2021; Krichene et al. 2023): the
    exact user step u_j = (Σ_{i∈I_j} v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_i y_ij v_i clipped to
    ‖u_j‖ ≤ C, then a private item step on the weighted objective with weights w_ij,
    Σ_i w_ij² ≤ β for every user. ``help`` in each field's metadata documents it.

    The fields here are the model ``fit`` trains; ``data``, ``gd``, ``ssp`` and ``privacy``
    hold what their consumers read (see the module docstring). A sub-config is given whole or
    as a dict of its fields — ``TrainConfig(dim=64, privacy=dict(epsilon=1.0))``,
    ``cfg.replace(data=dict(split="heldout-users"))``, ``TrainConfig(privacy=NonPrivate())``;
    :func:`route` maps flat names (``epsilon``, ``dataset``, ``gd_steps``) to them.
    """

    # -- what the model learns ------------------------------------------------------------
    task: str = _f("implicit", "implicit: the positives (ratings above --positive-threshold) "
                   "with label 1, ranked by Recall@k; rating: predict the ratings themselves "
                   "(RMSE), centred by a private global mean and clipped to ±label_clip",
                   "data", choices=TASKS)
    data: DataConfig = dataclasses.field(default_factory=DataConfig, metadata={"cli": False})

    # -- the rating task's labels --------------------------------------------------------
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

    # -- model -------------------------------------------------------------------------
    dim: int = _f(32, "embedding dimension d", "model")
    iterations: int | None = _f(None, "alternating-minimisation sweeps (each one is "
                                "charged)", "model", none=_TASK)
    reg: float | None = _f(None, "ridge λ of the user and item systems", "model",
                           none="a rule from n̂ and ε (dpmt.train.defaults): for noisy GD 10 "
                           "below n̂·ε = 1200, 1 up to 3·10⁴; else 3")
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

    fold_in: str = _f("auto", "how users are folded in against the released V: with "
                      "training's λ and α0 (training), or with the (λ, α0) chosen after "
                      "training among dpmt.train.fold_in_choice.CANDIDATES by one Gaussian "
                      "release of their Recall@20 summed over the training users (private: "
                      "L2 sensitivity √K, calibrated and charged with the other releases; "
                      "implicit task); auto: private for a private implicit run at "
                      f"ε ≥ {FOLD_IN_EPSILON:g}, else training", "model", choices=FOLD_INS)
    fold_in_reg: float | None = _f(None, "λ of the fold-in (the user solve of recommend and "
                                   "evaluation; free post-processing under joint DP)",
                                   "model", none="reg, or fold_in=private's choice")
    fold_in_gravity: float | None = _f(None, "α0 of the fold-in", "model",
                                       none="gravity, or fold_in=private's choice")

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
                            choices=SOLVERS, none=_TASK + "; implicit feedback: gd, or ssp "
                            "with λ = 20 and 3 sweeps where the released n̂·ε ≥ 4.5e5 and "
                            "the released counts average ≥ 170 per item (dpmt.train."
                            "defaults.solver_switch; the plan's privacy is kept)")
    gd: GDConfig = dataclasses.field(default_factory=GDConfig, metadata={"cli": False})
    ssp: SSPConfig = dataclasses.field(default_factory=SSPConfig, metadata={"cli": False})
    user_solve: str = _f("cg", "how the (unreleased) user systems are solved: cg "
                         "(--user-cg-steps matrix-free conjugate-gradient steps from the "
                         "previous iteration's U, which the trainer's checkpoint keeps so that "
                         "a resume is bit-identical; 2.1x faster than exact at ML-20M scale "
                         "with 8 steps, with the same quality --quick figures; the first "
                         "iteration is exact) or exact (Cholesky)", "solver",
                         choices=USER_SOLVES)
    cg_steps: int | None = _f(None, "conjugate-gradient steps per item system of "
                              "item_solve=cg (SSP's released systems and the non-private "
                              "item step), warm-started from the previous V", "solver",
                              none="8 private (~1e-4 relative difference to the exact "
                              "solve at ML-20M scale, where the noise is), 3 non-private "
                              "(the same test Recall@20: experiments/cg_steps_quality.py "
                              "--vary item)")
    user_cg_steps: int = _f(3, "conjugate-gradient steps per user system of user_solve=cg, "
                            "warm-started from the previous U (implicit's use_cg takes 3; "
                            "the same test Recall@20 as 8 on the quality benchmark: "
                            "experiments/cg_steps_quality.py)", "solver")

    # -- privacy -----------------------------------------------------------------------
    privacy: PrivacyConfig | NonPrivate = dataclasses.field(default_factory=PrivacyConfig,
                                                          metadata={"cli": False})

    def __post_init__(self):
        for name, cls in (("data", DataConfig), ("gd", GDConfig), ("ssp", SSPConfig),
                          ("privacy", PrivacyConfig)):
            if isinstance(getattr(self, name), dict):    # TrainConfig(gd=dict(steps=10))
                object.__setattr__(self, name, cls(**getattr(self, name)))
        for name, cls in (("data", DataConfig), ("gd", GDConfig), ("ssp", SSPConfig)):
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(f"{name} must be a {cls.__name__} (got "
                                  f"{type(getattr(self, name)).__name__}); use "
                                  f"TrainConfig({name}={cls.__name__}(...))")
        if not isinstance(self.privacy, (PrivacyConfig, NonPrivate)):
            raise ConfigError(f"privacy must be a PrivacyConfig or NonPrivate() (got "
                              f"{type(self.privacy).__name__}); use "
                              "TrainConfig(privacy=PrivacyConfig(epsilon=...))")
        apply_task_settings(self)                     # None: the task's (dpmt.tasks)
        check_types(self)
        check_finite(self)
        for name, allowed in [("solver", SOLVERS), ("weights", WEIGHTINGS),
                              ("user_solve", USER_SOLVES), ("task", TASKS),
                              ("user_offsets", USER_OFFSETS)]:
            check_choice(name, getattr(self, name), allowed)
        # upper bounds: beyond them a run is meaningless or overflows float32/float64 (they
        # are far outside anything useful, and refusing is better than a NaN or a traceback)
        check_range("dim", self.dim, low=1, high=MAX_DIM, integer=True)
        check_range("iterations", self.iterations, low=0 if TASKS[self.task].labelled else 1,
                    high=10_000, integer=True)        # ratings: 0 = the bias model alone
        if self.cg_steps is not None:
            check_range("cg_steps", self.cg_steps, low=1, high=MAX_DIM, integer=True)
        check_range("user_cg_steps", self.user_cg_steps, low=1, high=MAX_DIM, integer=True)
        if self.reg is not None:
            check_range("reg", self.reg, low=0.0, high=BIG, low_open=True)
        check_range("gravity", self.gravity, low=0.0, high=BIG)
        check_range("user_clip", self.user_clip, low=0.0, high=BIG, low_open=True)
        check_range("init_scale", self.init_scale, low=0.0, high=BIG, low_open=True)
        check_choice("init", self.init, INITS)
        check_choice("fold_in", self.fold_in, FOLD_INS)
        if self.fold_in_reg is not None:
            check_range("fold_in_reg", self.fold_in_reg, low=0.0, high=BIG, low_open=True)
        if self.fold_in_gravity is not None:
            check_range("fold_in_gravity", self.fold_in_gravity, low=0.0, high=BIG)
        if self.fold_in == "private" and TASKS[self.task].labelled:
            raise ConfigError("fold_in='private' chooses the fold-in by Recall@20 of ranked "
                              "items: it applies to the implicit task; use "
                              "fold_in='training' for --task rating")
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
        check_range("label_clip", self.label_clip, low=0.0, high=BIG, low_open=True)
        check_range("user_bias_reg", self.user_bias_reg, low=0.0, high=BIG)
        TASKS[self.task].check(self)                # the splits the task accepts
        WEIGHTINGS[self.weights].check(self)        # e.g. β an integer for uniform/tail
        if self.gd.uses_mlp and self.solver != "gd":
            raise ConfigError("encoder='mlp' needs solver='gd' (SSP solves a linear model per "
                              "item)")
        if self.spectral_start and self.gd.uses_mlp:
            raise ConfigError("init='spectral' starts the embedding table V; the MLP encoder "
                              "(gd.encoder='mlp') does not start from V: use init='random'")

    @property
    def private(self) -> bool:
        """Whether the run is private (``privacy`` is a :class:`PrivacyConfig`, not
        :class:`NonPrivate`)."""
        return self.privacy.private

    @property
    def item_cg_steps(self) -> int:
        """CG steps per item system: ``cg_steps``, or by default :data:`NOISY_CG_STEPS` when
        the systems carry noise (a private run) and :data:`EXACT_CG_STEPS` when they do not
        (implicit's ``use_cg`` takes 3; a warm start from the previous V leaves little to
        do)."""
        if self.cg_steps is not None:
            return self.cg_steps
        return NOISY_CG_STEPS if self.private else EXACT_CG_STEPS

    @property
    def fold_in_ridge(self) -> float | None:
        """λ of the fold-in: ``fold_in_reg``, else ``reg``."""
        return self.reg if self.fold_in_reg is None else self.fold_in_reg

    @property
    def fold_in_alpha0(self) -> float:
        """α0 of the fold-in: ``fold_in_gravity``, else ``gravity``."""
        return self.gravity if self.fold_in_gravity is None else self.fold_in_gravity

    @property
    def chooses_fold_in(self) -> bool:
        """Whether training ends with the choice of the fold-in
        (:mod:`dpmt.train.fold_in_choice`): ``fold_in="private"``, or ``"auto"`` on a private
        implicit run at ε ≥ :data:`FOLD_IN_EPSILON` (a rule on the public target ε, fixed
        before any data is read: the plan calibrates the release with the others)."""
        if self.fold_in == "auto":
            return (self.private and not TASKS[self.task].labelled
                    and self.privacy.epsilon >= FOLD_IN_EPSILON)
        return self.fold_in == "private"

    @property
    def spectral_start(self) -> bool:
        """Whether V starts from the private spectral release (``init="spectral"``)."""
        return self.init == "spectral"

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
        """A copy with ``changes``. A sub-config may be given whole or as a dict of the fields
        to change: ``replace(gd=dict(steps=10), privacy=dict(epsilon=1.0))`` (a dict given to a
        non-private config's ``privacy`` makes it private with those settings). The settings
        the task gave (:func:`dpmt.tasks.apply_task_settings`) are given again by its rule."""
        by_task = getattr(self, "_by_task", ())
        changes = {**{f: None for f in by_task if f not in PRIVACY_SETTINGS}, **changes}
        priv_reset = {f: None for f in by_task if f in PRIVACY_SETTINGS}
        if priv_reset and "privacy" not in changes:
            changes["privacy"] = {}
        if priv_reset and isinstance(changes["privacy"], dict) and self.private:
            changes["privacy"] = {**priv_reset, **changes["privacy"]}
        for name in _SUB_CONFIGS:
            if isinstance(changes.get(name), dict):
                current = getattr(self, name)
                if isinstance(current, NonPrivate):
                    changes[name] = PrivacyConfig(**changes[name])
                else:
                    changes[name] = dataclasses.replace(current, **changes[name])
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError("not TrainConfig fields: " + _moved(sorted(unknown)))
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields, nested by sub-config (``privacy`` None for :class:`NonPrivate`), without
        ``config_version``."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name in ("data", "gd", "ssp"):
            d[name] = dataclasses.asdict(d[name])
        d["data"]["split_fractions"] = list(self.data.split_fractions)
        d["privacy"] = dataclasses.asdict(self.privacy) if self.private else None
        return d

    def flat_dict(self) -> dict[str, Any]:
        """One flat dict of every setting (the sub-configs' fields at the top, ``gd``
        nested, ``private`` True/False, a non-private config with the privacy settings'
        defaults): the form :meth:`fingerprint` and the grids' fingerprints hash, unchanged
        since config version 3, so that a fingerprint does not move with the schema."""
        d = self.to_dict()
        flat = {k: v for k, v in d.items() if k not in ("data", "ssp", "privacy")}
        flat.update(d["data"])
        flat.update(d["ssp"])
        flat["private"] = self.private
        if not TASKS[self.task].labelled:   # a rating setting added in version 4: implicit
            del flat["user_offsets"]        # models keep their fingerprints
        flat["cg_steps"] = self.item_cg_steps    # the steps run (version 6: None = a rule)
        if self.user_cg_steps == self.item_cg_steps:  # version 5's split of cg_steps: a
            del flat["user_cg_steps"]                 # config of version ≤ 4 keeps its fingerprint
        if self.fold_in == "training":       # version 7's field: an older config (migrated
            del flat["fold_in"]              # to "training") keeps its fingerprint
        for name in ("fold_in_reg", "fold_in_gravity"):
            if getattr(self, name) is None:
                del flat[name]
        if self.private:
            flat.update(d["privacy"])
            if self.privacy.fold_in_noise_ratio == _FOLD_IN_NOISE_RATIO:
                del flat["fold_in_noise_ratio"]          # … nor here, at its default
        else:                   # the privacy defaults, with the task's count noise ratio
            ratio = TASKS[self.task].settings(self)["count_noise_ratio"]
            flat.update(dataclasses.asdict(PrivacyConfig(count_noise_ratio=ratio)))
            del flat["fold_in_noise_ratio"]
        return flat

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
        if d["privacy"] is not None:
            d["privacy"]["noise_seed"] = None
        return d

    def fingerprint(self) -> str:
        """SHA-256 (hex, 16 chars) of the canonical JSON of :meth:`flat_dict`: equal iff the
        configs are equal."""
        text = json.dumps(self.flat_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def diff(self, other: "TrainConfig") -> list[str]:
        """``setting: mine → other's`` for every setting that differs, by its flat name
        (``epsilon``, ``dataset``, ``private``, ``gd.steps``...: :meth:`flat_dict`)."""
        # every setting by its value (flat_dict leaves out user_cg_steps = cg_steps)
        a, b = ({**_flat(c.flat_dict()), "user_cg_steps": c.user_cg_steps}
                for c in (self, other))
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
        subs = {}
        for name, sub in (("data", DataConfig), ("gd", GDConfig), ("ssp", SSPConfig),
                          ("privacy", PrivacyConfig)):
            v = d.pop(name, {})
            if name == "privacy" and v is None:
                subs[name] = NonPrivate()
                continue
            if not isinstance(v, dict):
                raise ConfigError(f"config key {name!r} must be an object (got "
                                  f"{type(v).__name__})")
            refuse_unknown(sub, v, name + ".")
            if name == "data" and "split_fractions" in v:
                if not isinstance(v["split_fractions"], (list, tuple)):
                    raise ConfigError("split_fractions must be a list of three numbers")
                v = {**v, "split_fractions": tuple(v["split_fractions"])}
            subs[name] = v
        refuse_unknown(cls, d, "")
        try:
            made = {k: (v if not isinstance(v, dict) else
                        {"data": DataConfig, "gd": GDConfig, "ssp": SSPConfig,
                         "privacy": PrivacyConfig}[k](**v)) for k, v in subs.items()}
            return cls(**made, **d)
        except TypeError as e:   # a mistyped value that a comparison could not handle
            raise ConfigError(f"invalid config value: {e}") from None


#: TrainConfig's sub-configs, by field name
_SUB_CONFIGS = ("data", "gd", "ssp", "privacy")
#: the sub-config that holds each of these settings (flat name → TrainConfig field)
FIELD_GROUPS: dict[str, str] = {
    **{f.name: "data" for f in dataclasses.fields(DataConfig)},
    **{f.name: "ssp" for f in dataclasses.fields(SSPConfig)},
    **{f.name: "privacy" for f in dataclasses.fields(PrivacyConfig)},
    **{"gd_" + f.name: "gd" for f in dataclasses.fields(GDConfig)},
}


def _moved(names) -> str:
    """What to write instead of flat sub-config settings: ``epsilon (in privacy:
    privacy=dict(epsilon=...))``."""
    return ", ".join(f"{k} (in {FIELD_GROUPS[k]}: {FIELD_GROUPS[k]}=dict({k}=...))"
                     if k in FIELD_GROUPS else
                     f"{k} (privacy=NonPrivate() for private=False)" for k in names)


_dataclass_init = TrainConfig.__init__


@functools.wraps(_dataclass_init)
def _init(self, *args, **kwargs):
    # a setting of a sub-config given flat (the pre-version-4 form) gets a message that says
    # where it went, not dataclass's "unexpected keyword argument"
    flat = [k for k in kwargs if k in FIELD_GROUPS or k == "private"]
    if flat:
        raise ConfigError("not TrainConfig fields: " + _moved(flat) + "; or "
                          "TrainConfig(**dpmt.config.route(flat_settings))")
    _dataclass_init(self, *args, **kwargs)


TrainConfig.__init__ = _init


def route(values: Mapping[str, Any]) -> dict[str, Any]:
    """Flat settings (the CLI's names: ``epsilon``, ``dataset``, ``item_solve``, ``gd_steps``,
    ``dim``; ``private=False`` for :class:`NonPrivate`) → :meth:`TrainConfig.replace`'s
    arguments (``privacy=dict(epsilon=...)``, ``data=dict(...)``, ``gd=dict(steps=...)``,
    ``dim=...``). One table, :data:`FIELD_GROUPS`, for every consumer of flat names."""
    out: dict[str, Any] = {}
    private = values.get("private", True)
    if not isinstance(private, bool):
        raise ConfigError(f"private must be True or False (got {private!r})")
    for k, v in values.items():
        group = FIELD_GROUPS.get(k)
        if k == "private":
            continue
        if group is None:
            out[k] = v
        elif group != "privacy" or private:
            out.setdefault(group, {})[k[3:] if group == "gd" else k] = v
    if not private:         # non-private: the privacy settings do not apply
        out["privacy"] = NonPrivate()
    return out


@dataclasses.dataclass(frozen=True)
class ExecutionConfig:
    """How a run is executed; none of it changes the model (so resume ignores it).

    devices: shard the user step (by users) and the item step (by items; by users for noisy
      GD with the MLP encoder) over this many devices (:mod:`dpmt.solvers.sharding`). The noise
      of item i is keyed by i, so 1, 2 or 4 devices give the same V up to float32 round-off.
      On CPU, that many host devices are created when JAX has not started yet. None (auto,
      the default): :func:`dpmt.solvers.sharding.auto_devices` — on CPU the host devices JAX
      has, at most one per core and 4 (XLA:CPU runs the steps' batched kernels on one thread
      per device, so devices are how they use the cores; the CLI asks JAX for one per core
      before it starts, a library call leaves JAX's configuration alone); 1 on an
      accelerator and with ``sharded_data``.
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

    devices: int | None = _f(None, "shard the user and item steps over this many devices; "
                             "any number makes the same releases with the same noise and ε, "
                             "and V equal up to float32 round-off (on CPU: that many host "
                             "devices, one core each)", "execution",
                             none="auto: on CPU one per core, at most 4; else 1")
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
        check_types(self)
        if self.devices is not None:
            check_range("devices", self.devices, low=1, integer=True)
        if not isinstance(self.data_dir, str) or not self.data_dir:
            raise ConfigError(f"data_dir must be a non-empty path (got {self.data_dir!r})")
        if self.lapack_threads is not None:
            check_range("lapack_threads", self.lapack_threads, low=0, integer=True)


_FOLD_IN_NOISE_RATIO = next(f.default for f in dataclasses.fields(PrivacyConfig)
                            if f.name == "fold_in_noise_ratio")


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out
