"""Empirical privacy audits of dpmt's mechanisms: canary datasets, broken twins, runners.

Each ``audit_*`` builds two neighbouring datasets (privacy unit: one user, add/remove-one,
or the online neighbour relation), runs the mechanism many times on each, reduces every
release to a likelihood-ratio score for the canary, and bounds ε with the generic
statistics of :mod:`dpmt.audit` (see that module for the method). The Gaussian mechanisms
(SSP, noisy GD, counts, spectral start) are judged by the **GDP audit**
(:func:`~dpmt.audit.gdp_lower_bound`, Nasr et al. 2023): the score is the projection of the
release onto the canary's known contribution (the difference of the two noiseless
releases), the test is fixed in advance at the midpoint of the two noiseless projections,
and the verdict is ``ε(μ_lb, δ) > claimed ε``; the assumption-free threshold bound
(:func:`~dpmt.audit.epsilon_lower_bound`) is reported beside it. The online mechanisms
(Mirror, Combine_D: (ε, δ) claims on Bernoulli releases) keep the threshold audit. This is
an audit harness, outside the ``dpmt`` package; run it with ``scripts/privacy_audit.py``;
its power is measured by ``scripts/audit_power.py`` (``docs/audit_power.md``).

**Audited mechanisms** (each ``audit_*`` returns an :class:`~dpmt.audit.AuditResult`;
``broken=True`` runs a deliberately broken twin, which an audit must catch, i.e.
``ε_lb > claimed ε``; :data:`TWINS` names a gross, a subtle and a finest twin of each):

* :func:`audit_ssp` — the SSP item step's release of the stacked ``{Â_i}`` (or ``{b̂_i}``),
  ``dpmt.solvers.ssp.privatize_statistics`` on exact statistics from
  ``weighted_statistics`` (canary ``u = C e₁``, weights with ``Σ_i w² = β``, label ``y_max``).
  Twins: noise ×0.1; the canary's weight budget 2β (sensitivity ×√2); embeddings clipped at
  1.5·C (×1.5 for b̂).
* :func:`audit_noisy_gd` — the noisy clipped gradient sum of
  ``dpmt.solvers.noisy_gd.noisy_gradient`` (run once per trial, vmapped: the real per-user
  clipping code path every time); canary with a huge gradient. Twins: clipping disabled
  (clip norm 10⁶·G), clipping at 1.5·G or 1.1·G, with the noise still scaled to G. Also
  with Poisson sampling of users (``sampling_rate``: the DP-SGD variant, claim from
  ``PoissonSampledDpEvent``, audited against the subsampled Gaussian's trade-off).
* :func:`audit_counts` — ``dpmt.privacy.private_counts`` (discrete Gaussian) with the user
  count; canary rating ``k`` items (tight), or many items. Twins: per-user cap disabled and
  a canary rating 100·k items; the cap at 3k (sensitivity ×1.53) or k + 50% (×1.15).
* :func:`audit_spectral_init` — the spectral start's noisy co-occurrence
  (``dpmt.solvers.spectral_init``: ``cooccurrence`` then ``release``); canary rating one item
  (tight). Twins: the 1/√|S_j| normalisation disabled and a canary rating every item;
  duplicate (user, item) ratings kept (×1.53).
* :func:`audit_fold_in_choice` — the private fold-in choice's release of the K candidates'
  summed recalls (``dpmt.train.fold_in_choice.recall_sums`` plus the 64-bit sampler's
  normals); canary with a target under every candidate (tight: √K). Twins: the recall not
  normalised (hits, a canary with 6 targets: ×6); noise ×1/1.5 or ×1/1.1.
* :func:`audit_mirror` — ``dpmt.online.mirror.Mirror``: activity-sequence neighbours (one
  round's activity bit flipped), release = the answers on all other rounds, score = exact
  log-likelihood ratio. Twins: a ramp designed for 10·a, 5·a or 4·a presented as meeting a.
* :func:`audit_combiner` — ``dpmt.online.combiner.Combiner``: streams differing in one
  triple's label (each counter moves by one), release = the choices on the other rounds,
  score = exact log-likelihood ratio. Twins: ``D`` = 1, 3 or 6 while claiming the ε of the
  ``D`` Lemma 13 requires (486 at ε = 2).

Exact (un-noised) statistics are deterministic, so for SSP, GD and the spectral start the
noise is drawn many times on the exact statistics of each dataset; the counts, Mirror and
Combiner audits run the real function / object for ``n_real`` trials per dataset and a
vectorised replica of its sampling (calling the same capping code / probability functions)
for the rest. All runs are seeded: same arguments, same result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from unittest import mock

import numpy as np

from dpmt.audit import AuditResult, bernoulli_llr, make_result, midpoint_threshold
from dpmt.errors import ConfigError, check_range

__all__ = [
    "audit_ssp", "audit_noisy_gd", "audit_counts", "audit_spectral_init",
    "audit_fold_in_choice", "audit_mirror",
    "audit_combiner", "pair_epsilon",
    "MECHANISMS", "TWINS", "run_audit", "run_all", "repeat_rates",
]

# Trials per vectorised chunk of the replicas (bounds memory at full size).
_CHUNK = 2000


def _result(name, broken, break_kind, claimed, delta, trials, s_in, s_out, confidence,
            details, *, gaussian=False, threshold=None, sampling_rate=1.0,
            epsilon_of_mu=None) -> AuditResult:
    """The threshold bound, and for a Gaussian mechanism the GDP audit that decides."""
    return make_result(name, s_in, s_out, claimed_epsilon=claimed, delta=delta,
                       confidence=confidence, gaussian=gaussian, threshold=threshold,
                       sampling_rate=sampling_rate, epsilon_of_mu=epsilon_of_mu,
                       broken=broken, break_kind=break_kind, details=details)


def _check_trials(trials):
    check_range("trials", trials, low=40, integer=True)
    return int(trials)


# ----------------------------------------------------------------------------------------
# Small datasets with a canary
# ----------------------------------------------------------------------------------------
def _base_ratings(rng, n_users, n_items, per_user):
    """Every user rates ``per_user`` distinct random items; returns (user, item)."""
    users = np.repeat(np.arange(n_users), per_user)
    items = np.concatenate([rng.choice(n_items, per_user, replace=False)
                            for _ in range(n_users)])
    return users, items


def _ratings(user, item, value, n_users, n_items):
    from dpmt.data.ratings import Ratings

    return Ratings(user=np.asarray(user), item=np.asarray(item), value=np.asarray(value),
                   user_ids=np.arange(n_users), item_ids=np.arange(n_items), name="audit")


def _clip_rows(X, C):
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return X * np.minimum(1.0, C / np.maximum(n, 1e-12))


def _calibrated_release(name, sensitivity, epsilon, delta, sampling_rate=None, **kw):
    from dpmt.privacy import PlannedRelease, calibrate

    cal = calibrate([PlannedRelease(name, sensitivity, sampling_rate=sampling_rate, **kw)],
                    epsilon, delta)
    return cal.releases[0], cal.epsilon


def _out_and_in(scores_for, clean_out, clean_in, seed: int):
    """(scores without the canary, scores with it): ``scores_for(clean, key)`` on the two
    noiseless releases, with keys folded from ``seed`` (0: out, 1: in)."""
    import jax

    root = jax.random.PRNGKey(seed)
    return (scores_for(clean_out, jax.random.fold_in(root, 0)),
            scores_for(clean_in, jax.random.fold_in(root, 1)))


def _gaussian_details(sens: float, sigma: float, realised: float, factor: float,
                      **extra) -> dict:
    """The details of a Gaussian audit: the claimed sensitivity, the noise used, and the
    canary's realised move over the sensitivity (÷ the noise factor of a "noise" twin)."""
    return {"sensitivity": sens, "noise_std": sigma, **extra,
            "noise_multiplier": sigma / sens,
            "canary_norm_over_sensitivity": realised / sens,
            "sensitivity_ratio": realised / sens / factor}


