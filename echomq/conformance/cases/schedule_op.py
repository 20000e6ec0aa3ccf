"""schedule_op: pause, resume or remove one schedule."""
from ..dsl import World, call, case, refusals
from .schedule_set import NEXT, name_refusals, stored


def op(what="pause", next_ms=0, name="beat", **kw):
    return call("schedule_op", name=name, op=what, next_ms=next_ms, **kw)


CASES = [
    case("pause", "pause: the hash gets paused 1; its score becomes PAUSED, after every tick (never due); answers 1",
         stored(World()), op("pause")),
    case("pause-paused", "pausing a paused schedule: 1, nothing changes", stored(World(), paused=True), op("pause")),
    case("resume", "resume: paused goes, next and the score become next_ms, rev + 1; answers 1",
         stored(World(), paused=True), op("resume", NEXT)),
    case("resume-running", "resuming a schedule that is not paused: 1, nothing changes (its due tick is kept)",
         stored(World()), op("resume", NEXT)),
    case("remove", "remove: the hash, the schedules entry and its number go; answers 1",
         stored(World()), op("remove")),
    case("gone", "no such schedule: answers 0, nothing changes", World().meta(completed=1), op("pause")),
    case("next-unless-resuming", "a next_ms other than 0 with pause is refused with EMQARG; nothing changes",
         stored(World()), op("pause", NEXT)),
    *name_refusals("schedule_op", stored(World()), op("resume", NEXT)),
    *refusals("schedule_op", stored(World()), {"name": "beat", "op": "resume", "next_ms": NEXT},
              {"P": "P",
               "op": [("", "empty", "empty"), ("PAUSE", "upper", "in upper case"), ("drop", "unknown", "unknown")],
               "next_ms": ("int", 1704067200000, 3903090455551)}),
]
