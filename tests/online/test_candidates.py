"""Algorithm 2 (candidate sequence) and Algorithm 3 (online use): structure, Claim 1,
mistake bounds."""

import math

import numpy as np
import pytest

from dpmt.errors import ConfigError
from dpmt.online import point_functions, thresholds
from dpmt.online.candidates import (CandidateParams, CandidatePredictor, CandidateSequence,
                                    check_delays, level_thresholds, next_delay)
from dpmt.online.mirror import mirror_window
from dpmt.online.rep import Replacement, acceptance_delta, rep_min_D
from dpmt.online.selection import balanced_gamma
from dpmt.online.streams import threshold_stream

A, B = 4.0, 2e-3  # replacements with a short Mirror window: small delays for fast tests


def _params(H, k=40, n=1, N=3, levels=1, eps_sel=1.5):
    s = H.n_hypotheses
    return CandidateParams(k=k, n=n, K=2 * k * n, N=N, levels=levels, eps_sel=eps_sel,
                           log_gamma=balanced_gamma(eps_sel, k, s), s=s,
                           d=H.littlestone_dimension())


def _delays(params):
    rm = rep_min_D(A, B)
    Ds = [max(4 * params.K, rm)]
    for _ in range(params.N - 1):
        Ds.append(8 * Ds[-1] + 4 * params.K)
    return Ds


def _first_K_mistakes(table, xs, ys, K):
    return np.flatnonzero(table[xs] != ys)[:K]


def test_batches_of_neighbouring_streams_differ_in_two_timestamps():
    """Lemma 10's key fact: B_K(h, S) and B_K(h, S') differ in at most two timestamps."""
    rng = np.random.default_rng(0)
    H = thresholds(31)
    for _ in range(300):
        xs = rng.integers(0, 31, 200)
        ys = rng.integers(0, 2, 200)
        h = H.matrix[int(rng.integers(H.n_hypotheses))].astype(np.int8)
        K = int(rng.integers(1, 40))
        i = int(rng.integers(200))
        xs2, ys2 = xs.copy(), ys.copy()
        xs2[i], ys2[i] = rng.integers(0, 31), rng.integers(0, 2)
        b1 = set(_first_K_mistakes(h, xs, ys, K).tolist())
        b2 = set(_first_K_mistakes(h, xs2, ys2, K).tolist())
        assert len(b1 ^ b2) + (i in (b1 & b2)) <= 2


def test_store_lists_realizer_and_empty_groups():
    """White-box: the realiser is in every group's list, and a hypothesis wrong on the whole
    batch is in exactly the lists of the groups that received no record."""
    H = thresholds(31)
    params = _params(H, k=25, n=2)
    seed = 7
    seq = CandidateSequence(H, params, np.random.default_rng(seed))
    theta = 12
    rng = np.random.default_rng(1)
    bx = rng.integers(0, 31, params.K)
    by = (bx >= theta).astype(np.int8)
    seq._store(bx, by)
    c = seq.counts()
    assert c[theta] == params.k
    grp = np.random.default_rng(seed).integers(params.k, size=params.K)
    empty = params.k - np.unique(grp).size
    # thresholds θ' with h_θ' wrong on every record: none in general; use the complement
    wrong_all = np.flatnonzero(np.all(H.matrix[:, bx] != by[None, :], axis=1))
    for h in wrong_all:
        assert c[h] == empty
    # level thresholds ⌊a_ℓ n⌋ with a_ℓ = 1/8 − ℓ/(32(d+1))
    assert level_thresholds(64, 3, 4) == [8, 7, 7, 6]


def test_sensitivity_sum_bounds_every_run():
    """Σ over selection calls of the changed-list bound g = 2·(batches so far) never exceeds
    G = N(N+1) + 2N(levels−1) used in the privacy formula."""
    H = thresholds(31)
    rng = np.random.default_rng(3)
    for trial in range(40):
        params = _params(H, k=8, N=4, levels=3, eps_sel=0.05)  # weak: frequent ⊥
        seq = CandidateSequence(H, params, np.random.default_rng(trial))
        for _ in range(params.N):
            bx = rng.integers(0, 31, params.K)
            by = rng.integers(0, 2, params.K).astype(np.int8)
            seq.next_candidate(bx, by)
            if seq.exhausted:
                break
        assert sum(seq.calls) <= params.sensitivity_sum
        assert len(seq.calls) <= params.N + params.levels


