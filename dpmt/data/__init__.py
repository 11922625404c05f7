"""Data layer: ratings container, loaders, downloads, preprocessing, splits, synthetic data."""

from dpmt.data.fetch import (
    REGISTRY,
    DatasetInfo,
    dataset_items,
    dataset_path,
    fetch,
    item_features_for,
    load,
    parse_synthetic_spec,
)
from dpmt.data.loaders import (
    ML100K_GENRES,
    detect_format,
    from_tfds,
    load_csv,
    load_dat,
    load_file,
    load_inter,
    load_item_genres,
    load_tsv,
    parse_columns,
    parse_rating_range,
    read_item_catalogue,
)
from dpmt.data.adapters import as_ratings
from dpmt.data.ratings import CSR, Ratings
from dpmt.data.splits import (
    EvalSet,
    Split,
    binarize,
    cap_ratings_per_user,
    filter_min_counts,
    heldout_users_split,
    per_user_split,
    random_split,
)
from dpmt.data.stats import format_summary, gini, summary
from dpmt.data.synthetic import (
    SyntheticTruth,
    make_synthetic,
    make_synthetic_like,
    synthetic_item_topics,
)
from dpmt.data.synthetic_ratings import ExplicitTruth, make_explicit_synthetic

__all__ = [
    "CSR", "Ratings", "as_ratings",
    # loaders
    "load_file", "load_tsv", "load_dat", "load_csv", "load_inter", "detect_format",
    "from_tfds", "load_item_genres", "ML100K_GENRES", "parse_columns", "parse_rating_range",
    "read_item_catalogue",
    # fetch / load
    "REGISTRY", "DatasetInfo", "dataset_path", "dataset_items", "fetch", "load",
    "parse_synthetic_spec", "item_features_for",
    # preprocessing / splits
    "EvalSet", "Split", "binarize", "filter_min_counts", "cap_ratings_per_user",
    "per_user_split", "heldout_users_split", "random_split",
    # synthetic
    "SyntheticTruth", "make_synthetic", "make_synthetic_like", "synthetic_item_topics",
    "ExplicitTruth", "make_explicit_synthetic",
    # stats
    "summary", "format_summary", "gini",
]
