"""The pieces dpmt.Model composes, each on its own: the id index (dpmt.item_ids.ItemIndex),
the scorers of the two tasks (dpmt.scoring), the report (dpmt.model_report) and the
persistence of each piece (dpmt.model_files). Hand-built models: nothing is trained here."""

import json

import numpy as np
import pytest

from dpmt.config import NonPrivate, TrainConfig
from dpmt.errors import ConfigError, DataError
from dpmt.item_ids import ItemIndex
from dpmt.model import Model
from dpmt.model_files import arrays_fingerprint
from dpmt.registry import TASKS
from dpmt.scoring import ImplicitScorer, RatingScorer, make_scorer
from dpmt.tasks import Rating


# -- the id index ----------------------------------------------------------------------
def test_the_index_maps_raw_ids_to_their_rows():
    ids = np.array([70, 10, 40, 20])
    index = ItemIndex(ids)
    assert len(index) == 4
    np.testing.assert_array_equal(index.rows([10, 20, 70, 40, 10]), [1, 3, 0, 2, 1])
    assert index.rows([40.0]).tolist() == [2]                 # an integral float is an id
    assert index.rows([]).dtype == np.int64 and index.rows([]).size == 0
    text = ItemIndex(np.array(["b", "a", "10"]))
    np.testing.assert_array_equal(text.rows([10, "a"]), [2, 1])   # coerced to the id type


