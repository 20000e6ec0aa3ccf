"""The reaper: the queue's maintenance passes, on the server clock.

Each pass, for every queue: ``reap`` returns jobs whose lease expired (their
worker died or hung) to their ready sets and dead-letters jobs that stalled
too often; ``promote`` moves due delayed and retrying jobs to their ready
sets; ``fire_schedules`` enqueues the due ticks of the queue's schedules
(echomq/schedules.py). Each is bounded Lua calls, so any number of reapers
may run at once: each expired or due job is moved, and each tick enqueued,
by exactly one of them.

Extra ``tasks`` (plain callables) run after the queue passes; an application
hangs its own periodic work there (codemojex relays unsent guesses and closes
rounds past their end).
"""
from __future__ import annotations

import logging
import signal
import threading
import time

from .checks import MAX_BATCH, MAX_COUNT, MAX_MS, check_int, check_items
from .errors import ArgumentError, Unavailable

log = logging.getLogger("echomq.reaper")


class Reaper:
    def __init__(self, queues, *, interval_ms: int = 500, max_stalls: int = 2, limit: int = 1000,
                 tasks=()):
        check_int(interval_ms, "interval_ms", 1, MAX_MS)  # refused now, not on every pass later
        check_int(max_stalls, "max_stalls", 0, MAX_COUNT)
        check_int(limit, "limit", 1, MAX_BATCH)
        self.queues = list(check_items(queues, "Reaper queues"))
        for q in self.queues:  # a name or a client is not a queue: say so now, not at the first pass
            if not all(callable(getattr(q, m, None)) for m in ("reap", "promote", "fire_schedules")):
                raise ArgumentError(f"Reaper takes queues (Queue or ShardedQueue), got {type(q).__name__} {q!r:.60}")
        self.interval_ms = interval_ms
        self.max_stalls = max_stalls
        self.limit = limit
        self.tasks = list(check_items(tasks, "Reaper tasks"))
        for task in self.tasks:
            if not callable(task):
                raise ArgumentError(f"Reaper tasks are callables, got {type(task).__name__} {task!r:.60}")
        self._stop = threading.Event()
        self.passes = 0
        self.last_pass: float | None = None  # monotonic, each time round the loop (echomq.health)

    def run_once(self) -> dict:
        """One pass over every queue and task; answers what moved."""
        report = {}
        for q in self.queues:
            reaped = q.reap(max_stalls=self.max_stalls, limit=self.limit)
            promoted = q.promote(limit=self.limit)
            fired = q.fire_schedules(limit=self.limit)
            report[q.name] = {"returned": reaped.returned, "dead": reaped.dead, "promoted": promoted,
                              "fired": fired}
            if reaped or promoted or fired:
                log.info("reaper %s: returned=%d dead=%d promoted=%d fired=%d", q.name, reaped.returned,
                         reaped.dead, promoted, fired, extra={"queue": q.name})
        for task in self.tasks:
            name = getattr(task, "__name__", repr(task))
            try:
                report[name] = task()
            except Exception:
                log.exception("reaper task %s failed; it runs again next pass", name)
        self.passes += 1
        return report

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Pass every ``interval_ms`` until ``stop()`` or SIGTERM / SIGINT."""
        restore = self._install_signals()
        log.info("reaper started: queues=%s interval_ms=%d max_stalls=%d",
                 ",".join(q.name for q in self.queues), self.interval_ms, self.max_stalls)
        try:
            while not self._stop.is_set():
                self.last_pass = time.monotonic()
                try:
                    self.run_once()
                except Unavailable as exc:
                    log.warning("reaper lost Valkey (%s); next pass in %dms", type(exc).__name__,
                                self.interval_ms)
                self._stop.wait(self.interval_ms / 1000)
        finally:
            restore()
            log.info("reaper stopped after %d passes", self.passes)

    def _install_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.signal(sig, lambda s, f: self.stop()) for sig in (signal.SIGTERM, signal.SIGINT)}
        return lambda: [signal.signal(s, h) for s, h in previous.items()]
