"""SOA: definition, mistake bound, fast whole-stream path."""

import numpy as np
import pytest

from dpmt.errors import ConfigError, DpmtError
from dpmt.online.hypotheses import HypothesisClass, point_functions, thresholds
from dpmt.online.soa import SOA


def random_class(rng, max_h=12, max_x=6):
    n_h = int(rng.integers(2, max_h + 1))
    n_x = int(rng.integers(1, max_x + 1))
    return HypothesisClass((rng.random((n_h, n_x)) < rng.uniform(0.2, 0.8)).astype(np.uint8))


def realisable_stream(H, rng, T):
    h = int(rng.integers(H.n_hypotheses))
    xs = rng.integers(0, H.n_points, T)
    return xs, H.matrix[h, xs].astype(int)


@pytest.mark.parametrize("seed", range(200))
def test_soa_mistake_bound_random_classes(seed):
    rng = np.random.default_rng(seed)
    H = random_class(rng)
    d = H.littlestone_dimension()
    xs, ys = realisable_stream(H, rng, 50)
    s = SOA(H)
    for x, y in zip(xs, ys):
        s.predict(int(x)); s.update(int(y))
    assert s.mistakes <= d
    assert s.restarts == 0


@pytest.mark.parametrize("n", [1, 3, 7, 31, 100, 255])
def test_soa_adversary_forces_exactly_d(n):
    # The Littlestone adversary: query a point maximising min-side Ldim, answer against SOA
    # while staying realisable. SOA must make exactly Ldim mistakes (optimal both ways).
    H = thresholds(n)
    d = H.littlestone_dimension()
    s = SOA(H)
    for _ in range(d + 3):
        V = s.version_space
        best, bx = -2, None
        for x in range(H.n_points):
            v1 = H.restrict(V, x, 1)
            v0 = V ^ v1
            if v1 and v0:
                m = min(H.ldim(v0), H.ldim(v1))
                if m > best:
                    best, bx = m, x
        if bx is None:
            break
        yhat = s.predict(bx)
        s.update(1 - yhat)
    assert s.mistakes == d


def test_soa_prediction_is_argmax_ldim_with_zero_tiebreak():
    rng = np.random.default_rng(1)
    for _ in range(50):
        H = random_class(rng)
        V = H.full()
        s = SOA(H, V)
        for x in range(H.n_points):
            a = H.ldim(H.restrict(V, x, 1)); b = H.ldim(H.restrict(V, x, 0))
            assert s.predict(x) == (1 if a > b else 0)
            assert H.soa_label(V, x) == s.predict(x)
        assert H.soa_table(V).tolist() == [s.predict(x) for x in range(H.n_points)]


@pytest.mark.parametrize("seed", range(20))
def test_thresholds_realisable_many_seeds(seed):
    rng = np.random.default_rng(seed)
    H = thresholds(255)
    xs, ys = realisable_stream(H, rng, 3000)
    s = SOA(H)
    for x, y in zip(xs.tolist(), ys.tolist()):
        s.predict(x); s.update(y)
    assert s.mistakes <= 8
    # the true threshold is still alive
    assert all(H.matrix[h, xs].tolist() == ys.tolist() for h in H.members(s.version_space))


def _loop(s, xs, ys):
    marks = []
    for x, y in zip(xs.tolist(), ys.tolist()):
        m = s.mistakes
        s.predict(x); s.update(y)
        marks.append(int(s.mistakes != m))
    return np.array(marks, np.uint8)


@pytest.mark.parametrize("policy", ["restart", "keep"])
@pytest.mark.parametrize("seed", range(30))
def test_run_equals_per_round_loop(seed, policy):
    rng = np.random.default_rng(seed)
    H = random_class(rng, max_h=20, max_x=8) if seed % 2 else thresholds(int(rng.integers(2, 60)))
    T = int(rng.integers(1, 400))
    if seed % 3 == 0:  # non-realisable: random labels
        xs = rng.integers(0, H.n_points, T); ys = rng.integers(0, 2, T)
    else:
        xs, ys = realisable_stream(H, rng, T)
    a = SOA(H, on_empty=policy); b = SOA(H, on_empty=policy)
    la = _loop(a, xs, ys)
    lb = b.run(xs, ys, return_mistakes=True)
    assert np.array_equal(la, lb)
    assert (a.mistakes, a.version_space, a.restarts, a.rounds) == \
        (b.mistakes, b.version_space, b.restarts, b.rounds)
    # continuing after run works like continuing after the loop
    xs2, ys2 = rng.integers(0, H.n_points, 20), rng.integers(0, 2, 20)
    assert np.array_equal(_loop(a, xs2, ys2), b.run(xs2, ys2, return_mistakes=True))


def test_non_realisable_policies():
    H = point_functions(3)
    s = SOA(H)  # restart
    s.predict(0); s.update(1)   # V = {f0}
    s.predict(1); s.update(1)   # contradicts f0: restart to full ∧ (1,1) = {f1}
    assert s.restarts == 1 and H.members(s.version_space).tolist() == [1]
    k = SOA(H, on_empty="keep")
    k.predict(0); k.update(1)
    k.predict(1); k.update(1)
    assert k.restarts == 1 and H.members(k.version_space).tolist() == [0]
    # a label no hypothesis gives: restart to the full class
    one = HypothesisClass([[0, 1]])
    z = SOA(one)
    z.predict(0); z.update(1)
    assert z.version_space == one.full() and z.restarts == 1


