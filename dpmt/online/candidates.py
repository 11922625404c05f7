"""The private candidate sequence (Algorithm 2) and its online use (Algorithm 3), Sanyal 2026.

**Algorithm 2 for finite classes.** ``k`` groups store samples of mistake batches. For the
previous candidate ``h_{j−1}``, the batch ``B_j = B_K(h_{j−1}, S)`` is the first ``K``
examples of the stream on which it errs. Each record of ``B_j`` is assigned to a uniform
group and given a uniform number; every group appends the ``min(n, ·)`` records with the
smallest numbers (a uniform subset) to its samples ``S_i``. At level ``ℓ`` (``0 ≤ ℓ ≤ L``)
group ``i``'s list is the approximate version space

    G_i^ℓ = {h ∈ H : err_A(h) ≤ a_ℓ n for every stored sample A ∈ S_i},
    a_ℓ = 1/8 − ℓ/(32(d+1))

(for a finite domain with ``|X| ≤ p`` the essential hypotheses ``C_p(G)`` equal ``G`` —
property P4, see the notes — and the practical preset uses ``G`` as the list in every case;
any list that is a function of the group's own samples keeps the privacy proof below). The
sparse selection (:mod:`dpmt.online.selection`) picks a hypothesis appearing in many lists;
on ⊥ the level ``ℓ`` rises and the selection is retried on the same samples; ⊥ at ``ℓ = L``
ends the sequence (the rest is padded with ``h_0``). ``h_0`` is public: SOA's prediction on
the full class. The paper has ``L = d``.

**Privacy (Lemma 10, with the sensitivity counted per call).** Changing one stream record
changes a batch in at most two timestamps, so — coupling the assignment and sampling
randomness by timestamp — at most two groups' samples per processed batch. A call made after
``j`` batches therefore sees at most ``g = 2j`` changed lists and is
``(2gε_s, g s e^{gε_s}/Γ)``-DP (:func:`~dpmt.online.selection.sparse_selection_privacy`,
temperature ``ε_s``, list bound ``s = |H|``). There are at most ``N`` successful calls and
``L + 1`` failed ones (the last failure ends the run); the worst placement puts all failures
after the last batch, so ``Σ_calls g ≤ N(N+1) + 2NL`` and, by basic composition (valid with
the data-dependent but bounded number of calls, a privacy filter), Algorithm 2 is
``(2ε_s G, G s e^{2Nε_s}/Γ)``-DP with ``G = N(N+1) + 2NL`` (Lemma 10 uses the cruder
``(N+d+1)`` calls with group privacy of size ``2N``).

**Algorithm 3 (the online predictor A).** ``A_0 = h_0`` and ``A_j = Rep(A_{j−1}, h_j, D_j)``
(:class:`~dpmt.online.rep.Replacement`). The predictor keeps the last computed candidate
``h_m`` and, as soon as ``h_m`` has ``K`` mistakes on the observed prefix, obtains ``h_{m+1}``
(resuming Algorithm 2 on that batch), replays ``Rep`` for ``A_{m+1}`` on the stored prefix, and
predicts ``A_{m,t}``. With delays satisfying (Claim 1 and Lemma 11)::

    D_1 ≥ 4K,   D_j ≥ rep_min_D(a, b),   D_{j+1} ≥ 4 (K + D_j + W)

(``W`` the replacements' Mirror window) the replayed predictions of ``A_{m+1}`` equal the
released ones (checked at run time: a violation raises), so ``A`` equals the offline ``A_N``
for the same randomness and inherits its privacy (Lemma 12): Algorithm 2's ``(ε, δ)`` plus
``N`` times each Rep's ``(a, δ_Rep)``.

The paper states the last condition as ``D_{j+1} ≥ 8 D_j + 4K``, from Lemma 11(i) in the form
``M(A_j) ≤ K + 2D_j``. Its proof gives ``M(A_j) ≤ K + D_j + W``: the output can err where
``V = h_j`` errs, or on one of the first ``D_j + W`` disagreement rounds (after those the
Mirror answers ⊤ on every active round, and the acceptance bit is 1 because ``V`` erred on
fewer than ``K ≤ D_j/4`` of the first ``D_j`` disagreements, so ``c + ξ > 3D_j/4 − D_j/8 >
D_j/2``). Claim 1's induction needs ``M(A_j) ≤ D_{j+1}/4``, hence the condition above; since
``D_j ≥ W`` it is implied by the paper's (which :func:`check_delays` applies when ``W`` is not
given). The paper's ``D_j = 9^j D_0`` with ``D_0 > 4K`` satisfies both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpmt.errors import ConfigError, DpmtError, check_range
from dpmt.online.hypotheses import HypothesisClass
from dpmt.online.mirror import RampDesign, mirror_window
from dpmt.online.rep import Replacement, acceptance_delta, check_share
from dpmt.online.selection import SparseSelection, sparse_selection_privacy

__all__ = ["CandidateParams", "CandidateSequence", "CandidatePredictor", "check_delays",
           "next_delay",
           "level_thresholds"]


def level_thresholds(n: int, d: int, levels: int) -> list[int]:
    """Largest allowed mistake count ``⌊a_ℓ n⌋`` on a stored sample, ``ℓ = 0..levels−1``."""
    out = []
    for ell in range(levels):
        a = 1.0 / 8.0 - ell / (32.0 * (d + 1))
        out.append(math.floor(a * n + 1e-12))
    return out


@dataclass(frozen=True)
class CandidateParams:
    """Sizes of Algorithm 2.

    k: groups. n: sample size per group and batch. K: batch size (paper: ``2kn``).
    N: number of candidates after ``h_0``. levels: ``L + 1`` selection levels (paper:
    ``d + 1``). eps_sel: selection temperature ``ε_s``. log_gamma: ``log Γ``.
    s: list-size bound (``|H|``). d: Littlestone dimension (for ``a_ℓ``).
    """

    k: int
    n: int
    K: int
    N: int
    levels: int
    eps_sel: float
    log_gamma: float
    s: int
    d: int

    def __post_init__(self):
        for name in ("k", "n", "K", "N", "levels", "s"):
            check_range(f"candidate parameter {name}", getattr(self, name), low=1, integer=True)
        check_range("candidate parameter d", self.d, low=0, integer=True)
        check_range("selection temperature", self.eps_sel, low=0, low_open=True)

    @property
    def sensitivity_sum(self) -> int:
        """``G = N(N+1) + 2NL``: worst-case sum of changed lists over all selection calls."""
        L = self.levels - 1
        return self.N * (self.N + 1) + 2 * self.N * L

    def privacy(self) -> tuple[float, float]:
        """(ε, δ) of the whole candidate sequence (see module docstring)."""
        gmax = 2 * self.N
        # validity of the per-call bound for every g ≤ 2N (g/(1−e^{−gε}) increases in g)
        sparse_selection_privacy(self.eps_sel, self.log_gamma, self.s, gmax)
        G = self.sensitivity_sum
        eps = 2.0 * self.eps_sel * G
        log_delta = math.log(G) + math.log(self.s) + gmax * self.eps_sel - self.log_gamma
        return eps, (math.exp(log_delta) if log_delta < 0 else 1.0)


class CandidateSequence:
    """Algorithm 2, resumable: :meth:`next_candidate` consumes one full mistake batch.

    Returns the index (in ``H``) of the next candidate, or ``None`` once the sequence has
    ended (⊥ at the last level: the rest is ``h_0``). ``calls`` records the ``g`` (changed
    lists bound) of every selection call made.
    """

    def __init__(self, H: HypothesisClass, params: CandidateParams,
                 rng: np.random.Generator):
        self.H = H
        self.params = params
        self.rng = rng
        self.selector = SparseSelection(params.eps_sel, params.s, params.log_gamma)
        self.thresholds = level_thresholds(params.n, params.d, params.levels)
        self.level = 0
        self.batches = 0
        self.exhausted = False
        self.calls: list[int] = []
        self._maxerr = None  # (k, |H|) max mistakes over stored samples; allocated lazily

    def _store(self, bx: np.ndarray, by: np.ndarray) -> None:
        p = self.params
        K = bx.size
        grp = self.rng.integers(p.k, size=K)
        u = self.rng.random(K)
        order = np.lexsort((u, grp))
        gs = grp[order]
        starts = np.searchsorted(gs, gs, side="left")
        keep = (np.arange(K) - starts) < p.n
        idx = order[keep]
        gk = gs[keep]
        if self._maxerr is None:
            self._maxerr = np.zeros((p.k, self.H.n_hypotheses), np.int32)
        if idx.size == 0:
            return
        wrong = (self.H.matrix[:, bx[idx]] != by[idx][None, :])  # (|H|, kept)
        bounds = np.flatnonzero(np.r_[True, gk[1:] != gk[:-1]])
        sums = np.add.reduceat(wrong.astype(np.int32), bounds, axis=1)  # (|H|, groups)
        groups = gk[bounds]
        self._maxerr[groups] = np.maximum(self._maxerr[groups], sums.T)

    def counts(self, level: int | None = None) -> np.ndarray:
        """``c(h)`` = number of groups whose list (at ``level``) contains ``h``."""
        lev = self.level if level is None else level
        if self._maxerr is None:
            return np.full(self.H.n_hypotheses, self.params.k, np.int64)
        return (self._maxerr <= self.thresholds[lev]).sum(axis=0)

    def next_candidate(self, bx, by):
        """Process the full batch ``(bx, by)`` of the previous candidate's first ``K``
        mistakes and select the next candidate (``None``: sequence ended)."""
        if self.exhausted:
            return None
        if self.batches >= self.params.N:
            raise DpmtError("Algorithm 2 already produced N candidates")
        bx = np.asarray(bx, np.int64)
        by = np.asarray(by, np.int8)
        if bx.size != self.params.K:
            raise DpmtError(f"a mistake batch must hold K={self.params.K} records "
                            f"(got {bx.size})")
        self.batches += 1
        self._store(bx, by)
        g = 2 * self.batches
        while True:
            self.calls.append(g)
            z = self.selector.select_counts(self.counts(), self.rng)
            if z is not None:
                return int(z)
            if self.level >= self.params.levels - 1:
                self.exhausted = True
                return None
            self.level += 1


def next_delay(D: int, K: int, W: int | None = None) -> int:
    """Smallest ``D_{j+1}`` Claim 1 allows after ``D_j = D``: ``4(K + D + W)`` with the Mirror
    window ``W`` (see module docstring), or the paper's ``8D + 4K`` when ``W`` is None."""
    return 4 * (K + D + W) if W is not None else 8 * D + 4 * K


