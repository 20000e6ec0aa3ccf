"""counts: how many jobs are in each state, in one atomic read."""
from ..dsl import A, B, C, D, E, L1, L2, World, call, case, refusals


def counts(**kw):
    return call("counts", **kw)


CASES = [
    case("empty", "an empty queue: {pending, active, scheduled, dead, completed, dead_total, lanes, ring, paused, "
         "cancelled_total, retained} all 0", World(), counts()),
    case("every-state", "pending counts the flat set and every lane; totals come from meta; retained counts done",
         World().pending(A).pending(B, lane=L1).active(C, lane=L2).scheduled(D).dead(E)
         .meta(completed=7, dead=2, cancelled=1, paused="1").done("JOB0000000000F").wake(),
         counts()),
    *refusals("counts", World().pending(A).wake(), {}, {"P": "P"}),
]
