"""Data layer: ratings container, loaders, downloads, preprocessing, splits, synthetic data."""

from dpmt.data.ratings import CSR, Ratings

__all__ = ["CSR", "Ratings"]
