"""The Theorem C predictor: ``C = Combine_D(A, F)`` (Sanyal 2026, Sections 3 and 7).

* ``A``: the online candidate predictor of Algorithm 3 (:class:`CandidatePredictor`):
  Algorithm 2's private candidates ``h_1..h_N`` (sparse selection over the groups' approximate
  version spaces) chained by replacements ``A_j = Rep(A_{j−1}, h_j, D_j)``.
* ``F``: the Name-and-Shame SOA predictor (Fact 5, :class:`NameAndShame`), retention ``γ``.
* ``Combine_D`` (Algorithm 4, :class:`Combiner`).

**Budget split and privacy (Lemmas 10, 12, 13, 14).** With the requested ``(ε, δ)``, in the
paper (and the ``theory`` preset): Algorithm 2 gets ``(ε/4, δ/8)``, each of the ``N``
replacements ``(a, b) = (ε/(4N), δ/(8N))`` (Mirror ``(a/2, b/2)`` plus the acceptance test),
``F`` ``(0, γ = δ/4)``, and the combiner ``(ε/2, δ/2)``; the ``practical`` preset splits ε
differently (below) — the proofs compose the parts by basic composition, so any split whose
parts sum to at most the request is private. :meth:`JDPPredictor.privacy` recomputes
every term from the sizes actually used — Algorithm 2 by the per-call sensitivity count of
:class:`CandidateParams`, each replacement as its Mirror ramp's accounted δ plus the exact
acceptance δ at its smallest delay, ``F`` as ``(0, γ)``, the combiner by Lemma 13's formula
— and adds them (basic composition, Lemma 12 and Lemma 14). The constructor raises
:class:`ConfigError` if the total exceeds the request (it never should: the sizes are derived
from the shares, each scaled by ``1 − 1e−9`` against rounding).

**Presets.**

``theory`` — the paper's formulas (requires ``0 < ε ≤ 1``, ``0 < δ < 1/10``), with the
absolute constants chosen here ``C0 = C1 = 1``, ``C_D = 64``, ``C_comb = 1024``::

    n = C0 (d+1)^6,  s' = (2^d n)^d 2^{d²},  N = 2(d+1)s' + 2,  K = 2kn,  levels = d + 1,
    k = C1 (N² n + ε'^{-1} log(100 N n / (ε' δ' β))),   (ε', δ') = (ε/4, δ/8),  β = δ,
    ε0 = ε' / (8N(N+d+1)),  δ0 = δ' / (8eN(N+d+1))   (Select_{ε0,δ0}: temperature ε0/2,
                                   Γ at least the one giving δ0 for one list, raised to the
                                   balanced choice of Fact 3's two failure terms),
    D_0 = max(C_D (K + 16 N² ε^{-2} log²(32N/δ)), 4K+1, rep_min_D),  D_j = 9^j D_0,
    D_comb = C_comb ε^{-2} log(2/δ)   (checked against Lemma 13's condition).

For any class with ``d ≥ 1`` these sizes are astronomical (``K`` alone exceeds any horizon),
so ``A`` stays at ``h_0`` and the predictor behaves as ``Combine(h_0, F)``; the state of
Algorithm 2 is allocated only when a first batch fills.

``practical`` — the same mechanisms with sizes chosen for utility; its (ε, δ) is computed,
never assumed. Defaults (each overridable by keyword: ``N``, ``n``, ``k``, ``levels``,
``beta``, ``split``, ``mirror_share``):

* ``N = min(d + 1, 2)`` candidates, ``levels = 1`` (one selection level, ``L = 0``), ``n = 1``.
  Two candidates: on thresholds the first candidate is consistent with the mistakes of
  ``h_0`` on one side of the target only and the second pins the target down; a third
  costs more than it returns (``G`` and every delay grow; measured in ``docs/online.md``);
* the δ split of the paper (Algorithm 2 ``δ/8``, replacements ``δ/8`` in all, ``γ = δ/4``,
  combiner ``δ/2``); the **ε split** ``(f_cand, f_rep, f_comb)`` of ``ε`` between Algorithm
  2, the ``N`` replacements and the combiner, and each replacement's Mirror share ``ρ``
  (:mod:`dpmt.online.rep`), chosen by :func:`practical_split`: a search over a fixed grid
  minimising ``3(K + D_1 + W) + 2 D_comb``, Theorem C's bound on a stream whose first
  candidate is accurate. The search sees only ``(ε, δ, |H|, N, n, levels, β)``, so it costs
  no privacy, and every size below is then derived from the chosen shares;
* temperature ``ε_s = f_cand ε/(2G)`` with ``G = N(N+1) + 2N(levels−1)``; ``log Γ`` the
  larger of the privacy floor for ``δ/8`` and the balanced choice; ``k`` the smallest number
  of groups whose selection failure bound (Fact 3's two properties) is at most
  ``beta = 0.01`` per call; ``K = 2kn``;
* replacements ``(a, b) = (f_rep ε/N, δ/(8N))``, Mirror ``(ρa, b/2)`` (tempered ramp, exact
  accounting), acceptance test ``((1−ρ)a, ·)``;
* ``D_1 = max(4K, rep_min_D)``, ``D_{j+1} = max(4(K + D_j + W), rep_min_D)`` (Claim 1 with
  Lemma 11(i) in its sharp form, see :mod:`dpmt.online.candidates`);
* ``D_comb`` = the smallest ``D`` meeting Lemma 13 for ``(f_comb ε, δ/2)``.

With ``split=(0.25, 0.25, 0.5), mirror_share=0.5`` the shares are the paper's.

Per-round cost: a table lookup for ``h_0``, one step per active replacement, one SOA
prediction for ``F`` and a counter comparison in the combiner; coins are drawn in blocks.
:meth:`JDPPredictor.run` feeds a whole stream with the same result and final state but in
bulk (``A`` and ``F`` by their whole-stream paths, the combiner only on disagreement rounds):
on 1,024 thresholds at ``(1, 1e-6)`` about 10^6 rounds per CPU-second, against about
2.7·10^5 for the predict/update loop (measured in ``docs/online.md``).
"""

