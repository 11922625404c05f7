"""User-facing errors.

Every error a user can cause (bad file, bad argument, unmet budget, missing download) is raised
as a :class:`DpmtError` whose message says what is wrong and what to do. The CLI prints the
message and exits with status 2; library callers can catch it. Nothing else should escape to
users as a traceback.
"""

from __future__ import annotations


class DpmtError(ValueError):
    """An error caused by user input or environment, with an actionable message."""


class DataError(DpmtError):
    """Malformed, empty or missing data."""


class PrivacyBudgetError(DpmtError):
    """A privacy budget that cannot be met or would be exceeded."""


class ConfigError(DpmtError):
    """An invalid configuration value (range, type, combination)."""


def check_range(name: str, value, *, low=None, high=None, low_open=False, high_open=False,
                integer: bool = False) -> None:
    """Raise :class:`ConfigError` unless ``low (<|<=) value (<|<=) high``.

    The message states the value given and the allowed range, e.g.
    ``epsilon must be > 0 (got -1.0)``.
    """
    import math

    if integer and (isinstance(value, bool) or not float(value).is_integer()):
        raise ConfigError(f"{name} must be an integer (got {value!r})")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number (got {value!r})") from None
    if math.isnan(v):
        raise ConfigError(f"{name} must be a number, not NaN")
    if low is not None and (v <= low if low_open else v < low):
        raise ConfigError(f"{name} must be {'>' if low_open else '>='} {low} (got {value!r})")
    if high is not None and (v >= high if high_open else v > high):
        raise ConfigError(f"{name} must be {'<' if high_open else '<='} {high} (got {value!r})")
