"""enqueue: admission, flat or onto a lane, now or delayed; the JOB id is the idempotency key."""
from ..dsl import A, B, C, GES, L1, L2, LIVE, MAX_MS, World, call, case, key, refusals


def enqueue(job_id=A, payload="p", lane="", delay_ms=0, **kw):
    return call("enqueue", id=job_id, payload=payload, lane=lane, delay_ms=delay_ms, **kw)


CASES = [
    case("flat", "a flat job: row pending with attempts 0, its payload and created = now; "
         "its id in pending at score 0; one wake token; answers 1",
         None, enqueue()),
    case("flat-behind-others", "a flat job joins the others in pending at score 0 (ZPOPMIN takes the oldest mint)",
         World().pending(B).wake(), enqueue()),
    case("lane", "onto a lane: the row names the lane; the id joins the lane's pending set; the lane joins "
         "the lanes set and the ring; one wake token; answers 1",
         None, enqueue(lane=L1)),
    case("lane-on-ring", "onto a lane already on the ring: the ring keeps the lane once",
         World().pending(B, lane=L1).wake(), enqueue(lane=L1)),
    case("lane-behind-another", "onto a second lane: it is rung behind the first",
         World().pending(B, lane=L1).wake(), enqueue(lane=L2)),
    case("lane-paused", "onto a paused lane: the job waits in the lane's set; the lane stays off the ring",
         World().lane(L1, paused=True), enqueue(lane=L1)),
    case("lane-at-limit", "onto a lane at its active limit: the job waits; the lane stays off the ring",
         World().lane(L1, limit=1).active(B, lane=L1), enqueue(lane=L1)),
    case("delayed", "delay_ms > 0: row scheduled, the id in schedule at now + delay_ms; no ready set, "
         "no wake token; answers 2",
         None, enqueue(delay_ms=60000)),
    case("delayed-lane", "a delayed job on a lane: the row names the lane, but the lane's keys wait for "
         "its promotion; answers 2",
         None, enqueue(lane=L1, delay_ms=60000)),
    case("delay-at-bound", f"delay_ms = MAX_MS ({MAX_MS}) is accepted (bounds are inclusive)",
         None, enqueue(delay_ms=MAX_MS)),
    case("binary-payload", "the payload is stored byte for byte, not text",
         None, enqueue(payload={"$hex": "00ff0a80"})),
    case("empty-payload", "an empty payload is a payload", None, enqueue(payload="")),
    case("wake-capped", "the wake list holds at most 32 tokens", World().pending(B).wake(32), enqueue()),
    case("duplicate-pending", "the id of a pending job: answers 0 (duplicate) and nothing changes",
         World().pending(A, payload="first"), enqueue(payload="second")),
    case("duplicate-active", "the id of a leased job, even with another lane and payload: 0, nothing changes",
         World().active(A), enqueue(payload="second", lane=L1)),
    case("duplicate-scheduled", "the id of a scheduled job, with no delay: 0, nothing changes",
         World().scheduled(A, run_at=LIVE), enqueue()),
    case("duplicate-dead", "the id of a dead job: 0, nothing changes (requeue revives it, not enqueue)",
         World().dead(A), enqueue()),
    case("kind", "a well-formed id of another brand (GES): EMQKIND and nothing is written",
         None, enqueue(job_id=GES)),
    case("priority", "a priority is the job's ready score, negated (ZPOPMIN takes the highest first), and a "
         "field of the row", World().pending(B).wake(), enqueue(priority=7)),
    case("priority-low-lane", "a negative priority on a lane: score 5 in the lane's set, behind a default job",
         World().pending(B, lane=L1).wake(), enqueue(lane=L1, priority=-5)),
    case("priority-delayed", "a delayed job keeps its priority on the row (promote scores it then)",
         None, enqueue(delay_ms=60000, priority=3)),
    case("unique-take", "a unique key is taken: unique:<key> holds the id, PEXPIREd at unique_ttl_ms; the row "
         "names its key and keeps the TTL (unique_ttl, for a requeue)", None, enqueue(unique_key="user:1", unique_ttl_ms=60000)),
    case("unique-no-ttl", "a unique key without a TTL is held until the job ends (no expiry)",
         None, enqueue(unique_key="user:1")),
    case("unique-duplicate", "a live holder of the key: answers the holder's id and nothing changes",
         World().pending(B, unique="user:1").raw(key("unique:user:1"), {"string": B}),
         enqueue(unique_key="user:1", lane=L1, priority=9)),
    case("unique-holder-gone", "a key naming a job whose row is gone is free: taken by the new job",
         World().raw(key("unique:user:1"), {"string": C}), enqueue(unique_key="user:1")),
    case("unique-ttl-needs-key", "a TTL with no unique key is refused with EMQARG; nothing changes",
         World().pending(B).wake(), enqueue(unique_ttl_ms=1000)),
    *refusals("enqueue", World().pending(B, lane=L1).wake(), {"id": A, "payload": "p", "lane": L1, "delay_ms": 0},
              {"P": "P", "id": "id", "lane": "lane?", "delay_ms": ("int", 0, MAX_MS),
               "priority": [("101", "above", "of 101, one above its bound"), ("-101", "below", "of -101"),
                            ("+1", "plus", "with a plus sign"), ("-0", "minus-zero", "as -0"),
                            ("01", "leading-zero", "with a leading zero"), ("1.5", "fraction", "with a fraction"),
                            ("", "empty", "empty")],
               "unique_key": [("a b", "space", "with a space"), ("{k}", "brace", "with braces"),
                              ("x" * 201, "long", "of 201 bytes")],
               "unique_ttl_ms": ("int", 0, MAX_MS)}),
]