from __future__ import annotations

import math

import numpy as np

from dpmt.errors import ConfigError, DpmtError, check_range
from dpmt.online.candidates import CandidateParams, CandidatePredictor, check_delays, next_delay
from dpmt.online.combiner import Combiner, combiner_epsilon, combiner_min_D
from dpmt.online.hypotheses import HypothesisClass
from dpmt.online.mirror import mirror_window
from dpmt.online.name_and_shame import NameAndShame
from dpmt.online.rep import acceptance_min_D, check_share, rep_min_D
from dpmt.online.selection import balanced_gamma, gamma_for_privacy, selection_failure_bound
from dpmt.online.soa import check_stream

__all__ = ["JDPPredictor", "PRESETS", "practical_split"]

PRESETS = ("practical", "theory")
_SAFE = 1.0 - 1e-9
# theory-preset constants (stated in the module docstring)
C0, C1, C_D, C_COMB = 1, 1, 64, 1024


#: ε fractions searched by :func:`practical_split` (candidates, replacements; the combiner
#: gets the rest) and the Mirror shares ρ of each replacement's ``a``.
SPLIT_GRID = tuple(i / 20 for i in range(1, 19))
SHARE_GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def _window_estimate(a: float, b: float) -> float:
    """Rough Mirror window ``ln²(2/b)/a²`` (within ~15% of the tempered ramp's accounted
    window for the sizes used here); ranks splits only, never used for privacy."""
    return math.log(2.0 / b) ** 2 / (a * a)


