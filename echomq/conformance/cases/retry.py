"""retry: the holder failed the job; schedule it again, or dead-letter it at max_attempts."""
from ..dsl import A, B, C, L1, MAX_COUNT, MAX_MS, MAX_TEXT, MAX_TOKEN, World, call, case, now, refusals


def retry(job_id=A, token=1, delay_ms=5000, max_attempts=3, error="boom", **kw):
    return call("retry", id=job_id, token=token, delay_ms=delay_ms, max_attempts=max_attempts, error=error, **kw)


CASES = [
    case("scheduled", "below max_attempts: row scheduled with last_error; schedule scores it now + delay_ms; "
         "the lease goes; answers 'scheduled'", World().active(A), retry()),
    case("no-delay", "delay_ms 0 schedules at now (the next promote makes it ready)", World().active(A),
         retry(delay_ms=0)),
    case("dead-at-max", "attempts reaching max_attempts: row dead with died = now and last_error; dead scores it "
         "now; dead counted in meta and this minute; answers 'dead'", World().active(A, token=3), retry(token=3)),
    case("dead-waiter", "a job with a waiter dies: 'dead' is pushed on notify:<id>:<its wait_seq>, kept 60 s; "
         "the row's wait count and wait_seq go (a requeue starts a life with a list of its own)",
         World().active(A, token=3, wait="1", wait_seq="2"), retry(token=3)),
    case("flow-child-dead-fail", "a flow child dies under on_child_failure fail: its record reads dead with its "
         "error; the parent goes to dead naming it (a dead entry with data child), its children's record kept "
         "as long as a dead row", World().flow(C, {A: '{"state":"pending"}', B: '{"state":"pending"}'})
         .active(A, token=3, parent=C).active(B, parent=C), retry(token=3)),
    case("flow-child-dead-ignore", "under ignore the dead child counts as ended: the last one admits the parent",
         World().flow(C, {A: '{"state":"pending"}', B: '{"state":"completed","result":null}'}, policy="ignore")
         .active(A, token=3, parent=C), retry(token=3)),
    case("base-not-counted", "attempts below base (released or requeued claims) do not count: 3 attempts, base 2, "
         "max 2 is scheduled", World().active(A, token=3, base=2), retry(token=3, max_attempts=2)),
    case("lane", "a laned job of a lane with no limit touches no lane key; the lane with ready jobs stays on the ring",
         World().active(A, lane=L1).pending(B, lane=L1), retry()),
    case("lane-forgotten", "a laned job whose lane was forgotten (drained, no setting) leaves it forgotten; the row keeps its lane",
         World().active(A, lane=L1), retry()),
    case("dead-keep-count", "past keep_dead dead jobs, the oldest go, rows and all",
         World().active(A).meta(keep_dead=1).dead(B, died=now(-1000)), retry(max_attempts=1)),
    case("dead-keep-age", "dead jobs older than keep_dead_ms (seven days by default) go, rows and all",
         World().active(A).dead(B), retry(max_attempts=1)),
    case("error-at-bound", f"an error of MAX_TEXT ({MAX_TEXT}) bytes is kept whole", World().active(A),
         retry(error={"$repeat": ["e", MAX_TEXT]})),
    case("bounds", f"delay_ms MAX_MS and max_attempts MAX_COUNT are accepted", World().active(A),
         retry(delay_ms=MAX_MS, max_attempts=MAX_COUNT)),
    case("gone", "no row: answers 0 and nothing changes", World(), retry()),
    case("stale", "a stale token: EMQSTALE, nothing changes", World().active(A, token=2), retry(token=1)),
    case("cancelled", "a job cancelled while leased is dropped, not retried: EMQCANCELLED",
         World().active(A, cancel="1"), retry()),
    *refusals("retry", World().active(A), {"id": A, "token": 1, "delay_ms": 5000, "max_attempts": 3, "error": "boom"},
              {"P": "P", "id": "id", "token": ("int", 1, MAX_TOKEN), "delay_ms": ("int", 0, MAX_MS),
               "max_attempts": ("int", 1, MAX_COUNT), "error": "text"}),
]
