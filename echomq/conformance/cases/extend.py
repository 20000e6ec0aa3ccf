"""extend: the heartbeat; the holder moves its lease deadline to now + lease_ms."""
from ..dsl import A, L1, MAX_MS, MAX_TOKEN, PAST, World, call, case, refusals


def extend(job_id=A, token=1, lease_ms=30000, **kw):
    return call("extend", id=job_id, token=token, lease_ms=lease_ms, **kw)


CASES = [
    case("moves", "the holder's lease ends now + lease_ms; answers that deadline", World().active(A), extend()),
    case("expired-not-reaped", "a lease past its deadline but not reaped yet is still the holder's: extend renews it",
         World().active(A, deadline=PAST), extend()),
    case("no-lease-entry", "an active row without an active entry: answers the deadline but adds no lease (ZADD XX)",
         World().active(A, deadline=None), extend()),
    case("lease-at-bound", f"lease_ms = MAX_MS ({MAX_MS}) is accepted", World().active(A), extend(lease_ms=MAX_MS)),
    case("gone", "no row: answers 0 and nothing changes", World(), extend()),
    case("stale", "a stale token: EMQSTALE, nothing changes", World().active(A, token=2), extend(token=1)),
    case("stale-reaped", "a reaped job (pending again): EMQSTALE, nothing changes",
         World().pending(A, attempts=1, stalled=1).wake(), extend()),
    case("cancelled", "the heartbeat is how a worker learns of a cancel: the job is dropped, EMQCANCELLED",
         World().active(A, cancel="1"), extend()),
    case("cancelled-lane", "a dropped laned job releases its lane", World().active(A, lane=L1, cancel="1"), extend()),
    *refusals("extend", World().active(A), {"id": A, "token": 1, "lease_ms": 30000},
              {"P": "P", "id": "id", "token": ("int", 1, MAX_TOKEN), "lease_ms": ("int", 1, MAX_MS)}),
]