def _batched(fn, keys, batch):
    outs = [np.asarray(fn(keys[i:i + batch]), np.float64) for i in range(0, len(keys), batch)]
    return np.concatenate(outs)


# ----------------------------------------------------------------------------------------
# SSP item step
# ----------------------------------------------------------------------------------------
_SSP_FN = None


def _ssp_score_fn():
    """One compiled kernel for every SSP audit: per key, privatize the statistics and project
    the release onto the canary's contribution (``dir_A``, ``dir_b``; one of them zero)."""
    global _SSP_FN
    if _SSP_FN is None:
        import jax
        import jax.numpy as jnp

        from dpmt.solvers.ssp import privatize_statistics

        @jax.jit
        def f(A, b, keys, sigma, dir_A, dir_b):
            def one(k):
                Ah, bh = privatize_statistics(A, b, k, sigma, sigma)
                return jnp.sum(Ah * dir_A) + jnp.sum(bh * dir_b)
            return jax.vmap(one)(keys)
        _SSP_FN = f
    return _SSP_FN


def audit_ssp(trials: int = 4000, *, statistic: str = "A", epsilon: float = 2.0,
              delta: float = 1e-5, broken: bool = False, break_kind: str = "noise",
              break_factor: float | None = None, noise_factor: float = 0.1,
              n_users: int = 24, n_items: int = 6, dim: int = 3, per_user: int = 3,
              beta: float = 4.0, clip_norm: float = 1.0, y_max: float = 1.0,
              confidence: float = 0.95, seed: int = 0, data_seed: int = 0,
              batch: int = 2000) -> AuditResult:
    """Audit the SSP release of the stacked ``{Â_i}`` (``statistic="A"``) or ``{b̂_i}``.

    Other users: random embeddings clipped to ``‖u‖ ≤ C``, random labels in
    ``[−y_max, y_max]``, weights ``normalized_user_weights`` (every user at ``Σ w² = β``,
    computed from the counts of ``D`` for both datasets so the other users' weights do not
    change). Canary: rates every item, ``u = C e₁`` (for ``A`` the upper-triangle noise makes a
    coordinate direction the worst case: ``‖T(ΔA)‖ = ‖ΔA‖_F``), label ``y_max``, weights with
    ``Σ w² = β``. Its contribution then has norm equal to the sensitivity
    (``details['canary_norm_over_sensitivity']`` ≈ 1). Noise is calibrated with
    ``dpmt.privacy.calibrate`` for one release at (``epsilon``, ``delta``). Score: the
    projection of the release onto the canary's contribution (upper triangle for ``A``) — the
    likelihood-ratio statistic; the GDP audit's test is fixed in advance at the midpoint of
    the noiseless projections.

    Broken twins (``broken=True``), by ``break_kind`` and ``break_factor`` f:

    * ``"noise"``: noise f times the calibrated (default f = ``noise_factor`` = 0.1), i.e. a
      sensitivity error of 1/f;
    * ``"weights"``: the canary's weight budget f·β (``Σ w² = fβ``, e.g. a weighting that does
      not normalise): true sensitivity √f × the claimed one;
    * ``"clip"``: the canary's embedding of norm f·C (embeddings clipped at f·C): true
      sensitivity f² × (``A``) or f × (``b``) the claimed one.

    ``details['sensitivity_ratio']`` is the realised error r (canary contribution over the
    claimed sensitivity, times calibrated over used noise).
    """
    import jax
    import jax.numpy as jnp

    from dpmt import weighting
    from dpmt.solvers.layout import task_layout
    from dpmt.solvers.ssp import ssp_sensitivities, weighted_statistics

    if statistic not in ("A", "b"):
        raise ConfigError(f"statistic must be 'A' or 'b' (got {statistic!r})")
    if break_kind not in ("noise", "weights", "clip"):
        raise ConfigError(f"SSP break_kind must be noise, weights or clip (got {break_kind!r})")
    f = float(noise_factor if break_factor is None else break_factor) if broken else 1.0
    check_range("break_factor", f, low=0.0, low_open=True)
    trials = _check_trials(trials)
    rng = np.random.default_rng(data_seed)
    users, items = _base_ratings(rng, n_users, n_items, per_user)
    U = _clip_rows(rng.normal(size=(n_users, dim)), clip_norm)
    y = rng.uniform(-y_max, y_max, len(users))
    counts = np.maximum(np.bincount(items, minlength=n_items), 1).astype(np.float64)
    c_user = np.full(n_items, n_users)
    c_item = np.arange(n_items)
    u_c = np.zeros(dim)
    u_c[0] = clip_norm * (f if break_kind == "clip" else 1.0)
    users2 = np.concatenate([users, c_user])
    items2 = np.concatenate([items, c_item])
    y2 = np.concatenate([y, np.full(n_items, y_max)])
    w2 = weighting.normalized_user_weights(counts, users2, items2, mu=0.5, budget=beta)
    w = w2[:len(users)]
    if break_kind == "weights":
        w2 = w2.copy()
        w2[len(users):] *= np.sqrt(f)
    R1, R2 = _ratings(users, items, y, n_users, n_items), \
        _ratings(users2, items2, y2, n_users + 1, n_items)
    X1, X2 = U, np.vstack([U, u_c])
    A1, b1 = weighted_statistics(task_layout(R1, dim=dim), X1, w, y)
    A2, b2 = weighted_statistics(task_layout(R2, dim=dim), X2, w2, y2)

    sens_A, sens_b = ssp_sensitivities(beta, clip_norm, y_max)
    sens = sens_A if statistic == "A" else sens_b
    release, claimed = _calibrated_release(f"ssp_{statistic}", sens, epsilon, delta)
    sigma = release.noise_std * (f if break_kind == "noise" else 1.0)

    if statistic == "A":
        diff = np.asarray(A2, np.float64) - np.asarray(A1, np.float64)
        direction = diff * np.triu(np.ones((dim, dim)))
        dir_A, dir_b = direction, np.zeros((n_items, dim))
        clean_out, clean_in = np.asarray(A1, np.float64), np.asarray(A2, np.float64)
    else:
        direction = np.asarray(b2, np.float64) - np.asarray(b1, np.float64)
        dir_A, dir_b = np.zeros((n_items, dim, dim)), direction
        clean_out, clean_in = np.asarray(b1, np.float64), np.asarray(b2, np.float64)
    realised = float(np.linalg.norm(direction))
    fn = _ssp_score_fn()
    dA, db = jnp.asarray(dir_A, jnp.float32), jnp.asarray(dir_b, jnp.float32)

    def scores_for(A, b, key):
        return _batched(lambda ks: fn(A, b, ks, jnp.float32(sigma), dA, db),
                        jax.random.split(key, trials), batch)

    root = jax.random.PRNGKey(seed)
    s_out = scores_for(A1, b1, jax.random.fold_in(root, 0))
    s_in = scores_for(A2, b2, jax.random.fold_in(root, 1))
    details = {"sensitivity": sens, "noise_std": sigma, "noise_multiplier": sigma / sens,
               "canary_norm_over_sensitivity": realised / sens,
               "sensitivity_ratio": realised / sens * release.noise_std / sigma}
    kinds = {"noise": f"noise x{f:g}", "weights": f"canary weight budget {f:g}·β",
             "clip": f"embeddings clipped at {f:g}·C"}
    return _result(f"SSP item step (stacked {statistic}-hat)", broken, kinds[break_kind],
                   claimed, delta, trials, s_in, s_out, confidence, details, gaussian=True,
                   threshold=midpoint_threshold(clean_in, clean_out, direction))


