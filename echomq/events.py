"""What happened to a queue's jobs: the event stream, read as typed events.

Every transition script appends one entry to the capped stream
``emq:{q}:events`` in the same atomic step as the change it reports
(``lua/include/events.lua``; the entry format is in docs/echomq.md). This
module reads it:

* :class:`Event` -- one entry, typed: ``id`` (the server's ``<ms>-<seq>``),
  ``type``, ``job``, ``lane``, ``attempt``, ``data`` (a dict), and
  ``cursor``: where a reader resumes after it.
* :func:`tail` -- ``Queue.events()``: XREAD from a position on, ``count``
  entries per round trip, optionally blocking for more. Passing the last
  event's ``cursor`` as ``after`` resumes with nothing lost or repeated while
  the entries are still in the stream; when the position has been trimmed
  away, :class:`EventsLost` says so rather than skipping silently.
* :func:`merged` -- ``ShardedQueue.events()``: every shard's stream, each in
  its own order, interleaved by time; the cursor names a position per shard.
* :func:`recent`, :func:`history` -- newest-first pages and one job's story,
  for the dashboard (a backwards scan of the stream: O(its length) at worst).
* :func:`wait` -- ``Queue.wait()``: block until a job ends, told by the
  script that ends it (``lua/wait.lua``), never by polling the row.

A reader holds no lease and changes no job. Its cost on the server is one
XREAD per ``count`` entries (O(log n) to find the position, then the entries)
and, while it blocks, one blocked client that each new entry wakes: so many
watchers are served best by one reader per process fanning events out in
memory, not by one reader each. A named reader (``reader=``) records its
position at most once a second in ``emq:{q}:events:readers`` (a hash:
name -> last id), which the metrics turn into its lag.
"""
from __future__ import annotations

import heapq
import json
import re
import selectors
import time
from dataclasses import dataclass, field
from typing import Iterator

from .cluster import node_client, pipeline
from .errors import ArgumentError, EventsLost, JobNotFound, translate, translated
from .scripts import LIMITS

TYPES = ("enqueued", "claimed", "completed", "retried", "dead", "stalled", "released", "promoted",
         "requeued", "removed", "cancelling", "cancelled", "progress", "admitted")
FINAL = ("completed", "dead", "cancelled", "removed")  # what Queue.wait answers

READER = re.compile(r"[A-Za-z0-9._:-]{1,64}")
SLICE_MS = 1_000       # a blocking call waits at most this long (below any socket timeout we set)
SCAN_PAGE = 1_000      # entries per XREVRANGE of a backwards scan
REPORT_EVERY_S = 1.0   # a named reader records its position at most this often


@dataclass(frozen=True, slots=True)
class Event:
    """One job's step, from an entry of a queue's event stream. An entry of a
    batch step (a claim, a complete_batch) reports several jobs: each is an
    Event with the entry's ``id`` and its own ``index`` in it."""

    id: str
    index: int
    type: str
    job: str
    lane: str | None
    attempt: int
    data: dict = field(compare=False)
    queue: str = ""
    cursor: str = ""

    @property
    def at_ms(self) -> int:
        """When it happened: the server's clock, in ms (the id's first part)."""
        return int(self.id.split("-", 1)[0])

    def as_dict(self) -> dict:
        return {"id": self.id, "index": self.index, "type": self.type, "job": self.job, "lane": self.lane,
                "attempt": self.attempt, "data": self.data, "queue": self.queue, "cursor": self.cursor,
                "at_ms": self.at_ms}


