"""complete_batch: many completes in one call, each fenced on its own."""
from ..dsl import A, B, C, D, E, GES, L1, L2, World, call, case, refusals


def batch(*pairs, **kw):
    return call("complete_batch", pairs=list(pairs), **kw)


CASES = [
    case("two", "each holder's token completes its job; completed counted once per job; answers 1 per job",
         World().active(A).active(B), batch((A, 1), (B, 1))),
    case("mixed", "one code per job, in order: 1 completed, 0 gone, -1 stale (unchanged), -2 cancelled (dropped)",
         World().active(A).active(C, token=2).active(D, cancel="1"), batch((A, 1), (B, 1), (C, 1), (D, 1))),
    case("duplicate-pair", "a job named twice is completed and counted once: the second answer is 0 (gone)",
         World().active(A, lane=L1), batch((A, 1), (A, 1))),
    case("one-lane", "two jobs of a lane with a limit: its active count drops by two",
         World().lane(L1, limit=3).active(A, lane=L1).active(B, lane=L1), batch((A, 1), (B, 1))),
    case("lane-no-limit", "two jobs of a lane with no limit: no lane key is touched",
         World().active(A, lane=L1).active(B, lane=L1), batch((A, 1), (B, 1))),
    case("lanes-rering-in-order", "lanes at their limit go back on the ring in the order their jobs' completes "
         "free them (L1 is named first but freed by its second job, after L2)",
         World().lane(L1, limit=1).active(A, lane=L1).active(B, lane=L1).pending(C, lane=L1)
         .lane(L2, limit=1).active(D, lane=L2).pending(E, lane=L2), batch((A, 1), (D, 1), (B, 1))),
    case("lane-settings-kept", "two jobs of a paused lane with a limit: its active count drops by two; the lane "
         "and its settings stay, off the ring", World().lane(L1, paused=True, limit=4).active(A, lane=L1)
         .active(B, lane=L1)
         .pending(C, lane=L1), batch((A, 1), (B, 1))),
    case("all-stale", "only stale tokens: nothing changes, nothing is counted",
         World().active(A, token=2), batch((A, 1))),
    case("bad-id-later", "a bad id anywhere in the batch refuses the whole batch with EMQARG: nothing changes",
         World().active(A), batch((A, 1), ("JOBnope", 1))),
    case("kind-later", "a non-JOB id anywhere in the batch: EMQKIND for the whole batch, nothing changes",
         World().active(A), batch((A, 1), (GES, 1))),
    case("bad-token", "a token that is not a canonical integer >= 1: EMQARG, nothing changes",
         World().active(A), batch((A, 0))),
    case("bad-token-form", "a token with a leading zero: EMQARG, nothing changes", World().active(A), batch((A, "01"))),
    case("no-pairs", "no (id, token) pair: EMQARG", World().active(A), batch()),
    *refusals("complete_batch", World().active(A), {"pairs": [(A, 1)]}, {"P": "P"}),
]
