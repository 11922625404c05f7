"""User-facing errors.

Every error a user can cause (bad file, bad argument, unmet budget, missing download) is raised
as a :class:`DpmtError` whose message says what is wrong and what to do. The CLI prints the
message and exits with status 2; library callers can catch it. Nothing else should escape to
users as a traceback.
"""

from __future__ import annotations

import math


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
    ``epsilon must be > 0 (got -1.0)`` or ``delta must be in (0, 1) (got 1.5)``.
    """

    def fmt(x):   # 0.0 -> 0, 1e-05 stays, 2147483647 stays
        if isinstance(x, int):
            return str(x)
        return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"

    if low is not None and high is not None:
        allowed = (f"in {'(' if low_open else '['}{fmt(low)}, {fmt(high)}"
                   f"{')' if high_open else ']'}")
    elif low is not None:
        allowed = f"{'>' if low_open else '>='} {fmt(low)}"
    elif high is not None:
        allowed = f"{'<' if high_open else '<='} {fmt(high)}"
    else:
        allowed = ""
    if integer and (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not float(value).is_integer()):
        raise ConfigError(f"{name} must be an integer{' ' + allowed if allowed else ''} "
                          f"(got {value!r})")
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number (got {value!r})")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{name} must be a number (got {value!r})") from None
    if math.isnan(v):
        raise ConfigError(f"{name} must be a number{' ' + allowed if allowed else ''}, not NaN "
                          f"(got {value!r})")
    if (low is not None and (v <= low if low_open else v < low)) or \
            (high is not None and (v >= high if high_open else v > high)):
        raise ConfigError(f"{name} must be {allowed} (got {value!r})")
