"""Settings chosen by a rule from *released* statistics and the budget, never from exact data.

A setting left at ``None`` ("auto") in :class:`~dpmt.config.TrainConfig` is resolved here
once its inputs are public: the privacy target (ε) is public, and n̂ (the noisy user count)
is released with the item counts before any iteration. The resolved values are written into
the model's config, so a saved model states exactly what it used, and :func:`explain`
prints them with the reason.

Rule for the weights (``weights="auto"``): **uniform when n̂·ε < 10⁵, else adaptive**
(eq. 11, μ = ¼). Adaptive weights read the released counts n̂_i, whose noise is relative
to the tail counts largest when there are few users per unit of noise. Validation Recall@20
of noisy GD with Adam, 4 sweeps, the default model of each weighting at its best η (the
2026-12-01 run of ``dpmt quality``, QUALITY.md; mean of 3 seeds on ML-100K, held-out users /
per-user split; 1 seed on the synthetics), ordered by n̂·ε:

    n̂·ε ≈ 740–940     ML-100K, ε = 1      uniform 0.168 / 0.158   adaptive 0.099 / 0.114
    n̂·ε ≈ 3700–4700   ML-100K, ε = 5      uniform 0.248 / 0.265   adaptive 0.242 / 0.238
    n̂·ε ≈ 1.5–1.9·10⁴ ML-100K, ε = 20     uniform 0.295 / 0.318   adaptive 0.292 / 0.307
    n̂·ε ≈ 4·10⁴       synthetic, ε = 1    uniform 0.263           adaptive 0.249
    n̂·ε ≈ 2·10⁵       synthetic, ε = 5    uniform 0.285           adaptive 0.294
    n̂·ε ≈ 6·10⁵       ML-20M-like, ε = 5  uniform 0.275           adaptive 0.276
    n̂·ε ≈ 8·10⁵       synthetic, ε = 20   uniform 0.279           adaptive 0.291

Uniform leads up to 4·10⁴ and trails from 2·10⁵; 10⁵ is the round number between (it was 10⁴
until the synthetic at ε = 1 showed uniform ahead at 4·10⁴). On ML-100K at ε = 20 the
held-out test set disagrees with validation (QUALITY.md: the defaults 0.286 against the
tuned adaptive 0.301, paired gap −0.016 ± 0.013 over the 3 seeds). Both weightings release
the same counts, so the choice changes no ε.

Rule for the ridge λ (``reg=None``): **noisy GD below n̂·ε = 1200: λ = 10; from 1200 up to
3·10⁴: λ = 1; otherwise λ = 3** (SSP, non-private, and noisy GD from 3·10⁴). Where the
gradient noise dominates, a stronger ridge keeps the item embeddings from following it; with less noise the same λ = 10
pulls them to zero and the model falls to popularity. Validation Recall@20, noisy GD with
Adam, uniform weights, 4 sweeps, η = 0, 3 seeds (``experiments/defaults_sweep.py
ml100k-reg``, ``ml100k-peruser-reg``, ``ml100k-reg-edge``, ``synth50k-reg-eps1``):

    n̂·ε ≈ 740   ML-100K held-out, ε = 1   λ = 3: 0.142   λ = 5: 0.160   λ = 10: 0.167
    n̂·ε ≈ 940   ML-100K per-user, ε = 1   λ = 3: 0.151                  λ = 10: 0.171
    n̂·ε ≈ 1500  ML-100K held-out, ε = 2   λ = 3: 0.206   λ = 5: 0.202   λ = 10: 0.197
    n̂·ε ≈ 3700  ML-100K held-out, ε = 5   λ = 3: 0.248   λ = 5: 0.225   λ = 10: 0.199
    n̂·ε ≈ 4·10⁴ synthetic, ε = 1          λ = 3: 0.263                  λ = 10: 0.262

1200 lies between the last gain (940) and the first loss (1500); the synthetic at ε = 1
(λ = 10 level with 3) says the axis is n̂·ε, not ε. λ is post-processing of released values
in both the item and the user solve, so the rule changes no ε.

The light ridge in between (since 2026-12-07, issue 28: ML-100K held-out users at ε = 20 were
0.016 below the tuned best): λ = 1 against 3, the defaults otherwise (the private fold-in
choice included), test Recall@20 (``python -m experiments.light_reg``, 3 seeds on ML-100K;
``experiments/solver_rule.py --candidates defaults gd-l1``, 1 seed; ± se over seeds;
``dpmt quality`` after it: ML-100K held-out at ε = 20 0.3344 against the tuned best 0.3243):

    n̂·ε ≈ 1500–1900   ML-100K held-out / per-user, ε = 2    −0.0006 ± 0.0016 / +0.0009 ± 0.0022
    n̂·ε ≈ 3700–4700   ML-100K, ε = 5                        +0.0102 ± 0.0036 / −0.0053 ± 0.0091
    n̂·ε ≈ 1.5–1.9·10⁴ ML-100K, ε = 20                       +0.0286 ± 0.0053 / +0.0110 ± 0.0022
    n̂·ε ≈ 1.5·10⁴     two 3k-user generators, ε = 5, 2 seeds −0.0019 (topics) / +0.0020 (logistic)
    n̂·ε ≈ 2·10⁴       6 generators of 20k users, ε = 1       −0.0010 to +0.0012, mean +0.0001
    n̂·ε ≈ 4–4.9·10⁴   the 50k synthetic, E, H at ε = 1       −0.0017, −0.0018, −0.0015
    n̂·ε ≈ 8·10⁴–2.5·10⁵ 8 generators, ε = 5                  −0.0068 to +0.0032, mean −0.0032

It wins on ML-100K, whose items have few raters (26 training ratings ≥ 4 on average, against
100 on the 3k-user generators and 270–480 on the others), so that λ = 3 weighs on them, and
changes nothing measurable on the synthetic data of the same n̂·ε; from 4·10⁴ on it
loses a little, and with little noise (generator G at ε = 5: −0.012) the model needs the
ridge again (QUALITY.md, "Why the defaults fall with ε on two generators"). 3·10⁴ is the
round number between the 20k-user cells (level) and the 40k-50k-user ones (behind). The
window was chosen on ML-100K and the family's cells; only the two 3k-user generators were
not looked at before.

Rule for noisy GD's steps (``gd.steps=None``): **20 steps per sweep below n̂·ε = 10⁵, else
6 at 20/6 times the learning rate** — the same privacy (each step's noise scaled by √(6/20);
see :mod:`dpmt.train.methods.noisy_gd` for why the choice from n̂ is free, and for 8 against
10 and 6 against 8 steps: test Recall@20 +0.0007 and +0.0002 over 20 pairs, the tail buckets
ahead, the fourth −0.004 and −0.005), under a third of the item step's cost. It was 10 steps
at twice the rate until 2026-12-06, then 8 at 2.5 times until 2026-12-07;
validation Recall@20, 10 steps at lr 0.02 minus 20 at 0.01 (``python experiments/
solver_rule.py --candidates gd-s10-lr02``, 1 seed; ``experiments/defaults_sweep.py
ml100k-steps``, ``ml100k-peruser-steps``, 3 seeds, η = 0):

    n̂·ε ≈ 740–940     ML-100K held-out / per-user, ε = 1     −0.025 / 0.000
    n̂·ε ≈ 3700–4700   ML-100K, ε = 5                         −0.012 / +0.006
    n̂·ε ≈ 1.5–1.9·10⁴ ML-100K, ε = 20                        +0.003 / −0.005
    n̂·ε ≈ 1.7·10⁴–9.9·10⁴  8 synthetic generators, 14 cells   −0.0074 to +0.0024, mean −0.0018
    n̂·ε ≈ 2.3·10⁵–9.8·10⁵  the same generators, 10 cells      −0.0022 to +0.0034, mean −0.0001
                            (test: −0.0015 to +0.0023, mean +0.0006)

(the generators: 4 of the project's topic model and 4 of the logistic-link model of
:mod:`dpmt.data.synthetic_logistic`, 20k and 50k users, ε = 1, 5, 20). Below 10⁵ the small
loss is consistent (10 of 14 cells negative), above it is noise, and the item step costs half.

Rule for the solver (``solver=None``, implicit feedback; since 2026-12-07, issue 28): **noisy
GD, or SSP with λ = 20 where n̂·ε ≥ 4.5·10⁵ and the released counts average ≥ 170 per item**
(Σ_i max(n̂_i, 0) / m, each user counted on at most k items; :func:`solver_switch`). The plan
is made for noisy GD before n̂ is released; the switched run's iterations are Gaussian
releases of exactly the planned iterations' μ, within the δ the plan charged (it charges a
switchable config for the larger of the two phases' normals), so the choice from released
values costs nothing more (:func:`dpmt.train.plan.equivalent_iterations`; the argument is
the steps rule's). What the user sets (the solver, λ, noisy GD's own settings) is kept.
Validation / test Recall@20 of the old defaults (noisy GD) and SSP at λ = 20, seed 0, 2,000 +
2,000 held-out users, δ = 1e-6 (``python -m experiments.ssp_prior``; generators of
``experiments/solver_rule.py``; JSONs ``experiments/ssp_rule_*.json``, ``ssp_prior_K.json``,
``ssp_variants_K.json``):

    generator, ε          n̂·ε      count/item  noisy GD          SSP λ = 20          rule
    H logistic 50k, 20    9.3·10⁵   200         0.2775 / 0.2818   0.3022 / 0.3028 *   SSP
    E topics 50k, 20      9.8·10⁵   210         0.3938 / 0.3920   0.3923 / 0.3953 *   SSP
    I topics 100k, 5      4.9·10⁵   279         0.3005 / 0.2951   0.3087 / 0.3108 *   SSP
    J logistic 100k, 5    4.8·10⁵   275         0.2697 / 0.2803   0.2839 / 0.2935 *   SSP
    J logistic 100k, 10   9.5·10⁵   275         0.2785 / 0.2864   0.2923 / 0.3018 *   SSP
    S the 50k synthetic, 20 9.9·10⁵ 225         0.2942 / 0.2910   0.2985 / 0.2968 *   SSP
    K ML-20M-like, 5      6.9·10⁵   144         0.2708 / 0.2734   0.2607 / 0.2616     GD
    A topics 20k, 20      3.9·10⁵   124         0.3119 / 0.3184   0.3077 / 0.3151 †   GD
    G logistic 20k, 20    4.0·10⁵   139         0.2796 / 0.2824   0.2560 / 0.2593 †   GD
    H logistic 50k, 5     2.3·10⁵   200         0.2829 / 0.2821   0.2754 / 0.2786 †   GD
    E topics 50k, 5       2.5·10⁵   210         0.3792 / 0.3831   0.3880 / 0.3853 †   GD
    fitted on none of the above (made after the rule):
    P topics 80k × 4k, 10   7.8·10⁵ 424         0.2932 / 0.2932   0.2979 / 0.2989 *   SSP
    N logistic 110k × 20k, 10 1.1·10⁶ 122       0.2132 / 0.2171   0.2234 / 0.2209     GD

(* the switched defaults themselves; † 3 sweeps; otherwise SSP planned on its own at 4
sweeps.) SSP wins where both quantities are large: its item statistics Σ_j w_ij u_j u_jᵀ
grow with an item's raters while their noise does not, and noisy GD's test Recall@20 stops
rising (H: 0.2821 at ε = 5, 0.2818 at ε = 20, where SSP reaches 0.303). Below
4·10⁵ (A, G; H and E at ε = 5) or with few raters per item on a large catalogue (K, 26.7k
items) noisy GD leads or ties. Of the two generators made to test the rule, P (as predicted)
gains +0.006 on test; N (predicted GD) would have gained +0.004 on test and +0.010 on
validation with SSP: the count threshold is the rule's weak side (K at 144 loses 0.012 with
SSP, N at 122 gains). SSP at d = 64 led on K (0.2738 / 0.2765; its fit took 116 s against
noisy GD's 78 s) and trailed d = 32 on H (0.3016 / 0.3022); at λ = 10 SSP trailed λ = 20 on K
(0.2540 / 0.2570).

Rule for the item systems' CG steps (``cg_steps=None``, :attr:`~dpmt.config.TrainConfig.
item_cg_steps`): **8 when the systems carry noise (private SSP), 3 without (non-private)**.
The noisy systems' solution is used to ~1e-4 relative difference to the exact solve at
ML-20M scale with 8; an exact system warm-started from the previous V has little left to
do after the first iterations (implicit's ``use_cg`` takes 3). Non-private ALS, test
Recall@20, 8 → 3 item steps (``python experiments/cg_steps_quality.py --steps 8 3 --vary
item --methods ALS [--datasets 0 1 --seeds 3 4 5 6]``, ``experiments/
cg_steps_quality_item.json``, ``..._item_s3to6.json``): ML-100K held-out users, seeds 0-6,
mean change −0.0005 (six seeds within ±0.0020, one −0.0057); per-user split, seeds 0-6,
−0.0001 (all within ±0.0005); the 50k-user synthetic 0.0000. Public (privacy on or off), so
the rule changes no ε.

Rule for the popularity-prior weight η (:meth:`dpmt.model.Model.item_prior`), with
r = N₀ / (n̂ · ε), N₀ = 3500:

    noisy GD:  η = ¼ (η = 0 with uniform weights)    SSP:  η = min(100, r²)
    non-private: η = 0

Why: the signal a private item step extracts grows with the number of users per unit of
noise, n̂·ε (every release's noise std scales as 1/ε while the statistics grow with n̂), so
the less of it there is, the more the ranking should lean on the popularity that the
released counts give for free; without noise (ε = ∞) the prior only biases a model that
needs none (the non-private model lost Recall@20 with any η > 0: 0.78 → 0.54 on a planted
test set). The constants were read off validation Recall@20 (ML-100K held-out users, 3
seeds, n̂ ≈ 740; the 50k-user synthetic, n̂ ≈ 4.9·10⁴; η ∈ {0, ¼, ½, 1, 2, 4}):

* SSP at n̂ ≈ 740: η = 2 won at ε = 1 (and still lost to private popularity, i.e. η → ∞),
  η ≈ 1 at ε = 5, η = 0 at ε = 20 — a fast fall-off, hence the square; on the synthetic η = 0
  won at ε = 5.
* Noisy GD with Adam is a stronger model at small n̂·ε and needs little prior. With adaptive
  weights η = ¼ was best or within 0.012 of the best at every (dataset, ε) measured (ML-100K
  ε = 5: ¼ best by 0.026 over η = 0; 4 sweeps: ¼ best at ε = 5 and 20 on both ML-100K splits;
  synthetic: within 0.005). With uniform weights η = 0 was best in 5 of 6 ML-100K cells with
  4 sweeps (ε = 5, per-user: 0.265 vs 0.252 at ¼), so uniform gets no prior.

Rating task (issue 28; ``experiments/rating_sweep.py``, validation RMSE summed over ML-100K
and the 5k-user explicit synthetic, 2 noise seeds): λ = 16 without privacy (biased ALS,
d = 32; of d ∈ {8, 32} × λ ∈ {12, 16, 20, 25}), 30 privately (:mod:`dpmt.tasks`); and the
factors only where n̂·ε ≥ :data:`RATING_FACTORS_SCALE` (:func:`rating_factors`): forced on,
they tied the bias model within 0.0004 in all 6 private cells (n̂·ε ≈ 1,000–100,000).
"""