# ----------------------------------------------------------------------------------------
# The private spectral start (issue 10): the noisy top-K co-occurrence
# ----------------------------------------------------------------------------------------
_SPECTRAL_FN = None


def _spectral_score_fn():
    """One compiled kernel for every spectral audit: per key, release and project."""
    global _SPECTRAL_FN
    if _SPECTRAL_FN is None:
        import jax
        import jax.numpy as jnp

        from dpmt.solvers import spectral_init as si

        @jax.jit
        def f(C, keys, sigma, d):
            return jax.vmap(lambda k: jnp.sum(si.release(C, k, sigma) * d))(keys)
        _SPECTRAL_FN = f
    return _SPECTRAL_FN


def _no_normalisation(n_in_top):
    return np.where(np.asarray(n_in_top) > 0, 1.0, 0.0)


def audit_spectral_init(trials: int = 4000, *, epsilon: float = 2.0, delta: float = 1e-5,
                        broken: bool = False, break_kind: str = "normalisation",
                        break_factor: float | None = None, n_users: int = 24,
                        n_items: int = 8, per_user: int = 3, canary_items: int | None = None,
                        confidence: float = 0.95, seed: int = 0, data_seed: int = 0,
                        batch: int = 2000) -> AuditResult:
    """Audit the spectral start's release ``Ĉ = Σ_j x_j x_jᵀ + E``
    (``dpmt.solvers.spectral_init.cooccurrence`` then ``release``, the noisy Gramian's
    symmetric noise), K = ``n_items`` (every item; the top-K choice reads the released
    counts, public here).

    Other users rate ``per_user`` random items. Canary (real run): one item, so
    ``x x_ᵀ = e_i e_iᵀ`` and the upper triangle's change has norm exactly the sensitivity 1
    (``details['canary_norm_over_sensitivity']`` = 1; a canary with s items gives
    √((s+1)/(2s)) ≤ 1). Noise calibrated with ``dpmt.privacy.calibrate`` for one release at
    (``epsilon``, ``delta``). Score: projection of the release's upper triangle onto the
    canary's exact contribution (the likelihood-ratio statistic), tested at the midpoint of
    the noiseless projections (GDP audit).

    Broken twins, by ``break_kind``:

    * ``"normalisation"``: the 1/√|S_j| normalisation disabled (every x_jk = 1) while the
      noise stays calibrated to sensitivity 1, and a canary rating all ``n_items`` items
      (``‖T(ΔC)‖ = √(s(s+1)/2)``);
    * ``"duplicates"``: the one-rating-per-(user, item) rule not enforced: the canary rates
      one item twice and another once, so ``x = (2, 1)/√3`` and ``‖T(ΔC)‖ = √21/3 ≈ 1.53``
      × the sensitivity;
    * ``"noise"``: noise ``break_factor`` times the calibrated (sensitivity error
      1/``break_factor``).
    """
    import jax
    import jax.numpy as jnp

    from dpmt.solvers import spectral_init as si

    if break_kind not in ("normalisation", "duplicates", "noise"):
        raise ConfigError("spectral break_kind must be normalisation, duplicates or noise "
                          f"(got {break_kind!r})")
    trials = _check_trials(trials)
    kind = break_kind if broken else None
    rng = np.random.default_rng(data_seed)
    users, items = _base_ratings(rng, n_users, n_items, per_user)
    s = (n_items if kind == "normalisation" else 1) if canary_items is None \
        else int(canary_items)
    c_items = rng.choice(n_items, s, replace=False)
    if kind == "duplicates":
        c_items = rng.choice(n_items, 2, replace=False)[[0, 0, 1]]
        s = 3
    users2 = np.concatenate([users, np.full(s, n_users)])
    items2 = np.concatenate([items, c_items])
    top = si.top_items(np.bincount(items, minlength=n_items), n_items)
    patch = (mock.patch.object(si, "_user_scale", _no_normalisation)
             if kind == "normalisation" else contextlib.nullcontext())
    with patch:
        C1 = si.cooccurrence(users, items, n_users, top)
        C2 = si.cooccurrence(users2, items2, n_users + 1, top)
    sens = si.spectral_sensitivity()
    rel, claimed = _calibrated_release("spectral_init", sens, epsilon, delta)
    f = float(break_factor if break_factor is not None else 0.1) if kind == "noise" else 1.0
    check_range("break_factor", f, low=0.0, low_open=True)
    sigma = rel.noise_std * f
    direction = (C2 - C1) * np.triu(np.ones((n_items, n_items)))
    realised = float(np.linalg.norm(direction))
    d = jnp.asarray(direction, jnp.float32)
    fn = _spectral_score_fn()

    def scores_for(C, key):
        return _batched(lambda ks: fn(jnp.asarray(C, jnp.float32), ks, jnp.float32(sigma), d),
                        jax.random.split(key, trials), batch)

    s_out, s_in = _out_and_in(scores_for, C1, C2, seed)
    details = _gaussian_details(sens, sigma, realised, f, canary_items=s)
    kinds = {"normalisation": "1/sqrt(|S_j|) normalisation disabled",
             "duplicates": "duplicate (user, item) ratings kept", "noise": f"noise x{f:g}"}
    return _result("spectral start (noisy top-K co-occurrence)", broken,
                   kinds.get(kind, ""), claimed, delta, trials, s_in, s_out,
                   confidence, details, gaussian=True,
                   threshold=midpoint_threshold(C2, C1, direction))


