"""Rate limits, the Python side: the arguments of ``lua/rate.lua`` and the
view of a window (the limit is enforced by ``claim.lua``, see
``lua/include/rate.lua``). Shared by the queue and its lanes."""
from __future__ import annotations

from .checks import MAX_COUNT, MAX_MS, check_int
from .errors import ArgumentError


def rate_args(jobs, per_ms) -> tuple[int, int]:
    """(jobs, per_ms) for the rate script: (0, 0) clears; ArgumentError otherwise."""
    if jobs is None:
        if per_ms is not None:
            raise ArgumentError("per_ms without jobs: give both, or jobs=None to clear the limit")
        return 0, 0
    return check_int(jobs, "jobs", 1, MAX_COUNT), check_int(per_ms, "per_ms", 1, MAX_MS)


def rate_view(fields, now_ms: int) -> dict | None:
    """A limit and its window from the fields rate_jobs, rate_ms, rate_start, rate_count."""
    jobs, per, start, used = fields
    if jobs is None:
        return None
    per, start = int(per), int(start or 0)
    is_open = bool(start) and now_ms < start + per
    return {"jobs": int(jobs), "per_ms": per, "claimed": int(used or 0) if is_open else 0,
            "window_ms_left": start + per - now_ms if is_open else 0}