def test_candidate_params_privacy_formula():
    H = thresholds(15)
    p = CandidateParams(k=50, n=1, K=100, N=2, levels=2, eps_sel=0.01, log_gamma=20.0,
                        s=H.n_hypotheses, d=4)
    G = 2 * 3 + 2 * 2 * 1
    e, d = p.privacy()
    assert e == pytest.approx(2 * 0.01 * G)
    assert d == pytest.approx(G * H.n_hypotheses * math.exp(4 * 0.01 - p.log_gamma))
    with pytest.raises(ConfigError, match="too small"):  # Γ too small for g = 2N lists
        CandidateParams(k=50, n=1, K=100, N=2, levels=2, eps_sel=0.01, log_gamma=3.0,
                        s=H.n_hypotheses, d=4).privacy()
    with pytest.raises(ConfigError):
        CandidateParams(k=0, n=1, K=1, N=1, levels=1, eps_sel=1.0, log_gamma=1.0, s=2, d=1)


def _offline(H, params, Ds, seed, xs, ys):
    """A_m computed offline on the whole stream with the same randomness (Algorithm 2 on
    full batches, then the replacement chain), m = number of full batches."""
    ss = np.random.SeedSequence(seed)
    seq_ss, rep_ss = ss.spawn(2)
    seq = CandidateSequence(H, params, np.random.default_rng(seq_ss))
    h0 = H.soa_table(H.full()).astype(np.int8)
    tables = [h0]
    while len(tables) <= params.N:
        idx = _first_K_mistakes(tables[-1], xs, ys, params.K)
        if idx.size < params.K:
            break
        z = seq.next_candidate(xs[idx], ys[idx])
        tables.append(h0 if z is None else H.matrix[z].astype(np.int8))
    design = mirror_window(A / 2, B / 2)
    preds = h0[xs]
    for j, tab in enumerate(tables[1:], start=1):
        rep = Replacement(A, B, Ds[j - 1], rng=np.random.default_rng(rep_ss.spawn(1)[0]),
                          design=design)
        out = np.empty_like(preds)
        for t in range(len(xs)):
            out[t] = rep.step(int(preds[t]), int(tab[xs[t]]))
            rep.observe(int(ys[t]))
        preds = out
    return preds, len(tables) - 1


def _online(H, params, Ds, seed, xs, ys):
    Ap = CandidatePredictor(H, params, A, B, Ds, seed=seed)
    out = np.empty(len(xs), np.int8)
    for t, (x, y) in enumerate(zip(xs.tolist(), ys.tolist())):
        out[t] = Ap.predict(x)
        Ap.update(y)
    return out, Ap


@pytest.mark.parametrize("n_thr,dist", [(63, "boundary"), (31, "uniform")])
def test_online_equals_offline_A_N(n_thr, dist):
    """Claim 1: the online predictor of Algorithm 3 releases exactly the predictions of the
    offline A_N (same randomness), on every seed tried."""
    H = thresholds(n_thr)
    params = _params(H, k=30, N=3)
    Ds = _delays(params)
    switched = 0
    for seed in range(12):
        st = threshold_stream(n_thr, 6000, seed=seed, dist=dist)
        xs, ys = st.arrays()
        on, Ap = _online(H, params, Ds, seed, xs, ys)
        off, m = _offline(H, params, Ds, seed, xs, ys)
        assert Ap.m == m
        assert np.array_equal(on, off)
        switched += bool(np.any(on != Ap.h0[xs]))
    assert switched >= 3  # the replacements did change predictions on some streams


def test_mistake_bound_of_A():
    """Step 2: if the last candidate h_m has fewer than K mistakes on the stream, then
    M(A) ≤ K + 2 D_m (m ≥ 1), and M(A) = M(h_0) < K if m = 0."""
    H = thresholds(63)
    params = _params(H, k=30, N=3)
    Ds = _delays(params)
    for seed in range(15):
        st = threshold_stream(63, 8000, seed=100 + seed, dist="boundary")
        xs, ys = st.arrays()
        out, Ap = _online(H, params, Ds, seed, xs, ys)
        mA = int(np.sum(out != ys))
        mh = int(np.sum(Ap.tables[-1][xs] != ys))
        if mh < params.K:
            assert mA <= (params.K + 2 * Ds[Ap.m - 1] if Ap.m else mh)


def test_point_functions_A_learns_and_plateaus():
    """POINT-style stream (informative x = target with label 1 on 10% of rounds): A's
    mistakes stop growing once the replacement switches — the same count at T = 10^4 and
    T = 3·10^4 on most seeds, and never more than K + 2 D_1."""
    H = point_functions(8)
    params = _params(H, k=30, N=1)
    Ds = _delays(params)
    plateaus = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        T = 30000
        target = int(rng.integers(8))
        xs = np.where(rng.random(T) < 0.1, target, rng.integers(0, 8, T))
        ys = (xs == target).astype(np.int8)
        out, Ap = _online(H, params, Ds, seed, xs, ys)
        marks = out != ys
        assert marks.sum() <= params.K + 2 * Ds[0]
        plateaus += marks[:10000].sum() == marks.sum()
        assert Ap.chosen == [target] or marks.sum() > 0
    assert plateaus >= 8


