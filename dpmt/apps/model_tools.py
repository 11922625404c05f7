"""Commands on a saved model, for many users at once and for what it released.

* ``dpmt recommend --model M --histories FILE --out FILE``: top-k for every user of a
  ratings file (CSV/TSV/.inter as ``dpmt train`` reads them, or Parquet), written as CSV
  (or Parquet by the file's suffix) with one row per (user, rank, item, score). One process,
  one batched fold-in: no start-up per user.
* ``dpmt evaluate --model M --dataset D``: Recall@k/NDCG@k (or RMSE for a rating model) of
  the saved model on the held-out users of D, overall and per popularity bucket, the split
  the model's config names.
* ``dpmt export --model M --out FILE``: item ids and factors as CSV, Parquet or ``.npz``.
* ``dpmt privacy --model M``: what the ε covers (the privacy unit, the releases with their
  sensitivity, noise and share of ε), optionally a plot of ε over the run.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np

from dpmt._io import atomic_save_npz, atomic_write_bytes, atomic_write_text
from dpmt.config import ExecutionConfig
from dpmt.data import load
from dpmt.data.adapters import ALIASES
from dpmt.data.layout import _header_names, first_line
from dpmt.data.loaders import detect_format
from dpmt.errors import ConfigError, DataError
from dpmt.registry import TASKS


# -- recommend for many users ------------------------------------------------------------------
def read_histories(path: str, model):
    """{raw user id: (raw item ids, values)} of a ratings file (read as ``dpmt train
    --dataset FILE`` reads it: CSV/TSV with text ids and quoted fields, ``.inter``,
    Parquet; no rating scale; the header's columns named as a DataFrame's are, e.g.
    ``uid,iid,score``), items the model lacks left out (counted)."""

    p = Path(path)
    if not p.is_file():
        raise DataError(f"histories file {p} does not exist" if not p.exists()
                        else f"histories file {p} is not a file")
    r = load(str(p), progress=False, rating_range=None, columns=_columns_of_header(p))
    known = np.isin(r.item_ids, model.item_ids)
    keep = known[r.item]
    by_user: dict = {}
    order = np.argsort(r.user[keep], kind="stable")
    users, items, vals = r.user[keep][order], r.item_ids[r.item[keep]][order], \
        r.value[keep][order]
    cuts = np.flatnonzero(np.diff(users)) + 1
    for u, it, v in zip(np.split(users, cuts), np.split(items, cuts), np.split(vals, cuts)):
        if len(u):
            by_user[r.user_ids[u[0]]] = (it, v)
    return by_user, int((~keep).sum())


def _columns_of_header(p: Path) -> dict | None:
    """The user/item/rating/timestamp columns of a CSV/TSV/Parquet header found by
    :data:`dpmt.data.adapters.ALIASES` (the names a DataFrame's columns may have), for
    ``load(columns=)``; None where the header names none (the loader's own names apply)."""

    fmt = detect_format(p)
    if fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            names = list(pq.read_schema(p).names)
        except Exception:                                # noqa: BLE001 - load() says why
            return None
    elif fmt in ("csv", "tsv"):
        with open(p, "rb") as f:
            head = first_line(f.read(1 << 16))
        names = _header_names(head, "\t" if "\t" in head else ",")
    else:
        return None
    lower = {n.lower(): n for n in names}
    cols = {role: next((lower[a] for a in aliases if a in lower), None)
            for role, aliases in ALIASES.items()}
    cols = {role: name for role, name in cols.items() if name is not None}
    return cols if "user" in cols and "item" in cols else None


def recommend_many(model, histories: dict, k: int) -> dict[str, list]:
    """Columns ``user, rank, item, score`` of the top ``k`` of every history."""
    users = list(histories)
    values = [histories[u][1] for u in users] if model.scorer.labelled else None
    ids, scores = model.recommend_batch([histories[u][0] for u in users], k, values=values)
    out: dict[str, list] = {"user": [], "rank": [], "item": [], "score": []}
    for u, row_ids, row_scores in zip(users, ids, scores):
        for rank, (i, s) in enumerate(zip(row_ids.tolist(), row_scores.tolist()), 1):
            if math.isfinite(s):
                out["user"].append(u)
                out["rank"].append(rank)
                out["item"].append(i)
                out["score"].append(float(s))
    return out


def write_table(columns: dict[str, list], path: str) -> None:
    """CSV (or Parquet, by the suffix), written atomically."""

    p = Path(path)
    if p.suffix.lower() == ".parquet":
        pa, pq = _arrow()

        buf = io.BytesIO()
        pq.write_table(pa.table(columns), buf)
        atomic_write_bytes(p, buf.getvalue())
        return
    names = list(columns)
    lines = [",".join(names)]
    for row in zip(*(columns[n] for n in names)):
        lines.append(",".join(_csv_cell(x) for x in row))
    atomic_write_text(p, "\n".join(lines) + "\n")


def _csv_cell(x) -> str:
    s = repr(x) if isinstance(x, float) else str(x)
    return f'"{s}"' if any(c in s for c in ',"\n') else s


def _arrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("Parquet needs pyarrow (pip install pyarrow); or use .csv") from None
    return pa, pq


# -- export -----------------------------------------------------------------------------------
def export(model, path: str) -> int:
    """Item ids and factors to ``path`` (.csv, .parquet or .npz). Returns the rows written."""
    p = Path(path)
    ids, V = model.item_ids, np.asarray(model.item_embeddings, np.float32)
    if p.suffix.lower() == ".npz":
        atomic_save_npz(p, item_ids=ids, item_factors=V)
    elif p.suffix.lower() in (".csv", ".parquet"):
        cols = {"item": ids.tolist()}
        for j in range(V.shape[1]):
            cols[f"f{j}"] = V[:, j].tolist()
        write_table(cols, str(p))
    else:
        raise ConfigError(f"--out {p}: give a .csv, .parquet or .npz file")
    return len(ids)


# -- privacy ----------------------------------------------------------------------------------
def privacy_report(model) -> str:
    """What the model's ε covers and what each release cost."""
    from dpmt.privacy.ledger import PRIVACY_UNIT, epsilon_of

    if model.ledger is None:
        return ("non-private model: ε = ∞ (it protects nobody); trained with --no-privacy")
    led = model.ledger
    lines = [f"privacy unit: {PRIVACY_UNIT}",
             f"guarantee: (ε, δ) = ({model.epsilon:.4g}, {led.delta:g}) for everything this "
             "model released: the item factors, the released item counts and the ledger "
             "itself; user embeddings are folded in on the user's side and never released "
             "(joint DP)", "", led.summary(), "",
             "share of ε (each release alone, at the run's δ; the composition is below their "
             "sum):"]
    for r in led.releases:
        alone = epsilon_of([r], led.delta)
        lines.append(f"  {r.name:<28} ε alone {alone:8.4g}")
    if model.noise_reproducible:
        from dpmt.privacy.randomness import SEEDED_WARNING

        lines.append(f"WARNING: {SEEDED_WARNING}")
    return "\n".join(lines)


def plot_epsilon(model, path: str) -> None:
    """ε spent after each iteration (the history in the model), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hist = model.history or []
    if not hist:
        raise DataError("the model has no iteration history to plot")
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot([h["iteration"] + 1 for h in hist], [h["epsilon"] for h in hist], marker="o",
            color="#1b9e77")
    ax.axhline(model.config.privacy.epsilon, color="#777777", linestyle="--", label="target ε")
    ax.set_xlabel("iteration")
    ax.set_ylabel("ε spent (at the run's δ)")
    ax.legend(loc="lower right")
    fig.tight_layout()

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())


# -- evaluate ---------------------------------------------------------------------------------
def evaluate_saved(model, dataset: str, data_dir: str, eval_set: str = "test") -> dict:
    """Metrics of a saved model on the held-out part of ``dataset`` (the split the model's
    config names), in the model's item index space."""
    from dpmt.train.evaluate import evaluate, evaluate_ratings
    from dpmt.train.rundir import prepare_data

    cfg = model.config.replace(data=dict(dataset=dataset, items=None))
    split = prepare_data(cfg, ExecutionConfig(data_dir=data_dir, progress=False))
    if not np.array_equal(np.asarray(split.train.item_ids), np.asarray(model.item_ids)):
        raise DataError(f"{dataset}'s items are not the model's ({split.train.n_items} against "
                        f"{model.n_items}): evaluate on the data the model was trained on "
                        "(with the same item catalogue)")
    es = split.test if eval_set == "test" else split.validation
    score = evaluate_ratings if TASKS[cfg.task].labelled else evaluate
    return score(model, split.train, es)
