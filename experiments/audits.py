"""Empirical privacy audits of dpmt's mechanisms: canary datasets, broken twins, runners.

Each ``audit_*`` builds two neighbouring datasets (privacy unit: one user, add/remove-one,
or the online neighbour relation), runs the mechanism many times on each, reduces every
release to a likelihood-ratio score for the canary, and bounds ε with the generic
statistics of :mod:`dpmt.audit` (:func:`~dpmt.audit.epsilon_lower_bound`; see that module
for the method). This is an audit harness, outside the ``dpmt`` package; run it with
``scripts/privacy_audit.py``.

**Audited mechanisms** (each ``audit_*`` returns an :class:`~dpmt.audit.AuditResult`;
``broken=True`` runs the deliberately broken twin, which an audit must catch, i.e.
``ε_lb > claimed ε``):

* :func:`audit_ssp` — the SSP item step's release of the stacked ``{Â_i}`` (or ``{b̂_i}``),
  ``dpmt.solvers.ssp.privatize_statistics`` on exact statistics from
  ``weighted_statistics`` (canary ``u = C e₁``, weights with ``Σ_i w² = β``, label ``y_max``).
  Twin: noise 10× smaller than calibrated.
* :func:`audit_noisy_gd` — the noisy clipped gradient sum of
  ``dpmt.solvers.noisy_gd.noisy_gradient`` (run once per trial, vmapped: the real per-user
  clipping code path every time); canary with a huge gradient. Twin: clipping disabled (clip
  norm 10⁶·G) with the noise still scaled to G. Also with Poisson sampling of users
  (``sampling_rate``: the DP-SGD variant, claim from ``PoissonSampledDpEvent``).
* :func:`audit_counts` — ``dpmt.privacy.private_counts`` with the user count; canary rating
  ``k`` items (tight), or many items. Twin: per-user cap disabled and a canary rating 100·k
  items.
* :func:`audit_spectral_init` — the spectral start's noisy co-occurrence
  (``dpmt.solvers.spectral_init``: ``cooccurrence`` then ``release``); canary rating one item
  (tight). Twin: the 1/√|S_j| normalisation disabled and a canary rating every item.
* :func:`audit_mirror` — ``dpmt.online.mirror.Mirror``: activity-sequence neighbours (one
  round's activity bit flipped), release = the answers on all other rounds, score = exact
  log-likelihood ratio. Twin: a ramp designed for 10·a presented as meeting a.
* :func:`audit_combiner` — ``dpmt.online.combiner.Combiner``: streams differing in one
  triple's label (each counter moves by one), release = the choices on the other rounds,
  score = exact log-likelihood ratio. Twin: ``D = 1`` while claiming the ε of the ``D``
  Lemma 13 requires.

Exact (un-noised) statistics are deterministic, so for SSP the noise is drawn many times on
the exact statistics of each dataset; the counts, Mirror and Combiner audits run the real
function / object for ``n_real`` trials per dataset and a vectorised replica of its sampling
(calling the same capping code / probability functions) for the rest. All runs are seeded:
same arguments, same result.
"""

from __future__ import annotations

import contextlib
import dataclasses
from unittest import mock

import numpy as np

from dpmt.audit import AuditResult, bernoulli_llr, epsilon_lower_bound
from dpmt.errors import ConfigError, check_range

__all__ = [
    "audit_ssp", "audit_noisy_gd", "audit_counts", "audit_spectral_init", "audit_mirror",
    "audit_combiner",
    "MECHANISMS", "run_all", "repeat_rates",
]

# Trials per vectorised chunk of the replicas (bounds memory at full size).
_CHUNK = 2000


def _result(name, broken, break_kind, claimed, delta, trials, s_in, s_out, confidence,
            details) -> AuditResult:
    bound = epsilon_lower_bound(s_in, s_out, delta, confidence=confidence)
    return AuditResult(name, bool(broken), break_kind if broken else "", float(claimed),
                       float(delta), int(trials), bound, details)


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


