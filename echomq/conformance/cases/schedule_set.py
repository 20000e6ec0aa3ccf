"""schedule_set: create or replace a schedule; the same definition again changes nothing."""
from ..dsl import L1, LIVE, MAX_MS, P, World, call, case, key, refusals

NEXT = 3786825600000  # 2090-01-01: a first tick the caller computed (ticks end in 2093)
PAUSED = 9999999999999  # a paused schedule's score (lua/include/sched.lua)
# Stamps (a ShardedQueue's declarations: a minted id and the shard), S1 older than S2.
S1, S2 = "SCH0KHTOWnGLuC:0003", "SCH0KHTOWnGLuD:0001"
BAD_STAMPS = [("a b", "space", "with a space"), ("a-b", "dash", "with a dash"), ("x" * 65, "long", "of 65 bytes")]
DEF = {"kind": "every", "spec": "60000", "tz": "UTC", "payload": "p", "lane": "", "priority": "0", "catch_up": "0"}


def schedule_set(name="beat", **kw):
    args = {**DEF, "next_ms": NEXT, "seq_step": "1", "seq_offset": "0", "stamp": "", **kw}
    return call("schedule_set", name=name, **args)


def stored(world, name="beat", *, paused=False, seq=1, numbered=True, **fields):
    """Schedule ``name`` as schedule_set leaves it (next LIVE), the meta's
    sched_seq and, when ``numbered``, its number in the numbers zset (a
    plain queue's: k = seq); not numbered, a row stored before the zset."""
    row = {**DEF, "next": LIVE, "rev": "1", "seq": str(seq), **fields}
    if paused:
        row["paused"] = "1"
    world = (world.raw(key(f"sched:{name}"), {"hash": dict(sorted(row.items()))})
             .raw(key("schedules"), {"zset": {name: PAUSED if paused else LIVE}}).meta(sched_seq=seq))
    return world.raw(key("sched_numbers"), {"zset": {name: seq}}) if numbered else world


def name_refusals(script, world, good_call) -> list:
    """A bad schedule name at ARGV[2] (and KEYS[1], which names it): EMQARG, nothing changes."""
    out = []
    for value, slug, why in (("", "empty", "empty"), ("a b", "space", "with a space"),
                             ("a:b", "colon", "with a colon"), ("x" * 65, "long", "of 65 characters")):
        sent = dict(good_call)
        sent["argv"] = [sent["argv"][0], value, *sent["argv"][2:]]
        sent["keys"] = [P + "sched:" + value, *sent["keys"][1:]]
        out.append(case(f"bad-name-{slug}", f"a schedule name {why} is refused with EMQARG; nothing changes",
                        world, sent))
    return out


