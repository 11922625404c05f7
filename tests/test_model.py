"""dpmt.Model: save/load, recommendations by raw ids, similar items, fold-in, refusals."""

import json

import numpy as np
import pytest

import dpmt
from dpmt.config import ExecutionConfig, NonPrivate, TrainConfig
from dpmt.data import load, per_user_split
from dpmt.data.ratings import Ratings
from dpmt.errors import ConfigError, DataError
from dpmt.model import Model

QUIET = ExecutionConfig(progress=False)
#: the planted data of `split` (and of the run-directory test, which reuses its kernels)
SPEC = ("synthetic:users=300,items=120,interactions=6000,alpha=1.0,seed=1,rank=4,noise=0.0,"
        "concentration=0.05")


@pytest.fixture(scope="module")
def split():
    r = load(SPEC)
    # raw item ids that are not the dense indices (×7 + 1000), so a mix-up cannot pass
    r = Ratings(user=r.user, item=r.item, value=r.value, user_ids=r.user_ids,
                item_ids=np.asarray(r.item_ids, np.int64) * 7 + 1000, name="shifted",
                items_public=True)     # the catalogue: the synthetic items, renamed
    return per_user_split(r, seed=0)


@pytest.fixture(scope="module")
def model(split):
    # an explicit prior weight (the rule gives η = 0 with uniform weights at this n̂·ε), so
    # that the scores below exercise the prior
    return dpmt.fit(split.train, TrainConfig(dim=4,
                                             budget=10.0, popularity_prior=0.25,
                                             data=dict(dataset="synthetic"),
                                             privacy=dict(epsilon=4.0)),
                    test=split.test, execution=QUIET)


def test_save_load_gives_identical_recommendations(model, split, tmp_path):
    path = model.save(tmp_path / "m")
    loaded = Model.load(path)
    np.testing.assert_array_equal(loaded.item_embeddings, model.item_embeddings)
    np.testing.assert_array_equal(loaded.item_ids, model.item_ids)
    assert loaded.config == model.config
    assert loaded.epsilon == pytest.approx(model.epsilon)
    for u in range(5):
        hist = split.train.item_ids[split.train.by_user.row(u)[0]]
        a_ids, a_sc = model.recommend(hist, k=10)
        b_ids, b_sc = loaded.recommend(hist, k=10)
        np.testing.assert_array_equal(a_ids, b_ids)
        np.testing.assert_allclose(a_sc, b_sc)
    # the files hold no user data: only item-sized arrays
    z = np.load(tmp_path / "m" / "item_embeddings.npz")
    assert all(z[k].shape[0] == model.n_items for k in z.files)


def test_recommendations_by_raw_ids_equal_the_dense_path(model, split):
    from dpmt.metrics import _dot_scores  # noqa: F401  (the evaluation's scoring)

    hist_rows = split.train.by_user.row(3)[0]
    hist = split.train.item_ids[hist_rows]
    ids, scores = model.recommend(hist, k=15)
    # dense path: exact user solve on dense rows, rank all items, history excluded
    U = model.user_embeddings(split.train.select(split.train.user == 3))
    V = model.item_embeddings.astype(np.float64)
    # the popularity prior, from its formula: η·ρ_V·standardised log(1 + n̂⁺)
    p = np.log1p(np.maximum(model.item_counts, 0))
    p = (p - p.mean()) / p.std()
    eta = model.config.popularity_prior
    assert eta > 0
    s = V @ U[3] + eta * np.linalg.norm(U[3]) * np.sqrt(np.mean(np.sum(V * V, 1))) * p
    s[hist_rows] = -np.inf
    top = np.argsort(-s, kind="stable")[:15]
    np.testing.assert_array_equal(ids, split.train.item_ids[top])
    np.testing.assert_allclose(scores, s[top], rtol=1e-5)
    assert not set(ids.tolist()) & set(hist.tolist())


def test_recommend_batch_matches_single_recommend(model, split):
    hists = [split.train.item_ids[split.train.by_user.row(u)[0]] for u in range(20)]
    ids, scores = model.recommend_batch(hists, k=8, batch_size=7)
    assert ids.shape == (20, 8)
    for u in (0, 6, 7, 19):
        one, sc = model.recommend(hists[u], k=8)
        np.testing.assert_array_equal(ids[u], one)
        np.testing.assert_allclose(scores[u], sc, rtol=1e-5)


