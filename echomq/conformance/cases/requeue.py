"""requeue: a dead job gets a fresh set of attempts; the token never goes back."""
from ..dsl import A, B, C, L1, World, call, case, key, refusals


def requeue(job_id=A, **kw):
    return call("requeue", id=job_id, **kw)


CASES = [
    case("dead", "a dead job is ready again: row pending, base = attempts, stalled 0, died gone, last_error kept; "
         "out of dead; one wake token; answers 1", World().dead(A, attempts=3, stalled=1), requeue()),
    case("dead-lane", "a dead laned job goes back to its lane, which is rung", World().dead(A, lane=L1), requeue()),
    case("unique-free", "a dead job that held a unique key takes it again (the key names it, with the TTL of its "
         "row's unique_ttl: 60 s) as it is made ready", World().dead(A, unique="k1", unique_ttl=60000), requeue()),
    case("unique-no-ttl", "a row without unique_ttl (no TTL asked, or enqueued before rows kept it) holds the key "
         "with no TTL, until it ends", World().dead(A, unique="k1"), requeue()),
    case("unique-gone-holder", "a key naming a job whose row is gone is free: taken",
         World().dead(A, unique="k1").raw(key("unique:k1"), {"string": C}), requeue()),
    case("unique-self", "a key that still names the job is its own: set again",
         World().dead(A, unique="k1", unique_ttl=60000).raw(key("unique:k1"), {"string": A}), requeue()),
    case("unique-held", "another live job holds the key: EMQSTATE naming the holder, nothing changes (a second "
         "job with the key would run)",
         World().dead(A, unique="k1").pending(B, unique="k1").raw(key("unique:k1"), {"string": B}).wake(),
         requeue()),
    case("no-job", "no row: EMQNOJOB, nothing changes", World(), requeue()),
    case("pending", "a pending job is not dead: EMQSTATE, nothing changes", World().pending(A).wake(), requeue()),
    case("active", "an active job: EMQSTATE, nothing changes", World().active(A), requeue()),
    case("scheduled", "a scheduled job: EMQSTATE, nothing changes", World().scheduled(A), requeue()),
    *refusals("requeue", World().dead(A), {"id": A}, {"P": "P", "id": "id"}),
]
