"""Privacy layer: the ledger (dp_accounting events), calibration, simple mechanisms, the
exact discrete Gaussian.

Privacy unit: one user (add/remove-one).
"""

from dpmt.privacy.calibration import Calibration, PlannedRelease, calibrate
from dpmt.privacy.discrete_gaussian import discrete_gaussian_tail, sample_discrete_gaussian
from dpmt.privacy.ledger import (PRIVACY_UNIT, PrivacyLedger, Release, atomic_write_text,
                                 compose, epsilon_of, make_accountant)
from dpmt.privacy.mechanisms import (cap_per_user, count_sensitivity, partition_threshold,
                                     private_counts, private_item_offsets, private_mean,
                                     select_items)

__all__ = ["PRIVACY_UNIT", "Calibration", "PlannedRelease", "PrivacyLedger", "Release",
           "atomic_write_text", "calibrate", "cap_per_user", "compose", "count_sensitivity",
           "discrete_gaussian_tail", "epsilon_of", "make_accountant", "partition_threshold",
           "private_counts", "private_item_offsets", "private_mean", "sample_discrete_gaussian",
           "select_items"]