def practical_split(eps: float, dl: float, s: int, N: int, n: int = 1, levels: int = 1,
                    beta: float = 0.01, k: int | None = None, split=None,
                    share: float | None = None) -> tuple[tuple[float, float, float], float]:
    """The practical preset's ε split ``(f_cand, f_rep, f_comb)`` and Mirror share ``ρ``.

    A grid search (:data:`SPLIT_GRID`, :data:`SHARE_GRID`) minimising Theorem C's mistake
    bound on a stream whose first candidate is accurate, ``3 (K + D_1 + W) + 2 D_comb``
    (Lemma 11(i) in its sharp form ``M(A_1) ≤ K + D_1 + W`` and Lemma 13's
    ``E M ≤ 3 min(M(A), M(F)) + 2D``), with ``K`` from the selection's reliability, ``W``
    from :func:`_window_estimate` and ``D_comb`` from Lemma 13's condition. It depends only on
    ``(ε, δ, |H|, N, n, levels, β)`` — public quantities — so any choice is private; the
    predictor's ``privacy()`` is then computed from the sizes actually built. ``split`` and
    ``share`` fix either part (``k`` fixes ``K = 2kn``).
    """
    G = N * (N + 1) + 2 * N * (levels - 1)
    fixed = split is not None
    grid = [tuple(float(f) for f in split)] if fixed else [
        (fc, fr, round(1.0 - fc - fr, 10)) for fc in SPLIT_GRID for fr in SPLIT_GRID
        if round(1.0 - fc - fr, 10) >= SPLIT_GRID[0]]
    shares = (share,) if share is not None else SHARE_GRID
    if fixed and share is not None:
        return grid[0], float(share)
    Ks, Dcs = {}, {}
    b = dl / 8.0 / N
    best = None
    for fc, fr, fm in grid:
        if fc not in Ks:
            Ks[fc] = 2 * n * (k if k is not None else
                              _practical_k(eps * fc / (2.0 * G), s, dl / 8.0, G, N, beta)[0])
        if fm not in Dcs:
            Dcs[fm] = combiner_min_D(eps * fm, dl / 2.0)
        K, Dc = Ks[fc], Dcs[fm]
        a = eps * fr / N
        for rho in shares:
            W = _window_estimate(rho * a, b / 2.0)
            D1 = max(4 * K, W, acceptance_min_D(a, b / 2.0, rho))
            v = 3.0 * (K + D1 + W) + 2.0 * Dc
            if best is None or v < best[0]:
                best = (v, (fc, fr, fm), rho)
    return best[1], float(best[2])


def _practical_k(eps_sel: float, s: int, delta_sel: float, G: int, N: int, beta: float):
    """Smallest k (and its log Γ) with selection failure bound ≤ beta, Γ meeting privacy."""
    floor = math.log(G) + math.log(s) + 2 * N * eps_sel - math.log(delta_sel)
    floor = max(floor, gamma_for_privacy(eps_sel, s, 1.0, 2 * N))  # validity condition

    def lg(k):
        return max(floor, balanced_gamma(eps_sel, k, s))

    def bad(k):
        return selection_failure_bound(eps_sel, lg(k), k, s) > beta

    lo, hi = 1, 2
    while bad(hi):
        lo, hi = hi, hi * 2
        if hi > 1 << 40:
            raise ConfigError("no number of groups makes the sparse selection reliable")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if bad(mid):
            lo = mid
        else:
            hi = mid
    return hi, lg(hi)