def _s(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


def _fields(raw) -> dict:
    if isinstance(raw, dict):
        return {_s(k): _s(v) for k, v in raw.items()}
    return {_s(raw[i]): _s(raw[i + 1]) for i in range(0, len(raw), 2)}


def expand(queue: str, entry_id, raw, after: int = -1) -> list[Event]:
    """The Events of one stream entry (its id and fields, as redis-py or the
    raw reply gives them), those after position ``after`` in it. An event's
    cursor is the entry id for the entry's last job, else ``<id>:<index>``."""
    f = _fields(raw)
    data = f.get("data") or ""
    try:
        decoded = json.loads(data) if data else {}
    except ValueError:
        decoded = {"raw": data}
    if not isinstance(decoded, dict):
        decoded = {"value": decoded}
    entry_id = _s(entry_id)
    jobs = (f.get("job") or "").split(" ")
    lanes = (f.get("lane") or "").split(" ")
    attempts = (f.get("attempt") or "").split(" ")
    last = len(jobs) - 1
    out = []
    for k in range(after + 1, len(jobs)):
        lane = lanes[k] if k < len(lanes) else ""
        attempt = attempts[k] if k < len(attempts) else "0"
        out.append(Event(entry_id, k, f.get("type", ""), jobs[k], None if lane in ("", "-") else lane,
                         int(attempt) if attempt.isdigit() else 0, decoded, queue,
                         entry_id if k == last else f"{entry_id}:{k}"))
    return out


def id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


POSITION = re.compile(r"(0|[1-9][0-9]{0,19})-(0|[1-9][0-9]{0,19})(?::(0|[1-9][0-9]{0,5}))?")


def check_position(after) -> str:
    """``"$"`` (from now on), ``"0"`` (from the oldest entry kept) or an
    event's cursor (an entry id, or ``<id>:<index>`` inside a batch entry)."""
    if after in ("$", "0"):
        return after
    m = POSITION.fullmatch(after) if isinstance(after, str) else None
    if m is None or int(m.group(1)) >= 2**64 or int(m.group(2)) >= 2**64:
        raise ArgumentError(f"after must be '$', '0' or an event's cursor like '1712345678901-0', got {after!r}")
    return after


def _split(pos: str) -> tuple[str, int | None]:
    """(entry id, index of the last job read in it, or None: all of it)."""
    entry, _, k = pos.partition(":")
    return entry, int(k) if k else None


def check_reader(reader) -> str | None:
    if reader is not None and (not isinstance(reader, str) or not READER.fullmatch(reader)):
        raise ArgumentError(f"reader must be 1 to 64 of A-Z a-z 0-9 . _ : -, got {reader!r}")
    return reader


def key(queue) -> str:
    return queue.prefix + "events"


def readers_key(queue) -> str:
    return queue.prefix + "events:readers"


def _slice_ms(client) -> int:
    """How long one blocking call may wait: under the client's socket timeout."""
    kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {}) or {}
    timeout = kw.get("socket_timeout")
    return SLICE_MS if not timeout else max(10, min(SLICE_MS, int(timeout * 500)))


# -- one stream ----------------------------------------------------------------
def last_id(queue) -> str:
    """The newest entry's id, or '0-0' for an empty or absent stream."""
    with translated():
        newest = queue.client.xrevrange(key(queue), count=1)
    return _s(newest[0][0]) if newest else "0-0"


def _first_id(queue) -> str | None:
    with translated():
        oldest = queue.client.xrange(key(queue), count=1)
    return _s(oldest[0][0]) if oldest else None


def _check_kept(queue, pos: str) -> None:
    """Raise EventsLost when ``pos`` is older than the oldest entry kept."""
    entry = _split(pos)[0]
    if entry in ("0", "0-0"):
        return
    first = _first_id(queue)
    if first is not None and id_key(entry) < id_key(first):
        raise EventsLost(f"queue {queue.name}: events after {pos} may have been trimmed; the oldest kept is "
                         f"{first}", first)


def _rest_of_entry(queue, pos: str) -> tuple[str, list[Event]]:
    """For a position inside a batch entry: (the entry id, its jobs after the
    position). For any other position: (it, [])."""
    entry, k = _split(pos)
    if k is None:
        return entry, []
    with translated():
        found = queue.client.xrange(key(queue), min=entry, max=entry, count=1)
    if not found:
        _check_kept(queue, pos)
        return entry, []
    return entry, expand(queue.name, found[0][0], found[0][1], k)


