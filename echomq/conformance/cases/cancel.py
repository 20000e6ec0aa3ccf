"""cancel: an operator stops a job; a leased one is marked for its holder's next fenced call."""
from ..dsl import A, B, L1, World, call, case, refusals


def cancel(job_id=A, **kw):
    return call("cancel", id=job_id, **kw)


CASES = [
    case("pending", "a pending job is removed at once: cancelled counted in meta and this minute; "
         "answers 'cancelled'", World().pending(A).wake(), cancel()),
    case("pending-lane", "a laned pending job leaves its lane; a lane left empty leaves the ring and is forgotten",
         World().pending(A, lane=L1).wake(), cancel()),
    case("pending-lane-keeps", "a lane that keeps other ready jobs stays on the ring",
         World().pending(A, lane=L1).pending(B, lane=L1).wake(2), cancel()),
    case("scheduled", "a scheduled job is removed at once: answers 'cancelled'", World().scheduled(A), cancel()),
    case("active", "a leased job is marked cancel = 1 and keeps its lease: answers 'cancelling'",
         World().active(A), cancel()),
    case("active-again", "a leased job already marked: 'cancelling' again, nothing changes",
         World().active(A, cancel="1"), cancel()),
    case("dead", "a dead job cannot be cancelled (remove or requeue it): EMQSTATE, nothing changes",
         World().dead(A), cancel()),
    case("no-job", "no row: EMQNOJOB, nothing changes", World(), cancel()),
    *refusals("cancel", World().pending(A).wake(), {"id": A}, {"P": "P", "id": "id"}),
]