from __future__ import annotations

from dpmt.config import BASE_REG, WEIGHTS_SCALE
from dpmt.registry import SOLVERS, TASKS, WEIGHTINGS

# WEIGHTS_SCALE (n̂·ε below which weights="auto" is uniform) lives in dpmt.config, whose
# help text states it
#: λ of every run the ridge rule does not raise
REG = BASE_REG
# The solver-specific constants live with their solvers: N₀ and η_max in
# dpmt.train.methods.ssp (PRIOR_SCALE, PRIOR_MAX), λ = 10 below n̂·ε = 1200, 1 up to 3·10⁴ and
# η = ¼ in dpmt.train.methods.noisy_gd (NOISY_REG, REG_SCALE, LIGHT_REG, LIGHT_REG_SCALE,
# GD_PRIOR).


def weights_for(noisy_users: float | None, epsilon: float) -> str:
    """``weights="auto"``: uniform when n̂·ε < 10⁵, else adaptive (see the module doc)."""
    return "uniform" if max(float(noisy_users or 0.0), 1.0) * epsilon < WEIGHTS_SCALE \
        else "adaptive"


def reg_for(noisy_users: float | None, epsilon: float, private: bool,
            solver: str = "gd") -> float:
    """λ of the ridge rule above (``reg=None``) from n̂, ε and the item-step solver (its
    :meth:`~dpmt.train.methods.ItemMethod.default_reg`). Non-private: :data:`REG`."""
    return _reg(noisy_users, epsilon, private, solver)[0]