class _Reporter:
    """Records a named reader's position, at most once per REPORT_EVERY_S."""

    def __init__(self, queue, reader: str | None):
        self.queue, self.reader, self.last = queue, reader, 0.0

    def __call__(self, position: str, force: bool = False) -> None:
        if self.reader is None:
            return
        now = time.monotonic()
        if force or now - self.last >= REPORT_EVERY_S:
            self.last = now
            with translated():
                self.queue.client.hset(readers_key(self.queue), self.reader, position)


def tail(queue, after: str = "$", *, block_ms: int | None = None, count: int = 100,
         reader: str | None = None) -> Iterator[Event]:
    """Events of ``queue`` after position ``after`` (see the module doc).

    With ``block_ms`` None the iterator ends once it has caught up; with a
    number it then waits up to that long for more and ends after a wait that
    brought nothing; 0 waits for ever. ``count`` is entries per XREAD. The
    position is taken now (``"$"`` is the stream's end at this call), the
    reading happens as the iterator is consumed."""
    pos = check_position(after)
    pos = last_id(queue) if pos == "$" else pos
    _check_kept(queue, pos)
    return _tail(queue, pos, block_ms, count, _Reporter(queue, check_reader(reader)))


def _tail(queue, pos: str, block_ms: int | None, count: int, report: _Reporter) -> Iterator[Event]:
    k, client = key(queue), queue.client
    slice_ms = _slice_ms(client)
    seen = pos
    try:
        pos, rest = _rest_of_entry(queue, pos)
        for event in rest:
            seen = event.cursor
            report(seen)
            yield event
        while True:
            with translated():
                reply = client.xread({k: pos}, count=count)
            if not reply and block_ms is not None:
                deadline = None if block_ms == 0 else time.monotonic() + block_ms / 1000
                while not reply:
                    left = slice_ms if deadline is None else int((deadline - time.monotonic()) * 1000)
                    if left <= 0:
                        break
                    with translated():
                        reply = client.xread({k: pos}, count=count, block=min(left, slice_ms))
            if not reply:
                return
            entries = reply[0][1]
            if len(entries) >= count:  # behind: was anything after pos trimmed before this read?
                _check_kept(queue, pos)
            for entry_id, raw in entries:
                for event in expand(queue.name, entry_id, raw):
                    seen = event.cursor
                    report(seen)
                    yield event
                pos = _s(entry_id)
    finally:
        report(seen, force=True)


def _scan_back(queue, keep, limit: int, scan: int | None, stop=None) -> list[Event]:
    """Newest first: entries for which ``keep(event)`` holds, at most ``limit``,
    looking at most ``scan`` entries back (None: the whole stream), and no
    further back than a kept entry for which ``stop(event)`` holds."""
    out, seen, top = [], 0, "+"
    k = key(queue)
    while len(out) < limit and (scan is None or seen < scan):
        page = SCAN_PAGE if scan is None else min(SCAN_PAGE, scan - seen)
        with translated():
            entries = queue.client.xrevrange(k, max=top, min="-", count=page)
        for entry_id, raw in entries:
            for event in reversed(expand(queue.name, entry_id, raw)):
                if keep(event):
                    out.append(event)
                    if len(out) >= limit or (stop is not None and stop(event)):
                        return out
        seen += len(entries)
        if len(entries) < page:
            break
        top = "(" + _s(entries[-1][0])
    return out


def matcher(types=None, lane: str | None = None, job: str | None = None):
    """A predicate over events: any of ``types``, on ``lane``, about ``job``."""
    types = set(types or ())

    def keep(e: Event) -> bool:
        return (not types or e.type in types) and (lane is None or e.lane == lane) and (job is None or e.job == job)

    return keep


def recent(queue, limit: int, *, types=None, lane=None, job=None, scan: int | None = None) -> list[Event]:
    """The newest ``limit`` events that match, newest first."""
    return _scan_back(queue, matcher(types, lane, job), limit, scan)


