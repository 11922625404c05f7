"""Hostile and malformed input (property-based, hypothesis) for the loaders and the weighting
API: every outcome is either a correct result (invariants checked, or compared with an
oracle) or a :class:`~dpmt.errors.DpmtError` whose message names the problem — never another
exception type from inside numpy/JAX, never a silently wrong answer.

Hypothesis runs derandomised (fixed seed) with no example database, so a given test
selection is deterministic (hypothesis also mixes literal constants of the imported modules
into its examples, so running this file alone or after other test files can try different,
equally fixed, examples). The number of hostile inputs tried is counted and printed at the
end of the module (``hostile inputs tried: ...``).

Bugs this file found (in the loaders and the weighting API) are fixed; their minimal
reproducers stay as regression tests at the end. Comments saying a property test "keeps
clear of" an input date from when those inputs were still broken.
"""

import collections
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dpmt import weighting
from dpmt.data import load_file
from dpmt.errors import DataError, DpmtError

TRIED = collections.Counter()

SETTINGS = dict(deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


def hyp(n):
    return settings(max_examples=n, **SETTINGS)


@pytest.fixture(scope="module", autouse=True)
def _report(request):
    yield
    total = sum(TRIED.values())
    parts = ", ".join(f"{k} {v}" for k, v in sorted(TRIED.items()))
    msg = f"\nhostile inputs tried: {total} ({parts})"
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            print(msg)
    else:  # pragma: no cover
        print(msg)


@pytest.fixture(scope="module")
def tmpdir_(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile")


def _expect_dpmt_error(fn, *what):
    """Run fn; return its value, or None if it raised a DpmtError naming one of ``what``."""
    try:
        return fn()
    except DpmtError as e:
        msg = str(e)
        assert msg and len(msg) > 15, f"uninformative message {msg!r}"
        if what:
            assert any(w.lower() in msg.lower() for w in what), (msg, what)
        return None


# ==========================================================================================
# Loaders
# ==========================================================================================
FMT_EXT = {"tsv": "data", "dat": "dat", "csv": "csv", "inter": "inter"}
SEP = {"tsv": "\t", "dat": "::", "csv": ",", "inter": "\t"}
HEADER = {"csv": "userId,movieId,rating,timestamp",
          "inter": "user_id:token\titem_id:token\trating:float\ttimestamp:float"}
MOVIELENS_RANGE = (0.5, 5.0)


def check_ratings_invariants(r, fmt, data: bytes, rating_range="auto"):
    """Structural invariants of any successfully loaded file."""
    n = r.nnz
    assert n >= 1
    assert r.user.dtype == np.int32 and r.item.dtype == np.int32
    assert len(r.user) == len(r.item) == len(r.value) == n
    assert 0 <= r.user.min() and r.user.max() < r.n_users
    assert 0 <= r.item.min() and r.item.max() < r.n_items
    for ids, idx in ((r.user_ids, r.user), (r.item_ids, r.item)):
        assert len(np.unique(ids)) == len(ids) and np.all(ids[:-1] < ids[1:])   # sorted, unique
        assert len(np.unique(idx)) == len(ids)                                    # all used
        if ids.dtype.kind in "iu":
            assert ids.min() >= 0
    assert np.all(np.isfinite(r.value))
    lo_hi = MOVIELENS_RANGE if (rating_range == "auto" and fmt != "inter") else \
        (None if rating_range in ("auto", None) else rating_range)
    if lo_hi is not None:
        assert np.all((r.value >= np.float32(lo_hi[0])) & (r.value <= np.float32(lo_hi[1])))
    key = r.user.astype(np.int64) * r.n_items + r.item
    assert len(np.unique(key)) == n                                               # no dup pairs
    if r.timestamp is not None:
        assert r.timestamp.dtype == np.int64 and len(r.timestamp) == n
    lines = [ln for ln in data.replace(b"\r\n", b"\n").split(b"\n") if ln.strip()]
    assert n <= len(lines)


# -- arbitrary bytes ------------------------------------------------------------------------
_TOKENS = [b"0", b"1", b"7", b"42", b"999999999999999", b"00", b"-3", b"4.5", b".5", b"5.",
           b"1e3", b"nan", b"inf", b"-inf", b"NaN", b"", b" ", b"\t", b",", b"::", b":",
           b"\n", b"\r\n", b"\r", b"\n\n", b"\xff", b"\xfe\xfd", b"\x00", b"\xef\xbb\xbf",
           b"userId", b"movieId", b"rating", b"timestamp", b"user_id:token",
           b"item_id:token", b"rating:float", b"timestamp:float", b"abc", b'"', b"#",
           b"\xe2\x82\xac", b"\\", b"1,2,5,3\n", b"1\t2\t5\t3\n", b"1::2::5::3\n"]


@hyp(250)
@given(body=st.one_of(st.lists(st.sampled_from(_TOKENS), max_size=40).map(b"".join),
                      st.binary(max_size=200)),
       fmt=st.sampled_from(["tsv", "dat", "csv", "inter", None]),
       ext=st.sampled_from(["data", "dat", "csv", "inter", "txt", ""]))
def test_loader_arbitrary_bytes(tmpdir_, body, fmt, ext):
    TRIED["loader bytes"] += 1
    p = tmpdir_ / (f"f.{ext}" if ext else "f")
    p.write_bytes(body)
    r = _expect_dpmt_error(lambda: load_file(p, fmt))
    if r is not None:
        from dpmt.data.loaders import FORMATS, detect_format
        used = FORMATS[fmt] if fmt else detect_format(p)
        check_ratings_invariants(r, used, body)


# -- structured files with one mutation, against an oracle ----------------------------------
RATINGS = ["0.5", "1", "1.0", "2.5", "3", "3.50", "4", "4.0", "4.5", "5", "5.", ".5", "2.25",
           "4.125", "3.999", "1e0", " 4 "]
IDS = st.one_of(st.integers(0, 50), st.integers(0, 10**6),
                st.integers(10**14, 10**15), st.integers(2**53, 2**63 - 1))
TIMES = st.one_of(st.integers(0, 2**31), st.integers(0, 2**53))


@st.composite
def rating_tables(draw):
    n = draw(st.integers(1, 12))
    users = draw(st.lists(IDS, min_size=n, max_size=n))
    items = draw(st.lists(IDS, min_size=n, max_size=n))
    pairs, seen = [], set()
    for u, i in zip(users, items):
        if (u, i) not in seen:
            seen.add((u, i))
            pairs.append((u, i))
    rows = [(u, i, draw(st.sampled_from(RATINGS)), draw(TIMES)) for u, i in pairs]
    return rows


MUTATIONS = ["none", "negative_id", "text_id", "bad_rating", "out_of_range", "empty_field",
             "missing_field", "extra_field", "non_utf8_number", "duplicate",
             "fractional_time", "garbage_line", "header_only", "blank_only"]


def _fmt_id(v, pad):
    return f"{v:0{pad}d}" if pad else str(v)


@hyp(350)
@given(rows=rating_tables(), fmt=st.sampled_from(["tsv", "dat", "csv", "inter"]),
       crlf=st.booleans(), bom=st.booleans(), trailing_nl=st.booleans(),
       blank_every=st.sampled_from([0, 0, 2, 3]), mutation=st.sampled_from(MUTATIONS),
       where=st.floats(0, 1, exclude_max=True), bad=st.sampled_from(
           ["nan", "NaN", "inf", "-inf", "abc", "1.2.3", "--1", "0x10"]),
       keep_last=st.booleans(), auto=st.booleans())
@example(rows=[(1, 2, "4", 3)], fmt="csv", crlf=True, bom=True, trailing_nl=False,
         blank_every=2, mutation="duplicate", where=0.0, bad="nan", keep_last=True, auto=False)
def test_loader_structured_with_one_mutation(tmpdir_, rows, fmt, crlf, bom, trailing_nl,
                                             blank_every, mutation, where, bad, keep_last,
                                             auto):
    TRIED["loader structured"] += 1
    sep = SEP[fmt]
    header = HEADER.get(fmt)
    fields = [[str(u), str(i), r, str(t)] for u, i, r, t in rows]
    expect = {(u, i): (np.float32(float(r)), t) for u, i, r, t in rows}
    order = [(u, i) for u, i, _, _ in rows]
    k = int(where * len(fields))                 # the row the mutation touches
    err = None                                   # expected error: (fragment, row or None)
    text_ids = False
    if mutation == "negative_id":
        fields[k][0] = "-" + fields[k][0].lstrip("0") if fields[k][0] != "0" else "-1"
        err = ("negative", k)
    elif mutation == "text_id":
        fields[k][1] = "item" + fields[k][1]
        if fmt in ("inter", "csv"):              # RecBole tokens, a CSV header's ids: text
            text_ids = True
        else:
            err = ("item id", k)
    elif mutation == "bad_rating":
        fields[k][2] = bad
        err = ("rating", k)
    elif mutation == "out_of_range":
        fields[k][2] = "7.5"
        if fmt == "inter":                       # no rating scale for RecBole files
            u, i = order[k]
            expect[(u, i)] = (np.float32(7.5), expect[(u, i)][1])
        else:
            err = ("outside the allowed range", k)
    elif mutation == "empty_field":
        fields[k][0] = ""
        err = ("user id", k)
    elif mutation == "missing_field":
        fields[k] = fields[k][:-1]
        err = ("fields", k)
    elif mutation == "extra_field":
        fields[k] = fields[k] + ["9"]
        err = ("fields", k)
    elif mutation == "non_utf8_number":
        fields[k][2] = "4\udcff"                 # a raw 0xff byte inside the rating
        err = ("rating", k)
    elif mutation == "duplicate":
        u, i, r, t = rows[k]
        fields.append([str(u), str(i), "1" if r.strip() != "1" else "2", str(t + 1)])
        if keep_last:
            expect[(u, i)] = (np.float32(float(fields[-1][2])), t + 1)
        else:
            err = ("rated 2 times", None)
    elif mutation == "fractional_time":
        fields[k][3] = fields[k][3] + ".5"
        if fmt == "inter":                       # timestamp:float, rounded half to even
            u, i = order[k]
            expect[(u, i)] = (expect[(u, i)][0], int(np.rint(float(fields[k][3]))))
        else:
            err = ("timestamp", k)
    elif mutation == "garbage_line":
        fields.insert(k, ["#!%&"])
        err = ("fields", k)
    elif mutation == "header_only":
        fields = []
        err = ("no ratings|empty|found ''", None)
    elif mutation == "blank_only":
        fields = []
        header = None
        # a file holding only a BOM and newlines is reported as "has a header but no
        # ratings" (tsv/dat), "expected comma-separated ... found ''" (csv) or "RecBole header
        # '' must name..." (inter): misleading wordings (reported), still DataErrors naming
        # the file
        err = ("empty|no ratings|found ''|header ''", None)

    lines, phys = [], {}                         # phys: row index -> physical line number
    if header:
        lines.append(header)
    for j, f in enumerate(fields):
        if blank_every and j and j % blank_every == 0:
            lines.append("")
        lines.append(sep.join(f))
        phys[j] = len(lines)
    nl = "\r\n" if crlf else "\n"
    text = nl.join(lines) + (nl if trailing_nl or not lines else "")
    data = text.encode("utf-8", errors="surrogateescape")
    if bom:
        data = b"\xef\xbb\xbf" + data
    p = tmpdir_ / f"s.{FMT_EXT[fmt]}"
    p.write_bytes(data)

    kw = {"on_duplicate": "keep-last" if keep_last else "error"}
    if not auto:
        kw["fmt"] = fmt
    if err is not None:
        with pytest.raises(DataError) as ei:
            load_file(p, **kw)
        msg = str(ei.value)
        assert str(p) in msg, msg
        assert any(f.lower() in msg.lower() for f in err[0].split("|")), (msg, err)
        if err[1] is not None:
            assert f"{p}:{phys[err[1]]}:" in msg, (msg, phys[err[1]])
        return
    r = load_file(p, **kw)
    check_ratings_invariants(r, fmt, data)
    got_pairs = [(r.user_ids[a], r.item_ids[b]) for a, b in zip(r.user, r.item)]
    if text_ids:     # every id became text (RecBole tokens); compare as strings
        order = [(str(u), ("item" + str(i)) if j == k else str(i))
                 for j, (u, i) in enumerate(order)]
        expect = {(str(u), ("item" + str(i)) if (u, i) == rows[k][:2] else str(i)): v
                  for (u, i), v in expect.items()}
        got_pairs = [(str(a), str(b)) for a, b in got_pairs]
    else:
        got_pairs = [(int(a), int(b)) for a, b in got_pairs]
    if mutation == "duplicate" and keep_last:
        assert sorted(got_pairs) == sorted(order)
    else:
        assert got_pairs == order                  # file order kept
    for (a, b), v, t in zip(got_pairs, r.value, r.timestamp):
        ev, et = expect[(a, b)]
        assert v == ev, (a, b, v, ev)
        assert int(t) == et, (a, b, t, et)


# -- options --------------------------------------------------------------------------------
@hyp(100)
@given(rating_range=st.one_of(
           st.none(), st.just("auto"), st.text(max_size=5),
           st.tuples(st.floats(allow_nan=True), st.floats(allow_nan=True)),
           st.lists(st.floats(allow_nan=True), max_size=3),
           st.tuples(st.integers(-10, 10), st.integers(-10, 10))),
       on_duplicate=st.one_of(st.sampled_from(["error", "keep-last"]), st.text(max_size=8)),
       fmt=st.one_of(st.none(), st.sampled_from(["tsv", "ml-100k", "csv", "recbole", "TSV"]),
                     st.text(max_size=6)))
def test_loader_options(tmpdir_, rating_range, on_duplicate, fmt):
    TRIED["loader options"] += 1
    p = tmpdir_ / "o.data"
    data = b"1\t2\t4\t3\n2\t2\t1\t5\n"
    p.write_bytes(data)
    r = _expect_dpmt_error(lambda: load_file(p, fmt, rating_range=rating_range,
                                             on_duplicate=on_duplicate))
    if r is not None:
        from dpmt.data.loaders import FORMATS
        used = FORMATS[fmt.lower()] if fmt else "tsv"
        rr = rating_range if rating_range in (None, "auto") else tuple(map(float, rating_range))
        check_ratings_invariants(r, used, data, rr)
        assert list(r.value) == [4.0, 1.0] or used == "csv"


@pytest.mark.parametrize("name,setup,fragment", [
    ("missing.data", None, "does not exist"),
    ("adir", "dir", "not a file"),
    ("ratings.csv.gz", b"\x1f\x8b\x08\x00", "compressed"),
    ("empty.data", b"", "empty"),
    ("spaces.csv", b"  \n\t\r\n", "empty"),
    ("header.inter", b"user_id:token\titem_id:token\n", "no ratings"),
    ("noformat", b"1 2 5 3\n", "cannot tell the format"),
    ("nohead.inter", b"1\t2\n", "must name a user_id"),
    ("badhead.csv", b"uid,iid,stars\n1,2,3\n", "no user column"),
])
def test_loader_refuses_hostile_files_clearly(tmp_path, name, setup, fragment):
    TRIED["loader fixed"] += 1
    p = tmp_path / name
    if setup == "dir":
        p.mkdir()
    elif setup is not None:
        p.write_bytes(setup)
    with pytest.raises(DataError, match=fragment):
        load_file(p)


# ==========================================================================================
# Weighting API
# ==========================================================================================
# Invalid values (NaN, ±inf, zero, negative, < 1 for counts) anywhere in the float range,
# and valid ones up to 1e12 ("huge": more ratings than any dataset has). Valid values near
# the float64 limits are covered by the regression tests at the end.
HOSTILE_FLOATS = st.one_of(st.sampled_from([0.0, -0.0, -1.0, 0.5, 1e-300, math.nan,
                                            math.inf, -math.inf, -1e308]),
                           st.floats(max_value=1.0, exclude_max=True),
                           st.floats(1.0, 1e12))
GOOD_COUNTS = st.lists(st.one_of(st.integers(1, 10**6).map(float),
                                 st.floats(1.0, 1e12, allow_nan=False)),
                       min_size=1, max_size=30)


@hyp(200)
@given(counts=st.one_of(GOOD_COUNTS,
                        st.lists(HOSTILE_FLOATS, max_size=10),
                        st.lists(st.integers(-5, 5), max_size=10),
                        st.just([[1.0, 2.0]]), st.none()),
       mu=st.one_of(st.none(), st.floats(0, 3), st.sampled_from([-1.0, math.nan])),
       gamma=st.one_of(st.floats(0, 5), st.sampled_from([-0.5, math.nan])),
       budget=st.one_of(st.floats(1e-6, 1e6), st.sampled_from([0.0, -1.0, math.nan])),
       n_users=st.one_of(st.none(), st.integers(1, 10**9), st.sampled_from([0, -3, 2.5])),
       c_n=st.one_of(st.just(1.0), st.floats(0.01, 100), st.sampled_from([0.0, -1.0])))
def test_task_weights(counts, mu, gamma, budget, n_users, c_n):
    # Kept clear of: infinite or non-numeric counts/budget/exponents (see the regression tests at the end).
    TRIED["task_weights"] += 1
    w = _expect_dpmt_error(lambda: weighting.task_weights(
        counts, gamma=gamma, mu=mu, budget=budget, n_users=n_users, c_n=c_n))
    if w is None:
        return
    c = np.asarray(counts, np.float64)
    m = (1 + gamma) / 4 if mu is None else mu
    assert w.shape == c.shape and np.all(np.isfinite(w)) and np.all(w > 0)
    # the closed form, evaluated in log space: omega_i ∝ n_i^-mu, normalised by eq. (11)
    lc = np.log(c)
    if n_users is None:
        ref = 0.5 * math.log(budget) - m * (lc - lc.min())
    else:
        lse = np.logaddexp.reduce((1 - 2 * m) * lc)
        ref = 0.5 * (math.log(n_users) + math.log(budget) - math.log(c_n) - lse) - m * lc
    assert np.allclose(np.log(w), ref, atol=1e-9, rtol=0)
    if n_users is None:
        assert w.max() == pytest.approx(math.sqrt(budget), rel=1e-12)
    else:   # sum_i n_i omega_i^2 = n beta / c(n)
        assert np.sum(c * w ** 2) == pytest.approx(n_users * budget / c_n, rel=1e-9)


@st.composite
def user_item_ids(draw, n_items):
    nnz = draw(st.integers(0, 40))
    users = draw(st.lists(st.integers(0, 6), min_size=nnz, max_size=nnz))
    items = draw(st.lists(st.integers(0, n_items - 1), min_size=nnz, max_size=nnz))
    return np.asarray(users, np.int64), np.asarray(items, np.int64)


@hyp(150)
@given(data=st.data(),
       task_w=st.one_of(st.lists(st.floats(0, 1e3), min_size=1, max_size=8),
                        st.lists(HOSTILE_FLOATS, min_size=1, max_size=8)),
       budget=st.one_of(st.floats(1e-3, 1e3), st.sampled_from([0.0, -2.0, math.nan])),
       mismatch=st.booleans())
def test_clip_to_budget(data, task_w, budget, mismatch):
    # Kept clear of: id arrays with negative / out-of-range / float ids (regression tests below).
    TRIED["clip_to_budget"] += 1
    users, items = data.draw(user_item_ids(len(task_w)))
    if mismatch:
        items = np.append(items, 0)
    w = _expect_dpmt_error(lambda: weighting.clip_to_budget(
        np.asarray(task_w), users, items, budget), "length", "finite", "budget")
    if w is None:
        return
    omega = np.asarray(task_w)[items]
    assert w.shape == users.shape and np.all(np.isfinite(w)) and np.all(w >= 0)
    assert np.all(w <= omega)
    for j in np.unique(users):
        sel = users == j
        s_omega = np.sum(omega[sel] ** 2)
        assert np.sum(w[sel] ** 2) <= budget * (1 + 1e-12)
        if s_omega < budget * (1 - 1e-9):
            assert np.array_equal(w[sel], omega[sel])          # under budget: untouched
        elif s_omega > budget * (1 + 1e-9):
            assert np.sum(w[sel] ** 2) == pytest.approx(budget, rel=1e-9)
            nz = omega[sel] > 1e-290      # (subnormal weights may round to 0 when scaled)
            scale = w[sel][nz] / omega[sel][nz]
            assert np.allclose(scale, scale[0], rtol=1e-12)           # one scale per user


@hyp(120)
@given(data=st.data(), counts=st.one_of(GOOD_COUNTS, st.lists(HOSTILE_FLOATS, max_size=6)),
       mu=st.one_of(st.floats(0, 2), st.sampled_from([-1.0, math.nan])),
       budget=st.one_of(st.floats(1e-3, 1e3), st.sampled_from([0.0, math.nan])))
def test_normalized_user_weights(data, counts, mu, budget):
    # Kept clear of: mismatched / malformed id arrays (regression tests below).
    TRIED["normalized_user_weights"] += 1
    users, items = data.draw(user_item_ids(max(len(counts), 1)))
    w = _expect_dpmt_error(lambda: weighting.normalized_user_weights(
        counts, users, items, mu=mu, budget=budget))
    if w is None:
        return
    c = np.asarray(counts, np.float64)
    assert w.shape == users.shape and np.all(np.isfinite(w)) and np.all(w > 0)
    for j in np.unique(users):
        sel = users == j
        assert np.sum(w[sel] ** 2) <= budget
        assert np.sum(w[sel] ** 2) == pytest.approx(budget, rel=1e-9)   # every user at beta
        ratio = np.log(w[sel]) - np.log(w[sel][0])
        assert np.allclose(ratio, -mu * (np.log(c[items[sel]]) - np.log(c[items[sel]][0])),
                           atol=1e-9)


@hyp(100)
@given(counts=st.one_of(GOOD_COUNTS, st.lists(HOSTILE_FLOATS, max_size=6),
                        st.just([]), st.just([[2.0]])))
def test_improvement_ratios(counts):
    TRIED["improvement_ratios"] += 1
    r = _expect_dpmt_error(lambda: weighting.improvement_ratios(counts))
    if r is None:
        return
    r0, r1 = r
    assert math.isfinite(r0) and math.isfinite(r1)
    assert r0 >= 1 - 1e-12 and r1 >= 1 - 1e-12                   # Cauchy-Schwarz
    if len(set(counts)) == 1:
        assert r0 == pytest.approx(1.0) and r1 == pytest.approx(1.0)


@hyp(100)
@given(data=st.data(), k=st.one_of(st.integers(1, 5), st.sampled_from([0, -1, 2.5])),
       counts=st.one_of(GOOD_COUNTS, st.lists(HOSTILE_FLOATS, min_size=1, max_size=6)))
def test_sampling_baselines(data, k, counts):
    TRIED["uniform/tail weights"] += 1
    users, items = data.draw(user_item_ids(len(counts)))
    for fn in (lambda: weighting.uniform_sample_weights(users, k, seed=0),
               lambda: weighting.tail_weights(counts, users, items, k, seed=0)):
        w = _expect_dpmt_error(fn)
        if w is None:
            continue
        assert w.shape == users.shape and set(np.unique(w)) <= {0.0, 1.0}
        for j in np.unique(users):
            assert w[users == j].sum() == min(k, int(np.sum(users == j)))


def test_tail_weights_pick_the_least_popular():
    TRIED["uniform/tail weights"] += 1
    counts = [50.0, 1.0, 20.0, 3.0]
    users = np.zeros(4, int)
    w = weighting.tail_weights(counts, users, np.arange(4), 2)
    assert list(w) == [0.0, 1.0, 0.0, 1.0]


# ==========================================================================================
# Regression tests: minimal reproducers of bugs this file found (all fixed)
# ==========================================================================================
def _load(tmp_path, name, data, **kw):
    p = tmp_path / name
    p.write_bytes(data)
    return load_file(p, **kw)


@pytest.mark.parametrize("line", [b"9223372036854775808\t1\t5\t1\n",
                                  b"1\t99999999999999999999\t5\t1\n"])
def test_huge_ids_get_a_clear_error(tmp_path, line):
    with pytest.raises(DataError, match="id"):
        _load(tmp_path, "u.data", line)


@pytest.mark.parametrize("name,data", [
    ("u.data", b"1\t1\t5\t99999999999999999999\n"),
    ("r.csv", b"user,item,rating,timestamp\n1,1,3,1e19\n"),
    ("r.inter", b"user_id:token\titem_id:token\ttimestamp:float\n1\t1\t1e300\n"),
    ("u.data", b"1\t1\t5\t10000000000000001\n"),
])
def test_huge_timestamps_are_read_exactly_or_refused(tmp_path, name, data):
    # correct outcomes: the exact timestamp, or a DataError naming the line
    try:
        r = _load(tmp_path, name, data)
    except DataError as e:
        assert ":2:" in str(e) or ":1:" in str(e)
        return
    raw = data.strip().split(b"\n")[-1].split(b"," if name.endswith("csv") else b"\t")[-1]
    exact = int(float(raw)) if b"e" in raw else int(raw)
    assert int(r.timestamp[0]) == exact


@pytest.mark.parametrize("data", [
    b"user_id:token\titem_id:token\n\xff\t1\n\xfe\t2\n",
    b"user_id:token\titem_id:token\n007\t1\n7\t2\n",
])
def test_inter_tokens_stay_distinct(tmp_path, data):
    try:
        r = _load(tmp_path, "x.inter", data)
    except DataError:
        return                        # refusing the file is a correct outcome
    assert r.n_users == 2


@pytest.mark.parametrize("call", [
    lambda: weighting.clip_to_budget(np.array([1.0]), [-1], [0], 1.0),
    lambda: weighting.clip_to_budget(np.array([1.0]), [0], [3], 1.0),
    lambda: weighting.clip_to_budget(np.array([1.0]), [0.5], [0], 1.0),
    lambda: weighting.clip_to_budget(np.array([1.0]), [], [], 1.0),
    lambda: weighting.normalized_user_weights([1.0, 2.0], [0, 1], [0], mu=0.5, budget=1.0),
    lambda: weighting.normalized_user_weights([1.0, 2.0], [0], [5], mu=0.5, budget=1.0),
    lambda: weighting.normalized_user_weights([1.0, 2.0], [], [], mu=0.5, budget=1.0),
    lambda: weighting.tail_weights([1.0, 2.0], [0, 1], [0], 1),
    lambda: weighting.tail_weights([1.0, 2.0], [0], [5], 1),
    lambda: weighting.user_sq_norms([1.0], [-1]),
    lambda: weighting.task_weights(["a"], n_users=5),
], ids=["ctb-neg-user", "ctb-item-oob", "ctb-float-ids", "ctb-empty-lists",
        "nuw-mismatch", "nuw-item-oob", "nuw-empty-lists", "tail-mismatch", "tail-item-oob",
        "sqnorm-neg", "tw-text"])
def test_weighting_refuses_malformed_ids(call):
    try:
        call()
    except DpmtError:
        pass


@pytest.mark.parametrize("call", [
    lambda: weighting.task_weights([2.0, 3.0], gamma=math.inf, n_users=5),
    lambda: weighting.task_weights([2.0, 3.0], mu=math.inf),
    lambda: weighting.task_weights([2.0, 3.0], budget=math.inf, n_users=5),
    lambda: weighting.task_weights([1e308, 1e308], mu=0.0, n_users=5),
    lambda: weighting.task_weights([1e300], mu=2.0, n_users=5),
    lambda: weighting.task_weights([1e300, 1e299], mu=2.0),
    lambda: weighting.clip_to_budget(np.array([1e300]), [0, 0], [0, 0], 1.0),
    lambda: weighting.normalized_user_weights([2.0, 3.0], [0, 0], [0, 1], mu=2000.0,
                                              budget=1.0),
    lambda: weighting.improvement_ratios([1e308, 1e308]),
], ids=["gamma-inf", "mu-inf", "budget-inf", "counts-overflow", "counts-underflow",
        "counts-underflow-shape", "ctb-overflow",
        "nuw-underflow", "ratios-overflow"])
def test_weighting_never_returns_nonfinite_weights(call):
    try:
        out = call()
    except DpmtError:
        return
    vals = np.asarray(out, np.float64).ravel()
    assert np.all(np.isfinite(vals)) and np.all(vals > 0)


@pytest.mark.parametrize("counts", [[math.nan, 1.0], [0.0, 1.0], [-1.0, 2.0]])
def test_weighting_checks_jax_counts(counts):
    import jax.numpy as jnp

    try:
        w = weighting.task_weights(jnp.asarray(counts), n_users=5)
    except DpmtError:
        return
    assert bool(jnp.all(jnp.isfinite(w)))