def _reg(noisy_users, epsilon, private, solver, task: str = "implicit"
         ) -> tuple[float, str]:
    own = TASKS[task].default_reg(noisy_users, epsilon, private)
    if own is not None:
        return own
    if not private:
        return REG, "non-private"
    return SOLVERS[solver].default_reg(noisy_users, epsilon)


def popularity_prior(noisy_users: float | None, epsilon: float, private: bool,
                     solver: str = "gd", weights: str = "adaptive") -> float:
    """η of the rule above from the released user count ``noisy_users`` (n̂), ε, the
    item-step solver (its :meth:`~dpmt.train.methods.ItemMethod.default_prior`) and the
    (resolved) weights. Non-private: 0."""
    return _prior(noisy_users, epsilon, private, solver, weights)[0]


def _prior(noisy_users, epsilon, private, solver, weights) -> tuple[float, str]:
    if not private:
        return 0.0, "non-private: no prior"
    return SOLVERS[solver].default_prior(noisy_users, epsilon, weights)


#: n̂·ε from which the solver left to the task may be SSP (:func:`solver_switch`)
SSP_SCALE = 450_000.0
#: … when the released counts average at least this many (capped) ratings per item
SSP_MIN_COUNT = 170.0
#: what the switch sets: SSP, and λ where the config leaves it to the rule
SSP_SWITCH = dict(solver="ssp", reg=20.0)


