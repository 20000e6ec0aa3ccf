"""claim: lease up to n ready jobs, flat first, then lanes in ring order, on the server clock."""
from ..dsl import A, B, C, CSR, L1, L2, LIVE, MAX_BATCH, MAX_MS, World, call, case, key, lane_key, now, refusals


def claim(lease_ms=60000, n=1, consumer=CSR, **kw):
    return call("claim", lease_ms=lease_ms, n=n, consumer=consumer, **kw)


CASES = [
    case("flat", "takes a flat job: attempts + 1 is the token; row active with claimed = now and the consumer; "
         "active scores it now + lease_ms; answers id, payload, token, '' (no lane)",
         World().pending(A, payload="body").wake(), claim()),
    case("oldest-first", "flat jobs go oldest mint first (ZPOPMIN of score-0 ids)",
         World().pending(B).pending(A).wake(2), claim()),
    case("no-consumer", "consumer '' is allowed: the row's consumer is ''",
         World().pending(A).wake(), claim(consumer="")),
    case("token-continues", "a job claimed before (reaped since) gets the next token: attempts never go back",
         World().pending(A, attempts=2, stalled=1).wake(), claim()),
    case("nothing-ready", "nothing ready: answers an empty array and empties the wake list (every token is stale)",
         World().wake(3), claim()),
    case("short-empties-wake", "a claim that takes fewer than n leaves nothing ready: the wake list is emptied",
         World().pending(A).wake(2), claim(n=5)),
    case("full-keeps-wake", "a claim that takes all n leaves the wake tokens (more may be ready)",
         World().pending(A).pending(B).wake(2), claim(n=1)),
    case("flat-before-lanes", "flat jobs are served before lanes; a lane's job carries its lane; the lane, "
         "drained and with no setting, leaves the ring and the lanes set (it keeps no active count)",
         World().pending(A).pending(B, lane=L1).wake(2), claim(n=2)),
    case("lanes-take-turns", "each pick rotates the ring one step: lanes are served in turn, not lane by lane",
         World().pending(A, lane=L1).pending(C, lane=L1).pending(B, lane=L2).wake(3), claim(n=3)),
    case("ring-rotates", "one pick moves the served lane to the ring's tail",
         World().pending(A, lane=L1).pending(C, lane=L1).pending(B, lane=L2).wake(3), claim(n=1)),
    case("lane-limit", "a lane at its limit leaves the ring: one job of a lane limited to 1, however many asked",
         World().lane(L1, limit=1).pending(A, lane=L1).pending(B, lane=L1).wake(2), claim(n=2)),
    case("lane-limit-counts", "a lane with a limit counts the jobs taken in its active field and marks their "
         "rows counted; it stays known when drained (the limit is a setting)",
         World().lane(L1, limit=5).active(C, lane=L1).pending(A, lane=L1).pending(B, lane=L1).wake(2), claim(n=5)),
    case("lane-stale-count", "a drained lane with no setting whose meta holds a count (as earlier versions kept "
         "for every lane) is forgotten, meta and all",
         World().pending(A, lane=L1).raw(lane_key(L1, "meta"), {"hash": {"active": "3"}}).wake(), claim()),
    case("paused-lane", "a paused lane is not on the ring and is not served",
         World().lane(L1, paused=True).pending(A, lane=L1).wake(), claim()),
    case("paused-queue", "a paused queue answers an empty array and nothing changes, wake tokens included",
         World().meta(paused="1").pending(A).wake(), claim()),
    case("stale-ring-entry", "a ring entry whose lane has nothing ready is dropped (the ring invariant mends)",
         World().ring(L1).wake(), claim()),
    case("lease-at-bound", f"lease_ms = MAX_MS ({MAX_MS}) is accepted", World().pending(A).wake(),
         claim(lease_ms=MAX_MS)),
    case("n-at-bound", f"n = MAX_BATCH ({MAX_BATCH}) is accepted", World().pending(A).wake(), claim(n=MAX_BATCH)),
    case("rate-cut", "the queue's rate window allows 2 of 3: a fresh window opens now with 2 claimed; the "
         "reply ends with {queue_wait_ms 60000, lane_wait_ms 0}",
         World().meta(rate_jobs=2, rate_ms=60000).pending(A).pending(B).pending(C).wake(), claim(n=3)),
    case("rate-cut-nothing-left", "the queue's rate window allows 2 and 2 are ready: both are claimed; no tail, as "
         "no ready job is left for the window to hold back",
         World().meta(rate_jobs=2, rate_ms=60000).pending(A).pending(B).wake(2), claim(n=3)),
    case("rate-full-nothing-ready", "a full window with nothing ready: answers an empty array, no tail (nothing to "
         "wait for); the wake list is emptied and nothing else changes",
         World().meta(rate_jobs=2, rate_ms=60000, rate_start=now(), rate_count=2).wake(), claim(n=3)),
    case("rate-cut-lane-held", "the queue's window allows 1: the flat job is claimed and a lane on the ring is "
         "held back, so the reply ends with {queue_wait_ms 60000, lane_wait_ms 0}",
         World().meta(rate_jobs=1, rate_ms=60000).pending(A).pending(B, lane=L1).wake(2), claim(n=3)),
    case("rate-cut-paused-lane", "the queue's window allows 1 and the only other ready job is on a paused lane "
         "(off the ring): the pause holds it, not the window, so no tail",
         World().meta(rate_jobs=1, rate_ms=60000).pending(A).lane(L1, paused=True).pending(B, lane=L1).wake(2),
         claim(n=3)),
    case("rate-room", "a window with room for the whole claim counts it and adds no tail",
         World().meta(rate_jobs=5, rate_ms=60000).pending(A).pending(B), claim(n=2)),
    case("rate-window-over", "a window that has closed starts again at this claim",
         World().meta(rate_jobs=1, rate_ms=60000, rate_start=1000, rate_count=1).pending(A), claim(n=1)),
    case("lane-rate-cools", "a lane whose window fills leaves the ring: meta cooling 1, cooling scores it at "
         "the window's end; the short claim's tail names the lane's wait",
         World().meta(lane_rates=1).pending(A, lane=L1).pending(B, lane=L1)
         .raw(key(f"g:{L1}:meta"), {"hash": {"rate_jobs": "1", "rate_ms": "60000"}}), claim(n=5)),
    case("lane-rate-cools-empty", "a lane whose window fills as its last ready job is claimed cools all the same "
         "(meta cooling 1, scored in cooling), but holds nothing back: no tail",
         World().meta(lane_rates=1).pending(A, lane=L1)
         .raw(key(f"g:{L1}:meta"), {"hash": {"rate_jobs": "1", "rate_ms": "60000"}}), claim(n=5)),
    case("lane-cooling-paused", "a cooling lane that holds a ready job but is paused: the pause holds it, not the "
         "window, so an empty array and no tail; nothing changes",
         World().meta(lane_rates=1).pending(A, lane=L1).ring()
         .raw(key(f"g:{L1}:meta"), {"hash": {"paused": "1", "rate_jobs": "1", "rate_ms": "60000",
                                             "rate_start": str(LIVE - 60000), "rate_count": "1", "cooling": "1"}})
         .raw(key("cooling"), {"zset": {L1: LIVE}}), claim(n=1)),
    case("lane-rate-reopens", "a cooling lane whose window has ended goes back on the ring and is served",
         World().meta(lane_rates=1).pending(A, lane=L1).ring()
         .raw(key(f"g:{L1}:meta"), {"hash": {"rate_jobs": "1", "rate_ms": "60000", "rate_start": "1000",
                                             "rate_count": "1", "cooling": "1"}})
         .raw(key("cooling"), {"zset": {L1: 61000}}), claim(n=1)),
    *refusals("claim", World().pending(A).wake(), {"lease_ms": 60000, "n": 1, "consumer": CSR},
              {"P": "P", "lease_ms": ("int", 1, MAX_MS), "n": ("int", 1, MAX_BATCH), "consumer": "csr?"}),
]
