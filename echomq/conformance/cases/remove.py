"""remove: delete a job wherever it is; answers the state it was in."""
from ..dsl import A, B, C, L1, World, call, case, refusals


def remove(job_id=A, **kw):
    return call("remove", id=job_id, **kw)


CASES = [
    case("pending", "a flat pending job: row and pending entry go; answers 'pending'", World().pending(A).wake(),
         remove()),
    case("flow-parent", "a waiting flow parent: out of waiting, its children's record goes (the children run "
         "on); answers 'waiting'", World().flow(A, {B: '{"state":"pending"}'}).pending(B, parent=A).wake(), remove()),
    case("flow-child", "a flow child removed counts as a failure: under fail its parent goes to dead naming it",
         World().flow(C, {A: '{"state":"pending"}'}).pending(A, parent=C).wake(), remove()),
    case("pending-lane", "a laned pending job: out of its lane; a lane left empty leaves the ring and is forgotten",
         World().pending(A, lane=L1).wake(), remove()),
    case("pending-lane-keeps", "a lane that keeps other ready jobs stays on the ring",
         World().pending(A, lane=L1).pending(B, lane=L1).wake(2), remove()),
    case("active", "a leased job: row and lease go (its holder will get 0, gone); answers 'active'",
         World().active(A), remove()),
    case("active-lane", "a leased laned job: the lane's active count drops; the lane is forgotten",
         World().active(A, lane=L1), remove()),
    case("scheduled", "a scheduled job: answers 'scheduled'", World().scheduled(A), remove()),
    case("dead", "a dead job: answers 'dead'", World().dead(A), remove()),
    case("gone", "no row: answers 0 and nothing changes", World().pending(B).wake(), remove()),
    *refusals("remove", World().pending(A).wake(), {"id": A}, {"P": "P", "id": "id"}),
]
