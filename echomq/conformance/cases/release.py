"""release: the holder hands back a job it never started; not an attempt."""
from ..dsl import A, B, L1, MAX_TOKEN, World, call, case, refusals


def release(job_id=A, token=1, **kw):
    return call("release", id=job_id, token=token, **kw)


CASES = [
    case("flat", "the job is ready again at once: row pending, base + 1 (the claim is not counted), lease gone, "
         "one wake token; answers 1", World().active(A), release()),
    case("base-raised", "base rises by one from what the row holds", World().active(A, token=3, base=1),
         release(token=3)),
    case("lane", "a laned job goes back to its lane, which is rung and known again",
         World().active(A, lane=L1), release()),
    case("lane-limit", "a lane at its limit is rung again when its job is handed back",
         World().lane(L1, limit=1).active(A, lane=L1).pending(B, lane=L1), release()),
    case("gone", "no row: answers 0 and nothing changes", World(), release()),
    case("stale", "a stale token: EMQSTALE, nothing changes", World().active(A, token=2), release()),
    case("cancelled", "a job cancelled while leased is dropped, not handed back: EMQCANCELLED",
         World().active(A, cancel="1"), release()),
    *refusals("release", World().active(A), {"id": A, "token": 1},
              {"P": "P", "id": "id", "token": ("int", 1, MAX_TOKEN)}),
]