# ----------------------------------------------------------------------------------------
# The private fold-in choice
# ----------------------------------------------------------------------------------------
def audit_fold_in_choice(trials: int = 4000, *, epsilon: float = 2.0, delta: float = 1e-5,
                         broken: bool = False, break_kind: str = "noise",
                         break_factor: float | None = None, n_users: int = 30,
                         n_items: int = 12, per_user: int = 4, confidence: float = 0.95,
                         seed: int = 0, data_seed: int = 0) -> AuditResult:
    """Audit the fold-in choice's release ``S̃ = S + N(0, σ² I_K)``, S_c = Σ_j r_jc
    (``dpmt.train.fold_in_choice.recall_sums`` over the K candidates' scorers, the noise from
    ``dpmt.solvers.noise.normal`` as in training), calibrated for one release at
    (``epsilon``, ``delta``) with sensitivity ``fold_in_choice.sensitivity()`` = √K.

    ``n_items`` ≤ 20, so every item is in a user's top 20 and a user with a target scores
    recall 1 under every candidate. Canary (real run): ``per_user`` items with ≥ 1 target
    under the keyed split, so S moves by (1, …, 1): norm √K, the sensitivity
    (``details['canary_norm_over_sensitivity']`` = 1). Score: projection of S̃ onto that
    move, tested at the midpoint of the noiseless projections (GDP audit).

    Broken twins, by ``break_kind``: ``"unnormalised"`` — each user adds their hits, not
    hits / min(20, |T_j|), with a canary of 6 targets (×6); ``"noise"`` — noise
    ``break_factor`` times the calibrated.
    """
    import jax

    from dpmt.config import TrainConfig
    from dpmt.solvers import noise as sampler
    from dpmt.train import fold_in_choice as fc

    if break_kind not in ("unnormalised", "noise"):
        raise ConfigError("fold-in break_kind must be unnormalised or noise "
                          f"(got {break_kind!r})")
    trials = _check_trials(trials)
    kind = break_kind if broken else None
    rng = np.random.default_rng(data_seed)
    users, items = _base_ratings(rng, n_users, n_items, per_user)
    want = 6 if kind == "unnormalised" else 1
    size = n_items if kind == "unnormalised" else per_user
    for key in range(20231, 21231):        # a split key giving the canary ≥ ``want``
        c_items = rng.choice(n_items, size, replace=False)      # targets and a history
        plus = _ratings(np.r_[users, np.full(c_items.size, n_users)], np.r_[items, c_items],
                        np.ones(users.size + c_items.size, np.float32), n_users + 1, n_items)
        n_t = int(fc.target_mask(plus, key)[users.size:].sum())
        if want <= n_t < size:
            break
    else:                                                       # pragma: no cover
        raise RuntimeError("no canary with the wanted number of targets")
    base = _ratings(users, items, np.ones(users.size, np.float32), n_users, n_items)
    V = rng.normal(size=(n_items, 4)).astype(np.float32)
    cfg = TrainConfig(dim=4, reg=3.0, gravity=0.5)
    cands = fc.candidates(cfg.reg, cfg.gravity)
    patch = (mock.patch.object(fc, "user_recall", lambda hits, n_t: hits)   # no 1/min(20, |T|)
             if kind == "unnormalised" else contextlib.nullcontext())
    with patch:
        S1 = fc.recall_sums(V, None, cfg.user_clip, cands, base, key)
        S2 = fc.recall_sums(V, None, cfg.user_clip, cands, plus, key)
    sens = fc.sensitivity()
    rel, claimed = _calibrated_release("fold_in_choice", sens, epsilon, delta)
    f = float(break_factor if break_factor is not None else 0.1) if kind == "noise" else 1.0
    check_range("break_factor", f, low=0.0, low_open=True)
    sigma = rel.noise_std * f
    direction = S2 - S1
    realised = float(np.linalg.norm(direction))
    normals = jax.jit(jax.vmap(lambda k: sampler.normal(k, (fc.N_CANDIDATES,))))

    def scores_for(S, k):
        z = np.asarray(normals(jax.random.split(k, trials)), np.float64)
        return (S[None, :] + sigma * z) @ direction

    s_out, s_in = _out_and_in(scores_for, S1, S2, seed)
    details = _gaussian_details(sens, sigma, realised, f, canary_targets=n_t)
    kinds = {"unnormalised": "recall not normalised (hits)", "noise": f"noise x{f:g}"}
    return _result("fold-in choice (summed recalls of K candidates)", broken,
                   kinds.get(kind, ""), claimed, delta, trials, s_in, s_out, confidence,
                   details, gaussian=True, threshold=midpoint_threshold(S2, S1, direction))


