"""Name-and-Shame SOA predictor (Dmitriev–Szabó–Sanyal 2024; Fact 5 of Sanyal 2026).

Start with an empty retained sample ``R``. On round ``t`` predict ``SOA_{H|R}(x_t)``; after
seeing ``y_t`` retain ``(x_t, y_t)`` independently with probability ``γ``.

* **Privacy: (0, γ)-joint DP.** The retention coins are independent of the data. Couple two
  neighbouring streams (differing at round ``i``) on the same coins: if round ``i`` is not
  retained (probability ``1 - γ``), every other round's output is a function of the same
  retained sample, hence identical. So the outputs of all rounds but ``i`` are within total
  variation ``γ``: ``(0, γ)``-indistinguishable. (Round ``i``'s own output is excluded by
  joint DP; it does not depend on ``(x_i, y_i)``'s label anyway.)
* **Mistakes: ≤ d/γ in expectation** on realisable streams (``d = Ldim(H)``). Each
  mistake is retained with probability ``γ`` independently of the past, and SOA makes at
  most ``d`` mistakes on the retained sample; after ``d`` retained mistakes the retained
  version space has Ldim 0 and contains the target, so no further mistakes happen. Hence
  the mistake count is dominated by the number of Bernoulli(γ) trials needed for ``d``
  successes (negative binomial, mean ``d/γ``).

Retention is implemented with geometric gaps (the rounds between retained examples are
i.i.d. Geometric(γ)), which is the same Bernoulli(γ) process but costs one random draw per
*retained* round; a round therefore costs an SOA prediction and a counter decrement.

Non-realisable streams: when the retained sample becomes inconsistent, the inner SOA's
``on_empty`` policy applies (default: restart from the class restricted to the new
example). Fact 5 uses a fixed public function in that case instead; either policy is a
function of the retained sample alone, so the privacy argument is unchanged.
"""

from __future__ import annotations

import numpy as np

from dpmt.errors import ConfigError, DpmtError, check_range
from dpmt.online.hypotheses import HypothesisClass
from dpmt.online.soa import SOA, check_stream

__all__ = ["NameAndShame"]


class NameAndShame:
    """Subsampled SOA predictor: (0, γ)-JDP, at most d/γ expected mistakes.

    Args:
      H: hypothesis class.
      gamma: retention probability, in (0, 1].
      seed: the retention coins: None (default: fresh OS entropy), an int (reproducible:
        NOT private against anyone who knows it) or a ``numpy.random.Generator``.
      on_empty: inner SOA policy on an inconsistent retained sample (see :class:`SOA`).

    Attributes: ``mistakes``, ``rounds``, ``retained`` (number of retained examples),
    ``soa`` (the SOA on the retained sample; its ``mistakes`` are the retained mistakes).
    """

    def __init__(self, H: HypothesisClass, gamma: float, seed=None,
                 on_empty: str = "restart"):
        if not isinstance(H, HypothesisClass):
            raise ConfigError(f"NameAndShame needs a HypothesisClass (got {type(H).__name__})")
        check_range("gamma", gamma, low=0, high=1, low_open=True)
        self.H = H
        self.gamma = float(gamma)
        self.soa = SOA(H, on_empty=on_empty)
        self._rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.mistakes = 0
        self.rounds = 0
        self.retained = 0
        self._gap = self._next_gap()  # the current round is retained when the gap reaches 1
        self._pending = False
        self._yhat = 0

    def _next_gap(self) -> int:
        """Rounds until the next retained example, counting the current one (>= 1)."""
        if self.gamma >= 1.0:
            return 1
        return int(self._rng.geometric(self.gamma))

    def privacy(self) -> tuple[float, float]:
        """``(epsilon, delta) = (0, γ)`` joint DP (Fact 5)."""
        return (0.0, self.gamma)

    @property
    def version_space(self) -> int:
        """Version space of the retained sample."""
        return self.soa.version_space

    def predict(self, x: int) -> int:
        y = self.soa.predict(x)
        self._yhat = y
        self._pending = True
        return y

    def update(self, y: int) -> None:
        if not self._pending:
            raise DpmtError("update called without a preceding predict(x)")
        if y != 0 and y != 1:
            raise ConfigError(f"label must be 0 or 1 (got {y!r})")
        if y != self._yhat:
            self.mistakes += 1
        self._pending = False
        self.rounds += 1
        self._gap -= 1
        if self._gap == 0:
            self.soa.update(y)
            self.retained += 1
            self._gap = self._next_gap()
        else:
            self.soa._x = None  # discard the inner prediction: this example is not retained

    def run(self, xs, ys, return_mistakes: bool = False):
        """Feed a whole stream; identical (same coins, same state) to the per-round loop.

        Between retained rounds the retained version space is fixed, so predictions are a
        table lookup. Returns the number of mistakes on this stream, or per-round mistake
        indicators with ``return_mistakes=True``.
        """
        if self._pending:
            raise DpmtError("run called between predict and update")
        xs, ys = check_stream(self.H, xs, ys)
        T = len(xs)
        xl, yl = xs.tolist(), ys.tolist()
        marks = np.zeros(T, np.uint8) if return_mistakes else None
        m_start = self.mistakes
        t = 0
        while t < T:
            r = t + self._gap - 1           # index of the next retained round
            end = min(r, T)
            L = end - t
            if L > 0:                        # rounds t..end-1 are not retained
                if L < 32:  # short segment: scalar lookups in the lazy SOA table
                    V = self.soa.version_space
                    table = self.H._lazy_table(V)
                    for s in range(t, end):
                        x = xl[s]
                        lab = table[x]
                        if lab < 0:
                            lab = self.H.soa_labels(V, [x])[0]
                        if lab != yl[s]:
                            self.mistakes += 1
                            if marks is not None:
                                marks[s] = 1
                else:
                    pred = self.H.soa_labels(self.soa.version_space, xs[t:end])
                    miss = pred != ys[t:end]
                    self.mistakes += int(miss.sum())
                    if marks is not None:
                        marks[t:end] = miss
                self.rounds += L
                self._gap -= L
            if r >= T:
                break
            before = self.mistakes
            self.predict(xl[r])
            self.update(yl[r])       # gap reaches 0: retained, next gap drawn
            if marks is not None and self.mistakes != before:
                marks[r] = 1
            t = r + 1
        return marks if return_mistakes else self.mistakes - m_start
