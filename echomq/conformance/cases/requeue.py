"""requeue: a dead job gets a fresh set of attempts; the token never goes back."""
from ..dsl import A, L1, World, call, case, refusals


def requeue(job_id=A, **kw):
    return call("requeue", id=job_id, **kw)


CASES = [
    case("dead", "a dead job is ready again: row pending, base = attempts, stalled 0, died gone, last_error kept; "
         "out of dead; one wake token; answers 1", World().dead(A, attempts=3, stalled=1), requeue()),
    case("dead-lane", "a dead laned job goes back to its lane, which is rung", World().dead(A, lane=L1), requeue()),
    case("no-job", "no row: EMQNOJOB, nothing changes", World(), requeue()),
    case("pending", "a pending job is not dead: EMQSTATE, nothing changes", World().pending(A).wake(), requeue()),
    case("active", "an active job: EMQSTATE, nothing changes", World().active(A), requeue()),
    case("scheduled", "a scheduled job: EMQSTATE, nothing changes", World().scheduled(A), requeue()),
    *refusals("requeue", World().dead(A), {"id": A}, {"P": "P", "id": "id"}),
]