class JDPPredictor:
    """Theorem C's ``(ε, δ)``-jointly private online predictor ``Combine_D(A, F)``.

    Args:
      H: finite class (:class:`HypothesisClass`).
      epsilon, delta: requested joint-privacy target.
      preset: ``"practical"`` (default) or ``"theory"`` (see module docstring).
      seed: None (default: fresh OS entropy, the private choice), an int (reproducible,
        for experiments: NOT private against anyone who knows the seed) or a
        ``SeedSequence``; ``A``, ``F`` and the combiner use independent child streams.
      **overrides: practical sizes ``N``, ``n``, ``k``, ``levels``, ``beta``.

    ``predict(x) -> int`` / ``update(y)``; ``privacy() -> (ε, δ)`` computed from the sizes
    used (always ``≤`` the request); ``sizes`` holds the main sizes; ``components()`` the
    per-part (ε, δ).
    """

    def __init__(self, H: HypothesisClass, epsilon: float, delta: float,
                 preset: str = "practical", seed=None, **overrides):
        if not isinstance(H, HypothesisClass):
            raise ConfigError(f"JDPPredictor needs a HypothesisClass (got {type(H).__name__})")
        check_range("epsilon", epsilon, low=0, low_open=True)
        check_range("delta", delta, low=0, high=1, low_open=True, high_open=True)
        if not math.isfinite(float(epsilon)):
            raise ConfigError("epsilon must be finite")
        if preset not in PRESETS:
            raise ConfigError(f"preset must be one of {PRESETS} (got {preset!r})")
        allowed = {"N", "n", "k", "levels", "beta", "split", "mirror_share"}
        extra = set(overrides) - allowed
        if extra:
            raise ConfigError(f"unknown JDPPredictor option(s) {sorted(extra)}; "
                              f"allowed: {sorted(allowed)}")
        if preset == "theory" and overrides:
            raise ConfigError("the theory preset takes no size overrides")
        self.H = H
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.preset = preset
        self.d = int(H.littlestone_dimension())
        eps, dl = self.epsilon * _SAFE, self.delta * _SAFE
        if preset == "theory":
            if not (self.epsilon <= 1.0 and self.delta < 0.1):
                raise ConfigError("the theory preset follows Theorem C, which needs "
                                  f"0 < epsilon <= 1 and 0 < delta < 1/10 (got epsilon="
                                  f"{epsilon:g}, delta={delta:g}); use preset='practical'")
            self._build_theory(eps, dl)
        else:
            self._build_practical(eps, dl, overrides)
        ss = seed if isinstance(seed, np.random.SeedSequence) else \
            np.random.SeedSequence(seed)                 # None: OS entropy
        sa, sf, sc = ss.spawn(3)
        self.A = CandidatePredictor(H, self.params, self.rep_a, self.rep_b, self._delays,
                                    seed=sa, design=self.design, share=self.mirror_share)
        self.F = NameAndShame(H, self.gamma, seed=np.random.default_rng(sf))
        self.combiner = Combiner(self.D_comb, self._comb_eps, self._comb_delta,
                                 rng=np.random.default_rng(sc))
        e_tot, d_tot = self.privacy()
        if e_tot > self.epsilon or d_tot > self.delta:
            raise ConfigError(
                f"the {preset} sizes give ({e_tot:.6g}, {d_tot:.6g})-joint DP, above the "
                f"requested ({self.epsilon:g}, {self.delta:g})")
        self.mistakes = 0
        self.rounds = 0
        self._y = None

    # -- presets -----------------------------------------------------------------------
    def _common_tail(self, eps: float, dl: float) -> None:
        self.gamma = dl / 4.0
        self._comb_eps, self._comb_delta = eps / 2.0, dl / 2.0
        self.split = (0.25, 0.25, 0.5)
        self.mirror_share = 0.5

    def _build_practical(self, eps: float, dl: float, ov: dict) -> None:
        d = self.d
        s = self.H.n_hypotheses
        N = int(ov.get("N", min(d + 1, 2)))
        levels = int(ov.get("levels", 1))
        n = int(ov.get("n", 1))
        beta = float(ov.get("beta", 0.01))
        check_range("N", N, low=1, integer=True)
        check_range("levels", levels, low=1, high=d + 1, integer=True)
        check_range("n", n, low=1, integer=True)
        check_range("beta", beta, low=0, high=1, low_open=True, high_open=True)
        k_ov = None
        if "k" in ov:
            k_ov = int(ov["k"])
            check_range("k", k_ov, low=1, integer=True)
        split = ov.get("split")
        if split is not None:
            try:
                split = tuple(float(f) for f in split)
            except (TypeError, ValueError):
                raise ConfigError(f"split must be three fractions (got {split!r})") from None
            if len(split) != 3 or not all(0 < f < 1 for f in split) or sum(split) > 1 + 1e-12:
                raise ConfigError("split must be three fractions in (0, 1) (candidates, "
                                  f"replacements, combiner) summing to at most 1 (got {split})")
        share = ov.get("mirror_share")
        if share is not None:
            share = check_share(share)
        (f_cand, f_rep, f_comb), share = practical_split(
            eps, dl, s, N, n, levels, beta, k=k_ov, split=split, share=share)
        self.split = (f_cand, f_rep, f_comb)
        self.mirror_share = share
        G = N * (N + 1) + 2 * N * (levels - 1)
        eps_sel = (eps * f_cand) / (2.0 * G)
        delta_sel = dl / 8.0
        k_auto, lg = _practical_k(eps_sel, s, delta_sel, G, N, beta)
        if k_ov is not None:
            k = k_ov
            floor = math.log(G) + math.log(s) + 2 * N * eps_sel - math.log(delta_sel)
            floor = max(floor, gamma_for_privacy(eps_sel, s, 1.0, 2 * N))
            lg = max(floor, balanced_gamma(eps_sel, k, s))
        else:
            k = k_auto
        K = 2 * k * n
        self.params = CandidateParams(k=k, n=n, K=K, N=N, levels=levels, eps_sel=eps_sel,
                                      log_gamma=lg, s=s, d=d)
        self.rep_a = (eps * f_rep) / N
        self.rep_b = (dl / 8.0) / N
        self.design = mirror_window(share * self.rep_a, self.rep_b / 2.0)
        self.rep_min = rep_min_D(self.rep_a, self.rep_b, self.design, share)
        W = int(self.design.W)
        Ds = [max(4 * K, self.rep_min)]
        for _ in range(N - 1):
            Ds.append(max(next_delay(Ds[-1], K, W), self.rep_min))
        check_delays(Ds, K, self.rep_min, W)
        self._delays = Ds
        self.gamma = dl / 4.0
        self._comb_eps, self._comb_delta = eps * f_comb, dl / 2.0
        self.D_comb = combiner_min_D(self._comb_eps, self._comb_delta)
        self.selection_failure = selection_failure_bound(eps_sel, lg, k, s)

    def _build_theory(self, eps: float, dl: float) -> None:
        d = self.d
        s = self.H.n_hypotheses
        e1, d1 = eps / 4.0, dl / 8.0           # Algorithm 2's parameters (Lemma 3)
        beta = dl
        n = C0 * (d + 1) ** 6
        s_paper = (2 ** d * n) ** d * 2 ** (d * d)
        N = 2 * (d + 1) * s_paper + 2
        lnN = math.log(N)
        k = math.ceil(C1 * (N * N * n + (math.log(100.0 * n) + lnN - math.log(e1)
                                         - math.log(d1) - math.log(beta)) / e1))
        K = 2 * k * n
        eps0 = e1 / (8.0 * N * (N + d + 1))
        log_delta0 = math.log(d1) - math.log(8.0 * math.e) - lnN - math.log(N + d + 1)
        eps_sel = eps0 / 2.0
        lg = math.log(s) + eps_sel - log_delta0  # Γ = s e^{ε_s}/δ0: (ε0, δ0) for one list
        lg = max(lg, gamma_for_privacy(eps_sel, s, 1.0, 2 * N),  # validity for g ≤ 2N
                 balanced_gamma(eps_sel, k, s))                    # Fact 3's utility
        self.params = CandidateParams(k=k, n=n, K=K, N=N, levels=d + 1, eps_sel=eps_sel,
                                      log_gamma=lg, s=s, d=d)
        self.rep_a = (eps / 4.0) / N
        self.rep_b = (dl / 8.0) / N
        if not (self.rep_a / 2.0 > 0 and self.rep_b / 2.0 > 0):
            raise ConfigError(
                f"the theory preset's N = {N:.3g} replacements leave each Mirror a privacy "
                f"share (ε/(8N), δ/(16N)) = ({self.rep_a / 2:.3g}, {self.rep_b / 2:.3g}) that "
                "underflows floating point, so its privacy cannot be established; use a "
                "larger delta/epsilon or preset='practical'")
        self.design = mirror_window(self.rep_a / 2.0, self.rep_b / 2.0)
        self.rep_min = rep_min_D(self.rep_a, self.rep_b, self.design)
        D0 = max(math.ceil(C_D * (K + 16.0 * N * N / eps ** 2
                                  * (math.log(32.0) + lnN - math.log(dl)) ** 2)),
                 4 * K + 1, self.rep_min)
        self.D0 = D0
        self._delays = lambda j: 9 ** j * D0
        self._common_tail(eps, dl)
        D_comb = math.ceil(C_COMB * math.log(2.0 / self.delta) / self.epsilon ** 2)
        if combiner_epsilon(D_comb, self._comb_delta) > self._comb_eps:
            raise ConfigError("internal: the theory combiner constant misses Lemma 13")
        self.D_comb = D_comb
        self.selection_failure = selection_failure_bound(eps_sel, lg, k, s)

    # -- reporting ---------------------------------------------------------------------
    @property
    def sizes(self) -> dict:
        p = self.params
        return {"preset": self.preset, "d": self.d, "|H|": self.H.n_hypotheses,
                "N": p.N, "k": p.k, "n": p.n, "K": p.K, "levels": p.levels,
                "selection_temperature": p.eps_sel, "log_Gamma": p.log_gamma,
                "split": self.split, "mirror_share": self.mirror_share,
                "rep_a": self.rep_a, "rep_b": self.rep_b, "mirror_W": self.design.W,
                "mirror_method": self.design.method, "rep_min_D": self.rep_min,
                "D_1": self.A.delay(1),
                "D": ([self.A.delay(j) for j in range(1, p.N + 1)] if p.N <= 16 else None),
                "D_comb": self.D_comb, "gamma": self.gamma,
                "selection_failure_bound": self.selection_failure}

    def components(self) -> dict:
        """Per-part (ε, δ): candidates, replacements (all N), F, combiner."""
        ce, cd = self.params.privacy()
        ra, rd = self.A.rep_privacy()
        N = self.params.N
        return {"candidates": (ce, cd), "replacements": (N * ra, N * rd),
                "name_and_shame": self.F.privacy(), "combiner": self.combiner.privacy()}

    def privacy(self) -> tuple[float, float]:
        """Joint (ε, δ) from the sizes in use (basic composition of the parts)."""
        e = dl = 0.0
        for pe, pd in self.components().values():
            e += pe
            dl += pd
        return e, min(1.0, dl)

    # -- protocol ----------------------------------------------------------------------
    def predict(self, x: int) -> int:
        if not 0 <= x < self.H.n_points:
            raise ConfigError(f"point must be in [0, {self.H.n_points - 1}] (got {x!r})")
        u = self.A.predict(x)
        v = self.F.predict(x)
        w = self.combiner.choose(u, v)
        self._y = w
        return w

    def update(self, y: int) -> None:
        if self._y is None:
            raise DpmtError("update called without a preceding predict(x)")
        if y != 0 and y != 1:
            raise ConfigError(f"label must be 0 or 1 (got {y!r})")
        if y != self._y:
            self.mistakes += 1
        self.A.update(y)
        self.F.update(y)
        self.combiner.observe(y)
        self.rounds += 1
        self._y = None

    def run(self, xs, ys, return_mistakes: bool = False):
        """Feed a whole stream; returns its mistakes (or per-round mistake marks).

        Same result and final state as the predict/update loop: ``A`` and ``F`` never see
        the combiner's outputs, so their prediction sequences are computed first by their
        own whole-stream paths (``F``'s predictions are ``y XOR`` its mistake marks), then
        the combiner runs over the disagreement rounds (its coins are drawn only there)."""
        if self._y is not None:
            raise DpmtError("run called between predict and update")
        xs, ys = check_stream(self.H, xs, ys)
        ys = ys.astype(np.int8)
        u = self.A.run(xs, ys)
        v = (ys ^ self.F.run(xs, ys, return_mistakes=True).astype(np.int8)).astype(np.int8)
        w = u.copy()
        comb = self.combiner
        ul, vl, yl = u.tolist(), v.tolist(), ys.tolist()
        for t in np.flatnonzero(u != v).tolist():
            w[t] = comb.choose(ul[t], vl[t])
            comb.observe(yl[t])
        marks = (w != ys)
        self.mistakes += int(marks.sum())
        self.rounds += len(xs)
        return marks.astype(np.uint8) if return_mistakes else int(marks.sum())
