"""One per live process: the event reader and the fan-out to open streams.

A single thread reads the EchoMQ event streams of the guess queue ``cm``
(every shard of it), ``cm.settle`` and ``cm.tasks`` (``echomq.events.merged``:
one blocking ``XREAD`` per stream, resumed from its cursor after a lost
connection, so nothing is skipped while the entries are kept). Only
``completed`` events matter, and they carry ids only:

* a guess job (``cm``): its lane is its player, whose open round page
  gets their guesses at once (``mine``); one indexed query maps the
  batch's JOB ids to (round, player), and every stream on the round -- round pages, leaderboards,
  watch pages -- gets the round's new state, read once per process and at
  most every ``MIN_INTERVAL_S`` per round, however many guesses land; the
  lobby its counts;
* a settle job (``cm.settle``, its JOB id is the round's): the round closed
  (its pages reload or show the reveal);
* a task (``cm.tasks``) on a player's lane is a notification for them; on
  a round's lane, "a new round opened": unread counts, and the lobby.

What a stream then sends is read fresh (``games.push.payloads``), never
taken from the event. Rounds with streams are also re-read every
``REFRESH_S`` ("in the last minute" decays without events, and a change no
event tells of -- an admin's void -- shows within that).

The asyncio side owns all the bookkeeping; database and Valkey reads run on
a few worker threads (``WORKERS``). A stream holds a small mailbox: the
newest frame of each kind (a state replaces the one not yet sent), so a
slow reader costs one frame per kind, never a queue.

While the reader cannot read (Valkey down), the hub is ``down``: open
streams are told (``down``) and closed, new ones refused with 503, and the
pages poll as they do without JavaScript, until it reads again.
"""
from __future__ import annotations

import asyncio
import collections
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from echomq import EventsLost, events
from echomq.contrib.django import get_queue

from .. import settlement, tasks
from . import payloads

log = logging.getLogger("games.push")

MIN_INTERVAL_S = 0.5   # a round's streams get its new state at most this often (bench.live_push)
HEARTBEAT_S = 15.0     # a stream sent nothing this long gets a comment line (proxies close idle ones)
REFRESH_S = 10.0       # rounds with streams are re-read this often anyway
SHARED_FRESH_S = 1.0   # a stream that opens is sent a shared state this old at most
WORKERS = 4            # threads for the database and Valkey reads
BACKOFF_S = (0.5, 5.0)  # the reader's wait after a failed read: first, longest
GUESSES, SETTLE, TASKS = "cm", settlement.QUEUE, tasks.QUEUE


def frame(name: str, data) -> bytes:
    """One Server-Sent Event: ``event:`` and one ``data:`` line of JSON (JSON
    escapes every newline, so the data is always one line)."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {body}\n\n".encode()


class Stream:
    """One open stream: what it follows, and the frames waiting to be sent
    (the newest of each kind)."""

    __slots__ = ("kind", "round_id", "player_id", "pending", "wake", "closed", "sent", "ends")

    def __init__(self, kind: str, round_id: str | None = None, player_id: str | None = None, *,
                 lifetime_s: float = float("inf")):
        self.kind, self.round_id, self.player_id = kind, round_id, player_id
        self.pending: dict[str, bytes] = {}
        self.wake = asyncio.Event()
        self.closed = False
        self.sent = time.monotonic()  # when it was last sent anything (the heartbeat's clock)
        self.ends = self.sent + lifetime_s

    def put(self, name: str, data: bytes) -> None:
        self.pending[name] = data
        self.wake.set()

    def take(self) -> bytes:
        out = b"".join(self.pending.values())
        self.pending.clear()
        self.wake.clear()
        self.sent = time.monotonic()
        return out

    def close(self) -> None:
        self.closed = True
        self.wake.set()


class NotFound(Exception):
    """The stream's round does not exist."""