CASES = [
    case("create", "a new schedule: its hash (definition, next, rev 1, seq from meta sched_seq + 1); its name in "
         "schedules at next_ms; answers 1", None, schedule_set()),
    case("create-cron", "a cron schedule in a time zone, on a lane, at a priority, with catch_up",
         None, schedule_set(kind="cron", spec="0 3 * * *", tz="Europe/Paris", lane=L1, priority=-3, catch_up=2)),
    case("second", "a second schedule takes the next number", stored(World()), schedule_set(name="other")),
    case("shard-numbers", "shard 3 of 16: the schedule's number is k * 16 + 3, k the meta's sched_seq + 1 "
         "(5 here: 83), so the shards of a queue never number two schedules alike",
         World().meta(sched_seq=4), schedule_set(seq_step="16", seq_offset="3")),
    case("shard-numbers-wrap", "k wraps at 2^21 // seq_step (131072 for 16): a number stays below 2^21 and "
         "in its shard's class; k 0 is held here, so k 1: 1 * 16 + 15",
         World().meta(sched_seq=131071).raw(key("sched_numbers"), {"zset": {"old": 0}}),
         schedule_set(seq_step="16", seq_offset="15")),
    case("skip-held", "the numbers after sched_seq that live schedules hold are skipped: 5 and 6 are held, "
         "so k 7 (and sched_seq becomes 7)",
         World().meta(sched_seq=4).raw(key("sched_numbers"), {"zset": {"a": 5, "b": 6, "c": 9}}),
         schedule_set()),
    case("renumber-unnumbered", "a row the numbers zset does not number (stored before it) is numbered again "
         "although its definition is the same: a free k, seq, rev + 1; cursor and record stay; answers 2",
         stored(World(), seq=7, numbered=False, last="5000", last_job="JOB0000000000A").meta(sched_seq=7),
         schedule_set()),
    case("renumber-other-class", "a row whose number is of another class (a shard's of another layout): "
         "numbered again in this one; answers 2", stored(World(), seq=1),
         schedule_set(seq_step="4", seq_offset="2")),
    case("kept-number", "a row numbered in this class keeps its number when replaced",
         stored(World(), seq=6).meta(sched_seq=9), schedule_set(payload="new")),
    case("unchanged", "the same definition again: answers 0 and nothing changes (cursor and record kept)",
         stored(World(), last="5000", last_job="JOB0000000000A"), schedule_set()),
    case("stamped", "a declaration's stamp is kept on the row as stamp", None, schedule_set(stamp=S1)),
    case("unchanged-stamped", "the same definition with a new stamp: answers 0; the stamp is written, nothing "
         "else changes", stored(World(), stamp=S1), schedule_set(stamp=S2)),
    case("unstamped-keeps-stamp", "no stamp (''): the row's stamp stays", stored(World(), stamp=S1),
         schedule_set(payload="new")),
    case("unchanged-paused", "the same definition of a paused schedule: 0, it stays paused",
         stored(World(), paused=True), schedule_set()),
    case("replace", "a changed definition: the fields and next change, rev + 1, seq and the record stay; "
         "answers 2", stored(World(), last="5000", last_job="JOB0000000000A"), schedule_set(payload="new")),
    case("replace-paused", "replacing a paused schedule keeps it paused: its score stays PAUSED",
         stored(World(), paused=True), schedule_set(spec="1000")),
    *refusals("schedule_set", World().meta(completed=1),
              {"name": "beat", **DEF, "next_ms": NEXT, "seq_step": "1", "seq_offset": "0", "stamp": ""},
              {"P": "P",
               "kind": [("", "empty", "empty"), ("EVERY", "upper", "in upper case"), ("hourly", "unknown", "unknown")],
               "spec": ("int", 1, MAX_MS),
               "tz": [("", "empty", "empty"), ("a b", "space", "with a space"), ("../x", "dots", "with dots")],
               "lane": "lane?", "priority": [("101", "above", "of 101"), ("-0", "minus-zero", "as -0")],
               "catch_up": ("int", 0, 1000), "next_ms": ("int", 1704067200000, 3903090455551),
               "seq_step": ("int", 1, 1024), "seq_offset": ("int", 0, 0), "stamp": BAD_STAMPS}),
    case("bad-seq_offset-class", "a seq_offset not below seq_step (16 of 16) is refused with EMQARG; nothing changes",
         World().meta(completed=1), schedule_set(seq_step="16", seq_offset="16")),
    case("all-held", "every number of the class held (shard 0 of 1024 has 2^21 // 1024 = 2048, all held "
         "here): refused with EMQARG; nothing changes",
         World().meta(sched_seq=3).raw(key("sched_numbers"), {"zset": {f"s{k}": k for k in range(2048)}}),
         schedule_set(seq_step="1024", seq_offset="0")),
    *name_refusals("schedule_set", World().meta(completed=1), schedule_set()),
    case("bad-cron-control", "a cron spec with a control character is refused with EMQARG; nothing changes",
         World().meta(completed=1), schedule_set(kind="cron", spec="* * * *\n *")),
]