def test_check_delays():
    check_delays([100, 900], 25, 50)
    with pytest.raises(ConfigError, match="4K"):
        check_delays([99, 900], 25, 50)
    with pytest.raises(ConfigError, match="8 D_1"):
        check_delays([100, 899], 25, 50)
    with pytest.raises(ConfigError, match="minimum"):
        check_delays([100, 900], 25, 101)
    # with the Mirror window: D_2 >= 4(K + D_1 + W)
    check_delays([100, 4 * (25 + 100 + 30)], 25, 50, W=30)
    assert next_delay(100, 25, 30) == 620 <= next_delay(100, 25) == 900
    with pytest.raises(ConfigError, match=r"4\(K \+ D_1 \+ W\)"):
        check_delays([100, 619], 25, 50, W=30)
    with pytest.raises(ConfigError, match="window"):
        check_delays([100, 900], 25, 50, W=51)


def _sharp_delays(params):
    rm = rep_min_D(A, B)
    W = mirror_window(A / 2, B / 2).W
    Ds = [max(4 * params.K, rm)]
    for _ in range(params.N - 1):
        Ds.append(max(next_delay(Ds[-1], params.K, W), rm))
    check_delays(Ds, params.K, rm, W)
    return Ds


@pytest.mark.parametrize("n_thr,dist", [(63, "boundary"), (31, "uniform")])
def test_online_equals_offline_with_sharp_delays(n_thr, dist):
    """Claim 1 with the smallest delays the sharp Lemma 11(i) allows,
    D_{j+1} = 4(K + D_j + W): online predictions equal the offline A_N on every seed, and
    the replays never trip the run-time check."""
    H = thresholds(n_thr)
    params = _params(H, k=30, N=3)
    Ds = _sharp_delays(params)
    assert Ds[1] < 8 * Ds[0] + 4 * params.K
    switched = 0
    for seed in range(12):
        xs, ys = threshold_stream(n_thr, 5000, seed=seed, dist=dist).arrays()
        on, Ap = _online(H, params, Ds, seed, xs, ys)
        off, m = _offline(H, params, Ds, seed, xs, ys)
        assert Ap.m == m and np.array_equal(on, off)
        switched += bool(np.any(on != Ap.h0[xs]))
    assert switched >= 3


def test_mirror_share_in_the_candidate_predictor():
    """A Mirror share other than 1/2 reaches every replacement, and the bulk path equals the
    loop with it."""
    H = thresholds(63)
    params = _params(H, k=30, N=2)
    share = 0.8
    design = mirror_window(share * A, B / 2)
    rm = rep_min_D(A, B, design, share)
    Ds = [max(4 * params.K, rm)]
    Ds.append(max(next_delay(Ds[0], params.K, design.W), rm))
    xs, ys = threshold_stream(63, 6000, seed=2, dist="boundary").arrays()
    A1 = CandidatePredictor(H, params, A, B, Ds, seed=1, design=design, share=share)
    A2 = CandidatePredictor(H, params, A, B, Ds, seed=1, design=design, share=share)
    loop = []
    for x, y in zip(xs.tolist(), ys.tolist()):
        loop.append(A1.predict(x)); A1.update(y)
    assert np.array_equal(np.array(loop, np.int8), A2.run(xs, ys))
    assert A1.m >= 1 and all(r.share == share and r.mirror.a == share * A for r in A1.reps)
    assert A1.rep_privacy() == (A, design.delta + acceptance_delta(A, Ds[0], share))


def test_run_equals_loop():
    """The bulk whole-stream path releases the same predictions and ends in the same state
    as the per-round loop, also when fed in pieces."""
    H = thresholds(63)
    params = _params(H, k=30, N=3)
    Ds = _delays(params)
    for seed in range(6):
        st = threshold_stream(63, 9000, seed=seed, dist="boundary")
        xs, ys = st.arrays()
        loop, A1 = _online(H, params, Ds, seed, xs, ys)
        A2 = CandidatePredictor(H, params, A, B, Ds, seed=seed)
        cuts = [0, 137, 4000, 9000]
        bulk = np.concatenate([A2.run(xs[a:b], ys[a:b]) for a, b in zip(cuts, cuts[1:])])
        assert np.array_equal(loop, bulk)
        assert (A1.m, A1.t, A1._mc, A1.chosen) == (A2.m, A2.t, A2._mc, A2.chosen)
        for r1, r2 in zip(A1.reps, A2.reps):
            assert (r1.c, r1.dis, r1.mirror.n, r1.accepted) == (r2.c, r2.dis, r2.mirror.n,
                                                                r2.accepted)