class Hub:
    """The process's reader and its streams (see the module doc)."""

    ROUND_KINDS = ("round", "board", "watch")

    def __init__(self):
        self.loop: asyncio.AbstractEventLoop | None = None
        self.state = "starting"  # "up" while the reader reads, "down" while it cannot
        self.streams: dict[str, dict[str | None, set[Stream]]] = {
            k: collections.defaultdict(set) for k in ("round", "board", "watch", "lobby", "me")}
        self.by_player: dict[str, set[Stream]] = collections.defaultdict(set)
        self._events: collections.deque = collections.deque()
        self._drain_asked = False
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="push")
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._timers: dict[str, asyncio.TimerHandle] = {}   # round id -> its coming flush
        self._last: dict[str, float] = {}                   # round id -> its last flush (loop time)
        self._mine: set[tuple[str, str]] = set()
        self._unread: set[str] = set()
        self._lobby_timer: asyncio.TimerHandle | None = None
        self._lobby_last = 0.0
        self._shared: dict[tuple, tuple[float, asyncio.Future]] = {}
        self._tasks: set[asyncio.Task] = set()
        self.queues: dict[str, str] = {}  # queue name -> "guess", "settle" or "tasks"
        self.counters = collections.Counter()  # events read, pushes made (for the bench and the log)
        self._state_changed = asyncio.Event()

    # -- life ---------------------------------------------------------------
    async def start(self) -> None:
        if self.loop is not None:
            return
        self.loop = asyncio.get_running_loop()
        self._reader = threading.Thread(target=self._read, name="push-reader", daemon=True)
        self._reader.start()
        self._spawn(self._refresh_forever())
        self._spawn(self._heartbeat_forever())

    async def stop(self) -> None:
        """Close every stream, stop the reader (within a blocking slice, 1 s)."""
        self._stop.set()
        for streams in self.streams.values():
            for group in list(streams.values()):
                for s in list(group):
                    s.close()
        for task in list(self._tasks):
            task.cancel()
        if self._reader is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._reader.join, 3)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _spawn(self, coro) -> None:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.warning("live push: %s: %s", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")

    async def run(self, func, *args, **kwargs):
        """``func`` on a worker thread (database and Valkey reads)."""
        return await self.loop.run_in_executor(self._pool, lambda: func(*args, **kwargs))

    # -- streams ------------------------------------------------------------
    async def open(self, stream: Stream) -> bytes:
        """Register ``stream`` and answer its first frames (the state now);
        NotFound when its round does not exist."""
        kind, rid, pid = stream.kind, stream.round_id, stream.player_id
        first = b""
        if kind == "round":
            data = await self.run(payloads.mine, rid, pid)
            if data is None:
                raise NotFound(rid)
            first = frame("mine", data)
        elif kind == "board":
            first = await self.shared(("board", rid), payloads.board, rid)
        elif kind == "watch":
            first = await self.shared(("watch", rid), payloads.watch_view, rid)
        elif kind == "lobby":
            first = await self.shared(("lobby",), payloads.lobby)
        if first is None:
            raise NotFound(rid)
        self.streams[kind][rid].add(stream)
        if pid:
            self.by_player[pid].add(stream)
        return first

    def close(self, stream: Stream) -> None:
        group = self.streams[stream.kind].get(stream.round_id)
        if group is not None:
            group.discard(stream)
            if not group:
                del self.streams[stream.kind][stream.round_id]
        if stream.player_id:
            mine = self.by_player.get(stream.player_id)
            if mine is not None:
                mine.discard(stream)
                if not mine:
                    del self.by_player[stream.player_id]

    def count(self) -> int:
        return sum(len(g) for streams in self.streams.values() for g in streams.values())

    async def shared(self, key: tuple, func, *args) -> bytes | None:
        """A state many streams are sent alike, built once per
        ``SHARED_FRESH_S`` (the same build for streams opening together)."""
        now = self.loop.time()
        held = self._shared.get(key)
        if held is None or held[0] < now:
            future = self.loop.create_future()
            self._shared[key] = (now + SHARED_FRESH_S, future)
            if len(self._shared) > 10_000:
                self._shared = {k: v for k, v in self._shared.items() if v[0] >= now}
            try:
                data = await self.run(func, *args)
                future.set_result(None if data is None else frame(key[0], data))
            except BaseException as exc:
                self._shared.pop(key, None)
                future.set_exception(exc)
                future.exception()  # retrieved: the waiters see it raised
                raise
            return future.result()
        return await asyncio.shield(held[1])

    def _keep_shared(self, key: tuple, data: bytes) -> None:
        self._shared[key] = (self.loop.time() + SHARED_FRESH_S, _done_future(self.loop, data))

    # -- reading the events (the reader thread) ------------------------------
    def _queues(self) -> list:
        guess = get_queue(GUESSES)
        shards = list(getattr(guess, "shards", [guess]))
        queues = shards + [get_queue(SETTLE), get_queue(TASKS)]
        self.queues = {**{q.name: "guess" for q in shards}, SETTLE: "settle", TASKS: "tasks"}
        return queues

    def _read(self) -> None:
        cursor, backoff, failing = None, BACKOFF_S[0], False
        while not self._stop.is_set():
            try:
                queues = self._queues()
                if cursor is None:
                    cursor = ",".join(events.last_id(q) for q in queues)
                if self.state != "up":
                    self._call(self._set_state, "up")
                if failing:
                    log.info("live push: reading events again")
                    failing, backoff = False, BACKOFF_S[0]
                for event in events.merged(queues, cursor, block_ms=1000, count=500):
                    cursor = event.cursor
                    self._events.append(event)
                    if not self._drain_asked:
                        self._drain_asked = True
                        self._call(self._drain)
                    if self._stop.is_set():
                        return
            except EventsLost as exc:
                log.warning("live push: events were trimmed before they were read (%s); every stream is "
                            "sent its state again", exc)
                cursor = None
                self._call(self._everything_changed)
            except Exception as exc:  # noqa: BLE001 -- Valkey down, a failover: wait and read again
                if not failing:
                    log.warning("live push: cannot read events (%s: %s); pages poll until it can",
                                type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
                failing = True
                if self.state != "down":
                    self._call(self._set_state, "down")
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_S[1])

    def _call(self, func, *args) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(func, *args)

    # -- on the event loop ----------------------------------------------------
    async def wait_state(self, state: str) -> None:
        """Until the reader is ``state`` ("up" or "down")."""
        while self.state != state:
            self._state_changed = self._state_changed if not self._state_changed.is_set() else asyncio.Event()
            await self._state_changed.wait()

    def _set_state(self, state: str) -> None:
        was, self.state = self.state, state
        self._state_changed.set()
        if state == "down":
            for streams in self.streams.values():
                for group in list(streams.values()):
                    for s in list(group):
                        s.put("down", frame("down", {"retry_s": 30}))
                        s.close()
        elif was == "down":
            self._everything_changed()

    def _everything_changed(self) -> None:
        for kind in self.ROUND_KINDS:
            for rid in list(self.streams[kind]):
                self.round_changed(rid)
        for rid, pid in self._round_players():
            self._mine.add((rid, pid))
        if self._mine:
            self._spawn(self._flush_mine())
        self.lobby_changed()
        self.unread_changed(list(self.by_player))

    def _round_players(self) -> set[tuple[str, str]]:
        return {(rid, s.player_id) for rid, group in self.streams["round"].items() for s in group}

    def _drain(self) -> None:
        self._drain_asked = False
        jobs: list[str] = []
        while self._events:
            event = self._events.popleft()
            self.counters["events"] += 1
            if event.type != "completed":
                continue
            kind = self.queues.get(event.queue)
            if kind == "guess":
                jobs.append(event.job)
                # The lane is the guesser: their open round pages need no look-up first.
                for s in self.by_player.get(event.lane or "", ()):
                    if s.kind == "round":
                        self._mine.add((s.round_id, s.player_id))
            elif kind == "settle":
                rid = payloads.settle_round_of(event.job)
                if rid:
                    self.round_changed(rid, now=True)
                    self.lobby_changed()
            elif kind == "tasks":
                lane = event.lane or ""
                if lane.startswith("PLR"):
                    self.unread_changed([lane])
                elif lane.startswith("RND"):  # announce_round: a round opened
                    self.unread_changed(list(self.by_player))
                    self.lobby_changed()
        if self._mine:
            self._spawn(self._flush_mine())
        if jobs and any(self.streams[k] for k in ("round", "board", "watch", "lobby")):
            self._spawn(self._scored(jobs))

    async def _scored(self, jobs: list[str]) -> None:
        pairs = await self.run(payloads.guesses_of, jobs)
        for rid, _ in pairs:
            self.round_changed(rid)
        if pairs:
            self.lobby_changed()

    def round_changed(self, rid: str, now: bool = False) -> None:
        """Send the round's streams its new state: at once if it has not been
        sent for ``MIN_INTERVAL_S`` (or ``now``), else when that has passed."""
        if not any(rid in self.streams[k] for k in self.ROUND_KINDS):
            return
        if rid in self._timers:
            if not now:
                return
            self._timers.pop(rid).cancel()
        wait = 0.0 if now else max(0.0, self._last.get(rid, 0.0) + MIN_INTERVAL_S - self.loop.time())
        self._timers[rid] = self.loop.call_later(wait, self._flush_round_soon, rid)

    def _flush_round_soon(self, rid: str) -> None:
        self._spawn(self._flush_round(rid))

    async def _flush_round(self, rid: str) -> None:
        self._last[rid] = self.loop.time()
        try:
            players = sorted({s.player_id for s in self.streams["round"].get(rid, ())})
            data = await self.run(payloads.round_update, rid, watchers=bool(self.streams["watch"].get(rid)),
                                  readers=bool(self.streams["board"].get(rid)), players=players)
        finally:
            self._timers.pop(rid, None)
            if len(self._last) > 10_000:
                self._last.clear()
        if data is None:
            return
        self.counters["round_updates"] += 1
        if data["watch"] is not None:
            shared = frame("watch", data["watch"])
            self._keep_shared(("watch", rid), shared)
            self._send(self.streams["watch"].get(rid, ()), "watch", shared)
        if data["board"] is not None:
            shared = frame("board", data["board"])
            self._keep_shared(("board", rid), shared)
            self._send(self.streams["board"].get(rid, ()), "board", shared)
        state = data["round"]
        for s in list(self.streams["round"].get(rid, ())):
            panel = data["panels"].get(s.player_id)
            s.put("panel", frame("panel", {"round": state, "live": panel}))

    def _send(self, streams, name: str, data: bytes) -> None:
        for s in list(streams):
            s.put(name, data)
        self.counters["frames"] += len(streams)

    async def _flush_mine(self) -> None:
        pairs, self._mine = sorted(self._mine), set()
        results = await asyncio.gather(*(self.run(payloads.mine, rid, pid) for rid, pid in pairs),
                                       return_exceptions=True)
        for (rid, pid), data in zip(pairs, results):
            if isinstance(data, BaseException) or data is None:
                if isinstance(data, BaseException):
                    log.warning("live push: guesses of %s in %s not sent (%s)", pid, rid, type(data).__name__)
                continue
            shared = frame("mine", data)
            for s in list(self.by_player.get(pid, ())):
                if s.kind == "round" and s.round_id == rid:
                    s.put("mine", shared)

    def lobby_changed(self) -> None:
        if not self.streams["lobby"] or self._lobby_timer is not None:
            return
        wait = max(0.0, self._lobby_last + MIN_INTERVAL_S - self.loop.time())
        self._lobby_timer = self.loop.call_later(wait, lambda: self._spawn(self._flush_lobby()))

    async def _flush_lobby(self) -> None:
        self._lobby_last = self.loop.time()
        try:
            data = await self.run(payloads.lobby)
        finally:
            self._lobby_timer = None
        shared = frame("lobby", data)
        self._keep_shared(("lobby",), shared)
        self._send(self.streams["lobby"].get(None, ()), "lobby", shared)

    def unread_changed(self, player_ids: list[str]) -> None:
        wanted = [p for p in player_ids if p in self.by_player]
        if not wanted:
            return
        first = not self._unread
        self._unread.update(wanted)
        if first:
            self._spawn(self._flush_unread())

    async def _flush_unread(self) -> None:
        await asyncio.sleep(0)  # gather the players of the same batch of events
        players, self._unread = sorted(self._unread), set()
        counts = await self.run(payloads.unread, players)
        for pid, n in counts.items():
            for s in list(self.by_player.get(pid, ())):
                s.put("unread", frame("unread", {"unread": n}))

    async def _refresh_forever(self) -> None:
        while not self._stop.is_set():
            await asyncio.sleep(REFRESH_S)
            if self.state != "up":
                continue
            for kind in self.ROUND_KINDS:
                for rid in list(self.streams[kind]):
                    self.round_changed(rid)
            self.lobby_changed()


    async def _heartbeat_forever(self) -> None:
        """A comment line to each stream idle for ``HEARTBEAT_S``; the end
        of each stream whose lifetime is over. One pass over the streams,
        so a stream's own task only ever waits for its mailbox."""
        while not self._stop.is_set():
            await asyncio.sleep(HEARTBEAT_S / 3)
            now = time.monotonic()
            for streams in self.streams.values():
                for group in list(streams.values()):
                    for s in list(group):
                        if now >= s.ends:
                            s.close()
                        elif now - s.sent >= HEARTBEAT_S and not s.pending:
                            s.put(":", b":\n\n")


def _done_future(loop, value) -> asyncio.Future:
    future = loop.create_future()
    future.set_result(value)
    return future


_hub: Hub | None = None


def get_hub() -> Hub:
    """This process's hub (made on first use; started by the ASGI app)."""
    global _hub
    if _hub is None:
        _hub = Hub()
    return _hub


def reset_hub() -> None:
    """Forget the hub (tests: each gets its own, on its own loop)."""
    global _hub
    _hub = None