def switchable(cfg) -> bool:
    """Whether a rule may replace ``cfg``'s item step by SSP once n̂ is released (public
    fields only, so the plan can charge for it before any data is read): a private run of a
    ranking task whose solver is the task's (not chosen by the user), its releases plain
    Gaussians, and noisy GD's own settings (``cfg.gd``: steps, rate, clip, sampling, encoder)
    left at their defaults — a user who set them means noisy GD — and no spectral start."""
    return bool(cfg.private and TASKS[cfg.task].ranking and not TASKS[cfg.task].labelled
                and "solver" in getattr(cfg, "_by_task", ())
                and SOLVERS[cfg.solver] is not SOLVERS[SSP_SWITCH["solver"]]
                and cfg.gd == type(cfg.gd)() and not cfg.spectral_start)


def switched_config(cfg):
    """``cfg`` with SSP's settings of :data:`SSP_SWITCH` (λ only where the config leaves it
    to a rule)."""
    change = {"solver": SSP_SWITCH["solver"]}
    if cfg.reg is None:
        change["reg"] = SSP_SWITCH["reg"]
    return cfg.replace(**change)


def solver_switch(cfg, noisy_users: float | None, noisy_counts=None) -> tuple[bool, str]:
    """Whether the rule switches ``cfg`` (:func:`switchable`) to SSP, and why: **where
    n̂·ε ≥ 4.5·10⁵ and the released counts average ≥ 170 per item** (Σ_i max(n̂_i, 0) / m:
    each user counted on at most k items). Both are released values; the run then keeps
    the plan's privacy (:func:`dpmt.train.plan.resolved_plan`). See the module doc."""
    if not switchable(cfg) or noisy_users is None or noisy_counts is None:
        return False, ""
    import numpy as np

    counts = np.asarray(noisy_counts, np.float64)
    per_item = float(np.maximum(counts, 0.0).sum()) / max(counts.size, 1)
    n_eps = max(float(noisy_users), 1.0) * cfg.privacy.epsilon
    on = n_eps >= SSP_SCALE and per_item >= SSP_MIN_COUNT
    return on, (f"n̂·ε = {float(noisy_users):.0f}·{cfg.privacy.epsilon:g} "
                f"{'≥' if n_eps >= SSP_SCALE else '<'} {SSP_SCALE:g}, "
                f"released count per item {per_item:.0f} "
                f"{'≥' if per_item >= SSP_MIN_COUNT else '<'} {SSP_MIN_COUNT:g}")


