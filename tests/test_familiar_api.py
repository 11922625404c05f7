"""An implicit user's script and a LensKit user's script run unchanged but for the import
(issue 26): fit on a CSR users × items matrix or a DataFrame, recommend for one row or a
batch of rows, similar items, item factors."""

import numpy as np
import pytest
import scipy.sparse as sp

import dpmt
from dpmt.config import ExecutionConfig, NonPrivate, TrainConfig
from dpmt.errors import ConfigError, DataError

QUIET = ExecutionConfig(progress=False)


@pytest.fixture(scope="module")
def user_items():
    r = dpmt.data.make_synthetic(n_users=400, n_items=60, n_interactions=8000, seed=3)
    return sp.csr_matrix((np.ones(r.nnz, np.float32), (r.user, r.item)),
                         shape=(r.n_users, r.n_items))


@pytest.fixture(scope="module")
def model(user_items):
    # implicit: model = AlternatingLeastSquares(factors=4); model.fit(user_items)
    return dpmt.fit(user_items, TrainConfig(dim=4, iterations=2,
                                            privacy=dict(epsilon=5.0, noise_seed=0)),
                    execution=QUIET)


def test_an_implicit_users_script(model, user_items):
    assert model.item_factors.shape == (60, 4) and model.user_factors is None
    assert model.config.data.dataset == "user_items"          # not the config's default ml-100k
    ids, scores = model.recommend(0, user_items[0], N=5)
    assert ids.shape == (5,) and scores.shape == (5,)
    assert not set(ids.tolist()) & set(user_items[0].indices.tolist())   # liked ones filtered
    assert np.all(np.diff(scores) <= 0)
    userids = np.arange(10)
    bids, bscores = model.recommend(userids, user_items[userids], N=5)
    assert bids.shape == (10, 5) and bscores.shape == (10, 5)
    np.testing.assert_array_equal(bids[0], ids)
    # the whole matrix works too (rows taken by userid)
    np.testing.assert_array_equal(model.recommend(userids, user_items, N=5)[0], bids)
    # dpmt's own call on the same history gives the same ranking
    own, _ = model.recommend(list(user_items[0].indices), k=5)
    np.testing.assert_array_equal(own, ids)
    sims_ids, sims = model.similar_items(3, N=6)
    assert sims_ids[0] == 3 and sims[0] == pytest.approx(1.0) and len(sims_ids) == 6
    many, _ = model.similar_items(np.array([3, 4]), N=6)
    assert many.shape == (2, 6) and many[1, 0] == 4


def test_implicit_filters_and_candidates(model, user_items):
    ids, _ = model.recommend(0, user_items[0], N=5, filter_items=[1, 2, 3])
    assert not {1, 2, 3} & set(ids.tolist())
    ids, scores = model.recommend(0, user_items[0], N=5, items=np.arange(40, 60),
                                  filter_already_liked_items=False)
    assert set(ids[np.isfinite(scores)].tolist()) <= set(range(40, 60))
    ids, _ = model.similar_items(3, N=4, filter_items=[3])
    assert 3 not in ids.tolist()
    with pytest.raises(ConfigError, match="stores none"):
        model.recommend(0, user_items[0], recalculate_user=False)
    with pytest.raises(DataError, match="scipy.sparse"):
        model.recommend(0, [1, 2, 3])
    with pytest.raises(ConfigError, match="N must be an integer"):
        model.recommend(0, user_items[0], N=0)


def test_the_matrix_is_checked_like_every_input():
    dup = sp.coo_matrix((np.ones(3), ([0, 0, 1], [1, 1, 2])), shape=(3, 4))
    with pytest.raises(DataError, match="more than once"):
        dpmt.fit(dup, TrainConfig(dim=2, iterations=1))
    with pytest.raises(DataError, match="pandas DataFrame or a pyarrow Table"):
        dpmt.fit([[1, 2]], TrainConfig(dim=2, iterations=1))


def test_a_lenskit_users_script(tmp_path):
    pd = pytest.importorskip("pandas")
    r = dpmt.data.make_synthetic(n_users=400, n_items=60, n_interactions=8000, seed=4)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"user": [f"u{u}" for u in r.user], "item": [f"i{i}" for i in r.item],
                       "rating": rng.integers(1, 6, r.nnz).astype(float)})
    catalogue = [f"i{i}" for i in range(60)]
    ratings = dpmt.data.as_ratings(df, items=catalogue)     # string ids, public catalogue
    assert ratings.items_public and not ratings.implicit and ratings.n_items == 60
    split = dpmt.data.per_user_split(dpmt.data.binarize(ratings, 3.5), seed=0)
    model = dpmt.fit(split.train, TrainConfig(dim=4, iterations=1, solver="ssp",
                                              privacy=dict(epsilon=5.0, noise_seed=1)),
                     test=split.test, execution=QUIET)
    assert 0 <= model.metrics["overall"]["recall@20"] <= 1
    ids, _ = model.recommend(["i1", "i2"], k=3)
    assert all(str(x).startswith("i") for x in ids)
    # a DataFrame straight into fit, without ratings: events
    events = df[["user", "item"]]
    m2 = dpmt.fit(events.iloc[:4000], TrainConfig(dim=2, iterations=1, privacy=NonPrivate()),
                  execution=QUIET)
    assert m2.n_items <= 60


