"""promote: due scheduled jobs (delayed or retrying) go back to ready."""
from ..dsl import A, B, C, L1, MAX_BATCH, PAST, World, call, case, key, now, refusals


def promote(limit=100, **kw):
    return call("promote", limit=limit, **kw)


CASES = [
    case("due", "a due job goes to pending: row pending, one wake token; answers the count",
         World().scheduled(A, run_at=PAST), promote()),
    case("due-now", "a run-at equal to now is due", World().scheduled(A, run_at=now(0)), promote()),
    case("due-lane", "a due laned job joins its lane's set, the lanes set and the ring",
         World().scheduled(A, run_at=PAST, lane=L1), promote()),
    case("retrying", "a retrying job keeps its attempts and last_error", World().scheduled(A, run_at=PAST, attempts=2),
         promote()),
    case("not-due", "a job whose run-at is ahead stays: answers 0, nothing changes",
         World().scheduled(A, run_at=now(60000)), promote()),
    case("limit", "at most limit jobs per call, the earliest run-at first",
         World().scheduled(A, run_at=1002).scheduled(B, run_at=1000).scheduled(C, run_at=1001), promote(limit=2)),
    case("orphan", "a schedule entry without a row is removed, and counted",
         World().raw(key("schedule"), {"zset": {A: PAST}}), promote()),
    *refusals("promote", World().scheduled(A, run_at=PAST), {"limit": 100},
              {"P": "P", "limit": ("int", 1, MAX_BATCH)}),
]
