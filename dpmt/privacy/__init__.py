"""Privacy layer: the ledger (dp_accounting events), calibration, simple mechanisms.

Privacy unit: one user (add/remove-one).
"""

from dpmt.privacy.calibration import Calibration, PlannedRelease, calibrate
from dpmt.privacy.ledger import (PRIVACY_UNIT, PrivacyLedger, Release, atomic_write_text,
                                 compose, epsilon_of, make_accountant)
from dpmt.privacy.mechanisms import (cap_per_user, count_sensitivity, private_counts,
                                     private_mean)

__all__ = ["PRIVACY_UNIT", "Calibration", "PlannedRelease", "PrivacyLedger", "Release",
           "atomic_write_text", "calibrate", "cap_per_user", "compose", "count_sensitivity",
           "epsilon_of", "make_accountant", "private_counts", "private_mean"]