def history(queue, job_id: str, limit: int = 1000) -> list[Event]:
    """One job's events still in the stream, oldest first: a scan back from
    the newest entry that stops at the job's ``enqueued`` entry."""
    found = _scan_back(queue, matcher(job=job_id), limit, None, stop=lambda e: e.type == "enqueued")
    return found[::-1]


def stats(queue) -> dict:
    """The stream's length, entries added ever, newest id and the named
    readers' positions, from one XINFO and one HGETALL."""
    with translated():
        pipe = queue.client.pipeline(transaction=False)
        pipe.hget(queue.k_meta, "events")
        pipe.exists(key(queue))
        pipe.hgetall(readers_key(queue))
        cap, exists, readers = pipe.execute()
        info = queue.client.xinfo_stream(key(queue)) if exists else {}
    return {"maxlen": _cap(cap), "length": int(info.get("length", 0)),
            "added": int(info.get("entries-added", 0)),
            "last_id": _s(info.get("last-generated-id", b"0-0")),
            "readers": {_s(k): _s(v) for k, v in readers.items()}}


def _cap(raw) -> int:
    try:
        n = int(raw)
    except (TypeError, ValueError):
        return LIMITS["KEEP_EVENTS"]
    return n if n >= 0 else LIMITS["KEEP_EVENTS"]


def lag_seconds(last: str, position: str) -> float:
    """How far behind ``last`` (the newest id) a reader at ``position`` is, in seconds."""
    try:
        return max(0.0, (id_key(_split(last)[0])[0] - id_key(_split(position)[0])[0]) / 1000)
    except ValueError:
        return 0.0


# -- several streams: a sharded queue -------------------------------------------
def _cursor(positions: list[str]) -> str:
    return ",".join(positions)


def check_cursor(after, shards: int) -> list[str] | str:
    """``"$"``, ``"0"`` or a sharded cursor: one position per shard, comma-separated."""
    if after in ("$", "0"):
        return after
    parts = after.split(",") if isinstance(after, str) else []
    if len(parts) != shards:
        raise ArgumentError(f"after must be '$', '0' or a cursor of {shards} positions (an event's "
                            f"cursor), got {str(after)[:80]!r}")
    return [check_position(p) for p in parts]


def _xread_args(k: str, pos: str, count: int, block: int | None) -> tuple:
    return ("XREAD", "COUNT", count, *(("BLOCK", block) if block is not None else ()), "STREAMS", k, pos)


def _entries(reply) -> list:
    """The entries of one stream's XREAD reply (raw RESP2 or RESP3, or as
    redis-py parses it), [] for none."""
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3, read raw: {stream: entries}
        return next(iter(reply.values()))
    return reply[0][1]


class _Blocked:
    """One blocking XREAD per shard, each on a connection of its own to the
    node serving the shard, waited for together with select(). A call still
    outstanding when the reader stops is ended by closing its connection."""

    def __init__(self, shards):
        self.shards = shards
        self.out: dict[int, tuple] = {}  # shard -> (pool, connection)
        self.sel = selectors.DefaultSelector()

    def send(self, i: int, pos: str, count: int, block: int) -> None:
        shard = self.shards[i]
        _, node = node_client(shard.client, key(shard))
        pool = node.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_command(*_xread_args(key(shard), pos, count, block))
        except BaseException:
            pool.release(conn)
            raise
        self.out[i] = (pool, conn)
        self.sel.register(conn._sock, selectors.EVENT_READ, i)

    def wait(self, timeout_s: float) -> dict[int, list]:
        got = {}
        for sk, _ in self.sel.select(timeout_s):
            i = sk.data
            pool, conn = self.out.pop(i)
            self.sel.unregister(sk.fileobj)
            try:
                got[i] = _entries(conn.read_response())
            finally:
                pool.release(conn)
        return got

    def close(self) -> None:
        for pool, conn in self.out.values():
            conn.disconnect()  # its reply was never read
            pool.release(conn)
        self.out.clear()
        self.sel.close()


