"""complete: the holder of the lease finishes a job, fenced by its token."""
from ..dsl import A, B, C, L1, MAX_TOKEN, World, call, case, key, now, refusals


def complete(job_id=A, token=1, **kw):
    return call("complete", id=job_id, token=token, **kw)


CASES = [
    case("flat", "the holder's token completes the job: row and lease go; completed counted in meta and this "
         "minute's bucket (kept 7200 s); a record kept in done / done:rows; answers 1",
         World().active(A), complete()),
    case("counts-add", "the completed total adds to what meta holds", World().active(A).meta(completed=5),
         complete()),
    case("lane-forgotten", "a job of a lane with no limit (the lane keeps no count and was forgotten when "
         "drained): no lane key is touched",
         World().active(A, lane=L1), complete()),
    case("lane-keeps-ready", "a lane with no limit that still has ready jobs: its ready set, ring entry and "
         "lanes entry stay as they are",
         World().active(A, lane=L1).pending(B, lane=L1), complete()),
    case("lane-limit-counts", "a lane with a limit: its active count drops by one; below the limit and with "
         "nothing ready, it stays off the ring and known (the limit is a setting)",
         World().lane(L1, limit=2).active(A, lane=L1).active(B, lane=L1), complete()),
    case("lane-counted-unlimited", "a row marked counted whose lane's limit was cleared since: the meta is read, "
         "no limit is found, no lane key changes", World().active(A, lane=L1, counted="1"), complete()),
    case("lane-limit-rerings", "a lane at its limit goes back on the ring when its active job completes",
         World().lane(L1, limit=1).active(A, lane=L1).pending(B, lane=L1), complete()),
    case("keep-none", "keep_completed 0: no record is kept", World().active(A).meta(keep_completed=0), complete()),
    case("keep-count", "past keep_completed records, the oldest go", World().active(A).meta(keep_completed=1)
         .done(B, finished=now(-1000)), complete()),
    case("keep-age", "records older than keep_completed_ms (a day by default) go", World().active(A).done(B),
         complete()),
    case("token-at-bound", f"the largest token ({MAX_TOKEN}) holds like any other",
         World().active(A, token=MAX_TOKEN).meta(keep_completed=0),
         complete(token=MAX_TOKEN)),
    case("waiters", "a job with waiters (wait 2, wait_seq 5): its final state is pushed on notify:<id>:5 once "
         "per waiter, kept 60 s", World().active(A, wait="2", wait_seq="5"), complete()),
    case("waiters-unnumbered", "waiters an older wait.lua registered (wait without wait_seq) block on the bare "
         "notify:<id>: pushed there", World().active(A, wait="2"), complete()),
    case("flow-child", "a flow's child: its record in flow:<parent> reads completed with its result; the parent's "
         "children_left drops; the parent still waits for the other", World()
         .flow(C, {A: '{"state":"pending"}', B: '{"state":"pending"}'}).active(A, parent=C, result='{"n":1}')
         .active(B, parent=C), complete()),
    case("flow-last-child", "the last child of a flow: the parent is admitted (pending, out of waiting, an "
         "admitted entry after the child's completed entry)", World()
         .flow(C, {A: '{"state":"pending"}', B: '{"state":"completed","result":null}'}).active(A, parent=C),
         complete()),
    case("flow-parent", "a flow's parent completes: its children's record goes", World()
         .active(C, children="1", children_left="0", policy="fail")
         .raw(key("flow:" + C), {"hash": {A: '{"state":"completed","result":null}'}}), complete(job_id=C)),
    case("gone", "no row (completed, removed or cancelled before): answers 0 and nothing changes",
         World().active(B), complete()),
    case("stale-lower", "a token below the row's attempts (re-claimed by another): EMQSTALE, nothing changes",
         World().active(A, token=2), complete(token=1)),
    case("stale-higher", "a token above the row's attempts: EMQSTALE, nothing changes",
         World().active(A, token=2), complete(token=3)),
    case("stale-reaped", "the job was reaped and not re-claimed (pending, same attempts): EMQSTALE, nothing changes",
         World().pending(A, attempts=1, stalled=1).wake(), complete()),
    case("stale-scheduled", "a job the holder already retried (scheduled): EMQSTALE, nothing changes",
         World().scheduled(A, attempts=1), complete()),
    case("cancelled", "a job cancelled while leased is dropped, not completed: row and lease go, cancelled "
         "counted, no record; EMQCANCELLED", World().active(A, cancel="1"), complete()),
    case("cancelled-lane", "a cancelled laned job also releases its lane", World().active(A, lane=L1, cancel="1"),
         complete()),
    case("unique-released", "a completed job's unique key (naming it) is released",
         World().active(A, unique="user:1").raw(key("unique:user:1"), {"string": A}), complete()),
    case("unique-other-holder", "a unique key another job took after this one's TTL stays with that job",
         World().active(A, unique="user:1").raw(key("unique:user:1"), {"string": B}), complete()),
    *refusals("complete", World().active(A), {"id": A, "token": 1},
              {"P": "P", "id": "id", "token": ("int", 1, MAX_TOKEN)}),
]