def test_the_index_refuses_unknown_ids_naming_them_and_drops_them_on_drop():
    index = ItemIndex(np.arange(100, 110))
    with pytest.raises(DataError, match=r"item id\(s\) 5, 999 are not in this model "
                                        r"\(10 items, e.g. 100\)"):
        index.rows([101, 5, 999])
    with pytest.raises(DataError, match=r"1, 2, 3, 4, 5 … are not in this model"):
        index.rows([1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(index.rows([109, 5, 100, 999], unknown="drop"), [9, 0])
    assert index.rows([5], unknown="drop").size == 0
    with pytest.raises(ConfigError, match="unknown must be 'error' or 'drop'"):
        index.rows([100], unknown="ignore")
    with pytest.raises(DataError, match="integers"):
        index.rows([100.5])
    with pytest.raises(DataError, match="True/False"):
        index.rows(np.array([True]))


def test_the_index_refuses_duplicate_ids_and_ids_not_one_per_row():
    with pytest.raises(DataError, match="duplicates"):
        ItemIndex([1, 2, 1])
    with pytest.raises(DataError, match=r"one id per row of item_embeddings \(3; got "
                                        r"shape \(2,\)\)"):
        ItemIndex([1, 2], rows=3)
    with pytest.raises(DataError, match="1-D"):
        ItemIndex(np.zeros((2, 2)))


def test_the_index_parses_histories_and_hands_their_values_to_the_labels():
    index = ItemIndex(np.array([5, 6, 7, 8]))
    seen = []

    def labels(rows, values):
        seen.append((rows.tolist(), None if values is None else values.tolist()))
        return np.full(len(rows), 2.0, np.float32)

    rows, vals = index.histories([[8, 5], [], [6]], [[1, 2], [], [3]], labels)
    assert [r.tolist() for r in rows] == [[3, 0], [], [1]]
    assert seen == [([3, 0], [1.0, 2.0]), ([], []), ([1], [3.0])]
    assert all(v.dtype == np.float32 for v in vals)
    index.histories([[7]], None, labels)
    assert seen[-1] == ([2], None)
    with pytest.raises(DataError, match="history 1 lists an item more than once"):
        index.histories([[5], [6, 6]], None, labels)
    with pytest.raises(DataError, match="one entry per history"):
        index.histories([[5], [6]], [[1]], labels)
    with pytest.raises(DataError, match="values of history 0 must be 2 finite numbers"):
        index.histories([[5, 6]], [[1, np.inf]], labels)
    with pytest.raises(DataError, match="sequence of item-id sequences"):
        index.histories("5,6", None, labels)


# -- the scorers -------------------------------------------------------------------------
def _implicit_model(**kw):
    """A fixed implicit model (seeded); its rankings below were made by the Model of before
    the split (dpmt.model of commit 17cf9ca), so the split changed no result."""
    rng = np.random.default_rng(7)
    V = (0.5 * rng.normal(size=(40, 5))).astype(np.float32)
    counts = rng.integers(0, 50, size=40).astype(np.float64)
    cfg = TrainConfig(dim=5, popularity_prior=0.5, privacy=NonPrivate())
    return Model(item_embeddings=V, item_ids=np.arange(40) * 3 + 11, config=cfg,
                 item_counts=counts, **kw), rng


HISTORIES = [[11, 14, 59], [50, 71, 101, 119, 26], [128]]
BEFORE = [[107, 32, 125, 113, 110, 74, 38, 116], [110, 107, 32, 59, 41, 44, 113, 20],
          [38, 89, 17, 107, 125, 56, 32, 44]]
BEFORE_FIRST_SCORES = [0.144613, 0.103082, 0.079017, 0.077142, 0.076889, 0.068128,
                       0.065012, 0.064963]


def test_the_implicit_scorer_ranks_as_the_model_before_the_split():
    model, _ = _implicit_model()
    assert isinstance(model.scorer, ImplicitScorer) and not model.scorer.labelled
    ids, scores = model.recommend(HISTORIES[0], k=8)
    assert ids.tolist() == BEFORE[0]
    np.testing.assert_allclose(scores, BEFORE_FIRST_SCORES, atol=2e-6)
    ids, _ = model.recommend_batch(HISTORIES, 8, batch_size=2)
    assert ids.tolist() == BEFORE
    assert model.similar_items(14, k=5)[0].tolist() == [14, 32, 74, 107, 59]


def test_the_implicit_scorer_follows_its_formulas():
    """u = (Σ_H v_i v_iᵀ + α0 VᵀV + λI)⁻¹ Σ_H v_i clipped to ‖u‖ ≤ C; s = Vu + ‖u‖·π with
    π = η·ρ_V·standardised log(1 + n̂⁺); the history excluded; ties to the lower row."""
    model, _ = _implicit_model()
    cfg, V = model.config, model.item_embeddings.astype(np.float64)
    scorer = model.scorer
    for h in HISTORIES:
        rows = model.item_index(h)
        A = V[rows].T @ V[rows] + cfg.gravity * V.T @ V + cfg.reg * np.eye(model.dim)
        u = np.linalg.solve(A, V[rows].sum(0))
        u *= min(1.0, cfg.user_clip / np.linalg.norm(u))
        rows_got, labels = model.index.histories([h], None, scorer.labels)
        np.testing.assert_allclose(scorer.fold_in(rows_got, labels)[0], u, rtol=1e-4,
                                   atol=1e-7)
        p = np.log1p(np.maximum(model.item_counts, 0))
        p = (p - p.mean()) / p.std()
        prior = cfg.popularity_prior * np.sqrt(np.mean(np.sum(V * V, 1))) * p
        np.testing.assert_allclose(scorer.prior(), prior, rtol=1e-5)
        s = V @ u + np.linalg.norm(u) * prior
        s[rows] = -np.inf
        top, got = scorer.top(rows_got, labels, 6)
        np.testing.assert_array_equal(top[0], np.argsort(-s, kind="stable")[:6])
        np.testing.assert_allclose(got[0], s[top[0]], rtol=1e-4)


def test_the_prior_is_absent_without_counts_or_weight_and_an_empty_history_ranks_by_counts():
    model, _ = _implicit_model()
    ids, _ = model.recommend([], k=4)
    np.testing.assert_array_equal(ids, model.item_ids[np.argsort(-model.item_counts,
                                                                  kind="stable")[:4]])
    V, cfg = model.item_embeddings, model.config
    assert make_scorer(V, cfg, None).prior() is None
    assert make_scorer(V, cfg.replace(popularity_prior=0.0), model.item_counts).prior() is None
    with pytest.raises(DataError, match="empty history"):
        make_scorer(V, cfg, None).top([np.zeros(0, np.int64)], [np.zeros(0, np.float32)], 3)


def _rating_model(**kw):
    """A rating model whose users' offsets are their mean labels (``user_offsets="mean"``:
    the formula below; the refit and the slopes are tested in tests/test_rating.py)."""
    kw.setdefault("user_offsets", "mean")
    rng = np.random.default_rng(11)
    V = (2.5 * rng.normal(size=(30, 3))).astype(np.float32)
    cfg = TrainConfig(task="rating", dim=3, privacy=NonPrivate(), data=dict(split="random"),
                      user_clip=3.0, gravity=0.0, reg=0.5, **kw)
    return Model(item_embeddings=V, item_ids=np.arange(30) + 100, config=cfg,
                 label_offset=3.5, item_offsets=rng.normal(0, 1.5, 30))


def test_the_rating_scorer_predicts_by_its_formula_clipped_to_the_rating_bounds():
    model = _rating_model()
    scorer = model.scorer
    assert isinstance(scorer, RatingScorer) and scorer.labelled and scorer.prior() is None
    lo, hi = model.config.data.rating_bounds
    history, values = [100, 101, 102, 103], np.array([5.0, 5.0, 1.0, 4.0])
    items = model.item_ids
    pred = model.predict(history, values, items)
    assert np.all((pred >= lo) & (pred <= hi))
    assert np.any(pred == lo) and np.any(pred == hi)       # this model overshoots both ends
    # y = clip(r − μ̂ − b̂_i, ±c) − b_j (clipped again), b_j = Σ y / (|H| + λ_b)
    c, hist_rows = model.config.label_clip, model.item_index(history)
    y = np.clip(values - 3.5 - model.item_offsets[hist_rows], -c, c)
    b = y.sum() / (len(y) + model.config.user_bias_reg)
    np.testing.assert_allclose(scorer.labels(hist_rows, values), np.clip(y - b, -c, c),
                               rtol=1e-6)
    u = model.fold_in(history, values)
    raw = 3.5 + model.item_offsets + b + model.item_embeddings @ u
    inside = (raw > lo) & (raw < hi)
    assert inside.sum() > 10
    np.testing.assert_allclose(pred[inside], raw[inside], rtol=1e-5)
    np.testing.assert_array_equal(pred[~inside], np.clip(raw[~inside], lo, hi))
    # no user bias: b_j = 0
    plain = _rating_model(user_bias=False).scorer
    np.testing.assert_allclose(plain.labels(hist_rows, values), y, rtol=1e-6)


def test_a_rating_model_needs_ratings_and_an_implicit_model_does_not_predict():
    model = _rating_model()
    with pytest.raises(DataError, match="folds a user in from their ratings"):
        model.fold_in([100, 101])
    implicit, _ = _implicit_model()
    with pytest.raises(ConfigError, match="predict\\(\\) is for rating models"):
        implicit.predict([11], [1.0], [14])


def test_the_scorer_is_chosen_by_the_task_entry_not_by_optional_fields():
    model = _rating_model()
    V, cfg = model.item_embeddings, model.config
    with pytest.raises(DataError, match="label_offset is missing"):
        Model(item_embeddings=V, item_ids=model.item_ids, config=cfg)
    implicit, _ = _implicit_model()
    with pytest.raises(DataError, match="ranks items: it has no label_offset"):
        Model(item_embeddings=implicit.item_embeddings, item_ids=implicit.item_ids,
              config=implicit.config, label_offset=3.0)
    # a registered task with the ``labelled`` capability gets the rating scorer
    entry = TASKS.register(type("Stars", (Rating,), {"name": "stars-test"})())
    try:
        cfg2 = cfg.replace(task="stars-test")
        assert type(make_scorer(V, cfg2, label_offset=1.0)) is RatingScorer
        assert type(make_scorer(V, cfg2.replace(task="rating"), label_offset=1.0)) \
            is RatingScorer
        assert type(make_scorer(V, TrainConfig(dim=3))) is ImplicitScorer
    finally:
        TASKS.unregister(entry.name)


# -- the report and persistence, piece by piece ---------------------------------------------
def test_the_report_of_a_non_private_model():
    model, _ = _implicit_model()
    s = model.privacy_summary()
    assert s["epsilon"] == float("inf") and s["private"] is False and s["delta"] == 0.0
    assert model.noise_note()["source"] == "none"
    assert "non-private (ε = ∞)" in model.report()


@pytest.mark.parametrize("kind", ["implicit", "rating", "text ids"])
def test_save_then_load_round_trips_each_piece(kind, tmp_path):
    if kind == "rating":
        model = _rating_model()
    else:
        model, _ = _implicit_model()
        if kind == "text ids":
            model = Model(item_embeddings=model.item_embeddings,
                          item_ids=np.array([f"item-{i}" for i in range(40)]),
                          config=model.config, item_counts=model.item_counts)
    back = Model.load(model.save(tmp_path / "m"))
    # the id index: the same ids, the same rows for any request
    np.testing.assert_array_equal(back.index.ids, model.index.ids)
    assert back.index.ids.dtype.kind == model.index.ids.dtype.kind
    ask = model.item_ids[::-3]
    np.testing.assert_array_equal(back.item_index(ask), model.item_index(ask))
    # the scorer: the same kind, prior, offsets, scores
    assert type(back.scorer) is type(model.scorer)
    a, b = model.scorer, back.scorer
    if a.prior() is None:
        assert b.prior() is None
    else:
        np.testing.assert_array_equal(b.prior(), a.prior())
    h = model.item_ids[:3].tolist()
    vals = [4.0, 2.0, 5.0] if a.labelled else None
    np.testing.assert_array_equal(back.score(h, values=vals), model.score(h, values=vals))
    if a.labelled:
        np.testing.assert_array_equal(b.offsets(np.arange(30)), a.offsets(np.arange(30)))
        np.testing.assert_array_equal(back.predict(h, vals, model.item_ids),
                                      model.predict(h, vals, model.item_ids))
    # persistence and the report: the same fingerprint, summary and lines
    assert back.fingerprint() == model.fingerprint() == arrays_fingerprint(
        model.item_embeddings, model.item_ids, model.item_counts, model.item_offsets)
    assert back.privacy_summary() == model.privacy_summary()
    assert back.report() == model.report()
    # the files hold released arrays and public metadata only: item-sized arrays
    with np.load(tmp_path / "m" / "item_embeddings.npz") as z:
        assert all(z[k].shape[0] == model.n_items for k in z.files)
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["label_offset"] == model.label_offset
