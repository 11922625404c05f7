"""Private online *learners*: baselines that release a whole hypothesis every round.

A learner releases ``h_t`` (a function on the domain) before seeing ``x_t``, predicts
``h_t(x_t)`` and then sees ``y_t``. Its privacy guarantee is ordinary (ε, δ)-DP of the
entire released sequence ``(h_1, ..., h_T)`` under replacement of one example — stronger
than the joint DP of a predictor, which releases only ``ŷ_t`` and excludes round ``i`` from
the guarantee. The paper's lower bound (Theorems A/B of Sanyal 2026) is about learners.

Both classes follow the module protocol ``predict(x) -> int``, ``update(y)``, and have
``privacy() -> (epsilon, delta)`` and ``hypothesis() -> np.ndarray`` (the released
``h_t`` as a label vector over the domain, for the round about to be played).

NameAndShameLearner
    Construction: release ``h_t = SOA_{H|R_t}``, the SOA *function* of the retained sample
    ``R_t``, where each labelled example is retained independently with probability ``γ``
    (the Name-and-Shame SOA of DSS24). The released sequence is a function of the retained
    sample only; coupling two neighbouring streams on the same retention coins, the whole
    released sequence is identical unless the differing example is retained (probability
    ``γ``), so the learner is **(0, γ)-DP** as a learner (not only jointly). Its predictions
    ``h_t(x_t)`` coincide with the Name-and-Shame predictor's (same coins ⇒ same mistakes,
    at most ``d/γ`` in expectation on realisable streams): with ``γ = δ`` it is an
    (ε, δ)-DP learner for every ε ≥ 0 and matches the ``O(1/δ)`` branch of the lower bound.

AboveThresholdLearner
    Sparse-vector switching. Keep a current hypothesis ``h`` (initially uniform over ``H``,
    which uses no data) and count its mistakes since it was chosen. An AboveThreshold
    instance (Dwork–Roth, Alg. 1 of the SVT chapter; threshold noise Lap(2/ε₀), query noise
    Lap(4/ε₀), sensitivity-1 queries) watches the running count; when it fires, a new
    hypothesis is drawn by the exponential mechanism over ``H`` with utility ``−(errors on
    all examples so far)`` (sensitivity 1, ``P ∝ exp(−ε₀·err/2)``) and a fresh instance
    starts. After ``c`` switches the learner keeps its last hypothesis (no more data use).
    Each AboveThreshold instance and each exponential-mechanism draw is ``ε₀``-DP; the
    whole run is the adaptive composition of ``2c`` of them, with ``ε₀ ≈ ε/(2c)`` (nudged
    down by the accountant's discretisation error so the reported total is ≤ ε).
    :meth:`privacy` reports the composition computed with ``dp_accounting`` (privacy-loss
    distributions; each ε₀-DP mechanism represented by its dominating pair, binary
    randomized response with parameter ε₀; see :func:`compose_pure_dp`) at δ = 0:
    ``(≤ ε, 0)``.

    The threshold is ``τ = (4/ε₀)·ln(horizon/β) + (2/ε₀)·ln(1/β)``, so that with
    probability ≥ 1 − 2β no instance fires while the count is still 0 over the horizon;
    each switch therefore costs ``Θ(log(T)/ε₀)`` mistakes — the learner's price that grows
    with the horizon.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpmt.errors import ConfigError, DpmtError, check_range
from dpmt.online.hypotheses import HypothesisClass
from dpmt.online.name_and_shame import NameAndShame
from dpmt.online.soa import check_stream

__all__ = ["NameAndShameLearner", "AboveThresholdLearner", "compose_pure_dp"]

_PLD_GRID = 1e-5  # value discretisation of the PLDs (pessimistic rounding per event)


def _pld_grid(eps) -> float:
    """Loss grid: 1e-5, finer for tiny ε_i (rounding error ≤ 0.1% of each ε_i)."""
    return min(_PLD_GRID, min(eps) / 1e3)


def compose_pure_dp(epsilons, delta: float = 0.0) -> float:
    """ε of the adaptive composition of pure ε_i-DP mechanisms at ``delta``, via
    ``dp_accounting``'s privacy-loss distributions (PLD).

    Each ε_i-DP mechanism is represented by its dominating pair, binary randomized response
    with parameter ε_i (``RandomizedResponseDpEvent``'s PLD, replace-one neighbours), and
    the PLDs are composed pairwise, without tail truncation, as sparse PMFs (exact
    convolution), so ``delta = 0`` gives the basic-composition ε and ``delta > 0`` the
    optimal composition bound. Losses are rounded up (pessimistic) to a grid of
    ``min(1e-5, min ε_i / 1000)``.

    (Not ``PLDAccountant``: in dp_accounting 0.6.0 it ignores the ``count`` of a
    self-composed randomized-response event, and its tail truncation makes ε(δ = 0)
    infinite after a few dozen compositions; nor ``self_compose``, whose dense FFT
    convolution loses the tiny top atoms and under-reports ε at δ = 0.)
    """
    return _compose_pure_dp(tuple(float(e) for e in epsilons), float(delta))


@functools.lru_cache(maxsize=256)
def _compose_pure_dp(eps: tuple, delta: float) -> float:
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    eps = tuple(e for e in eps if e > 0)
    if not eps:
        return 0.0
    grid = _pld_grid(eps)
    total = None
    ones = {}
    for e in eps:
        one = ones.get(e)
        if one is None:
            one = ones[e] = pldlib.from_randomized_response(
                noise_parameter=2.0 / (1.0 + math.exp(e)), num_buckets=2,
                value_discretization_interval=grid,
                neighboring_relation=NeighboringRelation.REPLACE_ONE)
        # pairwise compose keeps the two-atom PMFs sparse (exact convolution of a few
        # hundred atoms); dp_accounting's self_compose would switch to a dense FFT whose
        # rounding wipes out the tiny-probability top atoms that decide ε at δ = 0
        total = one if total is None else total.compose(one, tail_mass_truncation=0.0)
    val = float(total.get_epsilon_for_delta(delta))
    if delta == 0 and val < sum(eps) - 1e-9:  # a top atom underflowed: refuse to under-report
        raise DpmtError(f"cannot account {len(eps)} compositions exactly at delta = 0 "
                        "(probabilities underflow); use fewer switches")
    return val


class NameAndShameLearner(NameAndShame):
    """Name-and-Shame SOA as a learner: releases ``SOA_{H|R_t}`` each round; (0, γ)-DP.

    Same arguments and coins as :class:`~dpmt.online.name_and_shame.NameAndShame`; see the
    module docstring for the construction and the privacy argument.
    """

    def hypothesis(self) -> np.ndarray:
        """The released hypothesis for the next round: SOA's label at every point."""
        return self.H.soa_table(self.soa.version_space)


class AboveThresholdLearner:
    """Sparse-vector switching learner; (ε, 0)-DP as a learner (see module docstring).

    Args:
      H: hypothesis class.
      epsilon: total privacy budget ε > 0.
      horizon: the stream length T the threshold is tuned for (>= 1).
      max_switches: c >= 1, the number of switches (default ``Ldim(H) + 1``).
      beta: failure probability used in the threshold (0 < β < 1).
      seed: None (default: fresh OS entropy), an int (reproducible: NOT private against
        anyone who knows it) or a ``SeedSequence``.

    Attributes: ``mistakes``, ``rounds``, ``switches``, ``current`` (index of h),
    ``threshold`` (τ), ``epsilon0`` (per-mechanism ε₀).
    """

    _BLOCK = 4096

    def __init__(self, H: HypothesisClass, epsilon: float, horizon: int,
                 max_switches: int | None = None, beta: float = 0.05, seed=None):
        if not isinstance(H, HypothesisClass):
            raise ConfigError(f"AboveThresholdLearner needs a HypothesisClass "
                              f"(got {type(H).__name__})")
        check_range("epsilon", epsilon, low=0, low_open=True)
        if math.isinf(float(epsilon)):
            raise ConfigError("epsilon must be finite (got inf)")
        check_range("horizon", horizon, low=1, integer=True)
        check_range("beta", beta, low=0, high=1, low_open=True, high_open=True)
        if max_switches is None:
            max_switches = H.littlestone_dimension() + 1
        check_range("max_switches", max_switches, low=1, high=200, integer=True)
        self.H = H
        self.epsilon = float(epsilon)
        self.horizon = int(horizon)
        self.max_switches = int(max_switches)
        self.beta = float(beta)
        # ε₀ = ε/(2c), nudged down if the accountant's (pessimistically discretised)
        # composition exceeds ε, so that privacy() never reports more than ε.
        e0 = self.epsilon / (2 * self.max_switches)
        for _ in range(4):
            total = compose_pure_dp([e0] * (2 * self.max_switches), 0.0)
            if total <= self.epsilon:
                break
            e0 = e0 * self.epsilon / total - _pld_grid([e0])  # one grid step per event
        self.epsilon0 = e0
        self._privacy = (total, 0.0)
        self.threshold = (4.0 / e0) * math.log(self.horizon / self.beta) + \
            (2.0 / e0) * math.log(1.0 / self.beta)
        ss = np.random.SeedSequence(seed) if not isinstance(seed, np.random.SeedSequence) \
            else seed
        q_ss, s_ss = ss.spawn(2)
        self._rng_q = np.random.default_rng(q_ss)   # query noise only (buffered)
        self._rng_s = np.random.default_rng(s_ss)   # threshold noise and selections
        self._qbuf = np.empty(0)
        self._qpos = 0
        self._qused = 0  # query-noise draws consumed (one per round while active)
        # counts of labelled examples per (point, label): errors of every h on demand
        self._cnt = np.zeros((H.n_points, 2), np.int64)
        self.mistakes = 0
        self.rounds = 0
        self.switches = 0
        self.current = int(self._rng_s.integers(H.n_hypotheses))  # uniform: no data used
        self._row = H.matrix[self.current]
        self._count = 0        # mistakes of the current h since it was chosen
        self._active = True    # an AboveThreshold instance is running
        self._noisy_tau = self.threshold + self._rng_s.laplace(scale=2.0 / e0)
        self._pending = False
        self._x = 0
        self._yhat = 0

    # -- accounting --------------------------------------------------------------------
    def privacy(self) -> tuple[float, float]:
        """(ε, 0): dp_accounting composition of the 2c ε₀-DP mechanisms at δ = 0."""
        return self._privacy

    def hypothesis(self) -> np.ndarray:
        """The released hypothesis for the next round (label vector)."""
        return self._row

    # -- noise -------------------------------------------------------------------------
    def _peek_noise(self, n: int) -> np.ndarray:
        """The next ``n`` query-noise draws, not consumed. Draws come from fixed-size
        blocks of the query generator, so the sequence is the same however it is read."""
        while len(self._qbuf) - self._qpos < n:
            block = self._rng_q.laplace(scale=4.0 / self.epsilon0, size=self._BLOCK)
            self._qbuf = np.concatenate([self._qbuf[self._qpos:], block])
            self._qpos = 0
        return self._qbuf[self._qpos:self._qpos + n]

    def errors(self) -> np.ndarray:
        """Errors of every hypothesis on all examples seen so far (int64, n_hypotheses)."""
        M = self.H.matrix.astype(np.int64)
        # err_h = Σ_x cnt[x,0]·h(x) + cnt[x,1]·(1 − h(x))
        return M @ self._cnt[:, 0] + (1 - M) @ self._cnt[:, 1]

    def selection_probabilities(self) -> np.ndarray:
        """Exponential mechanism: P[h] ∝ exp(−ε₀·err_h/2) (err has sensitivity 1)."""
        err = self.errors()
        p = np.exp(-0.5 * self.epsilon0 * (err - err.min()))
        return p / p.sum()

    def _switch(self) -> None:
        """Exponential mechanism over H on all examples so far, then a fresh instance."""
        p = self.selection_probabilities()
        self.current = int(self._rng_s.choice(self.H.n_hypotheses, p=p))
        self._row = self.H.matrix[self.current]
        self.switches += 1
        self._count = 0
        if self.switches < self.max_switches:
            self._noisy_tau = self.threshold + self._rng_s.laplace(scale=2.0 / self.epsilon0)
        else:
            self._active = False

    # -- protocol ----------------------------------------------------------------------
    def predict(self, x: int) -> int:
        try:
            if not 0 <= x < self.H.n_points:
                raise ConfigError(f"point must be in [0, {self.H.n_points - 1}] (got {x!r})")
            self._yhat = int(self._row[x])
        except (TypeError, IndexError):
            raise ConfigError(f"point must be an integer index (got {x!r})") from None
        self._x = x
        self._pending = True
        return self._yhat

    def update(self, y: int) -> None:
        if not self._pending:
            raise DpmtError("update called without a preceding predict(x)")
        if y != 0 and y != 1:
            raise ConfigError(f"label must be 0 or 1 (got {y!r})")
        self._pending = False
        self.rounds += 1
        self._cnt[self._x, y] += 1
        if y != self._yhat:
            self.mistakes += 1
            self._count += 1
        if self._active:
            nu = self._peek_noise(1)[0]
            self._qpos += 1
            self._qused += 1
            if self._count + nu >= self._noisy_tau:
                self._switch()

    def run(self, xs, ys, return_mistakes: bool = False):
        """Whole stream, vectorised between switches; identical to the per-round loop."""
        if self._pending:
            raise DpmtError("run called between predict and update")
        xs, ys = check_stream(self.H, xs, ys)
        T = len(xs)
        marks = np.zeros(T, np.uint8) if return_mistakes else None
        m_start = self.mistakes
        t = 0
        chunk = 256
        while t < T:
            e = T if not self._active else min(T, t + chunk)
            miss = self._row[xs[t:e]] != ys[t:e]
            fired = False
            if self._active:
                q = self._count + np.cumsum(miss)
                hit = np.flatnonzero(q + self._peek_noise(e - t) >= self._noisy_tau)
                if hit.size:
                    fired = True
                    e = t + int(hit[0]) + 1
                    miss = miss[: e - t]
                self._qpos += e - t  # one query (one noise draw) per round
                self._qused += e - t
            np.add.at(self._cnt, (xs[t:e], ys[t:e]), 1)
            nm = int(miss.sum())
            self.mistakes += nm
            self._count += nm
            self.rounds += e - t
            if marks is not None:
                marks[t:e] = miss
            if fired:
                self._switch()
                chunk = 256
            else:
                chunk = min(chunk * 4, 1 << 18)
            t = e
        return marks if return_mistakes else self.mistakes - m_start