def test_an_arrow_table_and_column_names(tmp_path):
    pa = pytest.importorskip("pyarrow")
    t = pa.table({"uid": [1, 1, 2, 3], "movieId": [10, 11, 10, 12], "stars": [5., 3., 4., 1.]})
    r = dpmt.data.as_ratings(t, columns={"user": "uid", "rating": "stars"})
    assert (r.n_users, r.n_items, r.nnz) == (3, 3, 4) and r.value.max() == 5.0
    with pytest.raises(DataError, match="no such column"):
        dpmt.data.as_ratings(t, columns={"user": "nope"})


# -- the shell, for many users and for what a model released --------------------------------------
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from _cli import cli

    out = tmp_path_factory.mktemp("tools") / "R"
    assert cli(["train", "--dataset", "synthetic:users=300,items=50,interactions=6000,seed=2",
                "--split", "heldout-users", "--heldout-users", "40", "--dim", "3",
                "--iterations", "2", "--solver", "ssp", "--quiet", "--out", out]) == 0
    return out


def test_recommend_for_every_user_of_a_file(run_dir, tmp_path, capsys):
    from _cli import cli

    h = tmp_path / "h.csv"
    h.write_text("user,item\na,1\na,2\nb,3\nb,999\n")            # 999: not in the model
    for out in (tmp_path / "r.csv", tmp_path / "r.parquet"):
        assert cli(["recommend", "--model", run_dir, "--histories", h, "--out", out,
                    "-k", "4"]) == 0
        said = capsys.readouterr().out
        assert "for 2 users" in said and "1 ratings of items the model does not have" in said
    lines = (tmp_path / "r.csv").read_text().splitlines()
    assert lines[0] == "user,rank,item,score" and len(lines) == 1 + 2 * 4
    assert {ln.split(",")[0] for ln in lines[1:]} == {"a", "b"}
    pq = pytest.importorskip("pyarrow.parquet")
    assert pq.read_table(tmp_path / "r.parquet").num_rows == 8
    assert cli(["recommend", "--model", run_dir, "--histories", h]) == 2
    assert "needs --out" in capsys.readouterr().err
    # a DataFrame's column names and quoted fields, read as dpmt train reads files
    h2 = tmp_path / "h2.csv"
    h2.write_text('uid,iid,score\n"a","1",5\n"a","2",4\n"b","3",1\n')
    assert cli(["recommend", "--model", run_dir, "--histories", h2, "--out",
                tmp_path / "r2.csv", "-k", "4"]) == 0
    assert "for 2 users" in capsys.readouterr().out
    assert (tmp_path / "r2.csv").read_text().splitlines()[1:] == lines[1:]


def test_evaluate_export_and_privacy_of_a_saved_model(run_dir, tmp_path, capsys):
    import json

    from _cli import cli

    ds = "synthetic:users=300,items=50,interactions=6000,seed=2"
    assert cli(["evaluate", "--model", run_dir, "--dataset", ds, "--json",
                tmp_path / "m.json"]) == 0
    m = json.loads((tmp_path / "m.json").read_text())
    saved = json.loads((run_dir / "trainer" / "metrics.json").read_text())
    assert m["overall"]["recall@20"] == pytest.approx(saved["overall"]["recall@20"])
    assert "B1 (tail)" in capsys.readouterr().out
    for name in ("f.csv", "f.npz", "f.parquet"):
        assert cli(["export", "--model", run_dir, "--out", tmp_path / name]) == 0
    z = np.load(tmp_path / "f.npz")
    model = dpmt.Model.load(run_dir)
    np.testing.assert_array_equal(z["item_factors"], model.item_factors)
    header = (tmp_path / "f.csv").read_text().splitlines()[0]
    assert header == "item,f0,f1,f2"
    capsys.readouterr()
    assert cli(["privacy", "--model", run_dir, "--plot", tmp_path / "e.png"]) == 0
    said = capsys.readouterr().out
    assert "privacy unit: one user" in said and "iter1/ssp_b" in said and "ε alone" in said
    assert (tmp_path / "e.png").stat().st_size > 1000
    assert cli(["export", "--model", run_dir, "--out", tmp_path / "f.txt"]) == 2