def test_similar_items_start_with_the_item_itself(model):
    for item in model.item_ids[[0, 17, 60]]:
        ids, sims = model.similar_items(item, k=5)
        assert ids[0] == item and sims[0] == pytest.approx(1.0)
        assert len(set(ids.tolist())) == 5
        assert np.all(np.diff(sims[1:]) <= 1e-6)      # best first
        V = model.item_embeddings
        row = model.item_index([item])[0]
        cos = V @ V[row] / (np.linalg.norm(V, axis=1) * np.linalg.norm(V[row]))
        cos[row] = -np.inf
        assert sims[1] == pytest.approx(cos.max(), rel=1e-5)


def test_fold_in_of_a_training_user_reproduces_the_evaluation_ranking(model, split):
    """The evaluation folds in users with Model.user_embeddings; recommend() with the same
    history must rank exactly as the evaluation does."""
    es = split.test
    users = np.flatnonzero(es.history.user_counts() > 0)[:10]
    U_eval = model.user_embeddings(es.history)
    for u in users:
        rows = es.history.by_user.row(u)[0]
        u_vec = model.fold_in(es.history.item_ids[rows])
        np.testing.assert_allclose(u_vec, U_eval[u], rtol=1e-5, atol=1e-7)
        ids, _ = model.recommend(es.history.item_ids[rows], k=20)
        s = model.item_embeddings @ U_eval[u] + np.linalg.norm(U_eval[u]) * model.item_prior()
        s[rows] = -np.inf
        np.testing.assert_array_equal(model.item_index(ids), np.argsort(-s, kind="stable")[:20])


def test_corrupted_or_foreign_files_are_refused_clearly(model, tmp_path):
    good = model.save(tmp_path / "good")
    with pytest.raises(DataError, match="not a dpmt model"):
        Model.load(tmp_path / "nowhere")
    # truncated arrays
    bad = tmp_path / "trunc"
    model.save(bad)
    data = (bad / "item_embeddings.npz").read_bytes()
    (bad / "item_embeddings.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="cannot be read|corrupted"):
        Model.load(bad)
    # arrays of another model
    other = tmp_path / "other"
    model.save(other)
    V = model.item_embeddings.copy()
    V[0, 0] += 1.0
    np.savez(other / "item_embeddings.npz", V=V, item_ids=model.item_ids)
    with pytest.raises(DataError, match="fingerprint"):
        Model.load(other)
    # a foreign JSON file and a newer format version
    meta = json.loads((good / "model.json").read_text())
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "model.json").write_text(json.dumps({"format": "keras"}))
    with pytest.raises(DataError, match="not a dpmt model file"):
        Model.load(tmp_path / "foreign")
    meta["version"] = 99
    (good / "model.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="version 99"):
        Model.load(good)
    (good / "model.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        Model.load(good)


def test_a_run_directory_is_a_saved_model(tmp_path):
    # the ratings of `split` (its per-user split, seed 0), so that the kernels the `model`
    # fixture compiled are reused
    cfg = TrainConfig(dim=4, budget=10.0,
                      data=dict(dataset=SPEC),
                      privacy=dict(epsilon=3.0))
    m = dpmt.run(cfg, tmp_path / "run", execution=QUIET)
    loaded = Model.load(tmp_path / "run")
    np.testing.assert_array_equal(loaded.item_embeddings, m.item_embeddings)
    assert loaded.metrics["overall"]["recall@20"] == pytest.approx(
        m.metrics["overall"]["recall@20"])
    # private popularity from the released counts is reported beside the model
    assert "private popularity" in m.metrics["baselines"]


def test_bad_histories_get_clear_errors(model):
    known = model.item_ids[:3]
    with pytest.raises(DataError, match="integers"):
        model.recommend([0.5, 1.7])
    with pytest.raises(DataError, match="not in this model"):
        model.recommend([-5])
    with pytest.raises(DataError, match="more than once"):
        model.recommend([known[0], known[0]])
    with pytest.raises(DataError, match="finite"):
        model.fold_in(known, values=[1.0, np.nan, 1.0])
    with pytest.raises(ConfigError, match="k must be"):
        model.recommend(known, k=0)
    # an empty history ranks by the released (noisy) counts: private popularity
    ids, _ = model.recommend([], k=5)
    np.testing.assert_array_equal(ids, model.item_ids[np.argsort(-model.item_counts,
                                                                  kind="stable")[:5]])


def test_empty_history_without_released_counts_is_refused(split):
    m = dpmt.fit(split.train, TrainConfig(dim=4, iterations=1,
                                          popularity_prior=0.0, privacy=NonPrivate()),
                 execution=QUIET)
    assert m.item_counts is None
    with pytest.raises(DataError, match="empty history"):
        m.recommend([], k=3)


def test_top_k_breaks_ties_by_the_lower_index_at_the_boundary():
    from dpmt.ranking import top_k as _top_k

    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(50, 40)).astype(np.float64)   # many ties
    expect = np.argsort(-scores, axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(_top_k(scores, 7), expect)
