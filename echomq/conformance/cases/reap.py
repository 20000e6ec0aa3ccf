"""reap: leases past their deadline (server clock) go back to ready; dead after max_stalls."""
from ..dsl import A, B, C, D, L1, MAX_BATCH, MAX_COUNT, PAST, World, call, case, key, now, refusals


def reap(max_stalls=2, limit=100, **kw):
    return call("reap", max_stalls=max_stalls, limit=limit, **kw)


CASES = [
    case("expired", "an expired lease goes back: row pending, stalled + 1, attempts unchanged (the next claim "
         "makes the old token stale); pending; one wake token; reaped counted; answers {returned, dead}",
         World().active(A, deadline=PAST), reap()),
    case("deadline-now", "a deadline equal to now has expired", World().active(A, deadline=now(0)), reap()),
    case("live", "a lease whose deadline is ahead stays: answers {0, 0}, nothing changes",
         World().active(A, deadline=now(60000)), reap()),
    case("lane", "an expired laned job goes back to its lane, which is rung and known again",
         World().active(A, lane=L1, deadline=PAST), reap()),
    case("past-max-stalls", "a job that stalled more than max_stalls is dead-lettered: row dead with died = now "
         "and last_error; dead counted in meta and this minute",
         World().active(A, deadline=PAST, stalled=2), reap()),
    case("max-stalls-zero", "max_stalls 0: the first stall is fatal", World().active(A, deadline=PAST),
         reap(max_stalls=0)),
    case("keep-dead-zero", "keep_dead 0: a job reaped to death is not kept",
         World().active(A, deadline=PAST).meta(keep_dead=0), reap(max_stalls=0)),
    case("cancelled", "an expired lease of a cancelled job is dropped: counted cancelled, neither returned nor dead",
         World().active(A, deadline=PAST, cancel="1"), reap()),
    case("orphan", "an active entry without a row is removed and not counted",
         World().raw(key("active"), {"zset": {A: PAST}}), reap()),
    case("limit", "at most limit leases per call, the earliest deadlines first",
         World().active(A, deadline=1002).active(B, deadline=1000).active(C, deadline=1001)
         .active(D, deadline=now(60000)), reap(limit=2)),
    *refusals("reap", World().active(A, deadline=PAST), {"max_stalls": 2, "limit": 100},
              {"P": "P", "max_stalls": ("int", 0, MAX_COUNT), "limit": ("int", 1, MAX_BATCH)}),
]