def _calibrated_release(name, sensitivity, epsilon, delta, sampling_rate=None):
    from dpmt.privacy import PlannedRelease, calibrate

    cal = calibrate([PlannedRelease(name, sensitivity, sampling_rate=sampling_rate)],
                    epsilon, delta)
    return cal.releases[0], cal.epsilon


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
              delta: float = 1e-5, broken: bool = False, noise_factor: float = 0.1,
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
    ``dpmt.privacy.calibrate`` for one release at (``epsilon``, ``delta``); the broken twin adds
    ``noise_factor`` times that noise. Score: the projection of the release onto the canary's
    contribution (upper triangle for ``A``) — the likelihood-ratio statistic.
    """
    import jax
    import jax.numpy as jnp

    from dpmt import weighting
    from dpmt.solvers.layout import task_layout
    from dpmt.solvers.ssp import ssp_sensitivities, weighted_statistics

    if statistic not in ("A", "b"):
        raise ConfigError(f"statistic must be 'A' or 'b' (got {statistic!r})")
    trials = _check_trials(trials)
    rng = np.random.default_rng(data_seed)
    users, items = _base_ratings(rng, n_users, n_items, per_user)
    U = _clip_rows(rng.normal(size=(n_users, dim)), clip_norm)
    y = rng.uniform(-y_max, y_max, len(users))
    counts = np.maximum(np.bincount(items, minlength=n_items), 1).astype(np.float64)
    c_user = np.full(n_items, n_users)
    c_item = np.arange(n_items)
    u_c = np.zeros(dim)
    u_c[0] = clip_norm
    users2 = np.concatenate([users, c_user])
    items2 = np.concatenate([items, c_item])
    y2 = np.concatenate([y, np.full(n_items, y_max)])
    w2 = weighting.normalized_user_weights(counts, users2, items2, mu=0.5, budget=beta)
    w = w2[:len(users)]
    R1, R2 = _ratings(users, items, y, n_users, n_items), \
        _ratings(users2, items2, y2, n_users + 1, n_items)
    X1, X2 = U, np.vstack([U, u_c])
    A1, b1 = weighted_statistics(task_layout(R1, dim=dim), X1, w, y)
    A2, b2 = weighted_statistics(task_layout(R2, dim=dim), X2, w2, y2)

    sens_A, sens_b = ssp_sensitivities(beta, clip_norm, y_max)
    sens = sens_A if statistic == "A" else sens_b
    release, claimed = _calibrated_release(f"ssp_{statistic}", sens, epsilon, delta)
    sigma = release.noise_std * (noise_factor if broken else 1.0)

    if statistic == "A":
        diff = np.asarray(A2, np.float64) - np.asarray(A1, np.float64)
        direction = diff * np.triu(np.ones((dim, dim)))
        dir_A, dir_b = direction, np.zeros((n_items, dim))
    else:
        direction = np.asarray(b2, np.float64) - np.asarray(b1, np.float64)
        dir_A, dir_b = np.zeros((n_items, dim, dim)), direction
    realised = float(np.linalg.norm(direction))
    f = _ssp_score_fn()
    dA, db = jnp.asarray(dir_A, jnp.float32), jnp.asarray(dir_b, jnp.float32)

    def scores_for(A, b, key):
        return _batched(lambda ks: f(A, b, ks, jnp.float32(sigma), dA, db),
                        jax.random.split(key, trials), batch)

    root = jax.random.PRNGKey(seed)
    s_out = scores_for(A1, b1, jax.random.fold_in(root, 0))
    s_in = scores_for(A2, b2, jax.random.fold_in(root, 1))
    details = {"sensitivity": sens, "noise_std": sigma, "noise_multiplier": sigma / sens,
               "canary_norm_over_sensitivity": realised / sens}
    return _result(f"SSP item step (stacked {statistic}-hat)", broken,
                   f"noise x{noise_factor:g}", claimed, delta, trials, s_in, s_out, confidence,
                   details)


# ----------------------------------------------------------------------------------------
# The private spectral start (issue 10): the noisy top-K co-occurrence
# ----------------------------------------------------------------------------------------
def _no_normalisation(n_in_top):
    return np.where(np.asarray(n_in_top) > 0, 1.0, 0.0)


def audit_spectral_init(trials: int = 4000, *, epsilon: float = 2.0, delta: float = 1e-5,
                        broken: bool = False, n_users: int = 24, n_items: int = 8,
                        per_user: int = 3, canary_items: int | None = None,
                        confidence: float = 0.95, seed: int = 0, data_seed: int = 0,
                        batch: int = 2000) -> AuditResult:
    """Audit the spectral start's release ``Ĉ = Σ_j x_j x_jᵀ + E``
    (``dpmt.solvers.spectral_init.cooccurrence`` then ``release``, the noisy Gramian's
    symmetric noise), K = ``n_items`` (every item; the top-K choice reads the released
    counts, public here).

    Other users rate ``per_user`` random items. Canary (real run): one item, so
    ``x x_ᵀ = e_i e_iᵀ`` and the upper triangle's change has norm exactly the sensitivity 1
    (``details['canary_norm_over_sensitivity']`` = 1; a canary with s items gives
    √((s+1)/(2s)) ≤ 1). Broken twin: the 1/√|S_j| normalisation disabled (every x_jk = 1)
    while the noise stays calibrated to sensitivity 1, and a canary rating all ``n_items``
    items (``‖T(ΔC)‖ = √(s(s+1)/2)``). Noise calibrated with ``dpmt.privacy.calibrate`` for one
    release at (``epsilon``, ``delta``). Score: projection of the release's upper triangle onto
    the canary's exact contribution (the likelihood-ratio statistic).
    """
    import jax
    import jax.numpy as jnp

    from dpmt.solvers import spectral_init as si

    trials = _check_trials(trials)
    rng = np.random.default_rng(data_seed)
    users, items = _base_ratings(rng, n_users, n_items, per_user)
    s = (n_items if broken else 1) if canary_items is None else int(canary_items)
    c_items = rng.choice(n_items, s, replace=False)
    users2 = np.concatenate([users, np.full(s, n_users)])
    items2 = np.concatenate([items, c_items])
    top = si.top_items(np.bincount(items, minlength=n_items), n_items)
    patch = (mock.patch.object(si, "_user_scale", _no_normalisation) if broken
             else contextlib.nullcontext())
    with patch:
        C1 = si.cooccurrence(users, items, n_users, top)
        C2 = si.cooccurrence(users2, items2, n_users + 1, top)
    sens = si.spectral_sensitivity()
    rel, claimed = _calibrated_release("spectral_init", sens, epsilon, delta)
    direction = (C2 - C1) * np.triu(np.ones((n_items, n_items)))
    realised = float(np.linalg.norm(direction))
    d = jnp.asarray(direction, jnp.float32)

    @jax.jit
    def f(C, keys):
        return jax.vmap(lambda k: jnp.sum(si.release(C, k, rel.noise_std) * d))(keys)

    def scores_for(C, key):
        return _batched(lambda ks: f(jnp.asarray(C, jnp.float32), ks),
                        jax.random.split(key, trials), batch)

    root = jax.random.PRNGKey(seed)
    s_out = scores_for(C1, jax.random.fold_in(root, 0))
    s_in = scores_for(C2, jax.random.fold_in(root, 1))
    details = {"sensitivity": sens, "noise_std": rel.noise_std, "canary_items": s,
               "noise_multiplier": rel.noise_multiplier,
               "canary_norm_over_sensitivity": realised / sens}
    return _result("spectral start (noisy top-K co-occurrence)", broken,
                   "1/sqrt(|S_j|) normalisation disabled", claimed, delta, trials, s_in,
                   s_out, confidence, details)


# ----------------------------------------------------------------------------------------
# Noisy GD (per-user clipping)
# ----------------------------------------------------------------------------------------
def audit_noisy_gd(trials: int = 4000, *, epsilon: float = 2.0, delta: float = 1e-5,
                   broken: bool = False, clip_norm: float = 1.0, n_users: int = 16,
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
    (with Poisson sampling at ``sampling_rate`` if given). Broken twin: clipping disabled (clip
    norm ``disabled_clip``·G) while the noise stays ``z·G``. Score: projection of the released
    gradient onto the canary's contribution (difference of the exact clipped sums, i.e. the
    noiseless release, computed with the clip norm in use; with Poisson sampling, the
    canary's clipped gradient from ``clipped_gradient_sum`` with a one-hot user mask).
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
    used_clip = clip_norm * disabled_clip if broken else clip_norm
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
    if sampling_rate is None:
        direction = (releases(L2, X2, w2j, y2j, k0, 0.0)[0]
                     - releases(L1, X1, w1j, y1j, k0, 0.0)[0]) * n_public
    else:   # the canary's clipped gradient, from the real clipping code with a one-hot mask
        mask = np.zeros(n_users + 1, np.float32)
        mask[-1] = 1.0
        g, _ = clipped_gradient_sum(enc, params, L2, X2, w2j, y2j, used_clip,
                                    user_mask=mask)
        direction = np.asarray(g["params"]["embedding"], np.float64)

    def scores_for(L, X, wj, yj, key):
        rel = releases(L, X, wj, yj, jax.random.split(key, trials), used_z)
        return np.einsum("tij,ij->t", rel, direction)

    root = jax.random.PRNGKey(seed)
    s_out = scores_for(L1, X1, w1j, y1j, jax.random.fold_in(root, 0))
    s_in = scores_for(L2, X2, w2j, y2j, jax.random.fold_in(root, 1))
    V = np.asarray(params["params"]["embedding"], np.float64)
    resid = w2[len(users):] * (V[np.arange(n_items)] @ u_c - y2[len(users):])
    canary_grad_norm = float(np.linalg.norm(u_c) * np.linalg.norm(resid))
    details = {"sensitivity": sens, "noise_multiplier": z, "clip_norm_used": used_clip,
               "canary_gradient_norm": canary_grad_norm,
               "canary_contribution_norm": float(np.linalg.norm(direction)),
               "sampling_rate": sampling_rate}
    name = "noisy GD step (clipped gradient sum)" + \
        (f", Poisson q={sampling_rate:g}" if sampling_rate else "")
    return _result(name, broken, "clipping disabled", claimed, delta, trials, s_in, s_out,
                   confidence, details)


# ----------------------------------------------------------------------------------------
# Private counts
# ----------------------------------------------------------------------------------------
def _key_rng(key) -> np.random.Generator:
    import jax

    return np.random.default_rng(np.asarray(jax.random.bits(key, (4,), dtype=np.uint32)))


def _no_cap(user_ids, k, key):
    return np.ones(len(np.asarray(user_ids)), dtype=bool)


def audit_counts(trials: int = 4000, *, epsilon: float = 2.0, delta: float = 1e-5,
                 broken: bool = False, k: int = 2, canary_items: int | None = None,
                 include_user_count: bool = True, n_items: int | None = None,
                 base_count: int = 12, n_real: int = 20, confidence: float = 0.95,
                 seed: int = 0, data_seed: int = 0) -> AuditResult:
    """Audit ``dpmt.privacy.private_counts`` (capped item histogram, plus the user count).

    Other users rate exactly ``k`` items each (so their capping keeps everything), giving
    every item about ``base_count`` ratings (so the clamp at 1 rarely acts); ``n_items``
    defaults to ``100·k``, the same dataset for the real audit and the twin. Canary: rates
    ``canary_items`` items (default ``k``: its capped contribution is then deterministic and
    has norm exactly √(k+1), the claimed sensitivity; with more items the cap keeps a random
    ``k`` of them). The noise std is calibrated for (``epsilon``, ``delta``) at the
    sensitivity :func:`~dpmt.privacy.count_sensitivity` reports; the claimed ε is that of the
    :class:`~dpmt.privacy.Release` the real ``private_counts`` returns.

    Trials: the first ``n_real`` per dataset call the real ``private_counts``; the rest use a
    vectorised replica that caps the canary's ratings in every trial at once with the real
    ``dpmt.privacy.mechanisms.cap_per_user`` (the trials stacked as distinct users), then adds
    float32 Gaussian noise and clamps at 1 exactly as ``private_counts`` does. Broken twin: the
    cap disabled (``cap_per_user`` patched to keep everything) and, by default, a canary rating
    ``100·k`` items. Score: the sum of the released counts over the canary's items (+ the user
    count) — the projection onto the canary's uncapped contribution.
    """
    import jax

    from dpmt.privacy import count_sensitivity, epsilon_of
    from dpmt.privacy import mechanisms

    trials = _check_trials(trials)
    check_range("n_real", n_real, low=1, integer=True)
    n_real = min(int(n_real), trials)
    if canary_items is None:
        canary_items = 100 * k if broken else k
    if n_items is None:
        n_items = max(canary_items, 100 * k)
    if canary_items > n_items:
        raise ConfigError(f"canary_items ({canary_items}) must be <= n_items ({n_items})")
    rng = np.random.default_rng(data_seed)
    n_users = max(1, -(-n_items * base_count // k))
    users, items = _base_ratings(rng, n_users, n_items, k)
    c_items = rng.choice(n_items, canary_items, replace=False)
    users2 = np.concatenate([users, np.full(canary_items, n_users)])
    items2 = np.concatenate([items, c_items])

    sens = count_sensitivity(k, include_user_count)
    release_cal, _ = _calibrated_release("item_counts", sens, epsilon, delta)
    sigma = release_cal.noise_std
    direction = np.zeros(n_items + (1 if include_user_count else 0))
    direction[c_items] = 1.0
    if include_user_count:
        direction[-1] = 1.0

    def score(hist_and_n):
        return hist_and_n @ direction

    root = jax.random.PRNGKey(seed)
    patch = mock.patch.object(mechanisms, "cap_per_user", _no_cap) if broken else \
        contextlib.nullcontext()
    claimed_release = None
    with patch:
        def real(u, i, key):
            nonlocal claimed_release
            out = mechanisms.private_counts(u, i, n_items, k=k, noise_std=sigma, key=key,
                                            include_user_count=include_user_count)
            claimed_release = out[-1]
            vec = np.append(out[0], out[1]) if include_user_count else out[0]
            return score(vec)

        def replica(u, i, n_trials, key):
            # every trial's capped histogram: others are never capped (k items each); the
            # canary's ratings are capped in all trials at once by the real cap_per_user
            base_keep = mechanisms.cap_per_user(users, k, jax.random.fold_in(key, 0))
            assert base_keep.all()
            base = np.bincount(items, minlength=n_items).astype(np.float64)
            is_c = u == n_users
            base_vec = np.append(base, float(n_users)) if include_user_count else base
            if not is_c.any():
                hists = np.broadcast_to(base_vec, (n_trials, len(base_vec))).copy()
            else:
                ci = i[is_c]
                tu = np.repeat(np.arange(n_trials), len(ci))
                ti = np.tile(ci, n_trials)
                keep = mechanisms.cap_per_user(tu, k, jax.random.fold_in(key, 1))
                add = np.bincount(tu[keep] * n_items + ti[keep],
                                  minlength=n_trials * n_items).reshape(n_trials, n_items)
                hists = base[None, :] + add
                if include_user_count:
                    hists = np.hstack([hists, np.full((n_trials, 1), n_users + 1.0)])
            # float32 standard normals as private_counts draws them (numpy's generator:
            # one JAX PRNG compile per array shape would dominate the audit's run time)
            noise = _key_rng(jax.random.fold_in(key, 2)).standard_normal(
                hists.shape, dtype=np.float32).astype(np.float64)
            return np.maximum(hists + sigma * noise, 1.0) @ direction

        def run(u, i, key):
            keys = jax.random.split(key, n_real)
            s_real = [np.array([real(u, i, kk) for kk in keys])]
            rest = trials - n_real
            for c, start in enumerate(range(0, rest, _CHUNK)):
                s_real.append(replica(u, i, min(_CHUNK, rest - start),
                                      jax.random.fold_in(key, 1000 + c)))
            return np.concatenate(s_real)

        s_out = run(users, items, jax.random.fold_in(root, 0))
        s_in = run(users2, items2, jax.random.fold_in(root, 1))
    claimed = epsilon_of([claimed_release], delta)
    details = {"sensitivity": claimed_release.sensitivity, "noise_std": sigma, "k": k,
               "canary_items": canary_items, "n_real": n_real,
               "noise_multiplier": claimed_release.noise_multiplier}
    return _result("private counts (capped histogram + user count)" if include_user_count
                   else "private counts (capped histogram)", broken,
                   "per-user cap disabled", claimed, delta, trials, s_in, s_out, confidence,
                   details)


# ----------------------------------------------------------------------------------------
# Online: Mirror
# ----------------------------------------------------------------------------------------
def audit_mirror(trials: int = 4000, *, a: float = 1.0, b: float = 1e-5, D: int = 2,
                 broken: bool = False, broken_factor: float = 10.0, n_real: int = 100,
                 confidence: float = 0.95, seed: int = 0) -> AuditResult:
    """Audit ``Mirror(a, b, D)`` on activity-sequence neighbours.

    Neighbours: every round active, versus the first round inactive (the active index of
    every later round shifts by one, which exposes the whole ramp). Release: the answers on
    all rounds but the first. Score: exact log-likelihood ratio of the answers, from
    ``Mirror.top_probabilities`` of the two sequences. The first ``n_real`` trials per
    sequence step a real :class:`~dpmt.online.mirror.Mirror` (its own coins); the rest draw
    the answers vectorised from the same probabilities. Claimed (ε, δ) = ``Mirror.privacy()``.
    Broken twin: the ramp ``mirror_window(broken_factor·a, b)`` relabelled as meeting ``a``
    (a window that is far too short).
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
    return _result("online Mirror (activity neighbours)", broken,
                   f"ramp for {broken_factor:g}·a", claimed_eps, claimed_delta, trials,
                   s_in, s_out, confidence, details)


