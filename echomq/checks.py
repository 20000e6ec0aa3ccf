"""Argument checks the API modules share (queue, schedules, lanes, ...), so
each can check before it sends without importing another API module."""
from __future__ import annotations

from .errors import ArgumentError


def check_int(value, what: str, lo: int, hi: int) -> int:
    """An int (not a bool, float, str, NaN or inf) in [lo, hi], else ArgumentError."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArgumentError(f"{what} must be an integer in [{lo}, {hi}], got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise ArgumentError(f"{what} must be in [{lo}, {hi}], got {value!r}")
    return value