def resolve(cfg, noisy_users: float | None, noisy_counts=None):
    """``cfg`` with every auto (None) setting resolved, and the list of (setting, value,
    reason) lines for :func:`explain`. ``noisy_counts``: the released n̂_i (the solver rule
    reads their mean)."""
    why = []
    on, reason = solver_switch(cfg, noisy_users, noisy_counts)
    if on:
        before = cfg
        cfg = switched_config(cfg)
        why.append(("solver", cfg.solver, reason))
        why += [(name, getattr(cfg, name), "SSP where the solver rule picks it")
                for name in SSP_SWITCH
                if name != "solver" and getattr(cfg, name) != getattr(before, name)]
    # the item step's own auto settings (noisy GD's steps): a rule that keeps the releases'
    # privacy (ItemMethod.equivalent_releases), so the plan made before n̂ still holds
    cfg, own = SOLVERS[cfg.solver].default_settings(cfg, noisy_users)
    why += own
    if WEIGHTINGS[cfg.weights].by_rule and cfg.private:
        w = weights_for(noisy_users, cfg.privacy.epsilon)
        cfg = cfg.replace(weights=w)
        eps = cfg.privacy.epsilon
        why.append(("weights", w, f"n̂·ε = {float(noisy_users or 0):.0f}·{eps:g} "
                                  f"{'<' if w == 'uniform' else '≥'} {WEIGHTS_SCALE:g}"))
    if cfg.reg is None:
        lam, reason = _reg(noisy_users, cfg.privacy.epsilon, cfg.private, cfg.solver, cfg.task)
        cfg = cfg.replace(reg=lam)
        why.append(("reg", lam, reason))
    if cfg.cg_steps is None:    # 8 CG steps for noisy item systems, 3 for exact ones
        steps = cfg.item_cg_steps
        cfg = cfg.replace(cg_steps=steps)
        if cfg.ssp.item_solve == "cg" and (cfg.solver == "ssp" or not cfg.private):
            why.append(("cg_steps", steps, "noisy item systems (private)" if cfg.private
                        else "exact item systems (non-private; implicit's 3)"))
    if cfg.popularity_prior is None and not TASKS[cfg.task].ranking:
        cfg = cfg.replace(popularity_prior=0.0)   # nothing is ranked: no prior, no rule
    if cfg.popularity_prior is None:
        eta, reason = _prior(noisy_users, cfg.privacy.epsilon, cfg.private, cfg.solver, cfg.weights)
        cfg = cfg.replace(popularity_prior=eta)
        why.append(("popularity_prior", eta, reason))
    return cfg, why


