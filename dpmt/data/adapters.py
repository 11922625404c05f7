"""Ratings as users of implicit and LensKit hold them: a ``scipy.sparse`` users × items
matrix, a pandas DataFrame or a pyarrow Table, turned into a :class:`~dpmt.data.Ratings`.

:func:`as_ratings` is what :func:`dpmt.fit` calls on its input, so ``fit(user_items)`` and
``fit(df)`` work as ``AlternatingLeastSquares().fit(user_items)`` and LensKit's
``fit(ratings)`` do. Every path ends in :class:`~dpmt.data.Ratings` (or
:meth:`~dpmt.data.Ratings.from_raw`), whose checks are the ones the privacy analysis needs:
one entry per (user, item) pair (a duplicate is refused, not summed), finite values, indices
in range.

* A sparse matrix (any scipy format): row ``u``, column ``i``, value ``x`` is user ``u``'s
  rating or confidence of item ``i``, as in implicit. The dense indices are the raw ids; the
  columns are the item catalogue (``items_public=True``: give the matrix the width of the
  whole catalogue, rated or not), and the entries are events (``implicit=True``: every
  stored entry is a positive; their values are kept as the labels of the rating task).
  Explicit zeros are entries too; duplicate (row, col) entries are refused.
* A DataFrame or Table: columns ``user``, ``item``, optional ``rating`` and ``timestamp``
  (or the MovieLens/RecBole names ``userId``/``user_id``, ``movieId``/``item_id``, …; or
  ``columns={"user": "uid", "item": "iid", "rating": "stars"}``). Ids may be strings.
  Without a rating column the rows are events (``implicit=True``). Without ``items=`` the
  items are those rated (``items_public=False``: a private run selects them privately).
"""

from __future__ import annotations

import numpy as np

from dpmt.data.ratings import Ratings, one_entry_per_pair
from dpmt.errors import DataError

#: accepted column names per role, first match wins (case-insensitive)
ALIASES = {"user": ("user", "userid", "user_id", "uid"),
           "item": ("item", "itemid", "item_id", "movieid", "movie_id", "iid"),
           "rating": ("rating", "ratings", "score", "value", "confidence"),
           "timestamp": ("timestamp", "time", "ts")}


def as_ratings(data, *, columns: dict | None = None, items=None, name: str | None = None,
               on_duplicate: str = "error") -> Ratings:
    """``data`` as :class:`~dpmt.data.Ratings` (see the module docstring); a Ratings is
    returned as it is. Anything else is a DataError that says what is accepted."""
    if isinstance(data, Ratings):
        return data
    if _is_sparse(data):
        return from_sparse(data, name=name or "user_items")
    table = _columns_of(data)
    if table is None:
        raise DataError(f"fit() trains on ratings: a dpmt.data.Ratings, a scipy.sparse users × "
                        f"items matrix, a pandas DataFrame or a pyarrow Table (got "
                        f"{type(data).__name__}); or load a file with dpmt.data.load(path)")
    return from_columns(table, columns=columns, items=items, name=name or "dataframe",
                        on_duplicate=on_duplicate)


def from_sparse(matrix, *, name: str = "user_items") -> Ratings:
    """Ratings of a scipy.sparse users × items matrix (see the module docstring)."""
    coo = matrix.tocoo()
    n_users, n_items = (int(x) for x in coo.shape)
    row, col = np.asarray(coo.row, np.int64), np.asarray(coo.col, np.int64)
    value = np.asarray(coo.data)
    if value.dtype.kind not in "biuf":
        raise DataError(f"the matrix holds {value.dtype} values; give numbers")
    one_entry_per_pair(row, col, n_items, unit="stored entries",
                       hint="The matrix stores that entry more than once; sum or drop the "
                            "duplicates first (e.g. matrix.sum_duplicates())")
    return Ratings(user=row, item=col, value=value.astype(np.float32),
                   user_ids=np.arange(n_users, dtype=np.int64),
                   item_ids=np.arange(n_items, dtype=np.int64), name=name,
                   items_public=True, implicit=True)


def from_columns(table: dict, *, columns: dict | None = None, items=None,
                 name: str = "dataframe", on_duplicate: str = "error") -> Ratings:
    """Ratings from named columns (a dict of 1-D arrays; see :func:`as_ratings`)."""
    role = _roles(list(table), columns)
    user, item = np.asarray(table[role["user"]]), np.asarray(table[role["item"]])
    for what in ("user", "item"):
        col = user if what == "user" else item
        if col.dtype == object and any(v is None or (isinstance(v, float) and np.isnan(v))
                                       for v in col.tolist()):
            raise DataError(f"column {role[what]!r} has missing {what} ids")
    rating = role.get("rating")
    value = (np.ones(len(user), np.float32) if rating is None
             else np.asarray(table[rating], np.float64))
    ts = role.get("timestamp")
    r = Ratings.from_raw(user, item, value,
                         timestamp=None if ts is None else np.asarray(table[ts]),
                         name=name, on_duplicate=on_duplicate, items=items)
    return r if rating is not None else Ratings(
        user=r.user, item=r.item, value=r.value, user_ids=r.user_ids, item_ids=r.item_ids,
        timestamp=r.timestamp, name=r.name, items_public=r.items_public, implicit=True)


# -- helpers -------------------------------------------------------------------------------------
def _is_sparse(x) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:                                  # pragma: no cover - scipy is core
        return False
    return sp.issparse(x)


def _columns_of(x) -> dict | None:
    """A DataFrame (pandas, or anything with ``columns`` and ``__getitem__``) or an Arrow
    Table as {name: numpy array}; None for anything else."""
    if hasattr(x, "column_names") and hasattr(x, "column"):          # pyarrow.Table
        return {str(c): x.column(c).to_numpy(zero_copy_only=False) for c in x.column_names}
    if hasattr(x, "columns") and hasattr(x, "__getitem__") and hasattr(x, "to_numpy"):
        return {str(c): np.asarray(x[c].to_numpy()) for c in x.columns}
    if isinstance(x, dict) and x and all(np.ndim(v) == 1 for v in x.values()):
        return {str(k): np.asarray(v) for k, v in x.items()}
    return None


def _roles(names: list[str], columns: dict | None) -> dict:
    lower = {n.lower(): n for n in names}
    role: dict[str, str] = {}
    for what, given in (columns or {}).items():
        if what not in ALIASES:
            raise DataError(f"columns= maps the roles user, item, rating, timestamp (got "
                            f"{what!r})")
        if given not in names:
            raise DataError(f"columns={{{what!r}: {given!r}}}: no such column (have "
                            f"{', '.join(names)})")
        role[what] = given
    for what, aliases in ALIASES.items():
        if what not in role:
            hit = next((lower[a] for a in aliases if a in lower), None)
            if hit is not None:
                role[what] = hit
    for what in ("user", "item"):
        if what not in role:
            raise DataError(f"no {what} column among {', '.join(names)}: name it "
                            f"({' or '.join(ALIASES[what][:3])}) or pass "
                            f"columns={{{what!r}: COLUMN}}")
    return role