def test_soa_errors():
    H = thresholds(4)
    with pytest.raises(ConfigError):
        SOA(H, version_space=0)
    with pytest.raises(ConfigError, match="on_empty"):
        SOA(H, on_empty="ignore")
    with pytest.raises(ConfigError):
        SOA(np.eye(3))
    s = SOA(H)
    with pytest.raises(DpmtError):
        s.update(1)
    with pytest.raises(ConfigError, match="point"):
        s.predict(4)
    with pytest.raises(ConfigError, match="point"):
        s.predict(-1)
    for bad in (1.5, "2", None):
        with pytest.raises(ConfigError, match="point"):
            s.predict(bad)
    s.predict(1)
    with pytest.raises(ConfigError, match="label"):
        s.update(3)
    with pytest.raises(ConfigError):
        s.run([0, 1], [0])
    with pytest.raises(ConfigError):
        s.run([0, 9], [0, 1])


def test_soa_version_space_start():
    H = thresholds(8)
    V = H.bitset([2, 3, 4])
    s = SOA(H, V)
    assert s.predict(0) == 0  # every θ in V is > 0
    assert s.predict(7) == 1  # every θ in V is <= 7
    assert s.predict(3) == 1  # V_{3→1} = {2, 3} (Ldim 1) beats V_{3→0} = {4} (Ldim 0)


@pytest.mark.slow
def test_soa_million_rounds_1024_thresholds():
    from dpmt.online.streams import threshold_stream
    H = thresholds(1023)
    assert H.n_hypotheses == 1024 and H.littlestone_dimension() == 10
    for seed in range(3):
        st = threshold_stream(1023, 10 ** 6, seed=seed, dist="boundary" if seed else "uniform")
        a, b = SOA(H), SOA(H)
        for x, y in zip(st.xs.tolist(), st.ys.tolist()):
            a.predict(x); a.update(y)
        assert b.run(st.xs, st.ys) == a.mistakes <= 10
        assert a.version_space == b.version_space


class _ReferenceSOA:
    """The SOA rule written out without any table or memo shortcut: predict 1 iff
    Ldim(V_{x→1}) > Ldim(V_{x→0}), restrict V by the label, the same empty-V policies."""

    def __init__(self, H, on_empty="restart"):
        self.H, self.on_empty = H, on_empty
        self.version_space = H.full()
        self.mistakes = self.restarts = 0

    def predict(self, x):
        V = self.version_space
        self._x = x
        self._y = int(self.H.ldim(H_restrict(self.H, V, x, 1))
                      > self.H.ldim(H_restrict(self.H, V, x, 0)))
        return self._y

    def update(self, y):
        self.mistakes += int(y != self._y)
        new = H_restrict(self.H, self.version_space, self._x, y)
        if new == 0:
            self.restarts += 1
            if self.on_empty == "restart":
                new = H_restrict(self.H, self.H.full(), self._x, y) or self.H.full()
            else:
                new = self.version_space
        self.version_space = new


def H_restrict(H, V, x, y):
    return V & int(H.bitset(np.flatnonzero(H.matrix[:, x] == y)))


@pytest.mark.parametrize("policy", ["restart", "keep"])
@pytest.mark.parametrize("seed", range(16))
def test_per_round_outputs_match_reference(seed, policy):
    """The per-version-space prediction tables change no per-round output: predictions,
    version spaces, mistakes and restarts equal the table-free rule, round by round, with
    two SOAs sharing the class (and its tables) interleaved, on realisable and random-label
    streams; a version space set from outside is honoured."""
    rng = np.random.default_rng(100 + seed)
    H = random_class(rng, max_h=24, max_x=9) if seed % 2 else thresholds(int(rng.integers(2, 80)))
    T = 300
    if seed % 4 == 0:
        xs, ys = rng.integers(0, H.n_points, T), rng.integers(0, 2, T)
    else:
        xs, ys = realisable_stream(H, rng, T)
    a, b, ref = SOA(H, on_empty=policy), SOA(H, on_empty=policy), _ReferenceSOA(H, policy)
    for t, (x, y) in enumerate(zip(xs.tolist(), ys.tolist())):
        if t == T // 2:  # an equal-valued but distinct int object, set from outside
            a.version_space = int(str(a.version_space))
        p = ref.predict(x)
        assert a.predict(x) == p and b.predict(np.int64(x)) == p
        ref.update(y); a.update(y); b.update(np.int8(y))
        assert a.version_space == b.version_space == ref.version_space
    assert (a.mistakes, a.restarts) == (b.mistakes, b.restarts) == (ref.mistakes, ref.restarts)
    assert a.rounds == b.rounds == T


def test_label_one_as_float_and_bool():
    """Labels 1.0 / True were accepted before the tables; they still are, with the same
    effect as 1."""
    H = thresholds(7)
    for lab in (1, 1.0, True, np.int8(1)):
        s = SOA(H)
        s.predict(3); s.update(lab)
        assert s.version_space == H.restrict(H.full(), 3, 1)