def rating_factors(cfg, noisy_users: float | None) -> tuple[bool, str]:
    """Whether a rating run trains its factors ⟨u_j, v_i⟩, and why: always without privacy;
    privately only where n̂·ε ≥ :data:`RATING_FACTORS_SCALE`. Below it, the bias model μ̂ +
    b̂_i + b_j + ⟨w_j, f_i⟩ alone predicts better on validation than with factors learned from
    noisy statistics (ML-100K: n̂·ε ≈ 940–19,000; the 5k-user explicit synthetic: 5,000–
    100,000; experiments/rating_sweep.py). The planned sweeps are then still charged, their
    releases not made (as if made and discarded: post-processing), so the guarantee is the
    plan's either way; the choice reads only the released n̂."""
    if not cfg.private:
        return True, "non-private"
    n_eps = max(float(noisy_users or 0.0), 1.0) * cfg.privacy.epsilon
    on = n_eps >= RATING_FACTORS_SCALE
    return on, f"n̂·ε = {n_eps:.0f} {'≥' if on else '<'} {RATING_FACTORS_SCALE:g}"


#: n̂·ε from which a private rating run trains its factors (rating_factors)
RATING_FACTORS_SCALE = 200_000.0


def explain(why) -> str:
    """One line per resolved setting: ``popularity_prior = 0.52 (rule ...)``."""
    return "; ".join(f"{k} = {v if isinstance(v, str) else f'{v:.3g}'} ({r})"
                     for k, v, r in why)