def check_delays(Ds, K: int, rep_min: int, W: int | None = None) -> None:
    """Raise ConfigError unless ``D_1 ≥ 4K``, ``D_j ≥ rep_min`` and
    ``D_{j+1} ≥`` :func:`next_delay` ``(D_j, K, W)`` (with ``W ≤ rep_min`` when given)."""
    if len(Ds) == 0:
        return
    if W is not None and W > rep_min:
        raise ConfigError(f"the Mirror window W={W} exceeds the replacement minimum "
                          f"{rep_min} (Definition 10 has D >= W)")
    if Ds[0] < 4 * K:
        raise ConfigError(f"D_1={Ds[0]} must be >= 4K={4 * K} (Lemma 11 / Claim 1)")
    for j, D in enumerate(Ds, start=1):
        if D < rep_min:
            raise ConfigError(f"D_{j}={D} is below the replacement's minimum {rep_min} "
                              "(Definition 10)")
        if j < len(Ds) and Ds[j] < next_delay(D, K, W):
            rule = "8 D_{j} + 4K" if W is None else "4(K + D_{j} + W)"
            raise ConfigError(f"D_{j + 1}={Ds[j]} must be >= {rule.format(j=j)} = "
                              f"{next_delay(D, K, W)} (Claim 1)")


class CandidatePredictor:
    """The online predictor ``A`` of Algorithm 3 (see module docstring).

    Args:
      H: finite class. params: Algorithm 2 sizes. rep_a, rep_b: each replacement's target.
      delays: ``D_1..D_N`` (a list, or a callable ``j -> D_j`` for huge ``N``).
      seed: None (default: fresh OS entropy), an int (reproducible: NOT private against
        anyone who knows it) or a ``SeedSequence``; Algorithm 2 and every replacement get
        independent child streams.
      design: Mirror ramp for ``(share·rep_a, rep_b/2)`` (default :func:`mirror_window`).
      share: the Mirror's share of each replacement's ``a`` (default 1/2, Definition 10;
        see :mod:`dpmt.online.rep`).
      check_claim1: verify that replays reproduce the released predictions.

    ``predict(x) -> int`` / ``update(y)``; ``privacy()`` returns Algorithm 2's plus ``N``
    replacements' ``(ε, δ)`` (basic composition, Lemma 12).
    """

    def __init__(self, H: HypothesisClass, params: CandidateParams, rep_a: float,
                 rep_b: float, delays, *, seed=None, design: RampDesign | None = None,
                 check_claim1: bool = True, share: float = 0.5):
        self.H = H
        self.params = params
        self.rep_a = float(rep_a)
        self.rep_b = float(rep_b)
        self.share = check_share(share)
        self._design = design
        self._delays = delays
        ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        self._seedseq = ss
        self._seq_ss, self._rep_ss = ss.spawn(2)
        self.seq = CandidateSequence(H, params, np.random.default_rng(self._seq_ss))
        self.check_claim1 = check_claim1
        self.h0 = np.ascontiguousarray(H.soa_table(H.full()), dtype=np.int8)
        self.tables = [self.h0]   # h_0..h_m as label tables over X
        self.chosen: list[int | None] = []  # H-indices of h_1..h_m (None = padded h_0)
        self.reps: list[Replacement] = []
        self.m = 0
        self.t = 0
        cap = 1024
        self._xs = np.zeros(cap, np.int64)
        self._ys = np.zeros(cap, np.int8)
        self._preds = np.zeros(cap, np.int8)
        self._mc = 0                 # mistakes of h_m on the prefix
        self._mist: list[int] = []   # first K mistake rounds of h_m
        self._x = None
        self._w = 0
        self._cur = self.h0

    # -- parameters --------------------------------------------------------------------
    def delay(self, j: int) -> int:
        return int(self._delays(j) if callable(self._delays) else self._delays[j - 1])

    @property
    def design(self) -> RampDesign:
        if self._design is None:
            self._design = mirror_window(self.share * self.rep_a, self.rep_b / 2)
        return self._design

    def rep_privacy(self, D: int | None = None) -> tuple[float, float]:
        """(ε, δ) of one replacement with delay ``D`` (default ``D_1``, the largest δ)."""
        D = self.delay(1) if D is None else D
        return self.rep_a, self.design.delta + acceptance_delta(self.rep_a, D, self.share)

    def privacy(self) -> tuple[float, float]:
        """Algorithm 2's (ε, δ) plus ``N`` replacements' (basic composition)."""
        e1, d1 = self.params.privacy()
        ea, da = self.rep_privacy()
        return e1 + self.params.N * ea, d1 + self.params.N * da

    # -- online ------------------------------------------------------------------------
    def _grow(self) -> None:
        cap = 2 * self._xs.size
        for name in ("_xs", "_ys", "_preds"):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[: old.size] = old
            setattr(self, name, new)

    def _advance(self) -> None:
        """Obtain h_{m+1}, replay A_{m+1} on the prefix, and switch to it (Algorithm 3)."""
        K = self.params.K
        idx = np.asarray(self._mist[:K], np.int64)
        z = self.seq.next_candidate(self._xs[idx], self._ys[idx])
        table = self.h0 if z is None else np.ascontiguousarray(self.H.matrix[z], np.int8)
        j = self.m + 1
        rep = Replacement(self.rep_a, self.rep_b, self.delay(j),
                          rng=np.random.default_rng(self._rep_ss.spawn(1)[0]),
                          design=self.design, share=self.share)
        t = self.t
        xs, ys, us = self._xs[:t], self._ys[:t], self._preds[:t]
        vs = table[xs]
        out = rep.replay(us, vs, ys)
        if self.check_claim1 and not np.array_equal(out, us):
            raise DpmtError("internal error: the replayed replacement changed a released "
                            "prediction (Claim 1 violated; delays too small?)")
        self.tables.append(table)
        self.chosen.append(z)
        self.reps.append(rep)
        self.m = j
        self._cur = table
        mis = np.flatnonzero(vs != ys)
        self._mc = int(mis.size)
        self._mist = mis[:K].tolist()

    def predict(self, x: int) -> int:
        K = self.params.K
        while self.m < self.params.N and self._mc >= K:
            self._advance()
        w = int(self.h0[x])
        if self.m:
            for j, rep in enumerate(self.reps, start=1):
                w = rep.step(w, int(self.tables[j][x]))
        self._x = x
        self._w = w
        return w

    def update(self, y: int) -> None:
        if self._x is None:
            raise DpmtError("update called without a preceding predict(x)")
        t = self.t
        if t >= self._xs.size:
            self._grow()
        x = self._x
        self._xs[t] = x
        self._ys[t] = y
        self._preds[t] = self._w
        for rep in self.reps:
            rep.observe(y)
        if self._cur[x] != y:
            self._mc += 1
            if len(self._mist) < self.params.K:
                self._mist.append(t)
        self.t = t + 1
        self._x = None

    def run(self, xs, ys) -> np.ndarray:
        """Feed a whole stream; returns the predictions. Identical to the predict/update
        loop (same randomness, same final state). Each replacement depends only on its own
        inputs, so between candidate switches the chain is evaluated level by level with
        :meth:`Replacement.replay` (bulk over agreement rounds and the first ``D``
        disagreements); a segment ends at the round completing ``h_m``'s batch."""
        if self._x is not None:
            raise DpmtError("run called between predict and update")
        xs = np.asarray(xs, np.int64)
        ys = np.asarray(ys, np.int8)
        T = xs.size
        out = np.empty(T, np.int8)
        K, N = self.params.K, self.params.N
        t0 = 0
        while t0 < T:
            while self.m < N and self._mc >= K:
                self._advance()
            end = T
            wrong = np.flatnonzero(self._cur[xs[t0:]] != ys[t0:])
            if self.m < N and self._mc + wrong.size >= K:  # stop after the K-th mistake
                wrong = wrong[: K - self._mc]
                end = t0 + int(wrong[-1]) + 1
            sx, sy = xs[t0:end], ys[t0:end]
            w = self.h0[sx]
            for j, rep in enumerate(self.reps, start=1):
                w = rep.replay(w, self.tables[j][sx], sy)
            out[t0:end] = w
            while self.t + (end - t0) > self._xs.size:
                self._grow()
            a, b = self.t, self.t + (end - t0)
            self._xs[a:b] = sx
            self._ys[a:b] = sy
            self._preds[a:b] = w
            room = K - len(self._mist)
            if room > 0:
                self._mist.extend((wrong[:room] + a).tolist())
            self._mc += int(wrong.size)
            self.t = b
            t0 = end
        return out
