"""Schedules: a job enqueued on a cron expression or every N ms, fired by the Reaper.

``Queue.schedule(name, cron="*/5 * * * *")`` (or ``every_ms=60_000``) stores
a schedule in the queue's slot (``lua/schedule_set.lua``): its definition
and a *cursor*, the server-ms time of its next tick. Every Reaper pass
fires the due ones (:func:`fire`): it reads each due schedule, works out
the ticks to fire and the first tick after now here, in Python, with
croniter for cron expressions, and sends them to ``lua/schedule_fire.lua``,
which enqueues them only if the cursor is still the one read and moves it
on. So of any number of reapers racing on a schedule, one fires each tick
and the others change nothing, and a reaper that dies between reading and
firing has fired nothing. A tick's JOB id is a function of the schedule and
the tick (:func:`tick_job_id`), so a tick's job is also idempotent by id.

The grid: ``every_ms=E`` ticks at the whole multiples of E since the Unix
epoch (``every_ms=60_000`` on each minute), ``cron`` at the expression's
times in time zone ``tz`` (croniter, so DST and the 6th field for seconds
are croniter's). A new or resumed schedule starts at the first tick after
now.

catch_up: a pass fires the latest due tick and, when the reaper was away
and more ticks fell due since the cursor, up to ``catch_up`` of the missed
ones before it (the most recent; oldest first), then moves the cursor to
the first tick after now. ``catch_up=0`` (the default) skips missed ticks:
after a day down, an hourly job runs once, not 24 times. Ticks closer
together than the reaper's interval are missed ticks too, so set catch_up
when every one of them matters.
"""
from __future__ import annotations

import logging
import re
import time
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import ids, keyspace
from .checks import check_int, check_payload
from .errors import ArgumentError, InvalidName, translated
from .scripts import LIMITS

log = logging.getLogger("echomq.schedules")

MAX_MS, MAX_CATCH_UP, MAX_CRON = LIMITS["MAX_MS"], LIMITS["MAX_CATCH_UP"], LIMITS["MAX_CRON"]
MAX_TICK = LIMITS["MAX_TICK"]
MAX_PRIORITY = LIMITS["MAX_PRIORITY"]
NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_RANDOM = re.compile(r"(?<![A-Za-z])[Rr](?![A-Za-z])")  # croniter's random field, not the r of "apr" or "fri"
_STATUS = {0: "unchanged", 1: "created", 2: "replaced"}


def check_name(name) -> str:
    name = keyspace._text(name, "schedule name")
    if not NAME.fullmatch(name):
        raise InvalidName(f"ill-formed schedule name: {name!r} (want 1 to 64 of A-Z a-z 0-9 . _ -)")
    return name


SCHED_SEQS = 1 << 21  # schedule numbers per queue (sched.lua), then they wrap


def tick_job_id(seq: int, tick_ms: int) -> str:
    """The JOB id of a tick, as sched.lua computes it: the snowflake of its
    millisecond with the schedule's 21-bit number in the node bits and the
    low 11 of the sequence, the sequence's top bit set. A minter never sets
    that bit (ids.MAX_MINT_SEQ), so no minted id is a tick's."""
    n = seq % SCHED_SEQS
    return ids.encode("JOB", (tick_ms - ids.EPOCH_MS) << 22 | (n >> 11) << 12 | 2048 | (n & 2047))