def merged(shards, after="$", *, block_ms: int | None = None, count: int = 100,
           reader: str | None = None) -> Iterator[Event]:
    """Events of every shard, each shard's in its order, interleaved by time.
    Each event's ``cursor`` holds every shard's position after it. The
    positions are taken now, as in :func:`tail`. A named ``reader`` records
    each shard's position in that shard's readers hash."""
    n = len(shards)
    start = check_cursor(after, n)
    check_reader(reader)
    if start == "$":
        positions = [last_id(s) for s in shards]
    elif start == "0":
        positions = ["0"] * n
    else:
        positions = list(start)
    for s, pos in zip(shards, positions):
        _check_kept(s, pos)
    return _merged(shards, positions, block_ms, count, [_Reporter(s, reader) for s in shards])


def _merged(shards, positions: list[str], block_ms: int | None, count: int,
            reports: list[_Reporter]) -> Iterator[Event]:
    n = len(shards)
    client = shards[0].client
    slice_ms = _slice_ms(client)
    blocked = _Blocked(shards) if block_ms is not None else None
    reads = list(positions)  # where each shard's next XREAD starts: an entry id
    try:
        rests = []
        for i, s in enumerate(shards):
            reads[i], rest = _rest_of_entry(s, positions[i])
            rests.append([(id_key(e.id), i, e.index, e) for e in rest])
        pending = list(heapq.merge(*rests))
        deadline = None
        while True:
            for _, i, _, event in pending:
                positions[i] = event.cursor
                reports[i](event.cursor)
                yield Event(event.id, event.index, event.type, event.job, event.lane, event.attempt, event.data,
                            event.queue, _cursor(positions))
            if blocked is None:
                commands = [(_xread_args(key(s), p, count, None), key(s)) for s, p in zip(shards, reads)]
                with translated():
                    replies = pipeline(client, commands)
                got = {}
                for i, r in enumerate(replies):
                    if isinstance(r, Exception):
                        raise translate(r)
                    got[i] = _entries(r)
            else:
                for i in range(n):
                    if i not in blocked.out:
                        with translated():
                            blocked.send(i, reads[i], count, slice_ms)
                if deadline is None and block_ms:
                    deadline = time.monotonic() + block_ms / 1000
                left = slice_ms / 1000 + 2.0 if deadline is None else deadline - time.monotonic()
                with translated():
                    got = blocked.wait(max(0.0, left))
            streams = []
            for i, entries in got.items():
                if len(entries) >= count:  # behind: was anything after its position trimmed before this read?
                    _check_kept(shards[i], reads[i])
                if entries:
                    reads[i] = _s(entries[-1][0])
                streams.append([(id_key(e.id), i, e.index, e) for eid, raw in entries
                                for e in expand(shards[i].name, eid, raw)])
            pending = list(heapq.merge(*streams))
            if not pending:
                if blocked is None or (deadline is not None and time.monotonic() >= deadline):
                    return
                continue
            deadline = None  # a wait that brought something starts again
    finally:
        if blocked is not None:
            blocked.close()
        for report, pos in zip(reports, positions):
            report(pos, force=True)


# -- waiting for a job to end -----------------------------------------------------
def wait(queue, job_id: str, timeout_s: float) -> str:
    """Block until ``job_id`` ends; its final state (see ``Queue.wait``)."""
    deadline = time.monotonic() + timeout_s
    answer = queue._run("wait", (queue.job_key(job_id),), (queue.prefix, job_id))
    if answer == 0:
        raise JobNotFound(f"queue {queue.name} has no job {job_id} and no record of it: removed, cancelled, "
                          "completed longer ago than it keeps records, or never enqueued")
    if not isinstance(answer, list):
        return _s(answer)  # ended already
    # Registered: this life's list, which only this life's end writes (lua/wait.lua).
    notify = f"{queue.prefix}notify:{job_id}:{int(answer[1])}"
    slice_s = _slice_ms(queue.client) / 1000
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"job {job_id} of queue {queue.name} did not end within {timeout_s}s")
        with translated():
            got = queue.client.blpop([notify], timeout=min(left, slice_s))
        if got is not None:
            return _s(got[1])
