"""rate: set or clear the queue's rate limit (claim enforces it)."""
from ..dsl import MAX_COUNT, MAX_MS, World, call, case, refusals


def rate(jobs=3, per_ms=1000, **kw):
    return call("rate", jobs=jobs, per_ms=per_ms, **kw)


CASES = [
    case("set", "a limit: meta rate_jobs and rate_ms; WAKE_MAX wake tokens for parked consumers; answers 1",
         None, rate()),
    case("reset-window", "setting a limit again starts a fresh window (rate_start and rate_count go)",
         World().meta(rate_jobs=3, rate_ms=1000, rate_start=5000, rate_count=3), rate(jobs=5)),
    case("clear", "0, 0 clears the limit and its window; the other meta fields stay",
         World().meta(rate_jobs=3, rate_ms=1000, rate_start=5000, rate_count=3, completed=4), rate(0, 0)),
    case("half-clear", "jobs 0 with per_ms positive is refused with EMQARG; nothing changes",
         World().meta(rate_jobs=3, rate_ms=1000), rate(0, 1000)),
    *refusals("rate", World().meta(completed=1), {"jobs": 3, "per_ms": 1000},
              {"P": "P", "jobs": ("int", 0, MAX_COUNT), "per_ms": ("int", 0, MAX_MS)}),
]
