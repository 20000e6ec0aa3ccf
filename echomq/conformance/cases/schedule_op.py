"""schedule_op: pause, resume or remove one schedule; supersede or withdraw a stamped copy."""
from ..dsl import World, call, case, refusals
from .schedule_set import BAD_STAMPS, NEXT, S1, S2, name_refusals, stored


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
    case("supersede-older", "supersede with a newer stamp than the row's: removed as by remove; answers 1",
         stored(World(), stamp=S1), op("supersede", S2)),
    case("supersede-unstamped", "supersede a row with no stamp (a plain queue's): removed; answers 1",
         stored(World()), op("supersede", S2)),
    case("supersede-newer", "supersede with an older stamp than the row's: kept, answers -1, nothing changes",
         stored(World(), stamp=S2), op("supersede", S1)),
    case("supersede-same", "supersede with the row's own stamp: kept, answers -1, nothing changes",
         stored(World(), stamp=S1), op("supersede", S1)),
    case("supersede-bytes", "stamps compare byte by byte (ASCII: digits, then upper, then lower case), not by "
         "the server's locale: 'SCH...Z' is older than 'SCH...a', so it is removed; answers 1",
         stored(World(), stamp="SCH0KHTOWnGLuZ:0001"), op("supersede", "SCH0KHTOWnGLua:0001")),
    case("supersede-prefix", "a stamp that is a prefix of the given one is older: removed; answers 1",
         stored(World(), stamp="SCH0KHTOWnGLuC"), op("supersede", "SCH0KHTOWnGLuC:0001")),
    case("supersede-longer", "a stamp the given one is a prefix of is newer: kept, answers -1, nothing changes",
         stored(World(), stamp="SCH0KHTOWnGLuC:0001"), op("supersede", "SCH0KHTOWnGLuC")),
    case("supersede-gone", "supersede with no such schedule: answers 0, nothing changes",
         World().meta(completed=1), op("supersede", S1)),
    case("withdraw-own", "withdraw with the row's own stamp: removed; answers 1",
         stored(World(), stamp=S1), op("withdraw", S1)),
    case("withdraw-restamped", "withdraw with a stamp the row no longer holds (a newer declaration stamped it): "
         "kept, answers -1, nothing changes", stored(World(), stamp=S2), op("withdraw", S1)),
    case("withdraw-unstamped", "withdraw a row with no stamp: kept, answers -1, nothing changes",
         stored(World()), op("withdraw", S1)),
    case("next-unless-resuming", "a next_ms other than 0 with pause is refused with EMQARG; nothing changes",
         stored(World()), op("pause", NEXT)),
    *name_refusals("schedule_op", stored(World()), op("resume", NEXT)),
    *refusals("schedule_op", stored(World()), {"name": "beat", "op": "resume", "next_ms": NEXT},
              {"P": "P",
               "op": [("", "empty", "empty"), ("PAUSE", "upper", "in upper case"), ("drop", "unknown", "unknown")],
               "next_ms": ("int", 1704067200000, 3903090455551)}),
    *[case(f"bad-stamp-{what}-{slug}", f"{what} with a stamp {why} is refused with EMQARG; nothing changes",
           stored(World(), stamp=S1), op(what, value))
      for what in ("supersede", "withdraw") for value, slug, why in BAD_STAMPS],
    case("bad-stamp-pause", "pause with a stamp in place of '0' is refused with EMQARG; nothing changes",
         stored(World(), stamp=S1), op("pause", S1)),
]
