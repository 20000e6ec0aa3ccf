"""lane: pause, resume or limit one lane, keeping the ring in step."""
from ..dsl import A, B, C, L1, L2, LIVE, MAX_COUNT, World, call, case, key, lane_key, refusals


def lane(op="pause", value=0, lane=L1, **kw):
    return call("lane", lane=lane, op=op, value=value, **kw)


def cooling_paused(world):
    """L1 paused and cooling (its window full, off the ring until LIVE)."""
    return (world.raw(lane_key(L1, "meta"), {"hash": {"paused": "1", "rate_jobs": "1", "rate_ms": "60000",
                                                      "rate_start": str(LIVE - 60000), "rate_count": "1",
                                                      "cooling": "1"}})
            .raw(key("cooling"), {"zset": {L1: LIVE}}).meta(lane_rates=1).ring())


CASES = [
    case("pause", "pausing a servable lane: meta paused 1; off the ring; answers 0 (not servable)",
         World().pending(A, lane=L1).wake(), lane("pause")),
    case("resume", "resuming a paused lane with ready jobs: paused goes (an empty meta goes with it); the lane is "
         "rung; one wake token; answers 1", World().lane(L1, paused=True).pending(A, lane=L1), lane("resume")),
    case("resume-servable", "resuming a lane that is not paused: answers 1, no second ring entry, no wake token",
         World().pending(A, lane=L1).wake(), lane("resume")),
    case("limit-reached", "a limit on a lane that had none counts the lane's leased jobs (found in the active "
         "set, another lane's not counted) into its active field and marks their rows counted; at the limit it "
         "leaves the ring: answers 0",
         World().active(A, lane=L1).active(C, lane=L2).pending(B, lane=L1).wake(), lane("limit", 1)),
    case("limit-above", "a limit above the lane's leased jobs keeps it servable: answers 1",
         World().active(A, lane=L1).pending(B, lane=L1).wake(), lane("limit", 2)),
    case("limit-changed", "changing a limit: a lane held back by limit 1 is rung under limit 2, with a wake "
         "token; answers 1",
         World().lane(L1, limit=1).active(A, lane=L1).pending(B, lane=L1), lane("limit", 2)),
    case("limit-recounts", "setting a limit counts the lane's leased jobs afresh, whatever count its meta held "
         "(a count that drifted, an unmarked row): active 1, the row marked; the lane, held back by the old count, is "
         "rung with a wake token; answers 1",
         World().active(A, lane=L1).pending(B, lane=L1)
         .raw(lane_key(L1, "meta"), {"hash": {"limit": "1", "active": "5"}}).ring(), lane("limit", 2)),
    case("limit-zero", "limit 0 removes the limit and its count: a lane held back by it is rung, with a wake "
         "token",
         World().lane(L1, limit=1).active(A, lane=L1).pending(B, lane=L1), lane("limit", 0)),
    case("pause-empty", "a lane with no jobs may be paused: its meta and the lanes set keep it; answers 0",
         World(), lane("pause")),
    case("resume-empty", "resuming a lane with no jobs and no other setting forgets it: answers 0",
         World().lane(L1, paused=True), lane("resume")),
    case("resume-cooling", "resuming a paused lane that holds a ready job but cools: paused goes, it stays off "
         "the ring (cooling); one wake token, so a parked consumer claims and learns the lane's wait; answers 0",
         cooling_paused(World().pending(A, lane=L1)), lane("resume")),
    case("resume-cooling-empty", "resuming a paused cooling lane that holds no job: paused goes; no wake token "
         "(nothing waits for the window); answers 0", cooling_paused(World()).raw(key("lanes"), {"set": [L1]}),
         lane("resume")),
    *refusals("lane", World().pending(A, lane=L1).wake(), {"lane": L1, "op": "limit", "value": 2},
              {"P": "P", "lane": "lane", "value": ("int", 0, MAX_COUNT),
               "op": [("", "empty", "empty"), ("PAUSE", "upper", "in upper case"),
                      ("drop", "unknown", "naming no operation")]}),
]
