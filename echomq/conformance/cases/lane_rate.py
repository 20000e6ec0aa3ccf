"""lane_rate: set or clear one lane's rate limit, keeping the ring in step."""
from ..dsl import A, L1, MAX_COUNT, MAX_MS, World, call, case, key, lane_key, refusals


def lane_rate(jobs=2, per_ms=1000, lane=L1, **kw):
    return call("lane_rate", lane=lane, jobs=jobs, per_ms=per_ms, **kw)


def cooling(world, *, jobs: bool):
    """L1 cooling: its window full, off the ring until 5000 + 1000 (the
    lanes set names it; ``world`` adds it there itself when L1 has jobs)."""
    world = (world.raw(lane_key(L1, "meta"), {"hash": {"rate_jobs": "1", "rate_ms": "1000", "rate_start": "5000",
                                                       "rate_count": "1", "cooling": "1"}})
             .raw(key("cooling"), {"zset": {L1: 6000}}).meta(lane_rates=1).ring())
    return world if jobs else world.raw(key("lanes"), {"set": [L1]})


CASES = [
    case("set", "a limit on a servable lane: its meta rate_jobs, rate_ms; meta lane_rates 1; answers 1",
         World().pending(A, lane=L1).wake(), lane_rate()),
    case("set-empty-lane", "a lane with no jobs keeps its limit: meta and the lanes set name it; answers 0",
         None, lane_rate()),
    case("change", "a new limit on a lane that has one: lane_rates stays 1, the window starts afresh",
         World().pending(A, lane=L1).meta(lane_rates=1)
         .raw(lane_key(L1, "meta"), {"hash": {"rate_jobs": "1", "rate_ms": "1000", "rate_start": "5000",
                                              "rate_count": "0"}}), lane_rate(jobs=5)),
    case("rering-cooling", "a new limit on a cooling lane with jobs: cooling goes, the lane is rung with a wake "
         "token; answers 1", cooling(World().pending(A, lane=L1), jobs=True), lane_rate(jobs=3)),
    case("clear-forgets", "clearing the only setting of an empty lane forgets it; lane_rates goes",
         cooling(World(), jobs=False), lane_rate(0, 0)),
    *refusals("lane_rate", World().pending(A, lane=L1).wake(), {"lane": L1, "jobs": 2, "per_ms": 1000},
              {"P": "P", "lane": "lane", "jobs": ("int", 0, MAX_COUNT), "per_ms": ("int", 0, MAX_MS)}),
]