# -- the grid ------------------------------------------------------------------
class Every:
    """Ticks at the whole multiples of ``every_ms`` since the Unix epoch."""

    def __init__(self, every_ms: int):
        self.every_ms = every_ms
        self.spec = str(every_ms)

    def after(self, ms: int) -> int:
        return (ms // self.every_ms + 1) * self.every_ms

    first_after = after

    def at_or_before(self, ms: int) -> int:
        return ms // self.every_ms * self.every_ms

    def before(self, ms: int) -> int:
        return self.at_or_before(ms - 1)


def _croniter():
    """croniter, which only cron schedules need: the ``echomq[cron]`` extra."""
    try:
        from croniter import croniter
    except ImportError:
        raise ArgumentError("cron schedules need croniter: pip install 'echomq[cron]' "
                            "(every_ms schedules do not)") from None
    return croniter


class Cron:
    """Ticks at a cron expression's times in a time zone (croniter)."""

    def __init__(self, expr: str, tz: ZoneInfo):
        self.expr, self.tz, self.spec = expr, tz, expr

    def _step(self, ms: int, forward: bool) -> int:
        it = _croniter()(self.expr, datetime.fromtimestamp(ms / 1000, self.tz))
        at = it.get_next(datetime) if forward else it.get_prev(datetime)
        return int(at.timestamp() * 1000)

    def after(self, ms: int) -> int:
        return self._step(ms, True)

    def first_after(self, ms: int) -> int:
        """The first tick after ``ms``, or ArgumentError when there is none
        (croniter finds no matching time, or none before MAX_TICK)."""
        try:
            first = self.after(ms)
        except (ValueError, OverflowError):  # croniter's CroniterBadDateError is a ValueError
            first = None
        if first is None or first > MAX_TICK:
            raise ArgumentError(f"cron expression {self.expr[:80]!r} never fires: no time after now matches it")
        return first

    def at_or_before(self, ms: int) -> int:
        return self._step(ms + 1, False)

    def before(self, ms: int) -> int:
        return self._step(ms, False)


def grid(cron: str | None = None, every_ms: int | None = None, tz: str = "UTC") -> Every | Cron:
    """The grid of a definition, or ArgumentError: give exactly one of a
    valid cron expression and a positive every_ms; tz a known time zone."""
    if (cron is None) == (every_ms is None):
        raise ArgumentError("give exactly one of cron and every_ms")
    tz = keyspace._text(tz, "tz")
    if not re.fullmatch(r"[A-Za-z0-9_+/-]{1,%d}" % MAX_CRON, tz):
        raise ArgumentError(f"unknown time zone {tz!r}")
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ArgumentError(f"unknown time zone {tz!r}") from None
    if every_ms is not None:
        if tz != "UTC":
            raise ArgumentError("tz applies to cron schedules; every_ms ticks on the epoch's grid")
        return Every(check_int(every_ms, "every_ms", 1, MAX_MS))
    cron = keyspace._text(cron, "cron")
    if not 0 < len(cron) <= MAX_CRON or not cron.isascii() or not cron.isprintable() or not _croniter().is_valid(cron):
        raise ArgumentError(f"not a valid cron expression: {cron[:80]!r}")
    if _RANDOM.search(cron):
        raise ArgumentError(f"cron expression {cron[:80]!r} has a random field (R): every reaper would draw "
                            "its own times, so ticks would not be on one grid; write the times out")
    g = Cron(cron, zone)
    g.first_after(int(time.time() * 1000))  # one that parses but never fires ("0 0 30 2 *") is refused here
    return g


def plan(g: Every | Cron, expect: int, now: int, catch_up: int) -> tuple[list[int], int]:
    """(ticks to fire, the new cursor) for a schedule whose cursor ``expect``
    is due at ``now``: the latest tick at or before now and up to
    ``catch_up`` missed ticks before it, oldest first; then the first tick after now."""
    latest = max(g.at_or_before(now), expect)
    ticks = [latest]
    while len(ticks) <= catch_up:
        earlier = g.before(ticks[-1])
        if earlier < expect:
            break
        ticks.append(earlier)
    return ticks[::-1], g.after(now)


# -- the calls -------------------------------------------------------------------
def keys(queue, name: str) -> tuple[str, str]:
    """schedule_fire's KEYS: the schedule's row and the schedules zset."""
    return (f"{queue.prefix}sched:{name}", f"{queue.prefix}schedules")


def keys_numbered(queue, name: str) -> tuple[str, str, str]:
    """schedule_set's and schedule_op's KEYS: those and the numbers zset."""
    return (*keys(queue, name), f"{queue.prefix}sched_numbers")


def check_definition(name: str, *, cron: str | None = None, every_ms: int | None = None, payload=b"",
                     lane: str | None = None, tz: str = "UTC", catch_up: int = 0, priority: int = 0):
    """(name, grid, payload, lane) of a definition, each argument checked as
    :func:`set_schedule` checks it (ArgumentError or InvalidName), with no
    server: lets a caller check many definitions before it stores any."""
    name = check_name(name)
    g = grid(cron, every_ms, tz)
    payload = check_payload(payload)
    lane = "" if lane is None else keyspace.check_lane(lane)
    check_int(catch_up, "catch_up", 0, MAX_CATCH_UP)
    check_int(priority, "priority", -MAX_PRIORITY, MAX_PRIORITY)
    return name, g, payload, lane


def set_schedule(queue, name: str, *, cron: str | None = None, every_ms: int | None = None,
                 payload=b"", lane: str | None = None, tz: str = "UTC", catch_up: int = 0,
                 priority: int = 0, stamp: str = "") -> str:
    """Create or replace schedule ``name``; answers "created", "replaced" or
    "unchanged" (the same definition again keeps its cursor and pause; a
    schedule stored before the numbers zset is numbered again and answers
    "replaced"). Every argument is checked first (ArgumentError, nothing stored).
    ``stamp`` (a ShardedQueue's, see :func:`new_stamp`) is kept on the row."""
    name, g, payload, lane = check_definition(name, cron=cron, every_ms=every_ms, payload=payload, lane=lane,
                                              tz=tz, catch_up=catch_up, priority=priority)
    first = g.first_after(queue.server_time_ms())
    kind = "every" if isinstance(g, Every) else "cron"
    step, offset = queue.schedule_numbers
    args = (queue.prefix, name, kind, g.spec, tz, payload, lane, priority, catch_up, first, step, offset,
            check_stamp(stamp, none_ok=True))
    return _STATUS[queue._run("schedule_set", keys_numbered(queue, name), args)]


_STAMP = re.compile(r"[A-Za-z0-9:]{1,64}")


def check_stamp(stamp, *, none_ok: bool = False) -> str:
    if none_ok and stamp == "":
        return stamp
    if not isinstance(stamp, str) or not _STAMP.fullmatch(stamp):
        raise ArgumentError(f"a schedule stamp is 1 to 64 of [A-Za-z0-9:], got {str(stamp)[:40]!r}")
    return stamp


def new_stamp(shard: int) -> str:
    """A declaration's stamp: a fresh id (mint order: later declarations
    stamp larger, byte by byte) and the shard the schedule goes to, so two
    declarations that go to different shards never stamp alike."""
    return f"{ids.mint('SCH')}:{shard:04d}"


def supersede(queues, name: str, stamp: str, *, withdraw: bool = False) -> list[int]:
    """On each of ``queues`` (a ShardedQueue's shards, one round trip),
    remove schedule ``name`` if its stamp is older than ``stamp`` (or it has
    none); with ``withdraw``, only if its stamp is ``stamp``. Answers, per
    queue, 1 removed, 0 no such schedule, -1 kept (lua/schedule_op.lua)."""
    name, stamp = check_name(name), check_stamp(stamp)
    what = "withdraw" if withdraw else "supersede"
    if not queues:
        return []
    batch = queues[0].batch()
    for q in queues:
        batch.add("schedule_op", keys_numbered(q, name), (q.prefix, name, what, stamp))
    replies = batch.run()
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return [int(r) for r in replies]


def op(queue, name: str, what: str) -> bool:
    """Pause, resume or remove schedule ``name``; False when there is none."""
    name = check_name(name)
    next_ms = 0
    if what == "resume":
        row = listing(queue, [name])
        if not row:
            return False
        next_ms = _grid_of(row[0]).first_after(queue.server_time_ms())
    return queue._run("schedule_op", keys_numbered(queue, name), (queue.prefix, name, what, next_ms)) == 1


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _grid_of(row: dict) -> Every | Cron:
    if row["every_ms"] is not None:
        return Every(row["every_ms"])
    return Cron(row["cron"], ZoneInfo(row["tz"]))


def _row(name: str, h: dict, score) -> dict:
    f = {k.decode(): v for k, v in h.items()}
    kind, spec = _text(f["kind"]), _text(f["spec"])
    paused = f.get("paused") == b"1"
    last = f.get("last")
    return {"name": name, "kind": kind, "cron": spec if kind == "cron" else None,
            "every_ms": int(spec) if kind == "every" else None, "tz": _text(f["tz"]),
            "lane": _text(f["lane"]) or None, "priority": int(f["priority"]), "catch_up": int(f["catch_up"]),
            "payload": f["payload"], "paused": paused,
            "next_ms": None if paused or score is None else int(score),
            "last_ms": int(last) if last else None, "last_job": _text(f.get("last_job")) or None,
            "rev": int(f["rev"]), "seq": int(f["seq"]), "cursor": int(f["next"])}


def listing(queue, names: list[str] | None = None) -> list[dict]:
    """Every schedule of the queue (or those named), soonest first: name,
    kind, cron or every_ms, tz, lane, priority, catch_up, payload, paused,
    next_ms (None while paused), last_ms and last_job (the last tick fired
    and its JOB id, None before the first)."""
    with translated():
        k_all = f"{queue.prefix}schedules"
        if names is None:
            scored = [(_text(m), s) for m, s in queue.client.zrange(k_all, 0, -1, withscores=True)]
        else:
            pipe = queue.client.pipeline(transaction=False)
            for name in names:
                pipe.zscore(k_all, name)
            scored = [(n, s) for n, s in zip(names, pipe.execute()) if s is not None]
        if not scored:
            return []
        pipe = queue.client.pipeline(transaction=False)
        for name, _ in scored:
            pipe.hgetall(keys(queue, name)[0])
        rows = pipe.execute()
    return [_row(name, h, score) for (name, score), h in zip(scored, rows) if h]


def fire(queue, *, limit: int = 1000) -> int:
    """One bounded pass: fire the due schedules of ``queue`` (at most
    ``limit`` of them); answers how many jobs were enqueued. A schedule
    another reaper fired first changes nothing here; one whose stored
    definition no longer parses is logged and left alone."""
    with translated():
        due = queue.client.zrange(f"{queue.prefix}schedules", 0, limit - 1, withscores=True)
        if not due:
            return 0
        now = queue.server_time_ms()  # a paused schedule's score (PAUSED, sched.lua) is never due
        names = [_text(m) for m, s in due if s <= now]
        if not names:
            return 0
    batch = queue.batch()
    for row in listing(queue, names):
        if row["paused"] or row["cursor"] > now:  # paused, or fired by another reaper since the read above
            continue
        try:
            ticks, next_ms = plan(_grid_of(row), row["cursor"], now, row["catch_up"])
        except Exception:
            log.exception("schedule %s/%s cannot be planned; left as it is", queue.name, row["name"])
            continue
        if next_ms > MAX_TICK:
            log.error("schedule %s/%s has no tick before %d; left as it is", queue.name, row["name"], MAX_TICK)
            continue
        pairs = [x for tick in ticks for x in (tick, tick_job_id(row["seq"], tick))]
        batch.add("schedule_fire", keys(queue, row["name"]),
                  (queue.prefix, row["name"], row["rev"], row["cursor"], next_ms, *pairs))
    fired = 0
    for reply in batch.run():
        if isinstance(reply, Exception):
            log.error("schedule fire on %s refused: %s", queue.name, reply)
        elif reply != 0:
            fired += len(reply)
    return fired