# ----------------------------------------------------------------------------------------
# Noisy GD (per-user clipping)
# ----------------------------------------------------------------------------------------
def audit_noisy_gd(trials: int = 4000, *, epsilon: float = 2.0, delta: float = 1e-5,
                   broken: bool = False, break_factor: float | None = None,
                   clip_norm: float = 1.0, n_users: int = 16,
                   n_items: int = 8, dim: int = 3, per_user: int = 3,
                   canary_norm: float = 100.0, disabled_clip: float = 1e6,
                   sampling_rate: float | None = None, confidence: float = 0.95,
                   seed: int = 0, data_seed: int = 0, batch: int = 2000) -> AuditResult:
    """Audit one noisy-GD gradient release (``noisy_gradient``, embedding encoder, task
    layout): the noisy sum of per-user clipped gradients, divided by the public ``n``.

    The canary has embedding norm ``canary_norm`` and labels ``−canary_norm²`` on every item,
    so its gradient norm is enormous; correct clipping bounds its contribution by ``G``. Every
    trial runs the real ``noisy_gradient`` (vmapped over keys), so the clipping code path is
    exercised on every release. The noise multiplier is calibrated for (``epsilon``, ``delta``)
    (with Poisson sampling at ``sampling_rate`` if given). Broken twin: clipping at
    ``break_factor``·G (default ``disabled_clip`` = 10⁶: clipping disabled; 1.5: a clip norm
    50% too large, true sensitivity 1.5× the claimed) while the noise stays ``z·G``. Score:
    projection of the released gradient onto the canary's contribution (difference of the
    exact clipped sums, i.e. the noiseless release, computed with the clip norm in use; with
    Poisson sampling, the canary's clipped gradient from ``clipped_gradient_sum`` with a
    one-hot user mask). GDP audit: without sampling, the test is fixed at the midpoint of the
    noiseless projections; with sampling, against the subsampled-Gaussian trade-off, the
    test fixed at ``median + c·σ̂`` of a pilot of ``trials/10`` extra releases on ``D``
    (the other users' sampling moves the score too; c from :func:`_subsampled_offset`), ε
    of μ from dpmt's accountant (``PoissonSampledDpEvent``).
    """
    import jax
    import jax.numpy as jnp

    from dpmt import weighting
    from dpmt.solvers.encoders import EmbeddingEncoder
    from dpmt.solvers.layout import task_layout
    from dpmt.solvers.noisy_gd import clipped_gradient_sum, noisy_gd_sensitivity, noisy_gradient

    trials = _check_trials(trials)
    rng = np.random.default_rng(data_seed)
    users, items = _base_ratings(rng, n_users, n_items, per_user)
    U = _clip_rows(rng.normal(size=(n_users, dim)), 1.0)
    y = rng.uniform(-1, 1, len(users))
    u_c = rng.normal(size=dim)
    u_c *= canary_norm / np.linalg.norm(u_c)
    users2 = np.concatenate([users, np.full(n_items, n_users)])
    items2 = np.concatenate([items, np.arange(n_items)])
    y2 = np.concatenate([y, np.full(n_items, -canary_norm ** 2)])
    counts = np.maximum(np.bincount(items, minlength=n_items), 1).astype(np.float64)
    w2 = weighting.normalized_user_weights(counts, users2, items2, mu=0.5, budget=4.0)
    w = w2[:len(users)]
    R1, R2 = _ratings(users, items, y, n_users, n_items), \
        _ratings(users2, items2, y2, n_users + 1, n_items)
    L1, L2 = task_layout(R1, dim=dim), task_layout(R2, dim=dim)
    X1 = jnp.asarray(U, jnp.float32)
    X2 = jnp.asarray(np.vstack([U, u_c]), jnp.float32)
    w1j, w2j = jnp.asarray(w, jnp.float32), jnp.asarray(w2, jnp.float32)
    y1j, y2j = jnp.asarray(y, jnp.float32), jnp.asarray(y2, jnp.float32)
    enc = EmbeddingEncoder(n_items, dim)
    params = enc.init(jax.random.PRNGKey(data_seed + 1))

    sens = noisy_gd_sensitivity(clip_norm)
    release, claimed = _calibrated_release("gd", sens, epsilon, delta, sampling_rate)
    z = release.noise_multiplier
    factor = float(disabled_clip if break_factor is None else break_factor)
    check_range("break_factor", factor, low=0.0, low_open=True)
    used_clip = clip_norm * factor if broken else clip_norm
    used_z = z * clip_norm / used_clip             # noise std z·G in both cases
    n_public = float(n_users)                      # a public constant, the same on D and D'

    nb = min(batch, trials)

    def releases(L, X, wj, yj, keys, z):
        # the public noisy_gradient, vmapped over keys: its scalars enter its jitted kernel
        # as traced values, so one compile per dataset serves every z and clip norm
        def one(k):
            return noisy_gradient(enc, params, L, X, wj, yj, k, clip_norm=used_clip,
                                  noise_multiplier=z, sampling_rate=sampling_rate,
                                  num_users=n_public)["params"]["embedding"]
        return _batched(jax.vmap(one), keys, nb)

    # exact clipped sums: the noiseless full-batch release (z = 0) times n
    k0 = jax.random.split(jax.random.PRNGKey(0), nb)
    threshold = None
    if sampling_rate is None:
        clean_in = releases(L2, X2, w2j, y2j, k0, 0.0)[0]
        clean_out = releases(L1, X1, w1j, y1j, k0, 0.0)[0]
        direction = (clean_in - clean_out) * n_public
        threshold = midpoint_threshold(clean_in, clean_out, direction)
    else:   # the canary's clipped gradient, from the real clipping code with a one-hot mask
        mask = np.zeros(n_users + 1, np.float32)
        mask[-1] = 1.0
        g, _ = clipped_gradient_sum(enc, params, L2, X2, w2j, y2j, used_clip,
                                    user_mask=mask)
        direction = np.asarray(g["params"]["embedding"], np.float64)

    def scores_for(L, X, wj, yj, key, n=trials):
        rel = releases(L, X, wj, yj, jax.random.split(key, n), used_z)
        return np.einsum("tij,ij->t", rel, direction)

    root = jax.random.PRNGKey(seed)
    if sampling_rate is not None:
        # the test, fixed before the audit's trials: a pilot of releases on D (independent
        # draws) locates the canary-free score; the offset maximises the asymptotic power
        pilot = scores_for(L1, X1, w1j, y1j, jax.random.fold_in(root, 2), max(trials // 10, 200))
        q25, q50, q75 = np.percentile(pilot, [25, 50, 75])
        mu_claim = 1.0 / z
        threshold = q50 + _subsampled_offset(sampling_rate, 1.25 * mu_claim, mu_claim,
                                             trials) * (q75 - q25) / 1.349
    s_out = scores_for(L1, X1, w1j, y1j, jax.random.fold_in(root, 0))
    s_in = scores_for(L2, X2, w2j, y2j, jax.random.fold_in(root, 1))
    V = np.asarray(params["params"]["embedding"], np.float64)
    resid = w2[len(users):] * (V[np.arange(n_items)] @ u_c - y2[len(users):])
    canary_grad_norm = float(np.linalg.norm(u_c) * np.linalg.norm(resid))
    contribution = float(np.linalg.norm(direction))
    details = {"sensitivity": sens, "noise_multiplier": z, "clip_norm_used": used_clip,
               "canary_gradient_norm": canary_grad_norm,
               "canary_contribution_norm": contribution,
               "sensitivity_ratio": contribution / sens, "sampling_rate": sampling_rate}
    name = "noisy GD step (clipped gradient sum)" + \
        (f", Poisson q={sampling_rate:g}" if sampling_rate else "")
    kind = "clipping disabled" if factor >= 1e3 else f"clipping at {factor:g}·G"
    eps_of_mu = None
    if sampling_rate is not None:
        from dpmt.privacy import Release, epsilon_of

        def eps_of_mu(mu):
            return epsilon_of([Release("gd", 1.0, 1.0 / mu, sampling_rate=sampling_rate)],
                              delta)
    return _result(name, broken, kind, claimed, delta, trials, s_in, s_out, confidence,
                   details, gaussian=True, threshold=threshold,
                   sampling_rate=sampling_rate or 1.0, epsilon_of_mu=eps_of_mu)


def _subsampled_offset(q: float, mu_alt: float, mu_claim: float, n: int) -> float:
    """The threshold c (in standard deviations above the canary-free mean) that maximises
    the asymptotic power of the subsampled-Gaussian GDP test ``μ_lb > mu_claim`` against
    ``mu_alt`` at ``n`` trials (a delta-method z-score on a grid; 1.1-1.2 for q = 0.5)."""
    from scipy import special, stats

    def mu_of(tpr, fpr):
        return -special.ndtri(fpr) + special.ndtri(np.clip((tpr - (1 - q) * fpr) / q, 1e-300,
                                                          1 - 1e-16))

    best, arg = -np.inf, 0.0
    for c in np.linspace(-1.0, 3.0, 81):
        fpr = stats.norm.sf(c)
        tpr = (1 - q) * fpr + q * stats.norm.sf(c - mu_alt)
        h = 1e-6
        d_t = (mu_of(tpr + h, fpr) - mu_of(tpr - h, fpr)) / (2 * h)
        d_f = (mu_of(tpr, fpr + h) - mu_of(tpr, fpr - h)) / (2 * h)
        se = math.sqrt((d_t ** 2 * tpr * (1 - tpr) + d_f ** 2 * fpr * (1 - fpr)) / n)
        if (mu_alt - mu_claim) / se > best:
            best, arg = (mu_alt - mu_claim) / se, float(c)
    return arg


# ----------------------------------------------------------------------------------------
# Private counts
# ----------------------------------------------------------------------------------------
def _no_cap(user_ids, k, rng):
    return np.ones(len(np.asarray(user_ids)), dtype=bool)


def _cap_at(k_used: int, cap):
    """``cap_per_user`` with the cap ``k_used`` whatever ``k`` the caller passes."""
    def capped(user_ids, k, rng):
        return cap(user_ids, k_used, rng)
    return capped


def _discrete_gaussian_sampler(sigma: float):
    """Vectorised N_Z(0, σ²) draws by inverse CDF on the library's pmf
    (``dpmt.privacy.discrete_gaussian.discrete_gaussian_pmf``), support ±14σ (tail mass
    < 1e-43): ``draw(rng, shape)``."""
    from dpmt.privacy.discrete_gaussian import discrete_gaussian_pmf

    half = int(math.ceil(14 * sigma)) + 1
    xs = np.arange(-half, half + 1)
    cdf = np.cumsum(discrete_gaussian_pmf(sigma, xs))
    cdf /= cdf[-1]

    def draw(rng: np.random.Generator, shape) -> np.ndarray:
        return xs[np.minimum(np.searchsorted(cdf, rng.random(shape), side="right"),
                             len(xs) - 1)]
    return draw


def audit_counts(trials: int = 4000, *, epsilon: float = 2.0, delta: float = 1e-5,
                 broken: bool = False, break_kind: str = "no_cap",
                 break_factor: float | None = None, k: int = 2,
                 canary_items: int | None = None, include_user_count: bool = True,
                 n_items: int | None = None, base_count: int = 12, n_real: int = 20,
                 confidence: float = 0.95, seed: int = 0, data_seed: int = 0) -> AuditResult:
    """Audit ``dpmt.privacy.private_counts`` (capped item histogram, plus the user count,
    discrete Gaussian noise).

    Other users rate exactly ``k`` items each (so their capping keeps everything), giving
    every item about ``base_count`` ratings (so the clamp at 1 rarely acts); ``n_items``
    defaults to ``100·k``, the same dataset for the real audit and the twins. Canary: rates
    ``canary_items`` items (default ``k``: its capped contribution is then deterministic and
    has norm exactly √(k+1), the claimed sensitivity; with more items the cap keeps a random
    ``k`` of them). σ is calibrated for (``epsilon``, ``delta``) for the counts' discrete
    Gaussian release (k (+1) coordinates, step 1); the claimed ε is that of the
    :class:`~dpmt.privacy.Release` the real ``private_counts`` returns.

    Trials: the first ``n_real`` per dataset call the real ``private_counts`` (its capping and
    its exact discrete Gaussian sampler); the rest use a vectorised replica that caps the
    canary's ratings in every trial at once with the real
    ``dpmt.privacy.mechanisms.cap_per_user`` (the trials stacked as distinct users) and draws
    N_Z(0, σ²) by inverse CDF on the library's pmf (the exact sampler is pure Python, ~25,000
    draws a second) on the coordinates the score reads, clamping at 1 as ``private_counts``
    does. Score: the sum of the released counts over the canary's items (+ the user count) —
    the projection onto the canary's uncapped contribution; GDP audit with the test fixed at
    the midpoint of the noiseless (capped, clamped) projections. (The discrete Gaussian with
    an integer shift is within the continuous one's trade-off to far below the audit's
    resolution at these σ ≈ 3.5: Canonne, Kamath & Steinke 2020.)

    Broken twins, by ``break_kind``:

    * ``"no_cap"``: the cap disabled (``cap_per_user`` patched to keep everything) and, by
      default, a canary rating ``100·k`` items;
    * ``"cap"``: the cap applied at ``round(break_factor·k)`` items (default 3: 6 instead of
      2) while the sensitivity stays √(k+1), and a canary rating that many items: true
      sensitivity √((k' + 1)/(k + 1)) × the claimed (1.53 for k = 2, k' = 6; "cap k + 50%",
      k' = 3, is 1.15);
    * ``"noise"``: noise ``break_factor`` times the calibrated while the ledger records the
      calibrated σ (sensitivity error 1/``break_factor``).
    """
    import random

    from dpmt.privacy import count_sensitivity, epsilon_of
    from dpmt.privacy import mechanisms

    if break_kind not in ("no_cap", "cap", "noise"):
        raise ConfigError(f"counts break_kind must be no_cap, cap or noise (got {break_kind!r})")
    kind = break_kind if broken else None
    trials = _check_trials(trials)
    check_range("n_real", n_real, low=1, integer=True)
    n_real = min(int(n_real), trials)
    k_used = int(round(float(break_factor if break_factor is not None else 3.0) * k)) \
        if kind == "cap" else k
    check_range("cap used", k_used, low=1, integer=True)
    if canary_items is None:
        canary_items = {"no_cap": 100 * k, "cap": k_used}.get(kind, k)
    if n_items is None:
        n_items = max(canary_items, 100 * k)
    if canary_items > n_items:
        raise ConfigError(f"canary_items ({canary_items}) must be <= n_items ({n_items})")
    noise_f = float(break_factor if break_factor is not None else 0.1) \
        if kind == "noise" else 1.0
    check_range("break_factor", noise_f, low=0.0, low_open=True)
    rng = np.random.default_rng(data_seed)
    n_users = max(1, -(-n_items * base_count // k))
    users, items = _base_ratings(rng, n_users, n_items, k)
    c_items = rng.choice(n_items, canary_items, replace=False)
    users2 = np.concatenate([users, np.full(canary_items, n_users)])
    items2 = np.concatenate([items, c_items])

    sens = count_sensitivity(k, include_user_count)
    coords = k + (1 if include_user_count else 0)
    release_cal, _ = _calibrated_release("item_counts", sens, epsilon, delta,
                                         mechanism="discrete_gaussian", coordinates=coords,
                                         step=1)
    sigma = release_cal.noise_std * noise_f
    direction = np.zeros(n_items + (1 if include_user_count else 0))
    direction[c_items] = 1.0
    if include_user_count:
        direction[-1] = 1.0
    support = np.flatnonzero(direction)
    draw = _discrete_gaussian_sampler(sigma)

    if kind == "no_cap":
        patch = mock.patch.object(mechanisms, "cap_per_user", _no_cap)
    elif kind == "cap":
        patch = mock.patch.object(mechanisms, "cap_per_user",
                                  _cap_at(k_used, mechanisms.cap_per_user))
    else:
        patch = contextlib.nullcontext()
    claimed_release = None
    with patch:
        def real(u, i, ss):
            nonlocal claimed_release
            cap_seed, noise_seed = ss.spawn(2)
            out = mechanisms.private_counts(
                u, i, n_items, k=k, noise_std=sigma, cap_rng=np.random.default_rng(cap_seed),
                noise_rng=random.Random(int(noise_seed.generate_state(2, np.uint64)[0])),
                include_user_count=include_user_count)
            claimed_release = out[-1]
            vec = np.append(out[0], out[1]) if include_user_count else out[0]
            return float(np.asarray(vec, np.float64) @ direction)

        def clean(u, i):
            # the noiseless release: the capped histogram (+ n), clamped at 1
            keep = mechanisms.cap_per_user(u, k, np.random.default_rng(7))
            h = np.bincount(i[keep], minlength=n_items).astype(np.float64)
            if include_user_count:
                h = np.append(h, float(len(np.unique(u))))
            return np.maximum(h, 1.0)

        def replica(u, i, n_trials, ss):
            # every trial's capped histogram on the score's coordinates: others are never
            # capped (k items each); the canary's ratings are capped in all trials at once by
            # the real cap_per_user
            g_base, g_cap, g_noise = (np.random.default_rng(x) for x in ss.spawn(3))
            assert mechanisms.cap_per_user(users, k, g_base).all()
            base = np.bincount(items, minlength=n_items).astype(np.float64)
            if include_user_count:
                base = np.append(base, float(n_users))
            hists = np.broadcast_to(base[support], (n_trials, len(support))).copy()
            is_c = u == n_users
            if is_c.any():
                ci = i[is_c]
                tu = np.repeat(np.arange(n_trials), len(ci))
                ti = np.tile(ci, n_trials)
                keep = mechanisms.cap_per_user(tu, k, g_cap)
                add = np.bincount(tu[keep] * n_items + ti[keep],
                                  minlength=n_trials * n_items).reshape(n_trials, n_items)
                hists[:, :len(support) - (1 if include_user_count else 0)] += \
                    add[:, support[support < n_items]]
                if include_user_count:
                    hists[:, -1] += 1.0
            noisy = np.maximum(hists + draw(g_noise, hists.shape), 1.0)
            return noisy.sum(axis=1)          # the direction is 1 on its support

        def run(u, i, tag):
            ss = np.random.SeedSequence([seed, tag])
            s_real, s_rep = ss.spawn(2)
            scores = [np.array([real(u, i, x) for x in s_real.spawn(n_real)])]
            rest = trials - n_real
            for c, (start, x) in enumerate(zip(range(0, rest, _CHUNK),
                                               s_rep.spawn(-(-rest // _CHUNK)))):
                scores.append(replica(u, i, min(_CHUNK, rest - start), x))
            return np.concatenate(scores)

        threshold = midpoint_threshold(clean(users2, items2), clean(users, items), direction)
        kept = int(mechanisms.cap_per_user(np.zeros(canary_items, np.int64), k,
                                           np.random.default_rng(7)).sum())
        s_out = run(users, items, 0)
        s_in = run(users2, items2, 1)
    if kind == "noise":     # the noise is too small, the ledger still says the calibrated σ
        claimed_release = dataclasses.replace(claimed_release,
                                              noise_std=release_cal.noise_std)
    claimed = epsilon_of([claimed_release], delta)
    details = {"sensitivity": claimed_release.sensitivity, "noise_std": sigma, "k": k,
               "cap_used": k_used, "canary_items": canary_items, "n_real": n_real,
               "noise_multiplier": claimed_release.noise_multiplier,
               "mechanism": claimed_release.mechanism,
               "sensitivity_ratio": math.sqrt(kept + (1 if include_user_count else 0))
               / claimed_release.sensitivity / noise_f}
    kinds = {"no_cap": "per-user cap disabled",
             "cap": f"cap at {k_used} items instead of {k}", "noise": f"noise x{noise_f:g}"}
    return _result("private counts (capped histogram + user count)" if include_user_count
                   else "private counts (capped histogram)", broken,
                   kinds.get(kind, ""), claimed, delta, trials, s_in, s_out, confidence,
                   details, gaussian=True, threshold=threshold)


# ----------------------------------------------------------------------------------------
# Exact ε of a pair of product-Bernoulli release distributions (the online mechanisms)
# ----------------------------------------------------------------------------------------
def pair_epsilon(p_in, p_out, delta: float, *, interval: float = 1e-4
                 ) -> tuple[float, float]:
    """Exact ε at ``delta`` between the two distributions of independent bits with
    ``P[bit_t = 1] = p_in[t]`` / ``p_out[t]`` (both orders), as (optimistic, pessimistic)
    estimates of dp_accounting's privacy-loss distribution (discretisation ``interval``;
    rounds with equal probabilities are grouped and self-composed). This is the true ε of
    the canary pair an online audit samples from: the most any audit of that pair could
    certify, whatever the number of trials."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    groups: dict[tuple[float, float], int] = {}
    for a, b in zip(np.asarray(p_in, np.float64), np.asarray(p_out, np.float64)):
        if a != b:
            groups[(float(a), float(b))] = groups.get((float(a), float(b)), 0) + 1
    out = []
    for pessimistic in (False, True):
        total = None
        for (a, b), count in groups.items():
            upper = {o: float(np.log(p)) for o, p in ((1, a), (0, 1 - a)) if p > 0}
            lower = {o: float(np.log(p)) for o, p in ((1, b), (0, 1 - b)) if p > 0}
            pld = pld_lib.from_two_probability_mass_functions(
                lower, upper, pessimistic_estimate=pessimistic,
                value_discretization_interval=interval, symmetric=False)
            if count > 1:
                pld = pld.self_compose(count)
            total = pld if total is None else total.compose(pld)
        out.append(0.0 if total is None else float(total.get_epsilon_for_delta(delta)))
    return out[0], out[1]


# ----------------------------------------------------------------------------------------
# Online: Mirror
# ----------------------------------------------------------------------------------------
def audit_mirror(trials: int = 4000, *, a: float = 1.0, b: float = 1e-5, D: int = 2,
                 broken: bool = False, broken_factor: float = 10.0, n_real: int = 100,
                 confidence: float = 0.95, seed: int = 0, exact: bool = False) -> AuditResult:
    """Audit ``Mirror(a, b, D)`` on activity-sequence neighbours.

    Neighbours: every round active, versus the first round inactive (the active index of
    every later round shifts by one, which exposes the whole ramp). Release: the answers on
    all rounds but the first. Score: exact log-likelihood ratio of the answers, from
    ``Mirror.top_probabilities`` of the two sequences. The first ``n_real`` trials per
    sequence step a real :class:`~dpmt.online.mirror.Mirror` (its own coins); the rest draw
    the answers vectorised from the same probabilities. Claimed (ε, δ) = ``Mirror.privacy()``.
    Broken twin: the ramp ``mirror_window(broken_factor·a, b)`` relabelled as meeting ``a``
    (a window that is too short; its true ε at the claimed δ is ≈ ``broken_factor``·a, the
    ramp's accounting being tight). ``exact``: also the exact ε at the claimed δ of the two
    answer distributions (:func:`pair_epsilon`, ``details['pair_epsilon']``).
    """
    from dpmt.online.mirror import Mirror, mirror_window

    trials = _check_trials(trials)
    n_real = min(int(n_real), trials)
    design = mirror_window(float(a), float(b))
    if broken:
        design = dataclasses.replace(mirror_window(float(broken_factor * a), float(b)), a=a)
    L = D + design.W + 3
    seq_in = np.ones(L, bool)
    seq_out = seq_in.copy()
    seq_out[0] = False
    probe = Mirror(a, b, D, seed=0, design=design)
    claimed_eps, claimed_delta = probe.privacy()
    q_in = probe.top_probabilities(seq_in)[1:]
    q_out = probe.top_probabilities(seq_out)[1:]
    rng = np.random.default_rng(seed)

    def run(seq, q, tag):
        real = np.empty((n_real, L - 1), bool)
        for r in range(n_real):
            m = Mirror(a, b, D, seed=[seed, tag, r], design=design)
            real[r] = [m.step(bool(x)) for x in seq][1:]
        out = [bernoulli_llr(real, q_in, q_out)]
        rest = trials - n_real
        for start in range(0, rest, _CHUNK):
            bits = rng.random((min(_CHUNK, rest - start), L - 1)) < q
            out.append(bernoulli_llr(bits, q_in, q_out))
        return np.concatenate(out)

    s_in = run(seq_in, q_in, 1)
    s_out = run(seq_out, q_out, 0)
    details = {"W": design.W, "D": D, "ramp_a": design.a if not broken else broken_factor * a,
               "n_real": n_real, "design_delta": design.delta}
    if exact:
        details["pair_epsilon"] = pair_epsilon(q_in, q_out, claimed_delta)
    return _result("online Mirror (activity neighbours)", broken,
                   f"ramp for {broken_factor:g}·a", claimed_eps, claimed_delta, trials,
                   s_in, s_out, confidence, details)


# ----------------------------------------------------------------------------------------
# Online: Combine_D
# ----------------------------------------------------------------------------------------
def audit_combiner(trials: int = 4000, *, epsilon: float = 2.0, delta: float = 1e-5,
                   broken: bool = False, broken_D: int = 1, rounds: int | None = None,
                   n_real: int = 20, confidence: float = 0.95, seed: int = 0,
                   exact: bool = False) -> AuditResult:
    """Audit ``Combine_D`` (``dpmt.online.combiner.Combiner``) on neighbouring streams.

    Streams of triples ``(u_t, v_t, y_t)``: round 0 is ``(1, 0, 1)`` in one stream and
    ``(1, 0, 0)`` in the other (``c1`` and ``c2`` each move by one, the most one triple can
    change); every later round is a disagreement ``(1, 0, y)`` with ``y`` alternating, which
    keeps the choice probability near 1/2 where each round is most informative. Release: the
    choices on rounds ≥ 1. Score: exact log-likelihood ratio from ``prob_first`` on the two
    (deterministic) counter sequences. ``D = combiner_min_D(epsilon, delta)`` and the claim is
    ``Combiner.privacy()``. The first ``n_real`` trials per stream run a real ``Combiner``.
    Broken twin: ``D = broken_D`` while claiming the ε of the ``D`` Lemma 13 needs. Lemma
    13's Bernstein bound is loose: the exact ε of this canary pair at ``D_ok`` is far below
    the claim (``exact=True``: :func:`pair_epsilon`, ``details['pair_epsilon']``; 1.95 at
    D = 24, 2.9 at D = 12 for the claim 2, see docs/audit_power.md), so only D ≪ D_ok
    violates it.
    """
    from dpmt.online.combiner import Combiner, combiner_epsilon, combiner_min_D, prob_first

    trials = _check_trials(trials)
    n_real = min(int(n_real), trials)
    D_ok = combiner_min_D(epsilon, delta)
    claimed_eps, claimed_delta = Combiner(D_ok, epsilon, delta).privacy()
    D_run = broken_D if broken else D_ok
    eps_run = combiner_epsilon(D_run, delta) if broken else epsilon
    T = int(rounds) if rounds is not None else int(min(4 * D_run + 50, 4000))
    ys_tail = (np.arange(T) % 2 == 0).astype(int)          # 1, 0, 1, 0, ...

    def probs(y0):
        c1, c2 = (1, 0) if y0 == 1 else (0, 1)
        p = np.empty(T)
        for t in range(T):
            p[t] = prob_first(c1, c2, D_run)
            if ys_tail[t] == 1:
                c1 += 1
            else:
                c2 += 1
        return p

    p_in, p_out = probs(1), probs(0)
    rng = np.random.default_rng(seed)

    def run(y0, p, tag):
        real = np.empty((n_real, T), bool)
        for r in range(n_real):
            c = Combiner(D_run, eps_run, delta, seed=[seed, tag, r])
            c.choose(1, 0)
            c.observe(y0)
            for t in range(T):
                real[r, t] = c.choose(1, 0) == 1
                c.observe(int(ys_tail[t]))
        out = [bernoulli_llr(real, p_in, p_out)]
        rest = trials - n_real
        for start in range(0, rest, _CHUNK):
            bits = rng.random((min(_CHUNK, rest - start), T)) < p
            out.append(bernoulli_llr(bits, p_in, p_out))
        return np.concatenate(out)

    s_in = run(1, p_in, 1)
    s_out = run(0, p_out, 0)
    details = {"D_required": D_ok, "D_used": D_run, "rounds": T, "n_real": n_real}
    if exact:
        details["pair_epsilon"] = pair_epsilon(p_in, p_out, claimed_delta)
    return _result("online Combine_D (one triple changed)", broken,
                   f"D={broken_D} instead of {D_ok}", claimed_eps, claimed_delta, trials,
                   s_in, s_out, confidence, details)


#: name -> (audit function, default keyword arguments of the real run)
MECHANISMS = {
    "ssp_A": (audit_ssp, {"statistic": "A"}),
    "ssp_b": (audit_ssp, {"statistic": "b"}),
    "noisy_gd": (audit_noisy_gd, {}),
    "noisy_gd_poisson": (audit_noisy_gd, {"sampling_rate": 0.5}),
    "counts": (audit_counts, {}),
    "spectral_init": (audit_spectral_init, {}),
    "fold_in_choice": (audit_fold_in_choice, {}),
    "mirror": (audit_mirror, {}),
    "combiner": (audit_combiner, {}),
}

#: name -> {twin: keyword arguments of the broken twin (with ``broken=True``)}. "gross": the
#: original twins (noise ×0.1, clipping / cap / normalisation off, a 10× ramp, D = 1);
#: "subtle": a true sensitivity 1.41-1.53× the claimed one for the Gaussian mechanisms
#: (caught at the test size, 4,000 trials), for the online ones the smallest break caught at
#: 10,000 trials (true ε 5× / 3.2× the claimed; the threshold audit they need is weaker);
#: "finest": 1.1-1.25× (Gaussian), 4× / 2.2× (online), caught at the full size, 50,000
#: (make test-slow). docs/audit_power.md: the measured power and the exact ε of each twin.
TWINS = {
    "ssp_A": {"gross": {"break_kind": "noise", "break_factor": 0.1},
              "subtle": {"break_kind": "weights", "break_factor": 2.0},      # r = √2
              "finest": {"break_kind": "weights", "break_factor": 1.21}},    # r = 1.1
    "ssp_b": {"gross": {"break_kind": "noise", "break_factor": 0.1},
              "subtle": {"break_kind": "clip", "break_factor": 1.5},         # r = 1.5
              "finest": {"break_kind": "clip", "break_factor": 1.1}},        # r = 1.1
    "noisy_gd": {"gross": {},                                                # clip 10⁶·G
                 "subtle": {"break_factor": 1.5},                            # r = 1.5
                 "finest": {"break_factor": 1.1}},
    "noisy_gd_poisson": {"gross": {}, "subtle": {"break_factor": 1.5},
                         "finest": {"break_factor": 1.25}},
    "counts": {"gross": {"break_kind": "no_cap"},
               "subtle": {"break_kind": "cap", "break_factor": 3.0},         # r = 1.53
               "finest": {"break_kind": "cap", "break_factor": 1.5}},        # cap 3: r = 1.15
    "spectral_init": {"gross": {"break_kind": "normalisation"},
                      "subtle": {"break_kind": "duplicates"},                # r = 1.53
                      "finest": {"break_kind": "noise", "break_factor": 1 / 1.1}},
    "fold_in_choice": {"gross": {"break_kind": "unnormalised"},                # r = 6
                       "subtle": {"break_kind": "noise", "break_factor": 1 / 1.5},
                       "finest": {"break_kind": "noise", "break_factor": 1 / 1.1}},
    "mirror": {"gross": {"broken_factor": 10.0},                             # true ε 10×
               "subtle": {"broken_factor": 5.0},                             # 5×
               "finest": {"broken_factor": 4.0}},                            # 4×
    "combiner": {"gross": {"broken_D": 1},                                   # true ε 10.4
                 "subtle": {"broken_D": 3},                                  # 6.4
                 "finest": {"broken_D": 6}},                                 # 4.4
}


def run_audit(name: str, trials: int, *, twin: str | None = None, confidence: float = 0.95,
              seed: int = 0, **kwargs) -> AuditResult:
    """The audit ``name`` of :data:`MECHANISMS` (``twin=None``) or one of its broken twins
    (a key of :data:`TWINS` ``[name]``)."""
    if name not in MECHANISMS:
        raise ConfigError(f"unknown mechanism {name!r}; known: {', '.join(MECHANISMS)}")
    fn, kw = MECHANISMS[name]
    if twin is not None:
        if twin not in TWINS[name]:
            raise ConfigError(f"unknown twin {twin!r} of {name}; known: "
                              f"{', '.join(TWINS[name])}")
        kw = {**kw, **TWINS[name][twin], "broken": True}
    return fn(trials, confidence=confidence, seed=seed, **{**kw, **kwargs})


def run_all(trials: int = 50_000, *, confidence: float = 0.95, seed: int = 0,
            mechanisms: list[str] | None = None, twins: tuple[str, ...] = ("gross", "subtle"),
            progress=None) -> list[tuple[AuditResult, AuditResult]]:
    """Every audit in :data:`MECHANISMS` and its broken twins, as (real, twin) pairs (one
    pair per twin kind in ``twins``, the real audit run once)."""
    out = []
    for name in mechanisms or list(MECHANISMS):
        real = run_audit(name, trials, confidence=confidence, seed=seed)
        for kind in twins:
            pair = (real, run_audit(name, trials, twin=kind, confidence=confidence,
                                    seed=seed))
            if progress is not None:
                progress(name, pair)
            out.append(pair)
    return out


def repeat_rates(name: str, repeats: int, trials: int = 4000, *,
                 real_confidence: float = 0.99, twin_confidence: float = 0.95,
                 twin: str = "gross", **kwargs) -> dict[str, float]:
    """Run the audit ``name`` and its twin with seeds ``0..repeats-1`` (same dataset, fresh
    randomness): the empirical false-failure rates of the two tests (real audit: ``ε_lb >
    claimed``; twin: ``ε_lb ≤ claimed``) and the extreme bounds."""
    real = [run_audit(name, trials, confidence=real_confidence, seed=s, **kwargs)
            for s in range(repeats)]
    tw = [run_audit(name, trials, twin=twin, confidence=twin_confidence, seed=s, **kwargs)
          for s in range(repeats)]
    return {"mechanism": name, "twin": twin, "repeats": repeats, "trials": trials,
            "real_confidence": real_confidence, "twin_confidence": twin_confidence,
            "claimed": real[0].claimed_epsilon,
            "real_false_failures": sum(not r.passed for r in real),
            "twin_misses": sum(r.passed for r in tw),
            "real_lb_max": max(r.epsilon_lb for r in real),
            "real_lb_mean": float(np.mean([r.epsilon_lb for r in real])),
            "real_lb_sd": float(np.std([r.epsilon_lb for r in real])),
            "twin_lb_min": min(r.epsilon_lb for r in tw),
            "twin_lb_mean": float(np.mean([r.epsilon_lb for r in tw])),
            "twin_lb_sd": float(np.std([r.epsilon_lb for r in tw]))}
