"""schedule_fire: enqueue a schedule's due ticks, if its cursor is still the one read, and move the cursor."""
from ..dsl import A, GES, L1, World, call, case, key, refusals
from ..dsl import job_key
from ...schedules import tick_job_id
from .schedule_set import DEF, PAUSED, name_refusals

T0 = 1735689600000        # 2025-01-01: a tick long due
NEXT = 3786825600000      # 2090-01-01: the new cursor, after now
T1, T2 = T0 + 60000, T0 + 120000


def due(world=None, *, seq=1, rev=1, cursor=T0, paused=False, **fields):
    """Schedule beat, due (cursor T0 in the past)."""
    row = {**DEF, "next": str(cursor), "rev": str(rev), "seq": str(seq), **fields}
    if paused:
        row["paused"] = "1"
    return ((world or World()).raw(key("sched:beat"), {"hash": dict(sorted(row.items()))})
            .raw(key("schedules"), {"zset": {"beat": PAUSED if paused else cursor}}).meta(sched_seq=seq))


def fire(*ticks, rev=1, expect=T0, next_ms=NEXT, seq=1, **kw):
    pairs = [(t, tick_job_id(seq, t)) for t in (ticks or (T0,))]
    return call("schedule_fire", name="beat", rev=rev, expect=expect, next_ms=next_ms, pairs=pairs, **kw)


CASES = [
    case("fire", "a due tick: a pending job with the tick's id, the payload and sched = the name; a wake "
         "token; the cursor and score move to next_ms, last and last_job record it; answers the id",
         due(), fire()),
    case("catch-up", "several ticks in one call, oldest first, each its own job", due(), fire(T0, T1, T2)),
    case("lane-priority", "a tick on the schedule's lane at its priority: the lane's set at -priority, rung",
         due(lane=L1, priority="4"), fire()),
    case("exists", "a tick whose job exists is left as it is (not in the reply); the cursor still moves",
         due(World().pending(tick_job_id(1, T0), payload="old")), fire()),
    case("stale-cursor", "a cursor other than expect (another reaper fired first): answers 0, nothing changes",
         due(cursor=T1), fire()),
    case("stale-rev", "another revision (the schedule changed): 0, nothing changes", due(rev=2), fire()),
    case("paused", "a paused schedule: 0, nothing changes", due(paused=True), fire()),
    case("gone", "no such schedule: 0, nothing changes", World().meta(completed=1), fire()),
    case("wrong-id", "an id that is not the tick's JOB id is refused with EMQARG; nothing changes",
         due(), call("schedule_fire", name="beat", rev=1, expect=T0, next_ms=NEXT, pairs=[(T0, A)])),
    case("kind", "an id of another brand (GES) is refused with EMQKIND; nothing changes",
         due(), call("schedule_fire", name="beat", rev=1, expect=T0, next_ms=NEXT, pairs=[(T0, GES)])),
    case("falling", "ticks that do not rise are refused with EMQARG; nothing changes", due(), fire(T1, T0)),
    case("before-expect", "a tick before expect is refused with EMQARG; nothing changes", due(), fire(T0 - 60000)),
    case("future", "a tick after the server clock is refused with EMQARG; nothing changes",
         due(), fire(T0, NEXT - 1, next_ms=NEXT)),
    case("next-not-after", "a next_ms not after the last tick is refused with EMQARG; nothing changes",
         due(), fire(T1, next_ms=T1)),
    *name_refusals("schedule_fire", due(), fire()),
    *refusals("schedule_fire", due(), {"name": "beat", "rev": 1, "expect": T0, "next_ms": NEXT,
                                       "pairs": [(T0, tick_job_id(1, T0))]},
              {"P": "P",
               "rev": ("int", 1, 999999999999999), "expect": ("int", 1704067200000, 3903090455551),
               "next_ms": ("int", 1704067200000, 3903090455551)}),
]