# ----------------------------------------------------------------------------------------
# Online: Combine_D
# ----------------------------------------------------------------------------------------
def audit_combiner(trials: int = 4000, *, epsilon: float = 2.0, delta: float = 1e-5,
                   broken: bool = False, broken_D: int = 1, rounds: int | None = None,
                   n_real: int = 20, confidence: float = 0.95, seed: int = 0) -> AuditResult:
    """Audit ``Combine_D`` (``dpmt.online.combiner.Combiner``) on neighbouring streams.

    Streams of triples ``(u_t, v_t, y_t)``: round 0 is ``(1, 0, 1)`` in one stream and
    ``(1, 0, 0)`` in the other (``c1`` and ``c2`` each move by one, the most one triple can
    change); every later round is a disagreement ``(1, 0, y)`` with ``y`` alternating, which
    keeps the choice probability near 1/2 where each round is most informative. Release: the
    choices on rounds ≥ 1. Score: exact log-likelihood ratio from ``prob_first`` on the two
    (deterministic) counter sequences. ``D = combiner_min_D(epsilon, delta)`` and the claim is
    ``Combiner.privacy()``. The first ``n_real`` trials per stream run a real ``Combiner``.
    Broken twin: ``D = broken_D`` while claiming the ε of the ``D`` Lemma 13 needs.
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
    "mirror": (audit_mirror, {}),
    "combiner": (audit_combiner, {}),
}


def run_all(trials: int = 50_000, *, confidence: float = 0.95, seed: int = 0,
            mechanisms: list[str] | None = None, progress=None
            ) -> list[tuple[AuditResult, AuditResult]]:
    """Every audit in :data:`MECHANISMS` and its broken twin, as (real, twin) pairs."""
    out = []
    for name in mechanisms or list(MECHANISMS):
        if name not in MECHANISMS:
            raise ConfigError(f"unknown mechanism {name!r}; known: {', '.join(MECHANISMS)}")
        fn, kw = MECHANISMS[name]
        pair = tuple(fn(trials, broken=b, confidence=confidence, seed=seed, **kw)
                     for b in (False, True))
        if progress is not None:
            progress(name, pair)
        out.append(pair)
    return out


def repeat_rates(name: str, repeats: int, trials: int = 4000, *,
                 real_confidence: float = 0.99, twin_confidence: float = 0.95,
                 **kwargs) -> dict[str, float]:
    """Run the audit ``name`` and its twin with seeds ``0..repeats-1`` (same dataset, fresh
    randomness): the empirical false-failure rates of the two tests (real audit: ``ε_lb >
    claimed``; twin: ``ε_lb ≤ claimed``) and the extreme bounds."""
    fn, kw = MECHANISMS[name]
    kw = {**kw, **kwargs}
    real = [fn(trials, broken=False, confidence=real_confidence, seed=s, **kw)
            for s in range(repeats)]
    twin = [fn(trials, broken=True, confidence=twin_confidence, seed=s, **kw)
            for s in range(repeats)]
    return {"mechanism": name, "repeats": repeats, "trials": trials,
            "real_confidence": real_confidence, "twin_confidence": twin_confidence,
            "claimed": real[0].claimed_epsilon,
            "real_false_failures": sum(not r.passed for r in real),
            "twin_misses": sum(r.passed for r in twin),
            "real_lb_max": max(r.epsilon_lb for r in real),
            "real_lb_mean": float(np.mean([r.epsilon_lb for r in real])),
            "real_lb_sd": float(np.std([r.epsilon_lb for r in real])),
            "twin_lb_min": min(r.epsilon_lb for r in twin),
            "twin_lb_mean": float(np.mean([r.epsilon_lb for r in twin])),
            "twin_lb_sd": float(np.std([r.epsilon_lb for r in twin]))}
